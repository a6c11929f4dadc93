"""TF image ops (read side): decode stored image bytes, convert channels, apply EXIF orientation, resize."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import tensorflow as tf

from tfrecorder.dataset.features import (
    DEFAULT_RESIZE_MODE,
    IMAGE,
    IMAGE_CHANNELS,
    IMAGE_FORMAT,
    IMAGE_HEIGHT,
    IMAGE_ORIENTATION,
    IMAGE_WIDTH,
    OBJECTS,
    SEGMENTATION_MASK,
)
from tfrecorder.dataset.manifest import Manifest
from tfrecorder.errors import TFRecorderError
from tfrecorder.read.infer import TFRECORDER2_FORMAT


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
    height, width = (float(v) for v in size)
    if mode == "stretch":
        return boxes, tf.ones(tf.shape(boxes)[:1], tf.bool)
    shape = tf.cast(shape, tf.float32)
    if mode == "pad":  # as resize: the picture fitted inside, rounded, at an offset of half the rest
        scale = tf.minimum(height / shape[0], width / shape[1])
        placed = tf.math.round(shape * scale)
        offset = tf.math.floordiv(tf.constant([height, width]) - placed, 2.0)
    else:  # crop: the picture covering the target, its centre kept
        scale = tf.maximum(height / shape[0], width / shape[1])
        placed = tf.math.ceil(shape * scale)
        offset = -tf.math.floordiv(placed - tf.constant([height, width]), 2.0)
    target = tf.constant([height, width, height, width])
    moved = (boxes * tf.tile(placed, [2]) + tf.tile(offset, [2])) / target
    if mode == "pad":
        return moved, tf.ones(tf.shape(boxes)[:1], tf.bool)
    moved = tf.clip_by_value(moved, 0.0, 1.0)
    kept = tf.logical_and(moved[:, 2] > moved[:, 0], moved[:, 3] > moved[:, 1])
    return moved, kept


def decode_bytes(data: tf.Tensor, fmt: tf.Tensor | None, formats: Sequence[str], channels: int = 0,
                 scale: tf.Tensor | None = None) -> tf.Tensor:
    """Decode stored image bytes to uint8 (H, W, C), first frame only.

    JPEGs are decoded with the accurate integer IDCT, which gives exactly the pixels Pillow
    (and libjpeg's own tools) see; TensorFlow's default fast IDCT differs by a few levels. With
    ``scale`` (an index into JPEG_RATIOS), a JPEG is decoded at 1/2, 1/4 or 1/8 size in the DCT
    domain: less work, and itself a filter against aliasing.
    """
    jpeg_channels = channels if channels in (0, 1, 3) else 0

    def jpeg_at(ratio: int) -> tf.Tensor:
        return tf.io.decode_jpeg(data, channels=jpeg_channels, dct_method="INTEGER_ACCURATE", ratio=ratio)

    def jpeg() -> tf.Tensor:
        if scale is None:
            return jpeg_at(1)
        known = tf.get_static_value(scale)
        if known is not None:
            return jpeg_at(JPEG_RATIOS[int(known)])
        return tf.switch_case(scale, [lambda r=r: jpeg_at(r) for r in JPEG_RATIOS])  # ratio must be static

    def other() -> tf.Tensor:
        return tf.io.decode_image(data, channels=channels, expand_animations=False)

    if list(formats) == ["jpeg"]:
        return jpeg()
    if formats and "jpeg" not in formats:
        return other()
    # Mixed formats: the record's image_format says which; files of other tools have none, so sniff.
    is_jpeg = tf.equal(fmt, "jpeg") if fmt is not None else tf.equal(tf.strings.substr(data, 0, 2), b"\xff\xd8")
    return tf.cond(is_jpeg, jpeg, other)


def to_channels(image: tf.Tensor, want: int) -> tf.Tensor:
    """Convert a uint8 (H, W, 1|2|3|4) image to ``want`` channels (gray, gray+alpha, RGB, RGBA)."""
    have = tf.shape(image)[-1]

    def rgba() -> tf.Tensor:
        opaque = tf.fill(tf.concat([tf.shape(image)[:2], [1]], 0), tf.constant(255, tf.uint8))
        return tf.switch_case(have - 1, [
            lambda: tf.concat([tf.tile(image[..., :1], [1, 1, 3]), opaque], -1),
            lambda: tf.concat([tf.tile(image[..., :1], [1, 1, 3]), image[..., 1:2]], -1),
            lambda: tf.concat([image[..., :3], opaque], -1),
            lambda: image[..., :4],
        ])

    def convert() -> tf.Tensor:
        full = rgba()
        if want == 4:
            return full
        if want == 3:
            return full[..., :3]
        gray = tf.image.rgb_to_grayscale(full[..., :3])
        return gray if want == 1 else tf.concat([gray, full[..., 3:]], -1)

    result = tf.cond(tf.equal(have, want), lambda: tf.ensure_shape(image, [None, None, None])[..., :want], convert)
    return tf.ensure_shape(result, [None, None, want])


# The JPEG decode scales libjpeg offers (tf.io.decode_jpeg's ratio).
JPEG_RATIOS = (1, 2, 4, 8)
# How load_dataset resizes (resize_method=): "auto" decodes JPEGs at the smallest scale that still covers the
# target, then bilinear (antialiased only if it still shrinks more than 3x); "bilinear" is exactly TensorFlow's
# default (full decode, no antialiasing); "area" and "lanczos3" (antialiased: the highest quality) decode fully.
RESIZE_METHODS = ("auto", "bilinear", "area", "lanczos3")
DEFAULT_RESIZE_METHOD = "auto"


def jpeg_scale(height: tf.Tensor, width: tf.Tensor, size: Any, mode: str = DEFAULT_RESIZE_MODE) -> tf.Tensor:
    """The index in JPEG_RATIOS of the largest ratio whose decode still covers ``size`` (height, width)
    for an image of ``height`` x ``width`` (as displayed) fitted by ``mode``."""
    h, w = tf.cast(height, tf.float32), tf.cast(width, tf.float32)
    target_h, target_w = (float(v) for v in size)
    if mode == "stretch":
        need_h, need_w = tf.constant(target_h), tf.constant(target_w)
    else:  # crop covers the target, pad fits inside it, both keeping the aspect ratio
        scale = (tf.maximum if mode == "crop" else tf.minimum)(target_h / h, target_w / w)
        need_h, need_w = tf.math.ceil(h * scale), tf.math.ceil(w * scale)
    covers = [tf.logical_and(tf.math.ceil(h / r) >= need_h, tf.math.ceil(w / r) >= need_w) for r in JPEG_RATIOS[1:]]
    return tf.reduce_sum(tf.cast(tf.stack(covers), tf.int32))  # a ratio that covers implies every smaller one does


def resize(image: tf.Tensor, size: Any, mode: str = DEFAULT_RESIZE_MODE,
           method: str = DEFAULT_RESIZE_METHOD) -> tf.Tensor:
    """Resize to (height, width), back to uint8, with ``method`` (see RESIZE_METHODS).

    ``mode`` as when writing: ``"stretch"`` ignores the aspect ratio, ``"pad"`` keeps it and pads
    with black, ``"crop"`` keeps it and crops the centre.
    """
    height, width = (int(v) for v in size)
    if mode == "pad":
        shape = tf.cast(tf.shape(image)[:2], tf.float32)
        scale = tf.minimum(height / shape[0], width / shape[1])
        fit = tf.cast(tf.math.round(shape * scale), tf.int32)
        resized = tf.image.pad_to_bounding_box(_resized(image, fit, method), (height - fit[0]) // 2,
                                               (width - fit[1]) // 2, height, width)
    elif mode == "crop":
        shape = tf.cast(tf.shape(image)[:2], tf.float32)
        scale = tf.maximum(height / shape[0], width / shape[1])
        cover = tf.cast(tf.math.ceil(shape * scale), tf.int32)
        resized = tf.image.resize_with_crop_or_pad(_resized(image, cover, method), height, width)
    else:
        resized = _resized(image, tf.constant([height, width]), method)
    if method == "lanczos3":  # its lobes overshoot the input's range: rounded, then clipped by the cast
        return tf.saturate_cast(tf.round(resized), tf.uint8)
    # The other filters' weights are all positive and sum to one, so values stay in [0, 255]: half added, the
    # cast's truncation rounds (half up), at half the cost of a round and a clip (benchmarks/CONSTANTS.md).
    return tf.cast(resized + 0.5, tf.uint8)


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
        scale = tf.minimum(height / shape[0], width / shape[1])
        fit = tf.cast(tf.math.round(shape * scale), tf.int32)
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


def _resized(image: tf.Tensor, size: tf.Tensor, method: str) -> tf.Tensor:
    if method == "bilinear":
        return tf.image.resize(image, size, method="bilinear")  # TensorFlow's default, exactly
    if method in ("area", "lanczos3"):
        return tf.image.resize(image, size, method=method, antialias=method == "lanczos3")
    # auto: after a reduced-scale JPEG decode the rest is a small step, where antialiasing only blurs (measured
    # against Pillow's LANCZOS: 51 dB without, 47 with, at 2.2x); larger steps (PNGs, odd sizes) need it.
    known_size = tf.get_static_value(size)
    if image.shape[:2].is_fully_defined() and known_size is not None:  # every image has one size: decided here
        shrink = max(image.shape[0] / known_size[0], image.shape[1] / known_size[1])
        return tf.image.resize(image, size, method="bilinear", antialias=bool(shrink > 3.0))
    shrink = tf.reduce_max(tf.cast(tf.shape(image)[:2], tf.float32) / tf.cast(size, tf.float32))
    return tf.cond(shrink > 3.0, lambda: tf.image.resize(image, size, method="bilinear", antialias=True),
                   lambda: tf.image.resize(image, size, method="bilinear"))


def image_decoder(manifest: Manifest, channels: int | None, image_size: Any, resize_mode: str = DEFAULT_RESIZE_MODE,
                  resize_method: str = DEFAULT_RESIZE_METHOD):
    """A function from a parsed example to the same example with ``image`` decoded to uint8 (H, W, C)."""
    info = manifest.image or {}
    mask_fill = (manifest.masks or {}).get("ignore_index", 0)  # what pads a mask
    stored = info.get("channels") or [3]
    want = int(channels) if channels else (stored[0] if len(stored) == 1 else 3)
    if want not in (1, 2, 3, 4):
        raise TFRecorderError(f"channels={channels!r}: use 1, 2, 3 or 4")
    base64_pixels = info.get("format") == TFRECORDER2_FORMAT
    raw = info.get("format") == "raw" or base64_pixels
    formats = info.get("formats") or []
    direct = stored == [want] and want != 2  # every image has the channels asked for: decode straight to them
    uniform = info.get("shape")  # every stored image has this (height, width): batches get a static shape
    turned = any(o != 1 for o in info.get("orientations") or [1])
    # JPEGs all of one known size, upright: the decode scale is the same for every record, so it is chosen
    # here once (and with it the resize filter), not per record by a switch in the graph.
    static_scale = None
    if uniform and formats == ["jpeg"] and not turned and image_size is not None and resize_method == "auto":
        static_scale = int(jpeg_scale(tf.constant(uniform[0]), tf.constant(uniform[1]), image_size, resize_mode))

    def decode(example: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        out = dict(example)
        if raw:
            shape = tf.stack([example[IMAGE_HEIGHT.name], example[IMAGE_WIDTH.name], example[IMAGE_CHANNELS.name]])
            data = tf.io.decode_base64(example[IMAGE.name]) if base64_pixels else example[IMAGE.name]
            image = tf.reshape(tf.io.decode_raw(data, tf.uint8), tf.cast(shape, tf.int32))
        else:
            scale = None
            if static_scale is not None:
                scale = tf.constant(static_scale)
            elif image_size is not None and resize_method == "auto" and IMAGE_HEIGHT.name in example:
                scale = jpeg_scale(example[IMAGE_HEIGHT.name], example[IMAGE_WIDTH.name], image_size, resize_mode)
            image = decode_bytes(example[IMAGE.name], example.get(IMAGE_FORMAT.name), formats,
                                 want if direct else 0, scale)
            if static_scale is not None and direct and uniform:
                ratio = JPEG_RATIOS[static_scale]
                image = tf.ensure_shape(image, [-(-uniform[0] // ratio), -(-uniform[1] // ratio), want])
        if raw or not direct:
            image = to_channels(image, want)
        if turned:
            image = apply_orientation(image, example[IMAGE_ORIENTATION.name])
        objects = example.get(OBJECTS)  # a detection record's (tf_objects.objects_gatherer): boxes follow the pixels
        if objects is not None and "bbox" in objects:
            objects = dict(objects)
            if turned:
                objects["bbox"] = orient_boxes(objects["bbox"], example[IMAGE_ORIENTATION.name])
            if image_size is not None:
                objects["bbox"], kept = resize_boxes(objects["bbox"], tf.shape(image)[:2], image_size, resize_mode)
                if resize_mode == "crop":
                    objects = {k: tf.boolean_mask(v, kept) for k, v in objects.items()}
            out[OBJECTS] = objects
        if SEGMENTATION_MASK.name in example:  # the mask: turned with the picture, resized by its geometry
            mask = tf.io.decode_png(example[SEGMENTATION_MASK.name], channels=1)
            if uniform and not turned:  # the mask is stored as its picture is (the writer's rule); shape is as shown
                mask = tf.ensure_shape(mask, [*uniform, 1])
            if turned:
                mask = apply_orientation(mask, example[IMAGE_ORIENTATION.name])
            if image_size is not None:
                mask = resize_mask(mask, tf.shape(image)[:2], image_size, resize_mode, mask_fill)
            out[SEGMENTATION_MASK.name] = tf.ensure_shape(mask, [None, None, 1])
        if image_size is not None:
            image = resize(image, image_size, resize_mode, resize_method)
        elif uniform:
            image = tf.ensure_shape(image, [*uniform, want])
        out[IMAGE.name] = image
        return out

    return decode
