"""Instance masks (numpy, pycocotools, Pillow): one image's objects' segmentations -> the PNGs its record stores.

An object's mask is given as COCO's ``segmentation`` (``types.InstanceMask``: polygons in the box columns' units
and frame, or RLE of the annotated picture) or as a PNG of its picture's size (``types.InstanceMaskUri``). It is
drawn at the size of the frame its annotation is in (``boxes.annotation_frame``: the boxes' rule for
EXIF-turned photos), checked there (not empty; its polygons inside the picture within ``CLIP_PIXELS``; its box
holding it within ``CLIP_PIXELS``, else a warning), and moved where its picture's pixels went in the stored image,
as the boxes are: turned, placed by a resize (``Geometry.placement``) with nearest-neighbour, so it stays 0/1. Each
is stored as a one-channel PNG at a low zlib level: a 0/1 mask compresses about as well there, several times
faster than the default. With ``mask_from_instances``, a record's masks also make its semantic mask of class
ids (``semantic_mask``).
"""

from __future__ import annotations

import io
import json
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image, UnidentifiedImageError

from tfrecorder.dataset.boxes import INVERSE
from tfrecorder.errors import ImageError
from tfrecorder.write.record.boxes import CLIP_PIXELS, Geometry, annotation_frame, frame_size
from tfrecorder.write.record.fetch import fetch
from tfrecorder.write.record.images import StoredImage
from tfrecorder.write.settings import FetchLimits

PNG_LEVEL = 1  # zlib level of each mask's PNG (benchmarks/bench_instance_masks.py: the default 6 buys ~nothing)
# What Pillow does to pixels for each EXIF orientation (as ImageOps.exif_transpose): stored -> displayed.
_SHOW = {2: Image.Transpose.FLIP_LEFT_RIGHT, 3: Image.Transpose.ROTATE_180, 4: Image.Transpose.FLIP_TOP_BOTTOM,
         5: Image.Transpose.TRANSPOSE, 6: Image.Transpose.ROTATE_270, 7: Image.Transpose.TRANSVERSE,
         8: Image.Transpose.ROTATE_90}


@dataclass(frozen=True)
class ObjectMasks:
    """One image's objects' instance masks: as given (``values``: segmentation text, or PNG locations where
    ``located``), the objects' box edges (``[N, 4]`` xmin, ymin, xmax, ymax in ``units``) and their rows."""

    values: Sequence[str | None]
    located: bool
    edges: np.ndarray
    units: str
    rows: Sequence[int]


def stored_masks(objects: ObjectMasks, frame: str, annotated: tuple[float, float] | None, image: StoredImage,
                 image_uri: str, limits: FetchLimits = FetchLimits()) -> tuple[list[np.ndarray], list[int]]:
    """Each object's mask as stored (uint8 0/1, the stored image's height x width; an object without one: all 0)
    and the rows of those whose box does not hold their mask within ``CLIP_PIXELS``. Raises ImageError
    (``instance_mask_*``) naming the row, the object and the image."""
    geometry = image.geometry
    frame, counted = annotation_frame(frame, annotated, geometry, objects.rows)
    size = frame_size(frame, geometry)  # drawn at the picture's size; its coordinates count ``counted``
    masks, loose = [], []
    for i, (value, row) in enumerate(zip(objects.values, objects.rows)):
        where = f"row {row}: the instance mask of object {i + 1} of image {image_uri}"
        if isinstance(value, bytes):  # a text column's values are held as UTF-8
            value = value.decode("utf-8")
        if value is None:
            masks.append(np.zeros(stored_size(image), np.uint8))
            continue
        if objects.located:
            drawn = _from_png(value, frame, size, geometry, where, limits)
        else:
            drawn = drawn_mask(value, size, objects.units, where, counted)
        if not drawn.any():
            raise ImageError("instance_mask_empty", f"{where} is empty: no pixel of the {size[1]}x{size[0]} "
                                                    f"picture is on the object; fix its segmentation or drop it")
        if not _holds(objects.edges[i], objects.units, counted, drawn):
            loose.append(row)
        masks.append(_placed(drawn, frame, geometry, image))
    return masks, loose


def stored_size(image: StoredImage) -> tuple[int, int]:
    """(height, width) of the stored pixels, which masks are stored in: kept bytes of a quarter-turned photo are
    the displayed picture's width x height."""
    turned = image.source is None and image.orientation in (5, 6, 7, 8)
    return (image.width, image.height) if turned else (image.height, image.width)


def semantic_mask(masks: Sequence[np.ndarray], ids: Sequence[int], image: StoredImage, fill: int) -> np.ndarray:
    """The record's semantic mask (uint8, stored pixels) from its objects' stored instance masks: each object's
    pixels its id (a class id, or ``fill`` for a crowd), later objects over earlier ones; 0 elsewhere, and
    ``fill`` (ignore_index) where a resize with ``pad`` left no picture, as a segmentation table's mask is."""
    out = np.zeros(stored_size(image), np.uint8)
    for mask, value in zip(masks, ids):
        out[mask.astype(bool)] = value
    geometry = image.geometry
    if image.source is not None and geometry.placement != (1.0, 1.0, 0.0, 0.0):  # only pad places it so
        picture = _resampled(np.ones((geometry.height, geometry.width), np.uint8), out.shape, geometry.placement)
        out[picture == 0] = fill
    return out


def png(mask: np.ndarray) -> bytes:
    """A 0/1 mask (or a semantic mask of class ids) as a one-channel PNG."""
    buffer = io.BytesIO()
    Image.fromarray(mask, "L").save(buffer, "PNG", compress_level=PNG_LEVEL)
    return buffer.getvalue()


def drawn_mask(value: str, size: tuple[int, int], units: str, where: str,
               counted: tuple[int, int] | None = None) -> np.ndarray:
    """COCO segmentation JSON text drawn as a uint8 0/1 mask of ``size`` (height, width): polygons (in ``units``,
    pixels or normalized) filled, RLE (its ``size`` the annotated picture's) decoded. ``counted``: the size
    (height, width) pixel coordinates count, where the annotation was drawn at another scale (None: ``size``):
    polygons are scaled to ``size`` before they are filled, RLE resampled after it is decoded."""
    from pycocotools import mask as coco_mask

    counted = size if counted is None else counted
    try:
        given = json.loads(value)
    except ValueError as e:
        raise ImageError("instance_mask_decode", f"{where} is not COCO segmentation JSON: {e}") from None
    if isinstance(given, dict):
        rle = _rle(given, counted, where)
    else:
        polygons = _polygons(given, counted, units, where, size)
        if not polygons:
            return np.zeros(size, np.uint8)
        rle = coco_mask.merge(coco_mask.frPyObjects(polygons, *size))
    try:
        with warnings.catch_warnings():  # pycocotools' own array protocol, which numpy 2 warns of
            warnings.simplefilter("ignore", DeprecationWarning)
            mask = np.ascontiguousarray(coco_mask.decode(rle))
    except (ValueError, TypeError) as e:
        raise ImageError("instance_mask_decode", f"{where}: its RLE cannot be decoded: {e}") from None
    return _resampled(mask, size, (1.0, 1.0, 0.0, 0.0))  # an RLE of the annotated picture: onto this one


def _rle(given: dict[str, Any], size: tuple[int, int], where: str) -> dict[str, Any]:
    """COCO RLE (``counts`` as a list of runs, or compressed text) of the picture's ``size``, compressed."""
    from pycocotools import mask as coco_mask

    found, counts = given.get("size"), given.get("counts")
    if not (isinstance(found, list) and len(found) == 2 and all(isinstance(v, int) for v in found)):
        raise ImageError("instance_mask_decode", f"{where}: RLE size {found!r} is not [height, width]")
    if tuple(found) != tuple(size):
        raise ImageError("instance_mask_size", f"{where}: its RLE is {found[1]}x{found[0]} (width x height), its "
                                               f"picture {size[1]}x{size[0]}")
    if isinstance(counts, str):
        return {"size": found, "counts": counts.encode("ascii")}
    if isinstance(counts, list) and all(isinstance(v, int) and v >= 0 for v in counts) \
            and sum(counts) == size[0] * size[1]:
        return coco_mask.frPyObjects({"size": found, "counts": counts}, *size)
    raise ImageError("instance_mask_decode", f"{where}: RLE counts are not runs adding up to its "
                                             f"{size[0] * size[1]} pixels, nor COCO's compressed text")


def _polygons(given: Any, size: tuple[int, int], units: str, where: str,
              to: tuple[int, int] | None = None) -> list[list[float]]:
    """COCO polygons (a list of ``[x1, y1, x2, y2, ...]``; one flat list alike) in pixels of ``size``, each point
    inside the picture within ``CLIP_PIXELS`` (else a row error), scaled to pixels of ``to`` (None: ``size``);
    those of under 3 points left out (no area)."""
    if isinstance(given, list) and given and all(isinstance(v, (int, float)) for v in given):
        given = [given]
    if not isinstance(given, list) or not all(isinstance(p, list) for p in given):
        raise ImageError("instance_mask_decode", f"{where}: {str(given)[:60]} is neither polygons "
                                                 f"[[x1, y1, ...], ...] nor RLE {{size, counts}}")
    height, width = size
    scale = np.array([width, height], np.float64) if units == "normalized" else np.ones(2)
    polygons = []
    for polygon in given:
        try:
            points = np.asarray(polygon, np.float64).reshape(-1, 2) * scale
        except (ValueError, TypeError):
            raise ImageError("instance_mask_decode", f"{where}: polygon {str(polygon)[:60]} is not x, y "
                                                     f"pairs of numbers") from None
        outside = ((points < -CLIP_PIXELS) | (points > np.array([width, height]) + CLIP_PIXELS)).any(axis=1)
        if outside.any() or not np.isfinite(points).all():
            x, y = points[np.flatnonzero(outside | ~np.isfinite(points).all(axis=1))[0]]
            raise ImageError("instance_mask_outside_image",
                             f"{where}: its polygon point ({x:g}, {y:g}) lies outside the {width}x{height} "
                             f"picture by more than 1 pixel")
        if len(points) >= 3:
            polygons.append((points * (np.array(to[::-1]) / (width, height) if to else 1)).ravel().tolist())
    return polygons


def _from_png(location: str, frame: str, size: tuple[int, int], geometry: Geometry, where: str,
              limits: FetchLimits) -> np.ndarray:
    """A mask PNG's nonzero pixels as 0/1 in the annotation's frame of ``size``: made for the picture as displayed
    or for its stored pixels, turned into that frame."""
    data = fetch(location, limits)
    try:
        picture: Image.Image = Image.open(io.BytesIO(data))
        picture.load()
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError, Image.DecompressionBombError) as e:
        raise ImageError("instance_mask_decode", f"{where} ({location}) cannot be decoded: {e}") from e
    if len(picture.getbands()) != 1:
        raise ImageError("instance_mask_decode", f"{where} ({location}) has {len(picture.getbands())} channels: "
                                                 f"an instance mask is one channel, nonzero on the object")
    found = (picture.height, picture.width)
    other = (size[1], size[0])  # the other frame's size, for a quarter-turned photo
    turned = geometry.source_orientation in (5, 6, 7, 8)
    if found != size and not (turned and found == other):
        raise ImageError("instance_mask_size", f"{where} ({location}) is {found[1]}x{found[0]}, its image "
                                               f"{size[1]}x{size[0]}")
    if found != size:  # made for the other frame: into the annotation's
        show = geometry.source_orientation if frame == "displayed" else INVERSE[geometry.source_orientation]
        picture = picture.transpose(_SHOW[show])
    return (np.asarray(picture) != 0).astype(np.uint8)


def _holds(edges: np.ndarray, units: str, counted: tuple[int, int], mask: np.ndarray) -> bool:
    """Whether a box (xmin, ymin, xmax, ymax in ``units``; pixels count ``counted``) holds its mask's pixels
    within ``CLIP_PIXELS``."""
    height, width = mask.shape
    box = edges * np.array([width, height, width, height], np.float64)
    box = box / (1.0 if units == "normalized" else np.array(counted[::-1] * 2, np.float64))
    rows, columns = np.flatnonzero(mask.any(axis=1)), np.flatnonzero(mask.any(axis=0))
    extent = np.array([columns[0], rows[0], columns[-1] + 1, rows[-1] + 1], np.float64)
    return bool((extent[:2] >= box[:2] - CLIP_PIXELS).all() and (extent[2:] <= box[2:] + CLIP_PIXELS).all())


def _placed(mask: np.ndarray, frame: str, geometry: Geometry, image: StoredImage) -> np.ndarray:
    """A mask in the annotation's frame moved where its picture's pixels are in the stored image: into the
    displayed picture, then placed as the re-encoded picture was (``Geometry.placement``, nearest-neighbour at
    pixel centres; outside the picture 0), or turned back into kept bytes' stored pixels."""
    if frame == "stored" and geometry.source_orientation != 1:
        mask = _turned(mask, geometry.source_orientation)
    if image.source is not None:
        return _resampled(mask, (image.height, image.width), geometry.placement)
    if geometry.orientation != 1:
        mask = _turned(mask, INVERSE[geometry.orientation])
    return mask


def _turned(mask: np.ndarray, orientation: int) -> np.ndarray:
    return np.asarray(Image.fromarray(mask, "L").transpose(_SHOW[orientation]))


def _resampled(mask: np.ndarray, size: tuple[int, int], placement: tuple[float, float, float, float]
               ) -> np.ndarray:
    """``mask`` (the displayed picture) where ``placement`` (scale_y, scale_x, offset_y, offset_x, normalized)
    puts it in a picture of ``size``: each pixel takes the source pixel under its centre (0 off the picture)."""
    height, width = size
    if (height, width) == mask.shape and placement == (1.0, 1.0, 0.0, 0.0):
        return mask
    scale_y, scale_x, offset_y, offset_x = placement
    rows = _sources(height, mask.shape[0], scale_y, offset_y)
    columns = _sources(width, mask.shape[1], scale_x, offset_x)
    out = mask[np.clip(rows, 0, mask.shape[0] - 1)][:, np.clip(columns, 0, mask.shape[1] - 1)]
    out[(rows < 0) | (rows >= mask.shape[0])] = 0
    out[:, (columns < 0) | (columns >= mask.shape[1])] = 0
    return out


def _sources(count: int, have: int, scale: float, offset: float) -> np.ndarray:
    """The source index under each of ``count`` pixel centres along an axis (may fall off the ``have`` pixels)."""
    normalized = ((np.arange(count) + 0.5) / count - offset) / scale
    return np.floor(normalized * have).astype(np.int64)
