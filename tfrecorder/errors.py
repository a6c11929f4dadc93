"""Errors: the exceptions tfrecorder raises, all subclasses of ValueError, and a row's failure (``ImageError``),
which becomes a row of errors.csv or a RowError."""

from __future__ import annotations

import heapq
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from tfrecorder.redact import redact

_ROW_ERROR = re.compile(r"row (\d+) \(split (\w+)\), column 'image_uri' = '(.*?)': (\w+): ([^\n]*)")


# Every code a row of errors.csv can carry: code -> (what happened, what to do). The one list: ImageError refuses
# any other code, and docs/questions.md's table is checked against it by the tests.
ROW_ERRORS: dict[str, tuple[str, str]] = {
    "missing_uri": ("the row has no image URI (empty cell)", "fill image_uri, or drop the row"),
    "not_found": ("no file at the URI", "fix the path; relative paths resolve against the working directory "
                  "(a DataFrame) or the CSV's folder"),
    "is_directory": ("the URI names a folder", "name an image file in it"),
    "not_a_file": ("a device, pipe or socket, not a regular file", "name a regular image file"),
    "permission_denied": ("the file or URL may not be read (HTTP 401/403)", "fix its permissions or credentials"),
    "fetch_error": ("reading failed after retries (I/O error, timeout, HTTP 5xx)",
                    "re-run the same conversion: it converts again, retrying them; raise image_timeout= for slow "
                    "servers"),
    "unsupported_uri": ("no fsspec backend for the URL's scheme (s3://, abfs://, ...)",
                        "install the backend (s3fs, adlfs, ...) or fix the scheme"),
    "outside_folder": ("an annotation file names a file outside the dataset's root (absolute, ../, a URL, a "
                       "symlink out), or a table read from a store or URL names a file of this machine",
                       "give images_dir= the folder that holds the images; copy a remote table beside its images"),
    "bad_annotation": ("a line of the image's annotation file is wrong (YOLO: a class outside names, a coordinate "
                       "outside [0, 1], an odd polygon, a word that is not a number)",
                       "fix the line the message names (file and line number)"),
    "annotation_size": ("the width and height an annotation file gives its image are not the image's, nor its "
                        "size at another scale (annotations at another scale are scaled to it)",
                        "pair the annotation with its own image, or correct its width and height"),
    "empty_file": ("a zero-byte file", "replace the file (often an interrupted download)"),
    "too_large": ("over max_image_bytes= or the pixel limit (a decompression bomb guard), audio over the "
                  "decoded-samples budget (about 2 hours of 16 kHz stereo), or a video's kept frames over 2 GiB "
                  "of pixels",
                  "raise max_image_bytes= / max_image_pixels= if the image is genuine; for video, max_frames= or a "
                  "lower video_fps="),
    "unsupported_format": ("not a file of its column's kind: an image Pillow can read, an audio file libsndfile "
                           "reads (WAV, FLAC, OGG/Vorbis, Opus, MP3), a video file FFmpeg reads (MP4, WebM, MKV, "
                           "AVI, MOV)",
                           "convert it to JPEG or PNG, to WAV or FLAC, or to MP4"),
    "truncated": ("an audio or video file ends before its samples or frames do (an interrupted copy or download)",
                  "replace the file; validate_audio=\"full\" (the default) finds these"),
    "empty_audio": ("an audio file or waveform that holds no samples", "drop the row, or replace the file"),
    "decode_error": ("a corrupt or truncated image", "replace the file; validate_images=\"full\" finds these"),
    "box_outside_image": ("a box lies outside its image by more than the tolerance",
                          "fix the box; check its units (pixels or 0-1) and the image's EXIF rotation"),
    "keypoint_outside_image": ("a labelled keypoint lies outside its image by more than the tolerance",
                               "fix the point, or mark it unlabelled (0, 0, 0)"),
    "instance_mask_empty": ("an object's instance mask covers no pixel of its image",
                            "fix its segmentation, or drop the object"),
    "instance_mask_outside_image": ("a polygon point of an instance mask lies outside its image by more than 1 pixel",
                                    "fix the polygon; check its units (pixels or 0-1) and the image's EXIF rotation"),
    "instance_mask_size": ("an instance mask (a PNG or an RLE) is of another size than its image",
                           "make the mask at its image's size"),
    "instance_mask_decode": ("an instance mask cannot be read: not COCO polygons or RLE, or not a one-channel image",
                             "fix the segmentation or the mask file"),
    "label_too_long": ("a label from an annotation file is over 64 KiB", "fix the annotation file"),
    "mask_size": ("the mask's size differs from its image's as displayed", "save the mask at the image's size"),
    "mask_decode": ("the mask cannot be decoded", "replace the mask file"),
    "mask_format": ("the mask is a JPEG: lossy compression changes class ids at every edge", "save masks as PNG"),
    "mask_channels": ("the mask has colour channels but no mask_colors= was given",
                      "save one channel of class ids, or pass mask_colors={(r, g, b): class_id}"),
    "mask_class": ("the mask holds a class id or colour that mask_classes=/mask_colors= do not name, or (with "
                   "mask_from_instances=True) an integer label has no class id in the semantic mask",
                   "name every class, or mark the pixels ignore_index; labels of 0-253 other than ignore_index - 1"),
    "duplicate": ("mode=\"append\": the row's image is already in the dataset's split (the same bytes), in the "
                  "shard the message names (in another split it is written, and reported as a leak)",
                  "drop the row from the new batch"),
    "tensor_shape": ("an array is not of the shape its column's types.Tensor(shape=...) declares",
                     "fix or drop the row; declare the first dimension None where rows differ in it"),
}


class TFRecorderError(ValueError):
    """A conversion or read cannot go on; the message says what, where and how to fix it.

    Examples:
        >>> tfrecorder.load_dataset(dataset_dir, split="DEV")
        Traceback (most recent call last):
        ...
        tfrecorder.errors.TFRecorderError: split='DEV': the dataset has TRAIN, VALIDATION, TEST
    """


class SchemaError(TFRecorderError):
    """The input table does not fit its schema (missing column, bad value, unknown split...).

    Example (``...`` stands for ``TRAIN/VALIDATION/TEST/DISCARD/UNASSIGNED:``):
        >>> import pandas as pd
        >>> tfrecorder.convert(pd.DataFrame({"split": ["TRIAN"], "x": [1]}), str(tmp_path / "bad"))
        Traceback (most recent call last):
        ...
        tfrecorder.errors.SchemaError: column 'split': 1 rows have values outside ... 'TRIAN' (row 0)
    """


class RowError(TFRecorderError):
    """One row cannot be written (missing or corrupt image, unreadable URI).

    Raised only with ``on_error="raise"``; with ``on_error="report"`` the same
    facts go to ``errors.csv``.

    Examples:
        >>> str(RowError(4, "TRAIN", "gs://b/a.jpg", "not_found", "not found: gs://b/a.jpg"))
        "row 4 (split TRAIN), column 'image_uri' = 'gs://b/a.jpg': not_found: not found: gs://b/a.jpg"
    """

    def __init__(self, row: int, split: str, image_uri: str, error: str, message: str):
        self.row = row
        self.split = split
        self.image_uri = image_uri
        self.error = error
        self.message = message
        super().__init__(
            f"row {row} (split {split}), column 'image_uri' = {image_uri!r}: {error}: {message}"
        )

    def __reduce__(self):  # picklable, so it crosses process boundaries (Beam workers) intact
        return (RowError, (self.row, self.split, self.image_uri, self.error, self.message))

    @classmethod
    def find_in(cls, text: str) -> RowError | None:
        """The RowError described in ``text`` (e.g. a Beam worker's traceback), or None."""
        found = _ROW_ERROR.search(text)
        if found is None:
            return None
        row, split, uri, error, message = found.groups()
        return cls(int(row), split, uri, error, message.strip().strip("\"'"))


# The codes kinds of value defined outside the package add (``Media.row_errors``), as ROW_ERRORS: documented by them.
KIND_ROW_ERRORS: dict[str, tuple[str, str]] = {}


class ImageError(Exception):
    """A row's image cannot be read or stored; ``error`` is a short class for errors.csv (not_found, ...)."""

    def __init__(self, error: str, message: str):
        if error not in ROW_ERRORS and error not in KIND_ROW_ERRORS:  # every code is documented; a new one is
            # added there first (or by the kind of value outside the package that raises it)
            raise AssertionError(f"row error code {error!r} is not in tfrecorder.errors.ROW_ERRORS")
        message = redact(message)  # it may quote a URL with a token in it
        super().__init__(f"{error}: {message}")
        self.error = error
        self.message = message


def describe_rows(rows: Sequence[int], limit: int = 5, total: int | None = None) -> str:
    """'rows 4, 9, 17' or 'rows 4, 9, 17, ... (12 in all)': for error messages. ``total``: how many rows
    there are in all, when ``rows`` holds only the first of them."""
    total = len(rows) if total is None else total
    shown = ", ".join(str(r) for r in rows[:limit])
    more = f", ... ({total} in all)" if total > limit else ""
    word = "row" if total == 1 else "rows"
    return f"{word} {shown}{more}"


@dataclass(frozen=True)
class RowSample:
    """Rows where something was found: the first few (positions in the whole table) and how many in all."""

    first: tuple[int, ...] = ()
    count: int = 0

    KEEP: ClassVar[int] = 6  # one more than an error message shows, so it can say "... (N in all)"

    @classmethod
    def of(cls, rows: Sequence[int], offset: int = 0) -> RowSample:
        return cls(tuple(offset + r for r in sorted(rows)[:cls.KEEP]), len(rows))

    def merge(self, other: RowSample) -> RowSample:
        return RowSample(tuple(heapq.merge(self.first, other.first))[:self.KEEP], self.count + other.count)

    def describe(self) -> str:
        return describe_rows(self.first, total=self.count)
