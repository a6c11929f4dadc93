"""Numpy examples (read side, no TensorFlow): one serialized record as the dict of numpy values ``load_dataset``
gives for it - every feature by its connector, a detection record's objects gathered under ``objects``, the image
decoded (a JPEG by libjpeg-turbo through simplejpeg; other kinds and reduced-scale JPEGs by Pillow), turned by
its EXIF orientation and resized with ``load_dataset``'s rules (``np_geometry``), and every feature with a place
in the picture moved with it. ``data_source`` decodes each record it reads here."""

from __future__ import annotations

import base64
import io
from typing import Any

import numpy as np

from tfrecorder.dataset import connectors
from tfrecorder.dataset.connectors import np_geometry
from tfrecorder.dataset.features import (
    DEFAULT_RESIZE_MODE,
    IMAGE,
    IMAGE_CHANNELS,
    IMAGE_HEIGHT,
    IMAGE_ORIENTATION,
    IMAGE_WIDTH,
    OBJECTS,
)
from tfrecorder.dataset.layouts import DEFAULT, layout_of
from tfrecorder.dataset.manifest import FeatureInfo, Manifest
from tfrecorder.errors import TFRecorderError
from tfrecorder.read.infer import TFRECORDER2_FORMAT

_NUMBERS = {"int64_list": np.int64, "float_list": np.float32}  # each Example list's numpy dtype (else bytes)
JPEG_RATIOS = (1, 2, 4, 8)  # the reduced-scale decodes libjpeg offers (tf_image.JPEG_RATIOS)
_MODES = {1: "L", 2: "LA", 3: "RGB", 4: "RGBA"}  # Pillow's mode of each channel count
_JPEG_START = b"\xff\xd8"
_JPEG_SPACES = {1: "GRAY", 3: "RGB"}  # simplejpeg's colour space of each channel count a JPEG decodes to
_JPEG_SOURCES = ("Gray", "YCbCr", "RGB")  # the stored colour spaces libjpeg turns into those


def jpeg_ratio(height: int, width: int, size: Any, mode: str = DEFAULT_RESIZE_MODE) -> int:
    """``tf_image.jpeg_scale`` in numpy: the largest of JPEG_RATIOS whose decode of a picture of ``height`` x
    ``width`` (as displayed) still covers ``size`` fitted by ``mode`` (float32, as it computes)."""
    h, w = np.float32(height), np.float32(width)
    target_h, target_w = (np.float32(v) for v in size)
    if mode == "stretch":
        need_h, need_w = target_h, target_w
    else:
        scale = (np.maximum if mode == "crop" else np.minimum)(target_h / h, target_w / w)
        need_h, need_w = np.ceil(h * scale), np.ceil(w * scale)
    covers = sum(bool(np.ceil(h / np.float32(r)) >= need_h and np.ceil(w / np.float32(r)) >= need_w)
                 for r in JPEG_RATIOS[1:])
    return JPEG_RATIOS[covers]


class ExampleDecoder:
    """Serialized records -> dicts of numpy values, as ``load_dataset`` gives them (``decode_images``, no batch):
    scalars as numpy scalars, lists as 1-D arrays, text and bytes as ``bytes`` (lists of them: object arrays),
    objects ``[N, ...]`` under ``objects`` by member name, the image uint8 ``(H, W, C)``."""

    def __init__(self, manifest: Manifest, image_size: tuple[int, int] | None = None,
                 resize_mode: str = DEFAULT_RESIZE_MODE, where: str = ""):
        self.manifest, self.image_size, self.resize_mode, self.where = manifest, image_size, resize_mode, where
        self._features = [(f, connectors.of(f)) for f in manifest.features]
        self._records = layout_of(manifest)
        label = (manifest.label or {}).get("feature")
        self._label = label if manifest.vocabulary is not None else None
        info = manifest.image or {}
        stored = info.get("channels") or [3]
        self._want = stored[0] if len(stored) == 1 else 3
        self._direct = stored == [self._want] and self._want != 2  # decoded straight to the stored channels
        self._format = info.get("format")
        self._turned = any(o != 1 for o in info.get("orientations") or [1])
        self._fill = (manifest.masks or {}).get("ignore_index", 0)

    def __call__(self, record: bytes, where: str, number: int) -> dict[str, Any]:
        """The record ``number`` of ``where`` (for errors) decoded."""
        stored = self._records.parse_record(record, where, number).features.feature
        out: dict[str, Any] = {}
        objects: dict[str, Any] = {}
        for feature, connector in self._features:
            value = self._value(feature, connector, stored, where, number)
            if isinstance(connector, connectors.Objects):
                shape = connector.object_shape(feature)
                objects[DEFAULT.member(feature.name)] = value.reshape(-1, *shape) if shape else value
            else:
                out[feature.name] = value
        if self._label in out and not 0 <= int(out[self._label]) < len(self.manifest.vocabulary or []):
            raise TFRecorderError(f"{where}: record {number} holds label id {int(out[self._label])}, beyond the "
                                  f"label vocabulary of {len(self.manifest.vocabulary or [])} names: dataset.json "
                                  f"was edited or damaged; convert again")
        if objects:
            out[OBJECTS] = objects
        if IMAGE.name in out:
            out = self._picture(out, where, number)
        return out

    def _value(self, feature: FeatureInfo, connector: connectors.Connector, stored: Any, where: str,
               number: int) -> Any:
        """One feature's value: its Example list as its connector reads it (a missing scalar: its default)."""
        dtype = _NUMBERS.get(connector.field)
        values = list(getattr(stored[feature.name], connector.field).value) if feature.name in stored else None
        if connector.nested:  # ListOf, Objects
            array = np.array(values or [], dtype=dtype if dtype is not None else object)
            return connector.array(array)
        if not connector.plain:  # a kind that reads its record's stored list itself
            if not values and feature.nullable:
                return None
            return connector.array(connector.from_wire(values or []))  # read_tfr gives from_wire's value alone
        if not values:
            if not feature.nullable:
                raise TFRecorderError(f"{where}: record {number} has no value of feature {feature.name!r}, which "
                                      f"dataset.json says every record holds: the dataset is damaged")
            values = [connector.stored(connector._default(feature.default))]
        if dtype is None:  # bytes, or what its kind decodes them to (an audio clip's samples)
            return connector.array(np.array([bytes(values[0])], dtype=object))[0]
        return connector.array(np.array(values[:1], dtype=dtype))[0]

    def _picture(self, example: dict[str, Any], where: str, number: int) -> dict[str, Any]:
        """The example with its image decoded, turned and resized, and what has a place in it moved with it."""
        orientation = int(example.get(IMAGE_ORIENTATION.name, 1)) if self._turned else None
        try:
            image = self._decoded(example)
        except (OSError, ValueError, SyntaxError, EOFError) as e:  # Pillow's and libjpeg's words for damage
            raise TFRecorderError(f"{where}: record {number}'s image cannot be decoded ({e}); load_dataset fails on "
                                  f"it too: convert its source again with validate_images='full'") from None
        if orientation is not None:
            image = np_geometry.orient(image, orientation)
        frame = np_geometry.Frame(orientation, image.shape[:2], self.image_size, self.resize_mode, self._fill)
        out = dict(example)
        for feature, connector in self._features:
            if not connector.in_picture:
                continue
            if isinstance(connector, connectors.Objects):
                member = DEFAULT.member(feature.name)
                objects, kept = connector.follow_array(out[OBJECTS], member, frame)
                out[OBJECTS] = objects if kept is None else {k: v[kept] for k, v in objects.items()}
            elif feature.name in out:
                out, _ = connector.follow_array(out, feature.name, frame)
        if self.image_size is not None:
            image = np_geometry.resize(image, self.image_size, self.resize_mode)
        out[IMAGE.name] = image
        return out

    def _decoded(self, example: dict[str, Any]) -> np.ndarray:
        """The stored image as uint8 ``(H, W, C)`` of the dataset's channels, before its EXIF turn."""
        data = example[IMAGE.name]
        if self._format in ("raw", TFRECORDER2_FORMAT):
            if self._format == TFRECORDER2_FORMAT:
                data = base64.urlsafe_b64decode(data + b"=" * (-len(data) % 4))
            shape = [int(example[f.name]) for f in (IMAGE_HEIGHT, IMAGE_WIDTH, IMAGE_CHANNELS)]
            pixels = np.frombuffer(data, np.uint8).reshape(shape)
            if shape[2] == self._want:
                return pixels
            from PIL import Image

            return np.asarray(Image.fromarray(pixels[..., 0] if shape[2] == 1 else pixels).convert(
                _MODES[self._want]))
        return self._pillow(data, example)

    def _pillow(self, data: bytes, example: dict[str, Any]) -> np.ndarray:
        from PIL import Image

        ratio = 1
        if data[:2] == _JPEG_START and self.image_size is not None and IMAGE_HEIGHT.name in example:
            # decoded at the reduced scale load_dataset picks (from the size as displayed), in the DCT domain
            ratio = jpeg_ratio(example[IMAGE_HEIGHT.name], example[IMAGE_WIDTH.name], self.image_size,
                               self.resize_mode)
        if data[:2] == _JPEG_START and self._want in _JPEG_SPACES:
            pixels = _jpeg(data, self._want, ratio)
            if pixels is not None:
                return pixels
        with Image.open(io.BytesIO(data)) as picture:
            if ratio > 1 and picture.format == "JPEG":
                width, height = picture.size
                picture.draft(picture.mode, (max(width // ratio, 1), max(height // ratio, 1)))
            mode = _MODES[self._want]
            if picture.format == "GIF" and picture.mode == "P" and picture.info.get("transparency") is not None:
                return _gif(picture, mode)
            converted = picture if picture.mode == mode else picture.convert(mode)
            # to be resized: read where Pillow holds them (the resize makes the array returned)
            view = np_geometry.pixel_view(converted) if self.image_size is not None else None
            pixels = view if view is not None else np.asarray(converted)
        return pixels[:, :, None] if pixels.ndim == 2 else pixels


def _gif(picture: Any, mode: str) -> np.ndarray:
    """A GIF's first frame as TensorFlow's ``decode_gif`` gives it: its transparent colour's pixels black (the
    frame is drawn on a canvas of zeros), not the colour the palette gives that index."""
    clear = np.asarray(picture) == picture.info["transparency"]
    pixels = np.array(picture.convert(mode))
    pixels[clear] = 0
    return pixels[:, :, None] if pixels.ndim == 2 else pixels


def _jpeg(data: bytes, channels: int, ratio: int = 1) -> np.ndarray | None:
    """A JPEG's ``(H, W, channels)`` pixels by libjpeg-turbo (simplejpeg), decoded at 1/``ratio`` scale in the
    DCT domain, as TensorFlow's ``decode_jpeg`` with ``INTEGER_ACCURATE`` and ``ratio`` gives them (the accurate
    DCT and fancy upsampling both use), into an array of its own, without the copies Pillow makes; None for a
    colour space it does not convert (CMYK, YCCK: Pillow does). As TensorFlow's decode, a JPEG that ends before
    its last row is a ValueError, and libjpeg's warnings of damage it decodes past are not."""
    import simplejpeg

    try:
        height, width, space, _ = simplejpeg.decode_jpeg_header(data)
    except ValueError:
        return None  # no header simplejpeg reads: Pillow says what is wrong
    if space not in _JPEG_SOURCES:
        return None
    options = {"colorspace": _JPEG_SPACES[channels], "fastdct": False, "fastupsample": False}
    if ratio > 1:  # exactly 1/ratio: the largest shrink of at least ``ratio`` that keeps libjpeg's rounded-up size
        options.update(min_factor=ratio, min_height=-(-height // ratio), min_width=-(-width // ratio))
    try:
        pixels = simplejpeg.decode_jpeg(data, **options)
    except ValueError as e:
        if "Premature end" in str(e):
            raise ValueError(f"the JPEG ends before its last row: {e}") from None
        pixels = simplejpeg.decode_jpeg(data, strict=False, **options)
    return pixels.reshape(*pixels.shape[:2], channels)
