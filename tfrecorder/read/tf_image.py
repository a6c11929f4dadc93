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


def decode_bytes(data: tf.Tensor, fmt: tf.Tensor | None, formats: Sequence[str], channels: int = 0) -> tf.Tensor:
    """Decode stored image bytes to uint8 (H, W, C), first frame only.

    JPEGs are decoded with the accurate integer IDCT, which gives exactly the pixels Pillow
    (and libjpeg's own tools) see; TensorFlow's default fast IDCT differs by a few levels.
    """
    jpeg_channels = channels if channels in (0, 1, 3) else 0

    def jpeg() -> tf.Tensor:
        return tf.io.decode_jpeg(data, channels=jpeg_channels, dct_method="INTEGER_ACCURATE")

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


def resize(image: tf.Tensor, size: Any, mode: str = DEFAULT_RESIZE_MODE) -> tf.Tensor:
    """Bilinear resize (antialiased when shrinking) to (height, width), back to uint8.

    ``mode`` as when writing: ``"stretch"`` ignores the aspect ratio, ``"pad"`` keeps it and pads
    with black, ``"crop"`` keeps it and crops the centre.
    """
    height, width = (int(v) for v in size)
    if mode == "pad":
        resized = tf.image.resize_with_pad(image, height, width, method="bilinear", antialias=True)
    elif mode == "crop":
        shape = tf.cast(tf.shape(image)[:2], tf.float32)
        scale = tf.maximum(height / shape[0], width / shape[1])
        cover = tf.cast(tf.math.ceil(shape * scale), tf.int32)
        resized = tf.image.resize(image, cover, method="bilinear", antialias=True)
        resized = tf.image.resize_with_crop_or_pad(resized, height, width)
    else:
        resized = tf.image.resize(image, (height, width), method="bilinear", antialias=True)
    return tf.cast(tf.clip_by_value(tf.round(resized), 0, 255), tf.uint8)


def image_decoder(manifest: Manifest, channels: int | None, image_size: Any, resize_mode: str = DEFAULT_RESIZE_MODE):
    """A function from a parsed example to the same example with ``image`` decoded to uint8 (H, W, C)."""
    info = manifest.image or {}
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

    def decode(example: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        out = dict(example)
        if raw:
            shape = tf.stack([example[IMAGE_HEIGHT.name], example[IMAGE_WIDTH.name], example[IMAGE_CHANNELS.name]])
            data = tf.io.decode_base64(example[IMAGE.name]) if base64_pixels else example[IMAGE.name]
            image = tf.reshape(tf.io.decode_raw(data, tf.uint8), tf.cast(shape, tf.int32))
        else:
            image = decode_bytes(example[IMAGE.name], example.get(IMAGE_FORMAT.name), formats, want if direct else 0)
        if raw or not direct:
            image = to_channels(image, want)
        if turned:
            image = apply_orientation(image, example[IMAGE_ORIENTATION.name])
        if image_size is not None:
            image = resize(image, image_size, resize_mode)
        elif uniform:
            image = tf.ensure_shape(image, [*uniform, want])
        out[IMAGE.name] = image
        return out

    return decode
