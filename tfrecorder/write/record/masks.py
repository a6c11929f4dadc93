"""Masks: one segmentation mask's bytes -> the PNG of class ids its record stores, checked against its image.

A mask is a one-channel image of class ids: PNG or another lossless format, a palette PNG (VOC's
``SegmentationClass``) read by its indices, an RGB one only through ``mask_colors``. It is made for its
photo as displayed or for its stored pixels; either way it is stored in the stored image's frame (as the
boxes are: ``boxes``), so that a reader applying no EXIF orientation (TFDS, Model Garden) gets an image and
a mask that line up, and ours turns both. When the image is re-encoded (upright, perhaps resized), the mask
goes where its pixels went, resized with nearest-neighbour so that no class id is blended into another.
"""

from __future__ import annotations

import functools
import io
from typing import cast

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from tfrecorder.dataset.boxes import INVERSE
from tfrecorder.errors import ImageError
from tfrecorder.write.record.fetch import fetch
from tfrecorder.write.record.images import StoredImage
from tfrecorder.write.settings import FetchLimits, MaskSettings

# What Pillow does to pixels for each EXIF orientation (as ImageOps.exif_transpose): stored -> displayed.
_SHOW = {2: Image.Transpose.FLIP_LEFT_RIGHT, 3: Image.Transpose.ROTATE_180, 4: Image.Transpose.FLIP_TOP_BOTTOM,
         5: Image.Transpose.TRANSPOSE, 6: Image.Transpose.ROTATE_270, 7: Image.Transpose.TRANSVERSE,
         8: Image.Transpose.ROTATE_90}
_ONE_CHANNEL = {"L", "P", "1", "I", "I;16", "I;16B", "I;16L"}
# dataset.json counts the pixels of each class in about this many masks of a split: every mask of a smaller
# split, one in ``pixel_stride`` of a larger one. A count costs as much as the mask's decode (Pillow's
# histogram), and a class balance needs no more; the ids of every mask are checked all the same.
MASK_PIXELS_SAMPLE = 100


def pixel_stride(split_rows: int) -> int:
    """Pixels are counted in the masks of every ``pixel_stride``-th rank of a split of ``split_rows``: content-key
    order, so a sample of the masks as random as the keys, the same whatever runner or shards write them."""
    return max(1, -(-split_rows // MASK_PIXELS_SAMPLE))


def load_mask(location: str | None, uri: str | None, image: StoredImage, image_uri: str | None,
              settings: MaskSettings, size: tuple[int, int] | None, resize_mode: str, validate: str = "full",
              limits: FetchLimits = FetchLimits(), count: bool = True) -> tuple[bytes, np.ndarray | None]:
    """The mask of ``image`` (at ``location``) as stored: PNG bytes of its class ids, in the stored image's
    frame, and the count of pixels of each id (256 counts; None for a mask not ``count``ed, or checked by its
    header alone). ``size``/``resize_mode``: how the image was resized, when it was. ``validate``: "header"
    stores a grey PNG made for the stored pixels as it is, checked by its header (size, one channel), as
    images are; "full" decodes every mask and checks its class ids. Raises ImageError naming the image and
    the mask."""
    data = fetch(location, limits)
    picture = _open(data, uri, settings)
    geometry = image.geometry
    shown = (geometry.height, geometry.width)
    turned = geometry.source_orientation in (5, 6, 7, 8)
    stored = (shown[1], shown[0]) if turned else shown
    found = (picture.height, picture.width)
    if found not in (shown, stored):
        raise ImageError("mask_size", f"mask {uri} is {found[1]}x{found[0]}, but its image {image_uri} is "
                                      f"{shown[1]}x{shown[0]} as displayed" +
                                      (f" ({stored[1]}x{stored[0]} as stored)" if stored != shown else ""))
    # Made for the stored pixels (unturned, or of their turned size), of bytes kept as they were: as it is
    as_given = image.source is None and found == stored and (geometry.orientation == 1 or stored != shown)
    if as_given and picture.format == "PNG" and picture.mode == "L":  # what decode_png reads as the ids
        if validate == "header":
            return data, None
        _load(picture, uri)
        return data, _checked(picture, uri, settings, count)
    mask = Image.fromarray(_class_ids(picture, uri, settings), "L")
    if found != shown:  # made for the stored pixels: shown as the picture is
        mask = mask.transpose(_SHOW[geometry.source_orientation])
    if image.source is not None:  # re-encoded upright: the mask goes where the pixels went
        if size is not None:
            mask = _resize(mask, size, resize_mode, settings.ignore_index)
    elif geometry.orientation != 1:  # kept bytes: back into their stored pixels
        mask = mask.transpose(_SHOW[INVERSE[geometry.orientation]])
    counts = _checked(mask, uri, settings, count)
    buffer = io.BytesIO()
    mask.save(buffer, "PNG", compress_level=6)
    return buffer.getvalue(), counts


def _open(data: bytes, uri: str | None, settings: MaskSettings) -> Image.Image:
    """The mask opened (its header read): an image Pillow reads, not a JPEG, one channel or ``mask_colors``."""
    try:
        picture = Image.open(io.BytesIO(data))
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError, Image.DecompressionBombError) as e:
        raise ImageError("mask_decode", f"mask {uri} cannot be decoded: {e}") from e
    if picture.format == "JPEG":
        raise ImageError("mask_format", f"mask {uri} is a JPEG: lossy compression changes class ids at every "
                                        f"edge; save masks as PNG")
    if picture.mode not in _ONE_CHANNEL and not settings.colors:
        raise ImageError("mask_channels", f"mask {uri} has {len(picture.getbands())} channels ({picture.mode}): a "
                                          f"mask holds one channel of class ids; for colour masks pass "
                                          f"mask_colors={{(r, g, b): class_id, ...}}")
    return picture


def _load(picture: Image.Image, uri: str | None) -> None:
    try:
        picture.load()
    except (OSError, SyntaxError, ValueError, EOFError, IndexError, Image.DecompressionBombError) as e:
        raise ImageError("mask_decode", f"mask {uri} cannot be decoded: {e}") from e


def _class_ids(picture: Image.Image, uri: str | None, settings: MaskSettings) -> np.ndarray:
    """The mask's class ids, uint8 (H, W): a one-channel image's values, a palette image's indices, an RGB
    image's colours through ``mask_colors``."""
    _load(picture, uri)
    if picture.mode in _ONE_CHANNEL:
        ids = np.asarray(picture)
        if ids.dtype != np.uint8 and ids.size and (ids.min() < 0 or ids.max() > 255):
            raise ImageError("mask_class", f"mask {uri} holds class ids up to {ids.max()}: at most 255 are stored")
        return ids.astype(np.uint8)
    rgb = np.asarray(picture.convert("RGB")).astype(np.int32)
    packed = (rgb[..., 0] << 16) | (rgb[..., 1] << 8) | rgb[..., 2]
    ids = np.full(packed.shape, -1, np.int32)
    for (r, g, b), class_id in settings.colors or ():
        ids[packed == (r << 16 | g << 8 | b)] = class_id
    if (ids < 0).any():
        y, x = np.argwhere(ids < 0)[0]
        raise ImageError("mask_class", f"mask {uri} has the colour {tuple(rgb[y, x].tolist())} at x={x}, y={y}, "
                                       f"which mask_colors does not name")
    return ids.astype(np.uint8)


def _checked(mask: Image.Image, uri: str | None, settings: MaskSettings, count: bool) -> np.ndarray | None:
    """The pixels of each id of a decoded grey ``mask`` if ``count``, once its ids are checked against
    ``mask_classes``: from the counts, or else from its highest id (below the number of classes: every id is
    known), or else by looking every pixel up in a table of the known ids and ignore_index."""
    counts = np.asarray(mask.histogram(), np.int64) if count else None
    if settings.classes is None:
        return counts
    known = len(settings.classes)
    if counts is None:
        if _highest(mask) < known:
            return None
        if not _highest(mask.point(_unknown_ids(known, settings.ignore_index))):
            return None
        counts = np.asarray(mask.histogram(), np.int64)  # a mask to refuse: its unknown ids, named below
    found = set(np.flatnonzero(counts).tolist()) - {settings.ignore_index}
    unknown_ids = sorted(i for i in found if i >= known)
    if unknown_ids:
        raise ImageError("mask_class", f"mask {uri} holds class ids {unknown_ids[:10]} beyond mask_classes' "
                                       f"{known} classes (0-{known - 1}; "
                                       f"{settings.ignore_index} is ignore_index)")
    return counts


@functools.lru_cache(maxsize=8)
def _unknown_ids(known: int, ignore_index: int) -> list[int]:
    """A lookup table of the 256 ids, 1 for an id beyond the ``known`` classes other than ``ignore_index``: made
    once per table's settings, not per mask."""
    return [int(i >= known and i != ignore_index) for i in range(256)]


def _highest(mask: Image.Image) -> int:
    """The highest value of a one-band image (Pillow's extrema of one band: a (lowest, highest) pair)."""
    return int(cast(tuple[int, int], mask.getextrema())[1])


def _resize(mask: Image.Image, size: tuple[int, int], mode: str, fill: int) -> Image.Image:
    """The mask resized as ``images.resize`` resizes its picture, with nearest-neighbour (class ids stay ids);
    a pad is ``fill``."""
    height, width = size
    if mode == "pad":
        fitted = ImageOps.contain(mask, (width, height), Image.Resampling.NEAREST)
        out = Image.new("L", (width, height), fill)
        out.paste(fitted, (round((width - fitted.width) * 0.5), round((height - fitted.height) * 0.5)))
        return out
    if mode == "crop":
        return ImageOps.fit(mask, (width, height), Image.Resampling.NEAREST)
    return mask.resize((width, height), Image.Resampling.NEAREST)
