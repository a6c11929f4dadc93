"""TF geometry (imports TensorFlow: the connectors' ``follow`` imports it when load_dataset runs): where the
picture's EXIF turn and load_dataset's resize take its pixels, masks, boxes and points. One rule for each, the
same as the writer's (``dataset.boxes.turn``, ``write/record/images.resize``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import tensorflow as tf

from tfrecorder.dataset.features import DEFAULT_RESIZE_MODE


@dataclass(frozen=True)
class Frame:
    """What happens to one decoded picture: its EXIF ``orientation`` (a tensor; None when no record of the
    dataset is turned), then a resize of the turned picture of ``shape`` (height, width: its decoded size) to
    ``size`` by ``mode`` (None: kept as it is). ``fill``: what pads a mask; ``uniform``: every stored picture's
    (height, width) when they share one, for static shapes."""

    orientation: tf.Tensor | None
    shape: tf.Tensor | None = None
    size: Any = None
    mode: str = DEFAULT_RESIZE_MODE
    fill: int = 0
    uniform: Any = None

    def boxes(self, boxes: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor | None]:
        """Normalized ``[N, 4]`` ``[ymin, xmin, ymax, xmax]`` boxes of the stored pixels where the picture shows
        them, and which still have an area (None: all; a crop may cut some off)."""
        if self.orientation is not None:
            boxes = orient_boxes(boxes, self.orientation)
        if self.size is None:
            return boxes, None
        boxes, kept = resize_boxes(boxes, self.shape, self.size, self.mode)
        return boxes, kept if self.mode == "crop" else None

    def points(self, points: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """Normalized ``[..., 2]`` ``(y, x)`` points of the stored pixels where the picture shows them, and which
        are still inside it (a crop cuts some off)."""
        as_boxes = tf.concat([points, points], axis=-1)  # a point is a box of no size: one rule for both
        flat = tf.reshape(as_boxes, [-1, 4])
        if self.orientation is not None:
            flat = orient_boxes(flat, self.orientation)
        inside = tf.ones(tf.shape(flat)[:1], tf.bool)
        if self.size is not None:
            flat = _placed(flat, self.shape, self.size, self.mode)
            inside = tf.reduce_all((flat >= 0.0) & (flat <= 1.0), axis=-1)
        moved = tf.reshape(flat[:, :2], tf.shape(points))
        return moved, tf.reshape(inside, tf.shape(points)[:-1])

    def mask(self, mask: tf.Tensor) -> tf.Tensor:
        """A decoded uint8 ``(H, W, 1)`` mask of class ids turned and resized with its picture."""
        if self.uniform and self.orientation is None:  # stored as its picture is (the writer's rule)
            mask = tf.ensure_shape(mask, [*self.uniform, 1])
        if self.orientation is not None:
            mask = apply_orientation(mask, self.orientation)
        if self.size is not None:
            mask = resize_mask(mask, self.shape, self.size, self.mode, self.fill)
        return tf.ensure_shape(mask, [None, None, 1])

    def instance_masks(self, pngs: tf.Tensor) -> tf.Tensor:
        """A record's objects' instance masks (``[N]`` PNGs of the stored pixels) as uint8 ``[N, H, W]``, turned
        and resized with the picture by ``mask``'s rules (a pad is 0: no object there). The objects are the
        channels of one picture while they move: one turn and one resize for all of them."""
        def some() -> tf.Tensor:
            masks = tf.map_fn(lambda png: tf.io.decode_png(png, channels=1)[..., 0], pngs,
                              fn_output_signature=tf.TensorSpec([None, None], tf.uint8))
            planes = tf.transpose(masks, [1, 2, 0])
            if self.orientation is not None:
                planes = apply_orientation(planes, self.orientation)
            if self.size is not None:
                planes = resize_mask(planes, self.shape, self.size, self.mode, 0)
            return tf.transpose(planes, [2, 0, 1])

        def none() -> tf.Tensor:  # no object: no mask to take the picture's size from
            height, width = (self.size[0], self.size[1]) if self.size is not None else (self.shape[0], self.shape[1])
            return tf.zeros(tf.stack([0, height, width]), tf.uint8)

        return tf.ensure_shape(tf.cond(tf.size(pngs) > 0, some, none), [None, None, None])


def apply_orientation(image: tf.Tensor, orientation: tf.Tensor) -> tf.Tensor:
    """Turn decoded pixels as EXIF ``orientation`` (1-8) says, as viewers and ``ImageOps.exif_transpose`` do."""
    transposed = lambda: tf.image.transpose(image)  # noqa: E731
    branches = [
        lambda: image,                                       # 1: as stored
        lambda: tf.image.flip_left_right(image),             # 2: mirrored
        lambda: tf.image.rot90(image, 2),                    # 3: upside down
        lambda: tf.image.flip_up_down(image),                # 4: mirrored upside down
        transposed,                                          # 5: mirrored, quarter turn
        lambda: tf.image.rot90(image, 3),                    # 6: quarter turn clockwise
        lambda: tf.image.rot90(tf.image.transpose(image), 2),  # 7: transverse
        lambda: tf.image.rot90(image, 1),                    # 8: quarter turn counter-clockwise
    ]
    index = tf.clip_by_value(tf.cast(orientation, tf.int32) - 1, 0, 7)
    return tf.switch_case(index, branches)


def orient_boxes(boxes: tf.Tensor, orientation: tf.Tensor) -> tf.Tensor:
    """Normalized ``[N, 4]`` ``[ymin, xmin, ymax, xmax]`` boxes of stored pixels as ``apply_orientation``
    shows the picture (the rule of ``dataset.boxes.turn``)."""
    y0, x0, y1, x1 = tf.unstack(boxes, 4, axis=-1)
    branches = [(y0, x0, y1, x1), (y0, 1 - x1, y1, 1 - x0), (1 - y1, 1 - x1, 1 - y0, 1 - x0),
                (1 - y1, x0, 1 - y0, x1), (x0, y0, x1, y1), (x0, 1 - y1, x1, 1 - y0),
                (1 - x1, 1 - y1, 1 - x0, 1 - y0), (1 - x1, y0, 1 - x0, y1)]
    index = tf.clip_by_value(tf.cast(orientation, tf.int32) - 1, 0, 7)
    return tf.switch_case(index, [lambda b=b: tf.stack(b, axis=-1) for b in branches])


def resize_boxes(boxes: tf.Tensor, shape: tf.Tensor, size: Any, mode: str = DEFAULT_RESIZE_MODE
                 ) -> tuple[tf.Tensor, tf.Tensor]:
    """Normalized ``[ymin, xmin, ymax, xmax]`` boxes of an image of ``shape`` (height, width) where ``resize``
    puts them: ``stretch`` leaves them, ``pad`` shrinks and centres them, ``crop`` moves them and clips them to
    the picture. Returns the boxes and which still have an area (``crop`` may cut one off)."""
    if mode == "stretch":
        return boxes, tf.ones(tf.shape(boxes)[:1], tf.bool)
    moved = _placed(boxes, shape, size, mode)
    if mode == "pad":
        return moved, tf.ones(tf.shape(boxes)[:1], tf.bool)
    moved = tf.clip_by_value(moved, 0.0, 1.0)
    kept = tf.logical_and(moved[:, 2] > moved[:, 0], moved[:, 3] > moved[:, 1])
    return moved, kept


def _placed(boxes: tf.Tensor, shape: tf.Tensor, size: Any, mode: str) -> tf.Tensor:
    """Normalized ``[N, 4]`` boxes of a picture of ``shape`` where ``resize`` by ``mode`` places them in the
    ``size`` target (not clipped)."""
    if mode == "stretch":
        return boxes
    height, width = (float(v) for v in size)
    shape = tf.cast(shape, tf.float32)
    if mode == "pad":  # as resize: the picture fitted inside, rounded, at an offset of half the rest
        placed = padded_size(shape, (height, width))
        offset = tf.math.floordiv(tf.constant([height, width]) - placed, 2.0)
    else:  # crop: the picture covering the target, its centre kept
        scale = tf.maximum(height / shape[0], width / shape[1])
        placed = tf.math.ceil(shape * scale)
        offset = -tf.math.floordiv(placed - tf.constant([height, width]), 2.0)
    target = tf.constant([height, width, height, width])
    return (boxes * tf.tile(placed, [2]) + tf.tile(offset, [2])) / target


def padded_size(shape: tf.Tensor, size: Any) -> tf.Tensor:
    """float32 (height, width) a picture of float32 ``shape`` is resized to inside ``size`` by ``pad``: scaled to
    fit, rounded, at least a pixel a side (a 400x3 strip in 64x64 rounds to no row)."""
    scale = tf.minimum(float(size[0]) / shape[0], float(size[1]) / shape[1])
    return tf.maximum(tf.math.round(shape * scale), 1.0)


def resize_mask(mask: tf.Tensor, shape: tf.Tensor, size: Any, mode: str = DEFAULT_RESIZE_MODE,
                fill: int = 0) -> tf.Tensor:
    """A uint8 (H, W, 1) mask of class ids fitted to ``size`` as ``resize`` fits its image of ``shape`` (the
    decoded picture's, which a reduced-scale JPEG decode makes smaller than the mask), with nearest-neighbour:
    no id blends into another. A pad is ``fill``."""
    height, width = (int(v) for v in size)
    if mode == "stretch":
        return nearest(mask, (height, width))
    shape = tf.cast(shape, tf.float32)
    if mode == "pad":
        fit = tf.cast(padded_size(shape, (height, width)), tf.int32)
        fitted = tf.cast(nearest(mask, fit), tf.int32) - fill
        padded = tf.image.pad_to_bounding_box(fitted, (height - fit[0]) // 2, (width - fit[1]) // 2, height, width)
        return tf.cast(padded + fill, tf.uint8)
    scale = tf.maximum(height / shape[0], width / shape[1])
    cover = tf.cast(tf.math.ceil(shape * scale), tf.int32)
    return tf.image.resize_with_crop_or_pad(nearest(mask, cover), height, width)


def nearest(image: tf.Tensor, size: Any) -> tf.Tensor:
    """``tf.image.resize(image, size, method="nearest")``, pixel for pixel, as two gathers: whole rows, then
    columns. TensorFlow's kernel finds its source pixel one output value at a time, which costs more than
    decoding the mask (benchmarks/CONSTANTS.md)."""
    shape = tf.shape(image)
    rows = _nearest_sources(image.shape[0] or shape[0], size[0])
    return tf.gather(tf.gather(image, rows, axis=0), _nearest_sources(image.shape[1] or shape[1], size[1]), axis=1)


def _nearest_sources(have: Any, want: Any) -> Any:
    """The source index of each of ``want`` outputs along an axis of ``have``: the rule of TensorFlow's
    nearest-neighbour kernel with half-pixel centres, ``min(floor((i + 0.5) * have / want), have - 1)``, in
    float32 as it computes it; worked out once, eagerly, when both are known (every image of one size)."""
    def rule() -> tf.Tensor:
        scale = tf.cast(have, tf.float32) / tf.cast(want, tf.float32)
        sources = tf.cast(tf.floor((tf.range(want, dtype=tf.float32) + 0.5) * scale), tf.int32)
        return tf.minimum(sources, have - 1)

    if isinstance(have, int) and isinstance(want, int):
        with tf.init_scope():  # out of the graph being traced: a constant in it
            return rule().numpy()
    return rule()
