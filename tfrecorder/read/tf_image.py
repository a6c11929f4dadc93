"""TF image ops (read side): decode stored image bytes, convert channels, apply EXIF orientation, resize."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import tensorflow as tf

from tfrecorder.dataset import connectors
from tfrecorder.dataset.connectors.tf_geometry import Frame, apply_orientation, padded_size
from tfrecorder.dataset.features import (
    DEFAULT_RESIZE_MODE,
    IMAGE,
    IMAGE_CHANNELS,
    IMAGE_FORMAT,
    IMAGE_HEIGHT,
    IMAGE_ORIENTATION,
    IMAGE_WIDTH,
    OBJECTS,
)
from tfrecorder.dataset.layouts import layout_of
from tfrecorder.dataset.manifest import Manifest
from tfrecorder.errors import TFRecorderError
from tfrecorder.read.infer import TFRECORDER2_FORMAT
from tfrecorder.read.tf_objects import placed_members


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
        fit = tf.cast(padded_size(tf.cast(tf.shape(image)[:2], tf.float32), size), tf.int32)
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


def _carries_turns(manifest: Manifest) -> bool:
    return any(o != 1 for o in (manifest.image or {}).get("orientations") or [1])


def uniform_shape(manifest: Manifest) -> list[int] | None:
    """The (height, width) every image of the dataset decodes to, where they share one: dataset.json's
    ``image.shape`` (as displayed), unless the layout keeps images unturned and some carry an EXIF turn."""
    shape = (manifest.image or {}).get("shape")
    return shape if layout_of(manifest).size_displayed or not _carries_turns(manifest) else None


def check_decodable(manifest: Manifest, split: str) -> None:
    """Refuse, in one line naming the file and record, to decode a split of others' records where one holds no
    image TensorFlow decodes (found as they were opened: ``infer_od``): its decode would stop the pipeline with
    TensorFlow's error, which names neither."""
    found = ((manifest.image or {}).get("undecodable") or {}).get(split)
    if found:
        more = f" (and {found['records'] - 1} more records of {split})" if found["records"] > 1 else ""
        raise TFRecorderError(f"{found['first']}{more}: decoding {split}'s images would stop there; read with "
                              f"decode_images=False for the bytes, or tfrecorder.convert the files to list such "
                              f"records in errors.csv and keep the rest")


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
    # Some images may carry an EXIF turn; load_dataset applies it only in a layout that records it beside the
    # image (ours). In the Object Detection API's, boxes are in the stored pixels' frame: its images stay unturned.
    turned = _carries_turns(manifest) and layout_of(manifest).orientation is not None
    uniform = uniform_shape(manifest)  # every decoded image's (height, width): batches get a static shape
    # JPEGs all of one known size, upright: the decode scale is the same for every record, so it is chosen
    # here once (and with it the resize filter), not per record by a switch in the graph.
    static_scale = None
    if uniform and formats == ["jpeg"] and not turned and image_size is not None and resize_method == "auto":
        static_scale = int(jpeg_scale(tf.constant(uniform[0]), tf.constant(uniform[1]), image_size, resize_mode))

    # The features that follow the picture's geometry, by name: a record's own, and its objects' (by member name).
    placed = {f.name: c for f in manifest.features if (c := connectors.of(f)).in_picture
              and not isinstance(c, connectors.Objects)}
    objects_placed = placed_members(manifest)

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
        # Every feature with a place in the picture follows its pixels (its connector says how); a detection
        # record's objects are gathered under OBJECTS (tf_objects.objects_gatherer), and those a crop cuts off go.
        frame = Frame(example[IMAGE_ORIENTATION.name] if turned else None, tf.shape(image)[:2], image_size,
                      resize_mode, mask_fill, uniform)
        for name, connector in placed.items():
            if name in out:
                out, _ = connector.follow(out, name, frame)
        if OBJECTS in example:
            objects, kept = dict(example[OBJECTS]), None
            for name in objects_placed:
                if name in objects:
                    objects, cut = objects_placed[name].follow(objects, name, frame)
                    if cut is not None:
                        kept = cut if kept is None else kept & cut
            out[OBJECTS] = objects if kept is None else {k: tf.boolean_mask(v, kept) for k, v in objects.items()}
        if image_size is not None:
            image = resize(image, image_size, resize_mode, resize_method)
        elif uniform:
            image = tf.ensure_shape(image, [*uniform, want])
        out[IMAGE.name] = image
        return out

    return decode
