"""Images: check, decode and re-encode one image's bytes with libjpeg-turbo and Pillow (fetching is in fetch)."""

from __future__ import annotations

import contextlib
import io
import logging
import struct
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import simplejpeg
from PIL import Image, ImageOps, UnidentifiedImageError

from tfrecorder.dataset.features import DEFAULT_RESIZE_MODE
from tfrecorder.errors import ImageError
from tfrecorder.write.record.boxes import Geometry
from tfrecorder.write.record.fetch import fetch
from tfrecorder.write.settings import FetchLimits, ImageSettings

logger = logging.getLogger(__name__)


# Modes whose original bytes tf.io.decode_image turns into the pixels Pillow sees, and the channels it gives.
_KEEP_CHANNELS: dict[str, dict[str, int]] = {
    "JPEG": {"L": 1, "RGB": 3},
    "PNG": {"1": 1, "L": 1, "LA": 2, "RGB": 3, "RGBA": 4},
    "GIF": {"P": 3, "L": 3, "RGB": 3},
    "BMP": {"RGB": 3, "RGBA": 4},
    "WEBP": {"RGB": 3, "RGBA": 4},
}
# What a mode becomes when pixels are decoded: the uint8 mode stored and its channel count.
_TARGET_MODES = {"1": "L", "L": "L", "LA": "LA", "RGB": "RGB", "RGBA": "RGBA", "I;16": "L", "I": "L",
                 "I;16B": "L", "F": "L", "CMYK": "RGB", "YCbCr": "RGB", "LAB": "RGB", "HSV": "RGB", "PA": "RGBA",
                 "RGBa": "RGBA", "La": "LA"}
_CHANNELS = {"L": 1, "LA": 2, "RGB": 3, "RGBA": 4}


@dataclass(frozen=True)
class StoredImage:
    """The bytes that go into the record's ``image`` feature, and what they hold."""

    data: bytes
    height: int
    width: int
    channels: int
    format: str  # jpeg, png, gif, bmp, webp or raw
    orientation: int = 1  # EXIF orientation of kept bytes (height and width are as displayed, after it)
    source: Geometry | None = None  # a re-encoded picture's: where its pixels went (None: kept as they were)
    mask: bytes | None = None  # a segmentation table's: its mask as stored (masks.load_mask)
    mask_pixels: Any = None  # ... and the pixels of each class id in it (256 counts)

    @property
    def geometry(self) -> Geometry:
        """Where the source picture's pixels are in these bytes (``boxes`` moves box edges by it)."""
        return self.source or Geometry(self.height, self.width, self.orientation, self.orientation)


def _oriented(data: bytes, height: int, width: int, channels: int, fmt: str, orientation: int) -> StoredImage:
    if orientation in (5, 6, 7, 8):  # these orientations turn the picture a quarter: it shows width x height
        height, width = width, height
    return StoredImage(data, height, width, channels, fmt, orientation)


EXIF_ORIENTATION = 0x0112
# What a malformed EXIF block can raise in Pillow; orientation then counts as 1 (as viewers do).
_EXIF_ERRORS = (OSError, ValueError, SyntaxError, TypeError, KeyError, IndexError, struct.error)


def exif_orientation(img: Image.Image) -> int:
    """The EXIF orientation (1-8) of an opened image; 1 when absent or unreadable."""
    try:
        value = img.getexif().get(EXIF_ORIENTATION, 1)
    except _EXIF_ERRORS:
        return 1
    return value if isinstance(value, int) and 1 <= value <= 8 else 1


def load_image(location: str | None, settings: ImageSettings, limits: FetchLimits = FetchLimits()) -> StoredImage:
    """Fetch (within ``limits``), check and (if settings ask) re-encode one image."""
    return prepare_image(fetch(location, limits), settings)


def held_image(data: bytes, settings: ImageSettings, limits: FetchLimits = FetchLimits()) -> StoredImage:
    """Check and (if settings ask) re-encode an image a table holds itself, within the size a file may have."""
    if not data:
        raise ImageError("empty_file", "zero-byte image: the row's image is empty bytes")
    if len(data) > limits.max_bytes:
        raise ImageError("too_large", f"{len(data)} bytes is over max_image_bytes={limits.max_bytes}")
    return prepare_image(data, settings)


def prepare_image(data: bytes, settings: ImageSettings) -> StoredImage:
    """Check ``data`` as settings.validate says and return what to store."""
    if settings.format == "keep" and settings.size is None and data[:2] == b"\xff\xd8":
        stored = _keep_jpeg(data, settings)
        if stored is not None:
            return stored
    try:
        img = Image.open(io.BytesIO(data))
    except UnidentifiedImageError as e:
        raise ImageError("unsupported_format", "not an image file Pillow can read") from e
    except Image.DecompressionBombError as e:  # twice Pillow's own limit: refused before its size is ours to see
        raise ImageError("too_large", f"over the limit of {settings.max_pixels} pixels, and Pillow's: {e}") from e
    except (OSError, SyntaxError, ValueError) as e:
        raise ImageError("decode_error", f"unreadable image header: {e}") from e
    width, height = img.size
    if width * height > settings.max_pixels:
        raise ImageError("too_large", f"{width}x{height} pixels is over the limit of {settings.max_pixels}")
    keep_channels = _KEEP_CHANNELS.get(img.format or "", {}).get(img.mode)
    if img.format == "PNG" and img.mode == "P":
        keep_channels = 4 if "transparency" in img.info else 3
    if img.format == "WEBP" and getattr(img, "is_animated", False) and img.mode != "RGBA":
        keep_channels = None  # TensorFlow decodes an animated WebP as RGBA only: its first frame is re-encoded
    if img.format == "GIF" and "transparency" in img.info:
        keep_channels = None  # TensorFlow draws its transparent colour black, Pillow the palette's: an RGBA PNG
    if settings.format == "keep" and settings.size is None and keep_channels is not None:
        if settings.validate == "full":
            with DECODE_MEMORY.hold(_pixel_bytes(img, scale=8 if img.format == "JPEG" else 1)):
                _decode_check(img)
        return _oriented(data, height, width, keep_channels, str(img.format).lower(), exif_orientation(img))
    with DECODE_MEMORY.hold(2 * _pixel_bytes(img)):  # the decoded pixels and a converted copy
        return _reencode(img, settings)


class MemoryBudget:
    """Bytes of decoded pixels that all threads of this process may hold at once.

    A decode waits until its bytes fit beside the others'; one image larger than the whole budget
    still decodes, alone. Bounds what a pool of workers costs when several huge images come together.
    """

    def __init__(self, limit: int):
        self.limit = limit
        self.used = 0
        self.peak = 0
        self._changed = threading.Condition()

    @contextlib.contextmanager
    def hold(self, nbytes: int) -> Iterator[None]:
        with self._changed:
            self._changed.wait_for(lambda: self.used == 0 or self.used + nbytes <= self.limit)
            self.used += nbytes
            self.peak = max(self.peak, self.used)
        try:
            yield
        finally:
            with self._changed:
                self.used -= nbytes
                self._changed.notify_all()


DECODE_MEMORY = MemoryBudget(1024**3)
_BYTES_PER_BAND = {"I": 4, "F": 4, "I;16": 2, "I;16B": 2, "I;16L": 2}


def _pixel_bytes(img: Image.Image, scale: int = 1) -> int:
    """What decoding ``img`` (at 1/scale in each direction) holds in memory."""
    bands = len(img.getbands()) * _BYTES_PER_BAND.get(img.mode, 1)
    return max(1, img.width // scale) * max(1, img.height // scale) * bands


_JPEG_CHANNELS = {"Gray": 1, "YCbCr": 3, "RGB": 3}


def _keep_jpeg(data: bytes, settings: ImageSettings) -> StoredImage | None:
    """Check a JPEG with libjpeg-turbo (simplejpeg): the header in microseconds, the whole
    bitstream at 1/8 scale, without holding the GIL. None hands the image to Pillow, which
    re-encodes CMYK/YCCK and has the last word on anything libjpeg-turbo complained about."""
    try:
        height, width, colorspace, _ = simplejpeg.decode_jpeg_header(data)
        channels = _JPEG_CHANNELS.get(colorspace)
        if channels is None or width * height > settings.max_pixels:
            return None
        if settings.validate == "full":
            # Gray output still entropy-decodes every component (the costly part), but skips colour work.
            simplejpeg.decode_jpeg(data, colorspace="GRAY", min_height=1, min_width=1, min_factor=8)
    except ValueError:
        return None
    orientation = exif_orientation(Image.open(io.BytesIO(data))) if _has_exif(data) else 1
    return _oriented(data, height, width, channels, "jpeg", orientation)


def _has_exif(data: bytes) -> bool:
    """Whether a JPEG has an EXIF (APP1) segment, found by walking its header segments (not scanning the data)."""
    at = 2
    while at + 4 <= len(data) and data[at] == 0xFF:
        marker = data[at + 1]
        if marker == 0xFF:  # fill byte
            at += 1
            continue
        if marker == 0xDA or 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            return False  # start of frame or scan: the header segments are over
        length = int.from_bytes(data[at + 2:at + 4], "big")
        if marker == 0xE1 and data[at + 4:at + 10] == b"Exif\x00\x00":
            return True
        at += 2 + length
    return False


def _decode_check(img: Image.Image) -> None:
    """Decode every pixel once (JPEG at 1/8 scale: still the whole bitstream) to catch corrupt files."""
    try:
        if img.format == "JPEG":
            img.draft(img.mode, (max(1, img.width // 8), max(1, img.height // 8)))
        img.load()
    except Image.DecompressionBombError as e:
        raise ImageError("too_large", str(e)) from e
    except (OSError, SyntaxError, ValueError, EOFError, IndexError) as e:
        raise ImageError("decode_error", f"corrupt or truncated {img.format} image: {e}") from e


def _reencode(img: Image.Image, settings: ImageSettings) -> StoredImage:
    """Decode, orient, convert to a uint8 mode, resize, and encode as PNG, JPEG or raw pixels."""
    source_format = img.format
    try:
        img.load()
        orientation = exif_orientation(img)
        img = ImageOps.exif_transpose(img)
        target = _target_mode(img)
        if img.mode in ("I;16", "I;16B", "I"):
            img = Image.fromarray((np.asarray(img, dtype=np.uint32) >> 8).clip(0, 255).astype(np.uint8))
        img = img.convert(target)
    except Image.DecompressionBombError as e:
        raise ImageError("too_large", str(e)) from e
    except (OSError, SyntaxError, ValueError, EOFError, IndexError) as e:
        raise ImageError("decode_error", f"corrupt or truncated {img.format} image: {e}") from e
    shown_height, shown_width = img.height, img.width
    placement = (1.0, 1.0, 0.0, 0.0)
    if settings.size is not None:
        img, placement = resize(img, settings.size, settings.resize_mode)
    fmt = settings.format
    if fmt == "keep":  # resized, or not decodable by TensorFlow as it is: JPEG stays JPEG, others go lossless
        fmt = "jpeg" if source_format == "JPEG" and img.mode in ("L", "RGB") and settings.size else "png"
    if fmt == "jpeg" and img.mode not in ("L", "RGB"):
        img = img.convert("RGB" if img.mode in ("RGBA", "P") else "L")
    channels = _CHANNELS[img.mode]
    if fmt == "raw":
        data = np.asarray(img, dtype=np.uint8).tobytes()
    else:
        buffer = io.BytesIO()
        options = {"quality": settings.jpeg_quality} if fmt == "jpeg" else {"compress_level": 6}
        img.save(buffer, format=fmt.upper(), **options)
        data = buffer.getvalue()
    return StoredImage(data, img.height, img.width, channels, fmt,
                       source=Geometry(shown_height, shown_width, orientation, 1, placement))


def resize(img: Image.Image, size: tuple[int, int], mode: str = DEFAULT_RESIZE_MODE
           ) -> tuple[Image.Image, tuple[float, float, float, float]]:
    """Resize to (height, width) with bicubic resampling: stretched, padded (letterbox: ``ImageOps.pad``'s
    pixels, centred) or centre-cropped; and where the picture went (``Geometry.placement``, normalized)."""
    height, width = size
    if mode == "pad":
        fitted = _contained(img, (width, height))
        top, left = round((height - fitted.height) * 0.5), round((width - fitted.width) * 0.5)
        out = Image.new(img.mode, (width, height), 0)
        out.paste(fitted, (left, top))
        return out, (fitted.height / height, fitted.width / width, top / height, left / width)
    if mode == "crop":
        scale = max(height / img.height, width / img.width)
        placement = (img.height * scale / height, img.width * scale / width,
                     (height - img.height * scale) / 2 / height, (width - img.width * scale) / 2 / width)
        return ImageOps.fit(img, (width, height), Image.Resampling.BICUBIC), placement
    return img.resize((width, height), Image.Resampling.BICUBIC), (1.0, 1.0, 0.0, 0.0)


def _contained(img: Image.Image, box: tuple[int, int]) -> Image.Image:
    """``ImageOps.contain``'s fit inside ``box`` (width, height), bicubic, at least a pixel a side: a strip it
    would round to no row or column (400x3 in 64x64) fails PIL's resize, and with it the conversion."""
    width, height = box
    if img.width * height > img.height * width and round(img.height / img.width * width) < 1:
        return img.resize((width, 1), Image.Resampling.BICUBIC)
    if img.width * height < img.height * width and round(img.width / img.height * height) < 1:
        return img.resize((1, height), Image.Resampling.BICUBIC)
    return ImageOps.contain(img, box, Image.Resampling.BICUBIC)


def _target_mode(img: Image.Image) -> str:
    if img.mode == "P":
        return "RGBA" if "transparency" in img.info else "RGB"
    return _TARGET_MODES.get(img.mode, "RGB")
