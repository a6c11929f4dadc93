"""Numpy geometry (pure numpy: ``data_source`` reads without TensorFlow): where a picture's EXIF turn and the resize
to ``image_size`` take its pixels, masks, boxes and points. Each rule is ``tf_geometry``'s and ``tf_image.resize``'s,
ported step for step (the same float32 arithmetic where pixels are computed), so that a record read at random
shows what ``load_dataset`` shows."""

from __future__ import annotations

import functools
import math
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from tfrecorder.dataset.features import DEFAULT_RESIZE_MODE

_ANTIALIAS_ABOVE = 3.0  # tf_image._resized's "auto": a step that shrinks more than this is antialiased


def orient(image: np.ndarray, orientation: int) -> np.ndarray:
    """Pixels ``(H, W, ...)`` turned as EXIF ``orientation`` (1-8) says: ``tf_geometry.apply_orientation``'s
    branches (``tf.image.rot90(x, k)`` is ``np.rot90(x, k)``)."""
    turns = {
        2: lambda x: x[:, ::-1],                         # mirrored
        3: lambda x: np.rot90(x, 2),                     # upside down
        4: lambda x: x[::-1],                            # mirrored upside down
        5: lambda x: np.swapaxes(x, 0, 1),               # mirrored, quarter turn
        6: lambda x: np.rot90(x, 3),                     # quarter turn clockwise
        7: lambda x: np.rot90(np.swapaxes(x, 0, 1), 2),  # transverse
        8: lambda x: np.rot90(x, 1),                     # quarter turn counter-clockwise
    }
    turn = turns.get(min(max(int(orientation), 1), 8))
    return image if turn is None else np.ascontiguousarray(turn(image))


def orient_boxes(boxes: np.ndarray, orientation: int) -> np.ndarray:
    """Normalized ``[N, 4]`` ``[ymin, xmin, ymax, xmax]`` boxes of stored pixels as ``orient`` shows the picture
    (``tf_geometry.orient_boxes``)."""
    y0, x0, y1, x1 = (boxes[:, i] for i in range(4))
    branches = {1: (y0, x0, y1, x1), 2: (y0, 1 - x1, y1, 1 - x0), 3: (1 - y1, 1 - x1, 1 - y0, 1 - x0),
                4: (1 - y1, x0, 1 - y0, x1), 5: (x0, y0, x1, y1), 6: (x0, 1 - y1, x1, 1 - y0),
                7: (1 - x1, 1 - y1, 1 - x0, 1 - y0), 8: (1 - x1, y0, 1 - x0, y1)}
    return np.stack(branches[min(max(int(orientation), 1), 8)], axis=-1).astype(np.float32)


def fitted(shape: tuple[int, int], size: Any, mode: str) -> tuple[tuple[int, int], tuple[int, int]]:
    """Where ``resize`` puts a picture of ``shape`` in the ``size`` target: the size it is resized to, and its
    offset in the target (pad: positive; crop: negative). float32, as ``tf_image.resize`` computes it."""
    return _fitted(tuple(int(v) for v in shape), tuple(int(v) for v in size), mode)


@functools.lru_cache(maxsize=256)
def _fitted(shape: tuple[int, int], size: tuple[int, int], mode: str) -> tuple[tuple[int, int], tuple[int, int]]:
    height, width = size
    if mode == "stretch":
        return (height, width), (0, 0)
    have = np.array(shape, np.float32)
    if mode == "pad":
        fit = _padded_size(have, (height, width)).astype(np.int64)
        return (int(fit[0]), int(fit[1])), ((height - int(fit[0])) // 2, (width - int(fit[1])) // 2)
    scale = np.maximum(np.float32(height) / have[0], np.float32(width) / have[1])
    cover = np.ceil(have * scale).astype(np.int64)
    return (int(cover[0]), int(cover[1])), (-((int(cover[0]) - height) // 2), -((int(cover[1]) - width) // 2))


def _padded_size(have: np.ndarray, size: Any) -> np.ndarray:
    """``tf_geometry.padded_size``: float32 (height, width) of a picture of float32 ``have`` fitted inside ``size``
    by ``pad``, rounded, at least a pixel a side."""
    scale = np.minimum(np.float32(size[0]) / have[0], np.float32(size[1]) / have[1])
    return np.maximum(np.round(have * scale), np.float32(1.0))


def _placed(boxes: np.ndarray, shape: tuple[int, int], size: Any, mode: str) -> np.ndarray:
    """``tf_geometry._placed``: normalized ``[N, 4]`` boxes of a picture of ``shape`` where ``resize`` by ``mode``
    places them in the ``size`` target (not clipped)."""
    if mode == "stretch":
        return boxes
    height, width = (np.float32(v) for v in size)
    have = np.array(shape, np.float32)
    if mode == "pad":
        placed = _padded_size(have, (height, width))
        offset = np.floor_divide(np.array([height, width], np.float32) - placed, np.float32(2.0))
    else:
        scale = np.maximum(height / have[0], width / have[1])
        placed = np.ceil(have * scale)
        offset = -np.floor_divide(placed - np.array([height, width], np.float32), np.float32(2.0))
    target = np.array([height, width, height, width], np.float32)
    return ((boxes * np.tile(placed, 2) + np.tile(offset, 2)) / target).astype(np.float32)


@dataclass(frozen=True)
class Frame:
    """What happens to one decoded picture (``tf_geometry.Frame`` in numpy): its EXIF ``orientation`` (None: not
    turned), then a resize of the turned picture of ``shape`` (height, width: its decoded size) to ``size`` by
    ``mode`` (None: kept). ``fill``: what pads a mask."""

    orientation: int | None
    shape: tuple[int, int]
    size: Any = None
    mode: str = DEFAULT_RESIZE_MODE
    fill: int = 0

    def boxes(self, boxes: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """Boxes where the picture shows them, and which still have an area (None: all)."""
        boxes = boxes.reshape(-1, 4).astype(np.float32)
        if self.orientation is not None:
            boxes = orient_boxes(boxes, self.orientation)
        if self.size is None or self.mode == "stretch":
            return boxes, None
        moved = _placed(boxes, self.shape, self.size, self.mode)
        if self.mode == "pad":
            return moved, None
        moved = np.clip(moved, 0.0, 1.0)
        return moved, (moved[:, 2] > moved[:, 0]) & (moved[:, 3] > moved[:, 1])

    def points(self, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``[..., 2]`` ``(y, x)`` points where the picture shows them, and which are still inside it."""
        flat = np.concatenate([points, points], axis=-1).reshape(-1, 4).astype(np.float32)
        if self.orientation is not None:
            flat = orient_boxes(flat, self.orientation)
        inside = np.ones(len(flat), bool)
        if self.size is not None:
            flat = _placed(flat, self.shape, self.size, self.mode)
            inside = np.all((flat >= 0.0) & (flat <= 1.0), axis=-1)
        return flat[:, :2].reshape(points.shape), inside.reshape(points.shape[:-1])

    def instance_masks(self, pngs: np.ndarray) -> np.ndarray:
        """A record's objects' instance masks (``[N]`` PNGs of the stored pixels) as uint8 ``[N, H, W]``, turned
        and resized with the picture by ``mask``'s rules, a pad 0 (no object there): ``tf_geometry``'s, the
        objects the channels of one picture while they move."""
        import io

        from PIL import Image

        if not len(pngs):  # no object: no mask to take the picture's size from
            height, width = (int(v) for v in (self.size if self.size is not None else self.shape))
            return np.zeros((0, height, width), np.uint8)
        planes = []
        for png in pngs:
            with Image.open(io.BytesIO(bytes(png))) as picture:
                planes.append(np.asarray(picture if picture.mode == "L" else picture.convert("L")))
        stacked = np.stack(planes, axis=-1)
        if self.orientation is not None:
            stacked = orient(stacked, self.orientation)
        if self.size is not None:
            (h, w), (top, left) = fitted(self.shape, self.size, self.mode)
            stacked = place(nearest(stacked, (h, w)), self.size, top, left, 0)
        return np.ascontiguousarray(np.moveaxis(stacked, -1, 0))

    def mask(self, mask: np.ndarray) -> np.ndarray:
        """A uint8 ``(H, W, 1)`` mask of class ids turned and resized with its picture (nearest neighbour)."""
        if self.orientation is not None:
            mask = orient(mask, self.orientation)
        if self.size is None:
            return mask
        (h, w), (top, left) = fitted(self.shape, self.size, self.mode)
        return place(nearest(mask, (h, w)), self.size, top, left, self.fill)


def nearest(image: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """``tf_geometry.nearest``: each output pixel's source ``min(floor((i + 0.5) * have / want), have - 1)``,
    in float32 as TensorFlow computes it."""
    def sources(have: int, want: int) -> np.ndarray:
        scale = np.float32(have) / np.float32(want)
        found = np.floor((np.arange(want, dtype=np.float32) + np.float32(0.5)) * scale).astype(np.int64)
        return np.minimum(found, have - 1)

    return image[sources(image.shape[0], size[0])][:, sources(image.shape[1], size[1])]


def place(image: np.ndarray, size: Any, top: int, left: int, fill: int = 0, dtype: Any = None) -> np.ndarray:
    """``image`` put at (``top``, ``left``) of a ``size`` canvas of ``fill``: padded where the offset is positive,
    its centre cut where negative (``pad_to_bounding_box`` and ``resize_with_crop_or_pad``); cast to ``dtype``
    (None: the image's) as it is put, the fraction cut."""
    height, width = (int(v) for v in size)
    dtype = image.dtype if dtype is None else np.dtype(dtype)
    if (top, left) == (0, 0) and image.shape[:2] == (height, width):
        return image if dtype == image.dtype else image.astype(dtype)
    canvas = np.full((height, width, *image.shape[2:]), fill, dtype)
    src = image[max(-top, 0):, max(-left, 0):]
    y, x = max(top, 0), max(left, 0)
    h, w = min(src.shape[0], height - y), min(src.shape[1], width - x)
    np.copyto(canvas[y:y + h, x:x + w], src[:h, :w], casting="unsafe")
    return canvas


def resize(image: np.ndarray, size: Any, mode: str = DEFAULT_RESIZE_MODE) -> np.ndarray:
    """``tf_image.resize`` with ``resize_method="auto"``: bilinear with half-pixel centres (TensorFlow's
    ``ResizeBilinear``), antialiased (its ``ScaleAndTranslate`` with a triangle kernel) where the step shrinks
    more than 3x; fitted by ``mode``; back to uint8 with half added and the fraction cut, as it does."""
    (h, w), (top, left) = fitted(image.shape[:2], size, mode)
    shrink = max(image.shape[0] / h, image.shape[1] / w)
    # a crop's cut rows and columns are never computed: each output pixel is its own sum, the same without them
    kept = _kept(h, -top, int(size[0])), _kept(w, -left, int(size[1]))
    if shrink > _ANTIALIAS_ABOVE:
        resized = _antialiased(image.astype(np.float32), (h, w), kept)
    else:
        resized = _bilinear(image, (h, w), kept)
    resized += np.float32(0.5)
    return place(resized, size, max(top, 0), max(left, 0), dtype=np.uint8)  # only what the canvas shows is cast


def _kept(have: int, cut: int, want: int) -> tuple[int, int]:
    """The (first, count) of ``have`` resized rows (or columns) a canvas of ``want`` keeps, ``cut`` of them cut
    before it (a crop's; 0 or less: all kept)."""
    return (cut, want) if cut > 0 or have > want else (0, have)


def _bilinear(image: np.ndarray, size: tuple[int, int],
              kept: tuple[tuple[int, int], tuple[int, int]] | None = None) -> np.ndarray:
    """TensorFlow's ``ResizeBilinear`` (half-pixel centres) of uint8 ``(H, W, C)`` pixels to ``size``: its float32
    interpolation, ``a + (b - a) * lerp`` along x and then along y; ``kept``: the (first, count) of the resized
    rows and of its columns computed (None: all). The result is a scratch array of the thread, good until its
    next call. Pixels may be a view of wider ones (``pixel_view``: RGB of Pillow's RGBX), read where they
    lie."""
    height, width, channels = image.shape
    flat, stride = _rows(image)
    kept = kept or ((0, size[0]), (0, size[1]))
    rows, ylo, yhi, ylerp, xlo, xhi, xlerp = _bilinear_plan(height, width, channels, stride, *size, *kept)
    # Each read row interpolated along x once: the rows it gives are TensorFlow's ``top`` and ``bottom``, the same
    # float32 steps for a fraction of the work. Rows are flat (W * stride values), so that a gather and a multiply
    # by the lerps run along one axis; only the gathered values are made float32, in the thread's scratch arrays.
    if rows is not None:
        flat = flat[rows]
    shape = (flat.shape[0], len(xlo))
    left, across, picked = _scratch("left", shape), _scratch("across", shape), _scratch("picked", shape, np.uint8)
    np.copyto(left, np.take(flat, xlo, axis=1, out=picked))  # gathered into scratch: a new array is new pages
    np.copyto(across, np.take(flat, xhi, axis=1, out=picked))
    across -= left
    across *= xlerp
    across += left
    # the plan's rows are in range: "clip" skips numpy's check of each index (a third of a row gather's time)
    top = np.take(across, ylo, axis=0, out=_scratch("top", (len(ylo), shape[1])), mode="clip")
    out = np.take(across, yhi, axis=0, out=_scratch("out", top.shape), mode="clip")
    out -= top
    out *= ylerp
    out += top
    return out.reshape(len(ylo), len(xlo) // channels, channels)


def _rows(image: np.ndarray) -> tuple[np.ndarray, int]:
    """``(H, W, C)`` uint8 pixels as ``(H, W * stride)`` rows and their pixel ``stride``: C for packed pixels, more
    for a view of the first C channels of wider pixels whose memory holds every row whole (``pixel_view``'s), read
    as they lie: the other channels are never gathered."""
    height, width, channels = image.shape
    row, pixel, channel = image.strides
    if channel == 1 and channels < pixel and row == width * pixel and _holds(image, height * row):
        return np.lib.stride_tricks.as_strided(image, (height, width * pixel), (row, 1), writeable=False), pixel
    return np.ascontiguousarray(image).reshape(height, width * channels), channels


def _holds(view: np.ndarray, length: int) -> bool:
    """Whether the memory that ``view`` is a view of holds ``length`` bytes from the view's start."""
    owner = view
    while isinstance(owner.base, np.ndarray):
        owner = owner.base
    start, begin = view.__array_interface__["data"][0], owner.__array_interface__["data"][0]
    return owner.flags.c_contiguous and begin <= start and start + length <= begin + owner.nbytes


def pixel_view(picture: Any) -> np.ndarray | None:
    """A decoded RGB Pillow image's pixels as a read-only ``(H, W, 3)`` view of its own memory (Pillow keeps RGB
    as RGBX; its Arrow export shares it), for ``resize`` to read: ``np.asarray`` would first pack a copy. None
    where this Pillow cannot share them (before 11.2, an image in several blocks): decode with ``np.asarray``."""
    if picture.mode != "RGB" or not hasattr(picture, "__arrow_c_array__"):
        return None
    import pyarrow as pa

    try:
        wide = pa.array(picture)
    except (ValueError, TypeError, NotImplementedError, pa.ArrowException):
        return None
    data = wide.buffers()[-1]
    if data is None or data.size < picture.width * picture.height * 4:
        return None
    return np.frombuffer(data, np.uint8, picture.width * picture.height * 4).reshape(
        picture.height, picture.width, 4)[..., :3]


@functools.lru_cache(maxsize=64)
def _bilinear_plan(height: int, width: int, channels: int, stride: int, want_h: int, want_w: int,
                   kept_y: tuple[int, int], kept_x: tuple[int, int]) -> tuple[Any, ...]:
    """Where ``_bilinear`` reads for one picture size: the rows read (None: all), each output row's two rows
    among them and its lerp ``[H', 1]``, each output value's two flat columns (pixels ``stride`` values apart)
    and its lerp ``[W' * C]``: of the output rows and columns ``kept_y`` and ``kept_x`` (first, count) only."""
    def axis(have: int, want: int, kept: tuple[int, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        scale = np.float32(have) / np.float32(want)
        where = (np.arange(want, dtype=np.float32) + np.float32(0.5)) * scale - np.float32(0.5)
        where = where[kept[0]:kept[0] + kept[1]]
        low = np.floor(where)
        lerp = (where - low).astype(np.float32)
        return (np.maximum(low, 0).astype(np.int64), np.minimum(np.ceil(where), have - 1).astype(np.int64), lerp)

    ylo, yhi, ylerp = axis(height, want_h, kept_y)
    xlo, xhi, xlerp = axis(width, want_w, kept_x)
    rows = np.union1d(ylo, yhi)  # a shrink reads only some rows: the others are never interpolated
    if len(rows) < height:
        ylo, yhi = np.searchsorted(rows, ylo), np.searchsorted(rows, yhi)
    else:
        rows = None
    spread = np.arange(channels)
    columns = [(x[:, None] * stride + spread).ravel() for x in (xlo, xhi)]
    return rows, ylo, yhi, ylerp[:, None], columns[0], columns[1], np.repeat(xlerp, channels)


_SCRATCH = threading.local()
_SCRATCH_MAX_BYTES = 4 * 1024 * 1024  # a larger array is made anew: its pages are a small part of its resize


def _scratch(name: str, shape: tuple[int, ...], dtype: Any = np.float32) -> np.ndarray:
    """The calling thread's scratch array ``name`` of ``shape``, kept for its next call: an array of a megabyte,
    made anew, is new pages from the system for each record, which costs more than the resize itself. Up to
    _SCRATCH_MAX_BYTES an array: each of many reading threads (Grain's) keeps five at most."""
    if math.prod(shape) * np.dtype(dtype).itemsize > _SCRATCH_MAX_BYTES:
        return np.empty(shape, dtype)
    arrays = _SCRATCH.__dict__.setdefault("arrays", {})
    array = arrays.get(name)
    if array is None or array.shape != shape or array.dtype != dtype:
        array = arrays[name] = np.empty(shape, dtype)
    return array


def _antialiased(image: np.ndarray, size: tuple[int, int],
                 kept: tuple[tuple[int, int], tuple[int, int]] | None = None) -> np.ndarray:
    """TensorFlow's ``ScaleAndTranslate`` with the triangle kernel, antialiased: each output a normalized
    weighted sum over a span of inputs that widens with the shrink; ``kept`` as ``_bilinear``'s."""
    (y0, ny), (x0, nx) = kept or ((0, size[0]), (0, size[1]))
    rows = _weights(image.shape[0], size[0])[y0:y0 + ny]
    cols = _weights(image.shape[1], size[1])[x0:x0 + nx]
    return np.einsum("oi,ijc->ojc", rows, np.einsum("oj,ijc->ioc", cols, image))


def _weights(have: int, want: int) -> np.ndarray:
    """``[want, have]`` weights of ScaleAndTranslate's spans (translation 0)."""
    inv_scale = np.float32(have) / np.float32(want)
    kernel_scale = max(inv_scale, np.float32(1.0))
    weights = np.zeros((want, have), np.float32)
    for x in range(want):
        sample = (np.float32(x) + np.float32(0.5)) * inv_scale
        start = int(np.ceil(sample - kernel_scale - np.float32(0.5)))
        end = int(np.floor(sample + kernel_scale - np.float32(0.5)))
        start, end = min(max(start, 0), have - 1), min(max(end, 0), have - 1) + 1
        source = np.arange(start, end, dtype=np.float32)
        row = np.maximum(np.float32(0.0), 1 - np.abs((source + np.float32(0.5) - sample) / kernel_scale))
        total = row.sum(dtype=np.float32)
        weights[x, start:end] = row / total if total else row
    return weights
