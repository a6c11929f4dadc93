"""COCO (IO edge): a COCO ``instances_*.json`` read into the long form, a row per box - parsed a value at a time
keeping only the keys it reads (``coco_json``), its annotations checked and held as columns as each is parsed
(``coco_columns``) - and the folder its images are in.
"""

from __future__ import annotations

import logging
import math
import posixpath
import re
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from tfrecorder.dataset.storage import filesystem, open_url
from tfrecorder.errors import SchemaError, TFRecorderError
from tfrecorder.schema import IMAGE_COLUMN, IMAGE_EXTENSIONS, LABEL_COLUMN, SPLIT_COLUMN
from tfrecorder.types import INSTANCE_MASK_COLUMN, KEYPOINTS_COLUMN
from tfrecorder.write.sources.annotated import Annotations, keypoint_names
from tfrecorder.write.sources.coco_columns import AnnotationColumns, Boxes, coco_id, entry_of, json_kind
from tfrecorder.write.sources.coco_json import parse_coco
from tfrecorder.write.sources.folders import FOLDER_SPLITS
from tfrecorder.write.sources.long_form import (
    LONG_FORM,
    SIZE_COLUMNS,
    URL,
    annotation_folder,
    file_folder,
    join_name,
    long_frame,
    quoted,
    utf8_text,
)
from tfrecorder.write.splits import TEST, TRAIN, UNASSIGNED, VALIDATION

logger = logging.getLogger(__name__)

COCO_SPLITS = {"train": TRAIN, "val": VALIDATION, "test": TEST}  # instances_<name>2017.json


def read_coco(url: str, images_dir: str | None) -> Annotations:
    data = _coco_json(url)
    if not isinstance(data, Mapping) or "images" not in data:
        raise TFRecorderError(f"{url!r} is not COCO instances JSON: it has no 'images' list")
    images, categories = (_coco_section(url, data, name) for name in ("images", "categories"))
    annotations = _coco_annotations(url, data)
    if images and not len(annotations):  # a test split's image_info file: no box to learn, no label to type
        raise TFRecorderError(f"COCO annotations {url!r} hold {len(images)} images but no annotation (a test "
                              f"split's image_info file?): there are no boxes to convert; convert the images as a "
                              f"folder or a table of image_uri instead")
    labels = _coco_categories(url, categories)
    names, skeleton = _coco_keypoint_names(url, categories)
    files = _coco_image_files(url, images)
    boxes = annotations.boxes(files, labels)
    note, found = None, False  # found: the images' folder found, not given (images_dir= is not listed)
    if images_dir is not None:
        folder = images_dir
    else:
        named = [image["file_name"] for image in images[:_LOOKED_FOR]]
        folder, note, found = _coco_images(url, [n for n in named if _inside(n)])
    uris = [join_name(folder, image["file_name"]) for image in images]
    frame = _coco_frame(url, images, uris, annotations, boxes, names)
    # the folder found for the images (not one given: images_dir= is read only where the file names, as VOC's)
    skipped = _unnamed(folder, pd.Series(uris, dtype=object), url) if found else []
    warnings = _coco_warnings(url, note, skipped, boxes)
    return Annotations(frame, keypoints=keypoint_names(names, skeleton), warnings=tuple(warnings),
                       skipped=tuple(skipped) if warnings else ())


def _coco_frame(url: str, images: list[Mapping[str, Any]], uris: list[str], annotations: AnnotationColumns,
                boxes: Boxes, names: list[str] | None) -> pd.DataFrame:
    """The long form, each column made in its own type from the annotations' (the frame holds them, not a copy:
    ``long_frame``)."""
    by_image, rows = _coco_rows(boxes, len(images))
    boxed = rows >= 0
    edges = np.asarray(annotations.edges, np.float64).reshape(-1, 4)
    x, y = _at(edges[:, 0], rows, boxed), _at(edges[:, 1], rows, boxed)
    keypointed, masked = names is not None or annotations.keypointed, bool(annotations.masks)
    extra = ("is_crowd", "area", *SIZE_COLUMNS, *((KEYPOINTS_COLUMN,) if keypointed else ()),
             *((INSTANCE_MASK_COLUMN,) if masked else ()))
    crowds = np.asarray(annotations.crowds, np.int8)[rows].astype(np.int64)
    vocabulary = [*boxes.names, None] if boxed.any() else [None]  # None alone: pandas types no text column
    labels = _at(boxes.labels, rows, boxed, len(vocabulary) - 1)  # an image of no box: its label None
    columns = {SPLIT_COLUMN: _repeated([_coco_split(url)], np.zeros(len(rows), np.intp)),
               IMAGE_COLUMN: _repeated(uris, by_image),
               LABEL_COLUMN: _repeated(vocabulary, labels),
               "xmin": x, "ymin": y, "xmax": x + _at(edges[:, 2], rows, boxed),
               "ymax": y + _at(edges[:, 3], rows, boxed), "is_crowd": pd.arrays.IntegerArray(crowds, ~boxed),
               "area": _at(np.asarray(annotations.areas, np.float64), rows, boxed),
               **{size: pd.array([image.get(size) for image in images], dtype="Int64").take(by_image)
                  for size in SIZE_COLUMNS}}
    if keypointed or annotations.keypoints:  # checked where given, a column or not ({} is no keypoints)
        files = [image["file_name"] for image in images]
        columns[KEYPOINTS_COLUMN] = annotations.checked_keypoints(rows, boxes.images, files, names)
    if masked:
        columns[INSTANCE_MASK_COLUMN] = [annotations.masks.get(int(row)) for row in rows]
    return long_frame({name: columns[name] for name in (*LONG_FORM, *extra)}, extra)


def _coco_rows(boxes: Boxes, image_count: int) -> tuple[np.ndarray, np.ndarray]:
    """Each row's image (its index) and annotation (-1: an image of no box, one row of none): its images' rows
    in the images' order, each one's boxes in the file's order."""
    kept = np.flatnonzero(boxes.kept)
    boxless = np.setdiff1d(np.arange(image_count), boxes.images[kept])
    by_image = np.concatenate([boxes.images[kept], boxless])
    order = np.argsort(by_image, kind="stable")
    return by_image[order], np.concatenate([kept, np.full(len(boxless), -1)])[order]


def _at(values: np.ndarray, rows: np.ndarray, boxed: np.ndarray, boxless: Any = math.nan) -> np.ndarray:
    """The values of the annotations at ``rows``; ``boxless`` at an image's row of no box (not ``boxed``)."""
    found = values[rows] if len(values) else np.zeros(len(rows), values.dtype)
    found[~boxed] = boxless
    return found


def _repeated(values: list[Any], at: np.ndarray) -> Any:
    """``values[at]``, typed as pandas types a column of them, taken from ``values``' own column: no object a
    row for pandas to copy into its strings again (its Arrow strings, from objects, peak near 3x their size)."""
    return pd.Series(np.asarray(values, dtype=object)).array.take(at)


def _coco_warnings(url: str, note: str | None, skipped: list[str], boxes: Boxes) -> list[str]:
    warnings = [note] if note is not None else []
    if skipped:
        warnings.append(f"{len(skipped)} images beside the images of {url!r} are not in its 'images' and were "
                        f"skipped: {', '.join(skipped[:5])}{', ...' if len(skipped) > 5 else ''} (result.skipped "
                        f"lists them)")
    if boxes.no_area:
        shown = ", ".join(str(i) for i in boxes.no_area[:5]) + (" ..." if len(boxes.no_area) > 5 else "")
        warnings.append(f"{url}: {len(boxes.no_area)} annotations have a bbox of no width or height, not "
                        f"converted, as the Object Detection API's create_coco_tf_record.py skips them: ids {shown}")
    if boxes.no_mask:  # stored all 0 (pycocotools draws [] so): said, as a mask head learns "no pixel" from it
        shown = ", ".join(boxes.no_mask[:5]) + (" ..." if len(boxes.no_mask) > 5 else "")
        warnings.append(f"{url}: {len(boxes.no_mask)} annotations have no segmentation (none, or []) where the "
                        f"others have one: kept as boxes whose instance mask is empty (all 0); give them a "
                        f"segmentation, or remove them if every object needs a mask: ids {shown}")
    return warnings


def _unnamed(folder: str, uris: pd.Series, url: str) -> list[str]:
    """The images in the folder the file's images were read from, and in its subfolders that hold any of them,
    that it does not name, as ``"<path in that folder> (an image the annotations do not name)"``: every image
    beside the annotations is a row or said to be none, as in a VOC or YOLO folder. Paths are compared as
    normalized (``./a.jpg`` and ``s//a.jpg`` name ``a.jpg`` and ``s/a.jpg``)."""
    fs, top = filesystem(folder)
    top = posixpath.normpath(top)
    named = {posixpath.normpath(filesystem(u)[1]) for u in uris.dropna().unique()}
    folders = {top, *(posixpath.dirname(p) for p in named if p.startswith(top + "/"))}
    own = posixpath.normpath(filesystem(url)[1])
    listed = {posixpath.normpath(p) for f in sorted(folders) if fs.isdir(f) for p in fs.ls(f, detail=False)}
    return [f"{p[len(top) + 1:]} (an image the annotations do not name)" for p in sorted(listed)
            if p not in named and p != own and p.lower().endswith(IMAGE_EXTENSIONS)
            and not posixpath.basename(p).startswith(".")]


def _coco_keypoint_names(url: str, categories: list[Any]) -> tuple[list[str] | None, list[list[int]] | None]:
    """The keypoints' names and skeleton (pairs of indices from 0; COCO counts from 1) that the categories give
    (COCO person keypoints: the person category's); None where none gives any. Categories that name different
    keypoints are refused: a dataset stores one set."""
    found = [c for c in categories if isinstance(c, Mapping) and c.get("keypoints")]
    if not found:
        return None, None
    names, skeleton = found[0]["keypoints"], found[0].get("skeleton") or []
    where = f"COCO annotations {url!r}: category {quoted(found[0].get('name'))}"
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise TFRecorderError(f"{where}: keypoints {quoted(names)} is not a list of names")
    for other in found[1:]:
        if other["keypoints"] != names:
            raise TFRecorderError(f"COCO annotations {url!r}: categories {quoted(found[0].get('name'))} and "
                                  f"{quoted(other.get('name'))} name different keypoints; a dataset stores one set "
                                  f"of keypoints an object: convert them apart")
    pairs = []
    for pair in skeleton if isinstance(skeleton, list) else [skeleton]:
        if not (isinstance(pair, list) and len(pair) == 2 and all(_is_index(v, len(names)) for v in pair)):
            raise TFRecorderError(f"{where}: skeleton pair {quoted(pair)} is not two keypoint numbers from 1 to "
                                  f"{len(names)}")
        pairs.append([int(pair[0]) - 1, int(pair[1]) - 1])
    return names, pairs


def _is_index(value: Any, count: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= count


def _coco_json(url: str) -> Any:
    """A COCO file parsed, keeping only ``COCO_KEYS`` of each object, its annotations as columns
    (``AnnotationColumns``: each checked and held as it is parsed)."""
    with open_url(url) as f:
        text = utf8_text(f.read(), f"COCO annotations {url!r}")  # the bytes are freed once decoded
    try:
        return parse_coco(text, lambda: AnnotationColumns(url))
    except TFRecorderError:  # an annotation's own, raised as it was parsed
        raise
    except ValueError as e:
        raise TFRecorderError(f"COCO annotations {url!r} are not JSON: {e}") from e
    except RecursionError:  # json's parser recurses per level: arrays in arrays 100,000 deep
        raise TFRecorderError(f"COCO annotations {url!r} nest arrays or objects too deep to parse: not COCO "
                              f"instances JSON") from None


def _coco_annotations(url: str, data: Mapping[str, Any]) -> AnnotationColumns:
    """The file's annotations, as columns (an ``annotations`` array is parsed into them)."""
    entries = data.get("annotations", [])
    if isinstance(entries, AnnotationColumns):
        return entries
    if not isinstance(entries, list):
        raise TFRecorderError(f"{url!r} is not COCO instances JSON: its 'annotations' is {json_kind(entries)}, "
                              f"not a list of entries")
    columns = AnnotationColumns(url)
    for index, entry in enumerate(entries):
        columns.add(index, entry)
    return columns


def _coco_section(url: str, data: Mapping[str, Any], name: str) -> list[Any]:
    entries = data.get(name, [])
    if not isinstance(entries, list):
        raise TFRecorderError(f"{url!r} is not COCO instances JSON: its '{name}' is {json_kind(entries)}, not a "
                              f"list of entries")
    return entries


def _coco_categories(url: str, categories: list[Any]) -> dict[Any, str]:
    """Category id -> name; a category without an id or a name, or two names under one id, refused."""
    names: dict[Any, str] = {}
    for i, category in enumerate(categories):
        where = f"COCO annotations {url!r}: categories[{i}]"
        category_id = coco_id(entry_of(category, where), "id", where)
        name = category.get("name")
        if name is not None and not isinstance(name, str):
            raise TFRecorderError(f"{where} (id {category_id!r}): name {quoted(name)} is not text")
        if name is None or not name.strip():  # its boxes would have no label to learn them as
            raise SchemaError(f"COCO annotations {url!r}: category {category_id!r} has "
                              f"{'no' if name is None else 'a blank'} name: every box needs its label; name it "
                              f"in 'categories'")
        if names.get(category_id, name) != name:
            raise SchemaError(f"COCO annotations {url!r}: categories {quoted(names[category_id])} and "
                              f"{quoted(name)} share the id {category_id!r}: their boxes would all take one "
                              f"name; give each category its own id")
        names[category_id] = name
    return names


def _coco_image_files(url: str, images: list[Any]) -> dict[Any, str]:
    """Image id -> file name, each image entry checked: an id, a file name, whole-number sizes, ids unique."""
    files: dict[Any, str] = {}
    for i, image in enumerate(images):
        where = f"COCO annotations {url!r}: images[{i}]"
        file_name = entry_of(image, where).get("file_name")
        image_id = coco_id(image, "id", f"{where} (file_name {quoted(file_name)})")
        if not isinstance(file_name, str) or not file_name.strip():
            raise TFRecorderError(f"{where} (id {image_id!r}): " + (
                "has no 'file_name'" if file_name is None else f"file_name {quoted(file_name)} is not a file name"))
        for size in SIZE_COLUMNS:
            _size(image.get(size), f"{where} ({file_name!r})", size)
        if image_id in files:  # annotations name their image by id: one image would take the other's boxes
            raise SchemaError(f"COCO annotations {url!r}: images {quoted(files[image_id])} and {quoted(file_name)} "
                              f"share the id {image_id!r}: each image needs its own id, the one its annotations "
                              f"give as image_id")
        files[image_id] = file_name
    return files


def _coco_split(url: str) -> str:
    """The split a COCO file's name says: instances_train2017.json is TRAIN; UNASSIGNED when it says none."""
    stem = posixpath.basename(url).lower().removesuffix(".json")
    for word, split in COCO_SPLITS.items():
        if f"_{word}" in stem or stem.startswith(word):
            return split
    # Roboflow's export names its file the same in each split folder: valid/_annotations.coco.json
    return FOLDER_SPLITS.get(posixpath.basename(posixpath.dirname(url.rstrip("/"))).upper(), UNASSIGNED)


def _coco_images(url: str, names: list[str]) -> tuple[str, str, bool]:
    """Where a COCO file's images are when ``images_dir`` is not given, and the line the result says of it: the
    first of these folders of the dataset's root (the file's folder, or its parent when that is
    ``annotations/``) that holds one of its first images (``names``): beside the file (Roboflow's
    ``train/_annotations.coco.json``), ``images/<subset>/`` (Datumaro's), ``images/``, ``<subset>/`` and
    ``<subset>2017/`` (COCO 2017's ``annotations/instances_train2017.json`` beside ``train2017/``), the subset
    from ``instances_<subset>.json`` or ``person_keypoints_<subset>.json``, then the root itself (names such as
    ``images/a.jpg`` given from it). None holding any: the first of them that exists after the file's own
    folder (else that folder), and the line names where it looked. The third value: whether one held an image."""
    folder = file_folder(url)
    root = annotation_folder(url)
    stem = posixpath.basename(url).rsplit(".", 1)[0]
    subset = re.sub(r"^(instances|person_keypoints)_", "", stem)
    candidates = list(dict.fromkeys([folder, join_name(root, f"images/{subset}"), join_name(root, "images"),
                                     join_name(root, subset), join_name(root, f"{subset}2017"),
                                     join_name(folder, "images"), root]))
    folders = [c for c in candidates if _exists(c, folder=True)]
    for candidate in folders:
        if any(_exists(join_name(candidate, name)) for name in names):
            return candidate, f"COCO annotations {url!r}: images read from {candidate}", True
    named = next((c for c in folders if c != folder), folder)  # no image there yet: the likeliest folder
    shown = ", ".join(map(repr, names[:3])) + (", ..." if len(names) > 3 else "")
    looked = ", ".join(f"{c}/" for c in candidates)
    return named, (f"COCO annotations {url!r}: none of its first images ({shown}) is in {looked}; their names are "
                   f"read from {named}: give images_dir= the folder that holds them"), False


_LOOKED_FOR = 8  # images a folder is tried for: any of them there makes it the images' folder


def _exists(url: str, folder: bool = False) -> bool:
    fs, path = filesystem(url)
    return fs.isdir(path) if folder else fs.exists(path)


def _inside(name: str) -> bool:
    """A file name that can only name a file under a folder (nothing else is looked for: not a URL, an absolute
    name or one that climbs out; the fetch names those ``outside_folder``)."""
    return not URL.match(name) and not name.startswith(("/", "\\")) and ".." not in re.split(r"[/\\]", name)


def _size(value: Any, where: str, name: str) -> None:
    """A COCO image's width or height: absent, or a whole number."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                              or not math.isfinite(value) or value != int(value)):
        raise TFRecorderError(f"{where}: {name} {quoted(value)} is not a whole number of pixels")
