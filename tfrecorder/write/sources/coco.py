"""COCO (IO edge): a COCO ``instances_*.json`` read into the long form, a row per box - parsed keeping only the
keys it reads (``COCO_KEYS``), each entry checked, read a column at a time - and the folder its images are in.
"""

from __future__ import annotations

import json
import logging
import math
import posixpath
import re
from collections.abc import Mapping
from typing import Any

import pandas as pd

from tfrecorder.dataset.storage import filesystem, open_url
from tfrecorder.errors import SchemaError, TFRecorderError
from tfrecorder.schema import IMAGE_COLUMN, IMAGE_EXTENSIONS, LABEL_COLUMN, SPLIT_COLUMN
from tfrecorder.types import INSTANCE_MASK_COLUMN, KEYPOINTS_COLUMN
from tfrecorder.write.settings import KEYPOINTS_ATTR, NOTES_ATTR
from tfrecorder.write.sources.folders import FOLDER_SPLITS
from tfrecorder.write.sources.long_form import (
    BOX_COLUMNS,
    SIZE_COLUMNS,
    URL,
    add_row,
    annotation_folder,
    empty_columns,
    file_folder,
    finite_number,
    join_name,
    long_frame,
    quoted,
    utf8_text,
)
from tfrecorder.write.splits import TEST, TRAIN, UNASSIGNED, VALIDATION

logger = logging.getLogger(__name__)

COCO_SPLITS = {"train": TRAIN, "val": VALIDATION, "test": TEST}  # instances_<name>2017.json
# The keys read from a COCO file. Every other key is dropped as its object is parsed. The segmentation polygons,
# most of a COCO file's bytes and ~4x their size as Python floats, are kept as their compact JSON bytes, made as
# each annotation is parsed (the read peaks under 3.5x the file; bytes, which pandas keeps as they are, where str
# would be copied into an Arrow string column); an RLE's "size" and "counts" with them.
COCO_KEYS = frozenset({"images", "annotations", "categories", "id", "file_name", "width", "height", "image_id",
                       "bbox", "category_id", "iscrowd", "area", "name", "keypoints", "skeleton", "segmentation",
                       "size", "counts"})
SEGMENTATION = "segmentation"


def read_coco(url: str, images_dir: str | None) -> pd.DataFrame:
    data = _coco_json(url)
    if not isinstance(data, Mapping) or "images" not in data:
        raise TFRecorderError(f"{url!r} is not COCO instances JSON: it has no 'images' list")
    images, annotations, categories = (_coco_section(url, data, name)
                                       for name in ("images", "annotations", "categories"))
    if images and not annotations:  # a test split's image_info file: no box to learn, no label to type
        raise TFRecorderError(f"COCO annotations {url!r} hold {len(images)} images but no annotation (a test "
                              f"split's image_info file?): there are no boxes to convert; convert the images as a "
                              f"folder or a table of image_uri instead")
    labels = _coco_categories(url, categories)
    names, skeleton = _coco_keypoint_names(url, categories)
    keypointed = names is not None or any(isinstance(a, Mapping) and a.get("keypoints") for a in annotations)
    masked = any(isinstance(a, Mapping) and a.get(SEGMENTATION) for a in annotations)
    extra = ("is_crowd", "area", *SIZE_COLUMNS, *((KEYPOINTS_COLUMN,) if keypointed else ()),
             *((INSTANCE_MASK_COLUMN,) if masked else ()))
    files = _coco_image_files(url, images)
    by_image = _coco_by_image(url, annotations, files)
    annotations.clear()  # each image's annotations are freed once its rows are added (by_image.pop)
    split = _coco_split(url)
    note, found = None, False  # found: the images' folder found, not given (images_dir= is not listed)
    if images_dir is not None:
        folder = images_dir
    else:
        named = [image["file_name"] for image in images[:_LOOKED_FOR]]
        folder, note, found = _coco_images(url, [n for n in named if _inside(n)])
    columns = empty_columns(extra)
    no_area: list[Any] = []  # annotations whose bbox has no width or height
    no_mask: list[str] = []  # annotations without a segmentation in a file whose others have one
    for image in images:
        base = {SPLIT_COLUMN: split, IMAGE_COLUMN: join_name(folder, image["file_name"]),
                "width": image.get("width"), "height": image.get("height")}
        boxes = by_image.pop(image["id"], [])
        kept = 0
        for annotation in boxes:
            where = f"{url}: annotation {annotation.get('id', '?')} of image {image['file_name']!r}"
            category = annotation.get("category_id")
            if not _is_id(category) or category not in labels:
                raise TFRecorderError(f"{where}: category_id {quoted(category)} is not in 'categories'")
            x, y, w, h = (finite_number(v, where, "bbox") for v in _four(annotation.get("bbox"), where))
            if w <= 0 or h <= 0:  # no box to store: skipped, as create_coco_tf_record.py skips them
                no_area.append(annotation.get("id", "?"))
                continue
            kept += 1
            area = annotation.get("area")
            if masked and annotation.get(SEGMENTATION) is None:
                no_mask.append(f"{quoted(annotation.get('id', '?'))} ({image['file_name']})")
            add_row(columns, {**base, LABEL_COLUMN: labels[category], "xmin": x, "ymin": y, "xmax": x + w,
                           "ymax": y + h, "is_crowd": _flag(annotation.get("iscrowd", 0), where, "iscrowd"),
                           "area": None if area is None else finite_number(area, where, "area"),
                           KEYPOINTS_COLUMN: _keypoints(annotation.get("keypoints"), names, where),
                           INSTANCE_MASK_COLUMN: annotation.get(SEGMENTATION) or None})
        if not kept:
            add_row(columns, {**base, LABEL_COLUMN: None, **dict.fromkeys(BOX_COLUMNS), "is_crowd": None,
                           "area": None, KEYPOINTS_COLUMN: None, INSTANCE_MASK_COLUMN: None})
    frame = long_frame(columns, extra)
    if names is not None:
        frame.attrs[KEYPOINTS_ATTR] = {"names": names, "skeleton": skeleton}
    warnings = [note] if note is not None else []
    # the folder found for the images (not one given: images_dir= is read only where the file names, as VOC's)
    skipped = _unnamed(folder, frame[IMAGE_COLUMN], url) if found else []
    if skipped:
        warnings.append(f"{len(skipped)} images beside the images of {url!r} are not in its 'images' and were "
                        f"skipped: {', '.join(skipped[:5])}{', ...' if len(skipped) > 5 else ''} (result.skipped "
                        f"lists them)")
    if no_area:
        shown = ", ".join(str(i) for i in no_area[:5]) + (" ..." if len(no_area) > 5 else "")
        warnings.append(f"{url}: {len(no_area)} annotations have a bbox of no width or height, not converted, as "
                        f"the Object Detection API's create_coco_tf_record.py skips them: ids {shown}")
    if no_mask:  # stored all 0 (pycocotools draws [] so): said, as a mask head learns "no pixel" from it
        shown = ", ".join(no_mask[:5]) + (" ..." if len(no_mask) > 5 else "")
        warnings.append(f"{url}: {len(no_mask)} annotations have no segmentation (none, or []) where the others "
                        f"have one: kept as boxes whose instance mask is empty (all 0); give them a segmentation, "
                        f"or remove them if every object needs a mask: ids {shown}")
    if warnings:
        frame.attrs[NOTES_ATTR] = {"warnings": warnings, "skipped": tuple(skipped)}
    return frame


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


def _keypoints(value: Any, names: list[str] | None, where: str) -> list[float] | None:
    """An annotation's ``keypoints``: ``[x, y, v] * K`` (K: its category's names), as numbers; None for an
    annotation without them (COCO writes ``num_keypoints`` 0 and zeros; a category without keypoints none)."""
    if value is None or value == []:
        return None
    count = len(names) if names is not None else None
    if not isinstance(value, list) or len(value) % 3 or (count is not None and len(value) != 3 * count):
        wanted = f"[x, y, v] for each of its category's {count} keypoints" if count else "[x, y, v] for each keypoint"
        raise TFRecorderError(f"{where}: keypoints {quoted(value)} are not {wanted}")
    numbers = [finite_number(v, where, "keypoints") for v in value]
    for i, visibility in enumerate(numbers[2::3]):  # checked here too, where the annotation's id is known
        if visibility not in (0, 1, 2):
            raise SchemaError(f"{where}: keypoint {i + 1}'s visibility {value[3 * i + 2]!r} is not 0 (not "
                                  f"labelled), 1 (labelled, hidden) or 2 (visible)")
    return numbers


def _coco_json(url: str) -> Any:
    """A COCO file parsed, keeping only ``COCO_KEYS`` of each object (dropped as each object is parsed)."""
    with open_url(url) as f:
        text = utf8_text(f.read(), f"COCO annotations {url!r}")  # the bytes are freed once decoded
    try:
        return json.loads(text, object_pairs_hook=_coco_kept)
    except ValueError as e:
        raise TFRecorderError(f"COCO annotations {url!r} are not JSON: {e}") from e
    except RecursionError:  # json's parser recurses per level: arrays in arrays 100,000 deep
        raise TFRecorderError(f"COCO annotations {url!r} nest arrays or objects too deep to parse: not COCO "
                              f"instances JSON") from None


def _coco_kept(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    return {key: _segmentation_text(value) if key == SEGMENTATION else value
            for key, value in pairs if key in COCO_KEYS}


def _segmentation_text(value: Any) -> str | bytes | None:
    """An annotation's segmentation (polygons or RLE) as compact JSON (UTF-8 bytes), the instance mask column's
    value (``types.InstanceMask``: drawn when written); None for none (``[]``)."""
    if isinstance(value, Mapping) and not value:  # an object of none of RLE's keys: the mask's decode names it
        return b"{}"
    if isinstance(value, str) or not value:  # text already (a file of another tool) or none
        return value or None
    return json.dumps(value, separators=(",", ":")).encode("ascii")


def _coco_section(url: str, data: Mapping[str, Any], name: str) -> list[Any]:
    entries = data.get(name, [])
    if not isinstance(entries, list):
        raise TFRecorderError(f"{url!r} is not COCO instances JSON: its '{name}' is {_json_kind(entries)}, not a "
                              f"list of entries")
    return entries


def _coco_categories(url: str, categories: list[Any]) -> dict[Any, str]:
    """Category id -> name; a category without an id or a name, or two names under one id, refused."""
    names: dict[Any, str] = {}
    for i, category in enumerate(categories):
        where = f"COCO annotations {url!r}: categories[{i}]"
        category_id = _coco_id(_entry(category, where), "id", where)
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
        file_name = _entry(image, where).get("file_name")
        image_id = _coco_id(image, "id", f"{where} (file_name {quoted(file_name)})")
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


def _coco_by_image(url: str, annotations: list[Any], files: Mapping[Any, str]) -> dict[Any, list[Mapping]]:
    """Image id -> its annotations, in the file's order; annotations whose image_id no image has, refused."""
    by_image: dict[Any, list[Mapping[str, Any]]] = {}
    dangling: list[str] = []
    for i, annotation in enumerate(annotations):
        where = f"COCO annotations {url!r}: annotations[{i}]"
        label = f"{where} (id {quoted(_entry(annotation, where).get('id'))})"
        image_id = _coco_id(annotation, "image_id", label)
        if image_id in files:
            by_image.setdefault(image_id, []).append(annotation)
        else:
            dangling.append(f"{quoted(annotation.get('id', f'[{i}]'))} (image_id {image_id!r})")
    if dangling:  # their boxes would be lost without a word
        raise SchemaError(f"COCO annotations {url!r}: {len(dangling)} annotations name an image_id that no entry "
                          f"of 'images' has: {', '.join(dangling[:5])}{', ...' if len(dangling) > 5 else ''}; add "
                          f"their images to 'images', or remove them")
    return by_image


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


def _coco_id(entry: Mapping[str, Any], key: str, where: str) -> Any:
    if key not in entry:
        raise TFRecorderError(f"{where} has no '{key}'")
    if not _is_id(entry[key]):
        raise TFRecorderError(f"{where}: {key} {quoted(entry[key])} is not an id (a number or text)")
    return entry[key]


def _is_id(value: Any) -> bool:
    """A JSON id: a number or text - not true/false, which Python's bool makes the ints 1 and 0."""
    return not isinstance(value, bool) and (isinstance(value, (int, str)) or isinstance(value, float)
                                            and math.isfinite(value))


def _entry(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise TFRecorderError(f"{where} is {_json_kind(value)} ({quoted(value)}), not an object")
    return value


def _size(value: Any, where: str, name: str) -> None:
    """A COCO image's width or height: absent, or a whole number."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                              or not math.isfinite(value) or value != int(value)):
        raise TFRecorderError(f"{where}: {name} {quoted(value)} is not a whole number of pixels")


def _flag(value: Any, where: str, name: str) -> int:
    """COCO's 0 or 1 (``iscrowd``): any other value is a TFRecorderError (a 2 was stored as 2)."""
    if value in (0, 1) and not isinstance(value, str):  # 0, 1, 0.0, 1.0, false, true
        return int(value)
    raise TFRecorderError(f"{where}: {name} {quoted(value)} is not 0 or 1")


def _four(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list) or len(value) != 4:
        raise TFRecorderError(f"{where}: bbox {quoted(value)} is not [x, y, width, height]")
    return value


def _json_kind(value: Any) -> str:
    kinds = {dict: "an object", list: "a list", str: "text", bool: "true/false", type(None): "null"}
    return kinds.get(type(value), "a number" if isinstance(value, (int, float)) else type(value).__name__)
