"""Others' Object Detection TFRecords as a source (IO edge): ``convert("export/*.tfrecord", "out/")`` re-validates
an export of CVAT, Roboflow, Datumaro or the Object Detection API's own scripts (``image/encoded``,
``image/object/bbox/*`` normalized, ``image/object/class/label`` from 1) into our layout.

Each record becomes its image and its box rows, the long form (``long_form``): the image's bytes are unpacked
into a folder of their own for the conversion (removed after it), named after the record
(``<file>/<record number>-<image/filename>``), so the writer checks each image as it checks any file and a bad
one is a row of errors.csv naming its record. Boxes are given in pixels of the picture as displayed (the stored
pixels' frame turned by the image's EXIF orientation, which the record's boxes ignore), so every box is checked
against its image as any table's is. Labels are the label map's names (``label_map.pbtxt`` beside the files),
else the first ``image/object/class/text`` any record gives the class id, else the id as text: an id is one
class, named as the readers name it.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import logging
import os
import posixpath
import re
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

import numpy as np
from PIL import Image

from tfrecorder.dataset.boxes import turn
from tfrecorder.dataset.example_proto import parse_example
from tfrecorder.dataset.foreign import (
    LABEL_MAP_SUFFIX,
    class_names,
    is_record_file,
    label_map,
    sniff_compression,
    split_folder_files,
    split_of,
)
from tfrecorder.dataset.layouts import OBJECT_DETECTION
from tfrecorder.dataset.manifest import MANIFEST_NAME
from tfrecorder.dataset.records import read_records
from tfrecorder.dataset.storage import filesystem
from tfrecorder.errors import TFRecorderError
from tfrecorder.schema import IMAGE_COLUMN, IMAGE_EXTENSIONS, LABEL_COLUMN, SPLIT_COLUMN
from tfrecorder.write.sources.annotated import Annotations
from tfrecorder.write.sources.long_form import BOX_COLUMNS, add_row, empty_columns, long_frame

logger = logging.getLogger(__name__)

LAYOUT = OBJECT_DETECTION
_LOOKED_AT = 64  # records of a file read to tell whether the files are in the layout
_FILES_LOOKED_AT = 8  # files of a glob so looked at: one in the layout makes the glob an export
_EXIF_ORIENTATION = 0x0112


def record_files(source: Any) -> tuple[Any, list[str]] | None:
    """(filesystem, paths) when ``source`` is a folder (without dataset.json), a glob of TFRecord files or one
    such file, whose records are in the Object Detection API's layout; else None."""
    if not isinstance(source, (str, os.PathLike)):
        return None
    url = os.fspath(source)
    fs, path = filesystem(url)
    if any(c in url for c in "*?[") and not fs.exists(path):
        paths = sorted(fs.glob(path))
    elif fs.isdir(path):
        names = fs.ls(path, detail=False)
        if any(posixpath.basename(n) == MANIFEST_NAME for n in names):
            return None  # a dataset of ours
        paths = [*sorted(names), *split_folder_files(fs, path)]  # and Roboflow's train/, valid/, test/
    elif is_record_file(path) and fs.isfile(path):
        paths = [path]
    else:
        return None
    paths = [p for p in paths if is_record_file(p) and fs.isfile(p)]
    kinds = [_in_layout(fs, p) for p in paths[:_FILES_LOOKED_AT]]
    if True in kinds:
        return fs, paths
    if False in kinds and not fs.isdir(path):  # a glob of TFRecords, or one, but no detection export: nothing else
        # reads them (a folder's may be strays beside an image folder's images)
        raise TFRecorderError(f"source {url!r}: {posixpath.basename(paths[kinds.index(False)])} holds TFRecords "
                              f"that are not in the Object Detection API's layout ({LAYOUT.image.name}, "
                              f"image/object/bbox/*, {LAYOUT.object_label.name}), the only ones convert takes; "
                              f"read them with tfrecorder.read_tfr or load_dataset")
    return None


def _in_layout(fs: Any, path: str) -> bool | None:
    """Whether the first records of ``path`` hold the layout's image and, in one of them at least, its boxes; None
    when its first record is no TFRecord of a tf.train.Example (a CSV named like a shard)."""
    keys = {LAYOUT.image.name, *(f.name for f in LAYOUT.box_features), LAYOUT.object_label.name}
    number = -1
    try:
        with fs.open(path, "rb") as f:
            compression = sniff_compression(f.read(64))
            f.seek(0)
            for number, record in enumerate(read_records(f, compression)):
                if keys <= set(parse_example(record, path, number).features.feature):
                    return True
                if number >= _LOOKED_AT:
                    break
    except TFRecorderError:
        return None if number < 0 else False
    return False if number >= 0 else None


@contextlib.contextmanager
def unpacked_records(source: Any) -> Iterator[Any]:
    """``source`` as the long form to convert when it is others' Object Detection TFRecords (its
    ``Annotations``, their images unpacked into a folder that lasts as long as the conversion); any other
    source as it is."""
    found = record_files(source)
    if found is None:
        yield source
        return
    fs, paths = found
    given = filesystem(os.fspath(source))[1]
    skipped = _not_read(fs, given, paths) if fs.isdir(given) else []
    key = hashlib.sha256("\n".join(f"{p} {fs.size(p)}" for p in paths).encode()).hexdigest()[:16]
    folder = os.path.join(tempfile.gettempdir(), f"tfrecorder-od-{key}")  # one name a source: a re-run is the same
    shutil.rmtree(folder, ignore_errors=True)
    try:
        yield read_od_records(fs, paths, folder, skipped)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _not_read(fs: Any, folder: str, paths: list[str]) -> list[str]:
    """The files under a folder read as others' export that are not its TFRecord files nor its label map, as
    ``"<path in it> (why)"``: images beside the export (an image folder with an export's file in it), TFRecord
    files deeper in a split folder (their split would be guessed: give a glob), anything else."""
    read = set(paths)
    top = folder.rstrip("/")
    out = []
    for path in sorted(fs.find(folder)):
        if path in read or path.endswith(LABEL_MAP_SUFFIX):
            continue
        why = "a TFRecord file deeper than a split folder: give a glob to read it" if is_record_file(path) else \
            "an image beside others' TFRecords: not read" if path.lower().endswith(IMAGE_EXTENSIONS) else \
            "not a TFRecord file"
        out.append(f"{path[len(top) + 1:]} ({why})")
    return out


def read_od_records(fs: Any, paths: list[str], folder: str, skipped: list[str] | None = None) -> Annotations:
    """The long form of the records in ``paths``, their images unpacked under ``folder`` (its root), each image a
    record's problem refuses named; the files beside them that are not read named in its notes (``skipped``)."""
    names, where = label_map(fs, paths)
    if where is not None:
        logger.info("label names from %s", where)
    columns = empty_columns(())
    texts: dict[int, str] = {}  # each class id's first class text, as the files give them
    refused: dict[str, str] = {}
    dropped: dict[str, int] = {}  # each per-object key not converted: the records holding it
    top = posixpath.commonpath([posixpath.dirname(p) for p in paths])
    for path in paths:
        # each file its own folder, named by its path under the files' common folder: two exports' train.tfrecord
        # (task1/, task2/) must not write their records' images over each other
        url, stem = fs.unstrip_protocol(path), path[len(top):].lstrip("/")
        os.makedirs(os.path.join(folder, stem), exist_ok=True)
        with fs.open(path, "rb") as f:
            compression = sniff_compression(f.read(64))
            f.seek(0)
            try:
                for number, record in enumerate(read_records(f, compression)):
                    example = parse_example(record, url, number)
                    image, problem = _add_record(columns, example, split_of(path), os.path.join(folder, stem),
                                                 number, texts)
                    for key in _not_converted(example):
                        dropped[key] = dropped.get(key, 0) + 1
                    if problem is not None:
                        refused[image] = f"{url} record {number}: {problem}"
            except TFRecorderError as e:
                raise TFRecorderError(f"{url} is not a readable TFRecord file: {e}") from e
    # each object named by its id, as the readers name it: the label map's name, else the first class text any
    # record gives that id, else the id, one name an id (two ids of one text told apart); an object of no id by
    # its own text
    ids = {label for label in columns[LABEL_COLUMN] if isinstance(label, int)} | set(names)
    named = class_names(sorted(ids), names, texts)
    columns[LABEL_COLUMN] = [named[label] if isinstance(label, int) else label for label in columns[LABEL_COLUMN]]
    frame = long_frame(columns, ())
    warnings = []
    if dropped:
        shown = ", ".join(f"{key} ({count} records)" for key, count in sorted(dropped.items()))
        warnings.append(f"per-object features of the Object Detection TFRecords are not converted, only each "
                        f"object's box and label: {shown}")
    if skipped:
        warnings.append(f"{len(skipped)} files beside the Object Detection TFRecords are not rows and were skipped: "
                        f"{', '.join(skipped[:5])}{', ...' if len(skipped) > 5 else ''} (result.skipped lists them)")
    return Annotations(frame, root=folder, named_by=fs.unstrip_protocol(paths[0]), refused=refused,
                       warnings=tuple(warnings), skipped=tuple(skipped or ()) if warnings else ())


# Each object's features a record may hold that the conversion reads: its box, class id and class text
_CONVERTED = frozenset(f.name for f in LAYOUT.object_features)


def _not_converted(example: Any) -> list[str]:
    """The per-object features (``image/object/...``) of a record that its box rows do not keep (masks, is_crowd,
    area, difficult, keypoints...), where it holds any value."""
    stored = example.features.feature
    return [key for key in stored if key.startswith(LAYOUT.object_prefix) and key not in _CONVERTED
            and _values(stored, key)]


def _add_record(columns: dict[str, list[Any]], example: Any, split: str, folder: str, number: int,
                texts_of: dict[int, str]) -> tuple[str, str | None]:
    """One record's image unpacked into ``folder`` and its box rows (one empty row for an image without any);
    the image's path, and what is wrong with its objects (None: nothing), which refuses the image: its box lists
    of different lengths, or a box of no area, would otherwise lose boxes, or fail the whole table."""
    stored = example.features.feature
    encoded = _values(stored, LAYOUT.image.name)
    data = encoded[0] if encoded else b""
    if not encoded:  # another kind of record among the export's: no image to check (not an empty file)
        image = os.path.join(folder, f"{number:06d}-")
        _no_boxes(columns, split, image)
        return image, f"has no {LAYOUT.image.name}: it is no record of an image"
    filename = _values(stored, "image/filename")
    given = filename[0].decode("utf-8", "replace") if filename else ""
    image = os.path.join(folder, f"{number:06d}-{re.sub(r'[^A-Za-z0-9._-]+', '_', posixpath.basename(given))}"[:120])
    with open(image, "wb") as out:
        out.write(data)
    ids: list[int | None] = [int(v) for v in _values(stored, LAYOUT.object_label.name)]
    texts = [t.decode("utf-8", "replace") for t in _values(stored, LAYOUT.class_text.name)] if LAYOUT.class_text \
        else []
    ids = ids or [None] * len(texts)  # named by their text alone
    for class_id, text in zip(ids, texts):  # every record's, as the readers take them: a refused one's too
        if class_id is not None and text:
            texts_of.setdefault(class_id, text)
    edges = [np.asarray(_values(stored, f.name), np.float64) for f in LAYOUT.box_features]
    header = _header(data)
    problem = _objects_problem(ids, edges)
    # An image whose header cannot be read is one row without boxes: the writer names it in errors.csv
    if not ids or problem is not None or header is None:
        _no_boxes(columns, split, image)
        return image, problem
    orientation, size = header
    boxes = LAYOUT.stored_boxes(edges)  # xmin, ymin, xmax, ymax: normalized, the stored pixels' frame
    boxes = turn(boxes, orientation) * np.tile(size, 2)  # pixels of the picture as displayed
    for i, class_id in enumerate(ids):
        text = texts[i] if i < len(texts) and texts[i] else None
        label = class_id if class_id is not None else text  # an id named once every record is read
        add_row(columns, {SPLIT_COLUMN: split, IMAGE_COLUMN: image, LABEL_COLUMN: label,
                          **dict(zip(BOX_COLUMNS, boxes[i].tolist()))})
    return image, None


def _no_boxes(columns: dict[str, list[Any]], split: str, image: str) -> None:
    """An image's one row without a label or a box."""
    add_row(columns, {SPLIT_COLUMN: split, IMAGE_COLUMN: image, LABEL_COLUMN: None, **dict.fromkeys(BOX_COLUMNS)})


def _objects_problem(ids: list[Any], edges: list[np.ndarray]) -> str | None:
    """What is wrong with a record's object lists: lengths that differ (which box is which object's is
    unknown), or a box that is none (``xmin < xmax`` and ``ymin < ymax`` fail); None when each object has a
    label and a box."""
    lengths = {"labels": len(ids), **{f.name: len(e) for f, e in zip(LAYOUT.box_features, edges)}}
    if len(set(lengths.values())) > 1:
        shown = ", ".join(f"{name}: {n}" for name, n in lengths.items())
        return f"its object lists differ in length ({shown}): which box is which object's is unknown"
    for i, (xmin, ymin, xmax, ymax) in enumerate(LAYOUT.stored_boxes(edges).tolist() if ids else []):
        if not (xmin < xmax and ymin < ymax):
            return (f"object {i}'s box (xmin {xmin:g}, ymin {ymin:g}, xmax {xmax:g}, ymax {ymax:g}) is none: it "
                    f"needs xmin < xmax and ymin < ymax")
    return None


def _values(stored: Any, key: str) -> list[Any]:
    if key not in stored:
        return []
    kind = stored[key].WhichOneof("kind")
    return list(getattr(stored[key], kind).value) if kind else []


def _header(data: bytes) -> tuple[int, np.ndarray] | None:
    """An image's EXIF orientation and its (width, height) as displayed, from its header; None where it cannot
    be read."""
    try:
        with Image.open(io.BytesIO(data)) as image:
            orientation = image.getexif().get(_EXIF_ORIENTATION, 1)
            orientation = orientation if isinstance(orientation, int) and 1 <= orientation <= 8 else 1
            width, height = image.size
    except Exception:  # noqa: BLE001 - any unreadable image: the writer's own check says why
        return None
    return orientation, np.array([height, width] if orientation in (5, 6, 7, 8) else [width, height], np.float64)
