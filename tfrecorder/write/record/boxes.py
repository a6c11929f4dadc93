"""Boxes (pure): one image's box rows -> the boxes its record stores, checked against the image.

Records store ``[ymin, xmin, ymax, xmax]`` normalized to the stored image's pixels, as stored (before any
EXIF orientation): TFDS's ``BBoxFeature`` convention, and what a reader that ignores EXIF (TFDS, Model
Garden) needs to find each box on its object. Our reader turns the boxes with the picture.

A box row gives edges in pixels or normalized (``box_units``), in the frame of the picture as displayed
or of its stored pixels (``box_orientation``). Edges up to ``CLIP_PIXELS`` (pixels) or ``CLIP_FRACTION``
(normalized) outside the picture are clipped and counted; beyond that the image is a row error.

A label over ``MAX_LABEL_BYTES`` (an annotation file's category name, say) is a row error too: a class name,
not a document, and one a reader holds per record and per class.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from tfrecorder.dataset.boxes import INVERSE, turn
from tfrecorder.errors import ImageError

CLIP_PIXELS = 1.0  # pixel boxes this far outside the image are clipped onto it
CLIP_FRACTION = 0.005  # ... and normalized ones this far
MAX_LABEL_BYTES = 64 * 1024  # of UTF-8: a longer label is a row error (label_too_long)


@dataclass(frozen=True)
class Geometry:
    """Where a source picture's pixels went in the stored image.

    ``height``/``width``: the picture as displayed (after its EXIF ``orientation``); ``orientation``: the one
    the stored bytes still carry (1 once re-encoded upright); ``placement``: (scale_y, scale_x, offset_y,
    offset_x) taking normalized displayed coordinates into the stored image (a resize with ``pad`` shrinks
    and centres; ``stretch`` changes nothing normalized)."""

    height: int
    width: int
    source_orientation: int
    orientation: int
    placement: tuple[float, float, float, float] = (1.0, 1.0, 0.0, 0.0)


def stored_boxes(edges: np.ndarray, units: str, frame: str, annotated: tuple[float, float] | None,
                 geometry: Geometry, rows: list[int], what: str = "box") -> tuple[np.ndarray, int]:
    """The record's boxes (float32 ``[N, 4]`` as ``[ymin, xmin, ymax, xmax]``, normalized, stored frame) from
    one image's box rows (``edges``: ``[N, 4]`` as ``[xmin, ymin, xmax, ymax]``) and how many were clipped.

    ``frame``: box_orientation ("auto", "displayed", "stored"); ``annotated``: the (width, height) the
    annotation was drawn on, if the table says. Raises ImageError("box_outside_image") naming the row of
    the first box beyond the image (``what``: what a message calls one, "keypoint" for points as boxes of no
    size)."""
    frame, (height, width) = annotation_frame(frame, annotated, geometry, rows)
    boxes = edges.astype(np.float64)
    if units == "pixels":
        boxes = boxes / np.array([width, height, width, height], np.float64)
    slack = np.array([CLIP_PIXELS / width, CLIP_PIXELS / height] * 2) if units == "pixels" else CLIP_FRACTION
    outside = (boxes < -slack).any(axis=1) | (boxes > 1 + slack).any(axis=1)
    if outside.any():
        i = int(np.flatnonzero(outside)[0])
        shown = ", ".join(f"{v:g}" for v in (edges[i] if what == "box" else edges[i][:2]))
        size = f"{width}x{height}" + (" (as stored, before its EXIF orientation)" if frame == "stored" else "")
        raise ImageError(f"{what}_outside_image",
                         f"row {rows[i]}: {what} ({shown}) lies outside the {size} image by more than "
                         f"{'1 pixel' if units == 'pixels' else f'{CLIP_FRACTION:g} of its size'}")
    clipped = int(((boxes < 0) | (boxes > 1)).any(axis=1).sum())
    boxes = np.clip(boxes, 0.0, 1.0)
    if frame == "stored":  # into the displayed picture's frame first
        boxes = turn(boxes, geometry.source_orientation)
    scale_y, scale_x, offset_y, offset_x = geometry.placement
    boxes = boxes * np.array([scale_x, scale_y, scale_x, scale_y]) + np.array([offset_x, offset_y] * 2)
    boxes = turn(boxes, INVERSE[geometry.orientation])  # kept bytes: back into their stored pixels
    return boxes[:, [1, 0, 3, 2]].astype(np.float32), clipped


def annotation_frame(frame: str, annotated: tuple[float, float] | None, geometry: Geometry, rows: Sequence[int] = ()
                     ) -> tuple[str, tuple[int, int]]:
    """The frame an image's annotations are in ("stored" or "displayed") and the (height, width) in pixels their
    coordinates count: ``frame`` (box_orientation) unless "auto", where an EXIF-turned photo annotated at its
    stored pixels' size (``annotated``: (width, height)) is in the stored frame. One rule for boxes, points and
    instance masks.

    An annotation drawn on the picture at another scale (a folder of images resized after annotating, with its
    COCO or VOC file kept) counts the annotated size's pixels: its coordinates are scaled to the picture, as
    ``create_coco_tf_record.py`` and Ultralytics' converter normalize by the annotation's size. One whose size
    is no scale of the picture's (another picture, a turn the file does not say) is ImageError
    ("annotation_size") naming ``rows``' first: its boxes would land elsewhere on this one."""
    drawn = None if annotated is None else (int(annotated[1]), int(annotated[0]))
    if drawn is not None and min(drawn) <= 0:  # no size given (an exporter's 0): the picture's is taken
        drawn = None
    if frame == "auto":
        frame = "displayed"
        if drawn is not None and geometry.source_orientation != 1 and _scaled(drawn, frame_size("stored", geometry)):
            frame = "stored"
    size = frame_size(frame, geometry)
    if drawn is None or drawn == size:
        return frame, size
    if _scaled(drawn, size):
        return frame, drawn
    row = f"row {rows[0]}: " if len(rows) else ""
    raise ImageError("annotation_size",
                     f"{row}the annotation was drawn on a {drawn[1]}x{drawn[0]} picture (its width and height), "
                     f"but the image is {size[1]}x{size[0]}" + (" as stored" if frame == "stored" else "") +
                     ", not that picture at another scale: its boxes would land elsewhere on this one; pair the "
                     "annotation with its own image, or correct its width and height")


def frame_size(frame: str, geometry: Geometry) -> tuple[int, int]:
    """(height, width) of the picture in ``frame``: its stored pixels' or as displayed."""
    turned = frame == "stored" and geometry.source_orientation in (5, 6, 7, 8)
    return (geometry.width, geometry.height) if turned else (geometry.height, geometry.width)


def _scaled(drawn: tuple[int, int], size: tuple[int, int]) -> bool:
    """Whether a picture of ``size`` (height, width) is one of ``drawn`` resized, each side rounded to a whole
    pixel: scaled by either side's ratio, the other side lands within a pixel of its own."""
    (dh, dw), (h, w) = drawn, size
    return abs(dh * w / dw - h) <= 1.0 or abs(dw * h / dh - w) <= 1.0


def stored_keypoints(given: Sequence[Sequence[float] | None], count: int, units: str, frame: str,
                     annotated: tuple[float, float] | None, geometry: Geometry, rows: list[int]
                     ) -> tuple[np.ndarray, np.ndarray]:
    """The record's keypoints (float32 ``[N, K, 2]`` normalized (y, x), stored frame) and their visibility
    (int64 ``[N, K]``) from one image's objects' ``[x, y, v] * K`` (None: an object without keypoints, all
    0). Each labelled point (v > 0) goes where ``stored_boxes`` takes a box of no size, clipped by its rule;
    unlabelled ones are (0, 0). Raises ImageError("keypoint_outside_image") as boxes do."""
    values = np.zeros((len(given), count, 3), np.float64)
    for i, value in enumerate(given):
        if value is not None:
            values[i] = np.asarray(value, np.float64).reshape(count, 3)
    visibility = values[..., 2].astype(np.int64)
    labelled = visibility > 0
    points = np.zeros((len(given), count, 2), np.float32)
    if labelled.any():
        xy = values[labelled][:, :2]
        point_rows = [rows[i] for i in np.nonzero(labelled)[0]]
        stored, _ = stored_boxes(np.concatenate([xy, xy], axis=1), units, frame, annotated, geometry, point_rows,
                                 what="keypoint")
        points[labelled] = stored[:, :2]  # [ymin, xmin, ...] of a box of no size: its (y, x)
    return points, visibility


def long_labels(vocabulary: Sequence[str] | None) -> dict[int, int]:
    """The ids of the vocabulary's labels over ``MAX_LABEL_BYTES`` of UTF-8, each with its size."""
    sizes = ((i, len(name.encode("utf-8"))) for i, name in enumerate(vocabulary or ()))
    return {i: size for i, size in sizes if size > MAX_LABEL_BYTES}


def check_labels(labels: Sequence[int], rows: Sequence[int], long: Mapping[int, int], vocabulary: Sequence[str],
                 image: str) -> None:
    """Raises ImageError("label_too_long") naming the row, size and start of the first of one image's ``labels``
    (vocabulary ids) that is in ``long``: the image and its rows are not written."""
    for label, row in zip(labels, rows):
        if label in long:
            raise ImageError("label_too_long",
                             f"row {row}: the label {vocabulary[label][:40]!r}... of image {image} is "
                             f"{long[label]:,} bytes, over the {MAX_LABEL_BYTES // 1024} KiB a label may have: "
                             f"name the class in fewer words")
