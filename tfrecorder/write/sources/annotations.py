"""Annotations (IO edge): object-detection tables in the formats people have - a Pascal VOC folder, COCO
``instances_*.json``, an AutoML Vision object-detection CSV - read into one long form: a row per box.

The long form's columns (``LONG_FORM``): ``split, image_uri, label, xmin, ymin, xmax, ymax``, then what the
format adds (VOC: ``difficult``, ``truncated``; COCO: ``is_crowd`` (its ``iscrowd``), ``area``) and, where the
format records it, the size of the image the boxes were drawn on (``width``, ``height``). A row whose label and box are
empty is an image without objects. Coordinates are box edges in pixels counted from 0 (VOC's 1-based
inclusive pixels and COCO's ``[x, y, w, h]`` are turned into edges), or normalized to [0, 1] (AutoML).

What comes in is untrusted and is checked as it is read: a wrong entry (an id, a file name, a size, a box) is a
one-line error naming the file, the entry and what is wrong, never a traceback; nothing is dropped without a
word (two images under one id, an annotation whose image is not listed, a box without a label, an AutoML file
in two units are SchemaErrors). VOC XML is parsed with defusedxml: a DTD or entity is refused. The dataset's
root travels with the long form in ``attrs[ROOT_ATTR]``: every name an annotation file gives must resolve inside
it, which the fetch enforces (``outside_folder``).
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import posixpath
import re
from collections.abc import Mapping
from typing import Any

import pandas as pd
from defusedxml import DefusedXmlException
from defusedxml import ElementTree as SafeElementTree

from tfrecorder.dataset.storage import filesystem, open_url
from tfrecorder.errors import SchemaError, TFRecorderError
from tfrecorder.schema import IMAGE_COLUMN, LABEL_COLUMN, MASK_COLUMN, SPLIT_COLUMN
from tfrecorder.write.options import ROOT_ATTR
from tfrecorder.write.splits import DEFAULT_FRACTIONS, TEST, TRAIN, UNASSIGNED, VALIDATION, hash_fraction

BOX_COLUMNS = ("xmin", "ymin", "xmax", "ymax")
LONG_FORM = (SPLIT_COLUMN, IMAGE_COLUMN, LABEL_COLUMN, *BOX_COLUMNS)
SIZE_COLUMNS = ("width", "height")  # the image the boxes were drawn on, as the annotation says
VOC_SPLITS = {"train": TRAIN, "val": VALIDATION, "test": TEST}  # ImageSets/Main/<name>.txt
COCO_SPLITS = {"train": TRAIN, "val": VALIDATION, "test": TEST}  # instances_<name>2017.json
AUTOML_WIDTH = 11  # split, image, label, then x,y of 4 vertices: 2-vertex rows leave two pairs empty
# The frame's attrs entry the fetch checks names against: {"root": the dataset's root (an absolute local path or
# a URL), "annotations": the annotation file or folder as given}
URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")  # a name that is a URL (http://, gs://, file://...)
SHOWN = 60  # characters of a bad value a message quotes


def read_annotations(path: str, images_dir: str | None = None, task: str = "auto") -> pd.DataFrame:
    """Read object-detection annotations into a DataFrame of one row per box (``LONG_FORM``), or a VOC
    folder's segmentation masks into a row per image.

    Args:
        path: a Pascal VOC folder (``Annotations/*.xml`` beside ``JPEGImages/``, or XML files beside the
            images, as labelImg writes them), a COCO ``instances_*.json``, or an AutoML Vision
            object-detection CSV (headerless: ``TRAIN,gs://b/img.jpg,car,0.1,0.2,,,0.3,0.4,,``, or its
            4-vertex form). Local, gs:// or any fsspec URL.
        images_dir: where the images are, when not where the format says (VOC: ``JPEGImages/`` or beside
            the XML; COCO: beside the JSON, or ``images/`` there).
        task: ``"detection"`` (VOC's ``Annotations/``), ``"segmentation"`` (VOC's ``SegmentationClass/``
            palette PNGs: ``split, image_uri, mask_uri``, splits from ``ImageSets/Segmentation``), or
            ``"auto"``: a VOC folder's boxes where it has ``Annotations/``, else its masks.

    Returns:
        The boxes: ``split, image_uri, label, xmin, ymin, xmax, ymax`` (pixels from 0 for VOC and COCO,
        normalized for AutoML) and the format's own columns (VOC ``difficult``, ``truncated``; COCO
        ``is_crowd``, ``area``; the annotated image's ``width``, ``height``). An image without objects is one
        row with an empty label and box. Splits: VOC's ``ImageSets/Main/{train,val,test}.txt``
        (``trainval``: TRAIN or VALIDATION by a stable hash of the image id); COCO's from the file name
        (``instances_val2017.json``: VALIDATION); AutoML's own; else UNASSIGNED.

    Examples:
        >>> coco = {"images": [{"id": 1, "file_name": "a.jpg", "width": 64, "height": 48}],
        ...         "annotations": [{"image_id": 1, "bbox": [8, 4, 16, 20], "category_id": 3, "iscrowd": 0,
        ...                          "area": 320.0}],
        ...         "categories": [{"id": 3, "name": "cat"}]}
        >>> _ = (tmp_path / "instances_train.json").write_text(json.dumps(coco))
        >>> boxes = tfrecorder.read_annotations(str(tmp_path / "instances_train.json"))
        >>> boxes[["split", "label", "xmin", "ymin", "xmax", "ymax"]].values.tolist()
        [['TRAIN', 'cat', 8.0, 4.0, 24.0, 24.0]]
    """
    if task not in ("auto", "detection", "segmentation"):
        raise TFRecorderError(f"task={task!r}: use 'auto', 'detection' or 'segmentation'")
    url = os.fspath(path)
    fs, fs_path = filesystem(url)
    if not fs.exists(fs_path):
        raise TFRecorderError(f"annotations {url!r} do not exist")
    if fs.isdir(fs_path):
        root = fs_path.rstrip("/")
        if task == "segmentation" or (task == "auto" and fs.isdir(f"{root}/SegmentationClass")
                                      and not fs.isdir(f"{root}/Annotations")):
            return _rooted(_voc_segmentation(url, images_dir), url, images_dir, _url(url, fs, root))
        return _rooted(_voc(url, images_dir), url, images_dir, _url(url, fs, root))
    if url.lower().endswith(".json"):
        return _rooted(_coco(url, images_dir), url, images_dir, _annotation_folder(url))
    return _automl(url)  # no root: AutoML's format names every image by its full gs:// URI


def _rooted(boxes: pd.DataFrame, url: str, images_dir: str | None, folder: str) -> pd.DataFrame:
    """``boxes`` with the dataset's root in ``attrs[ROOT_ATTR]``: ``images_dir`` when given, else ``folder`` (the
    VOC folder, or the annotation file's folder or its parent) - an absolute local path, or a URL."""
    root = images_dir if images_dir is not None else folder
    root = root.rstrip("/") if "://" in root else os.path.abspath(root)
    boxes.attrs[ROOT_ATTR] = {"root": root, "annotations": url}
    return boxes


def _annotation_folder(url: str) -> str:
    """The folder of an annotation file, or its parent when that folder is named ``annotations`` (COCO's and
    Datumaro's layout: ``annotations/instances_train.json`` beside ``images/``)."""
    if "://" in url:
        folder = posixpath.dirname(url)
        return posixpath.dirname(folder) if posixpath.basename(folder).lower() == "annotations" else folder
    folder = os.path.dirname(os.path.abspath(url))
    return os.path.dirname(folder) if os.path.basename(folder).lower() == "annotations" else folder


def annotation_table(source: Any, images_dir: str | None = None) -> pd.DataFrame | None:
    """``source`` read with ``read_annotations`` (``images_dir`` as it takes it) when it is annotations
    ``convert`` takes directly - a Pascal VOC folder (``Annotations/``, or labelImg's XML files beside the
    images), a ``.json`` file (COCO), or a headerless CSV of AutoML Vision's object-detection width - else None
    (any other table or folder; with ``images_dir``, a TFRecorderError: it names only annotation files' images)."""
    found = _annotation_url(source)
    if found is None:
        if images_dir is not None:
            raise TFRecorderError(f"images_dir={images_dir!r}: it says where the images of an annotation file (a VOC "
                                  f"folder, a COCO .json, an AutoML detection CSV) are; this source is a table, "
                                  f"whose image_uri column names its images itself")
        return None
    return read_annotations(found, images_dir=images_dir)


def _annotation_url(source: Any) -> str | None:
    """``source``'s URL when it is annotations ``convert`` reads with ``read_annotations``, else None."""
    if not isinstance(source, (str, os.PathLike)) or any(c in os.fspath(source) for c in "*?["):
        return None
    url = os.fspath(source)
    fs, path = filesystem(url)
    if not fs.exists(path):
        return None
    if fs.isdir(path):
        names = [posixpath.basename(p.rstrip("/")) for p in fs.ls(path, detail=False)]
        voc = "Annotations" in names or "SegmentationClass" in names or any(n.lower().endswith(".xml")
                                                                             for n in names)
        return url if voc else None
    if url.lower().endswith(".json"):
        return url
    if url.lower().endswith(".csv"):
        with open_url(url) as f:
            first = f.read(65536).split(b"\n", 1)[0].decode("utf-8-sig", "replace").strip()
        if _automl_like(first.split(",")):
            return url
    return None


def _automl_like(cells: list[str]) -> bool:
    """Whether a CSV's first line is an AutoML Vision object-detection row: a split, then AUTOML_WIDTH fields;
    or more of them (``_automl`` names the line) whose vertices are numbers or empty, x_min and y_min given -
    not a headerless classification row with more labels (text) after its image."""
    if cells[0].strip().upper() not in (TRAIN, VALIDATION, TEST, UNASSIGNED) or len(cells) < AUTOML_WIDTH:
        return False
    if len(cells) == AUTOML_WIDTH:
        return True
    vertices = [c.strip() for c in cells[3:AUTOML_WIDTH]]
    return all(_is_number(v) for v in vertices[:2]) and all(not v or _is_number(v) for v in vertices)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


# --- Pascal VOC ---------------------------------------------------------------------------------------------

def _voc(url: str, images_dir: str | None) -> pd.DataFrame:
    fs, root = filesystem(url)
    root = root.rstrip("/")
    annotations = f"{root}/Annotations"
    xml_dir = annotations if fs.isdir(annotations) else root
    files = sorted(p for p in fs.ls(xml_dir, detail=False) if p.lower().endswith(".xml"))
    if not files:
        raise TFRecorderError(f"{url!r} is not a Pascal VOC folder: no Annotations/*.xml, nor XML files in it")
    if images_dir is None and fs.isdir(f"{root}/JPEGImages"):
        images_dir = _url(url, fs, f"{root}/JPEGImages")
    splits = _voc_splits(url, fs, root)
    columns = _columns(("difficult", "truncated", *SIZE_COLUMNS))
    for xml in files:
        where = _url(url, fs, xml)
        tree = _voc_xml(fs, xml, where)
        name = tree.findtext("filename") or posixpath.basename(xml)[:-4] + ".jpg"
        image_id = posixpath.splitext(name)[0]
        folder = images_dir if images_dir is not None else _url(url, fs, posixpath.dirname(xml))
        image = {SPLIT_COLUMN: splits.get(image_id, UNASSIGNED), IMAGE_COLUMN: _join(folder, name),
                 "width": _int(tree.findtext("size/width"), where, "<width>"),
                 "height": _int(tree.findtext("size/height"), where, "<height>")}
        objects = tree.findall("object")
        for number, obj in enumerate(objects, 1):
            label = (obj.findtext("name") or "").strip()
            if not label:  # a box without its label: no class to learn it as
                raise SchemaError(f"Pascal VOC annotation {where!r}: object {number} has "
                                  f"{'no' if obj.find('name') is None else 'a blank'} <name>: every box needs "
                                  f"its label; name it, or remove the object")
            box = obj.find("bndbox")
            at = f"{where}: object {obj.findtext('name')!r}"
            edges = [_number(box.findtext(edge) if box is not None else None, at, edge) for edge in BOX_COLUMNS]
            # VOC counts pixels from 1, both ends included: as edges from 0, xmin and ymin move back one
            _add(columns, {**image, LABEL_COLUMN: label,
                           "xmin": edges[0] - 1, "ymin": edges[1] - 1, "xmax": edges[2], "ymax": edges[3],
                           "difficult": _int(obj.findtext("difficult"), at, "<difficult>") or 0,
                           "truncated": _int(obj.findtext("truncated"), at, "<truncated>") or 0})
        if not objects:
            _add(columns, {**image, LABEL_COLUMN: None, **dict.fromkeys(BOX_COLUMNS),
                           "difficult": None, "truncated": None})
    return _frame(columns, ("difficult", "truncated", *SIZE_COLUMNS))


def _voc_xml(fs: Any, xml: str, where: str) -> Any:
    """The root element of a VOC annotation, parsed as untrusted XML: a DTD (and so any entity - the billion
    laughs, an external file) is refused, never expanded."""
    with fs.open(xml, "rb") as f:
        try:
            return SafeElementTree.parse(f, forbid_dtd=True).getroot()
        except SafeElementTree.ParseError as e:
            raise TFRecorderError(f"Pascal VOC annotation {where!r} is not XML: {e}") from e
        except DefusedXmlException:  # DTDForbidden, EntitiesForbidden, ExternalReferenceForbidden
            raise TFRecorderError(f"Pascal VOC annotation {where!r} has a DTD/entity declaration: refused "
                                  f"(untrusted XML); VOC annotations need none - remove its <!DOCTYPE>") from None


def _voc_segmentation(url: str, images_dir: str | None) -> pd.DataFrame:
    """A VOC folder's ``SegmentationClass/*.png`` (palette PNGs of class ids, 255 the border to ignore), each
    with its photo from ``JPEGImages/``: ``split, image_uri, mask_uri``, splits from ImageSets/Segmentation."""
    fs, root = filesystem(url)
    root = root.rstrip("/")
    masks = sorted(p for p in fs.ls(f"{root}/SegmentationClass", detail=False) if p.lower().endswith(".png"))
    if not masks:
        raise TFRecorderError(f"{url!r}: SegmentationClass/ holds no PNG masks")
    images = images_dir if images_dir is not None else _url(url, fs, f"{root}/JPEGImages")
    splits = _voc_splits(url, fs, root, "Segmentation")
    rows = []
    for mask in masks:
        image_id = posixpath.splitext(posixpath.basename(mask))[0]
        rows.append({SPLIT_COLUMN: splits.get(image_id, UNASSIGNED), IMAGE_COLUMN: _join(images, f"{image_id}.jpg"),
                     MASK_COLUMN: _url(url, fs, mask)})
    return pd.DataFrame(rows, columns=[SPLIT_COLUMN, IMAGE_COLUMN, MASK_COLUMN])


def _voc_splits(url: str, fs: Any, root: str, task: str = "Main") -> dict[str, str]:
    """Image id -> split from ImageSets/<task>/{train,val,test,trainval}.txt (trainval: TRAIN or VALIDATION by
    a stable hash of the id, in the default fractions' proportion)."""
    main = f"{root}/ImageSets/{task}"
    found: dict[str, str] = {}
    for name in ("trainval", *VOC_SPLITS):  # train/val/test, where given, over trainval's guess
        path = f"{main}/{name}.txt"
        if not fs.exists(path):
            continue
        with fs.open(path, "rb") as f:
            text = _utf8(f.read(), f"Pascal VOC split list {_url(url, fs, path)!r}")
        ids = [line.split()[0] for line in text.splitlines() if line.strip()]
        for image_id in ids:
            if name == "trainval":
                train = DEFAULT_FRACTIONS[0] / (DEFAULT_FRACTIONS[0] + DEFAULT_FRACTIONS[1])
                found[image_id] = TRAIN if hash_fraction(image_id) < train else VALIDATION
            else:
                found[image_id] = VOC_SPLITS[name]
    return found


# --- COCO ---------------------------------------------------------------------------------------------------

# The keys read from a COCO file. Every other key is dropped as its object is parsed: the segmentation polygons,
# most of a COCO file's bytes and ~4x their size as Python floats, never stay (the read peaks under 3x the file)
COCO_KEYS = frozenset({"images", "annotations", "categories", "id", "file_name", "width", "height", "image_id",
                       "bbox", "category_id", "iscrowd", "area", "name"})


def _coco(url: str, images_dir: str | None) -> pd.DataFrame:
    data = _coco_json(url)
    if not isinstance(data, Mapping) or "images" not in data:
        raise TFRecorderError(f"{url!r} is not COCO instances JSON: it has no 'images' list")
    images, annotations, categories = (_coco_section(url, data, name)
                                       for name in ("images", "annotations", "categories"))
    labels = _coco_categories(url, categories)
    files = _coco_image_files(url, images)
    by_image = _coco_by_image(url, annotations, files)
    annotations.clear()  # each image's annotations are freed once its rows are added (by_image.pop)
    split = _coco_split(url)
    folder = images_dir if images_dir is not None else _coco_images(url)
    columns = _columns(("is_crowd", "area", *SIZE_COLUMNS))
    for image in images:
        base = {SPLIT_COLUMN: split, IMAGE_COLUMN: _join(folder, image["file_name"]),
                "width": image.get("width"), "height": image.get("height")}
        boxes = by_image.pop(image["id"], [])
        for annotation in boxes:
            where = f"{url}: annotation {annotation.get('id', '?')} of image {image['file_name']!r}"
            category = annotation.get("category_id")
            if not _is_id(category) or category not in labels:
                raise TFRecorderError(f"{where}: category_id {_shown(category)} is not in 'categories'")
            x, y, w, h = (_number(v, where, "bbox") for v in _four(annotation.get("bbox"), where))
            area = annotation.get("area")
            _add(columns, {**base, LABEL_COLUMN: labels[category], "xmin": x, "ymin": y, "xmax": x + w,
                           "ymax": y + h, "is_crowd": _flag(annotation.get("iscrowd", 0), where, "iscrowd"),
                           "area": None if area is None else _number(area, where, "area")})
        if not boxes:
            _add(columns, {**base, LABEL_COLUMN: None, **dict.fromkeys(BOX_COLUMNS), "is_crowd": None,
                           "area": None})
    return _frame(columns, ("is_crowd", "area", *SIZE_COLUMNS))


def _coco_json(url: str) -> Any:
    """A COCO file parsed, keeping only ``COCO_KEYS`` of each object (dropped as each object is parsed)."""
    with open_url(url) as f:
        text = _utf8(f.read(), f"COCO annotations {url!r}")  # the bytes are freed once decoded
    try:
        return json.loads(text, object_pairs_hook=_coco_kept)
    except ValueError as e:
        raise TFRecorderError(f"COCO annotations {url!r} are not JSON: {e}") from e
    except RecursionError:  # json's parser recurses per level: arrays in arrays 100,000 deep
        raise TFRecorderError(f"COCO annotations {url!r} nest arrays or objects too deep to parse: not COCO "
                              f"instances JSON") from None


def _coco_kept(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    return {key: value for key, value in pairs if key in COCO_KEYS}


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
            raise TFRecorderError(f"{where} (id {category_id!r}): name {_shown(name)} is not text")
        if name is None or not name.strip():  # its boxes would have no label to learn them as
            raise SchemaError(f"COCO annotations {url!r}: category {category_id!r} has "
                              f"{'no' if name is None else 'a blank'} name: every box needs its label; name it "
                              f"in 'categories'")
        if names.get(category_id, name) != name:
            raise SchemaError(f"COCO annotations {url!r}: categories {_shown(names[category_id])} and "
                              f"{_shown(name)} share the id {category_id!r}: their boxes would all take one "
                              f"name; give each category its own id")
        names[category_id] = name
    return names


def _coco_image_files(url: str, images: list[Any]) -> dict[Any, str]:
    """Image id -> file name, each image entry checked: an id, a file name, whole-number sizes, ids unique."""
    files: dict[Any, str] = {}
    for i, image in enumerate(images):
        where = f"COCO annotations {url!r}: images[{i}]"
        file_name = _entry(image, where).get("file_name")
        image_id = _coco_id(image, "id", f"{where} (file_name {_shown(file_name)})")
        if not isinstance(file_name, str) or not file_name.strip():
            raise TFRecorderError(f"{where} (id {image_id!r}): " + (
                "has no 'file_name'" if file_name is None else f"file_name {_shown(file_name)} is not a file name"))
        for size in SIZE_COLUMNS:
            _size(image.get(size), f"{where} ({file_name!r})", size)
        if image_id in files:  # annotations name their image by id: one image would take the other's boxes
            raise SchemaError(f"COCO annotations {url!r}: images {_shown(files[image_id])} and {_shown(file_name)} "
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
        label = f"{where} (id {_shown(_entry(annotation, where).get('id'))})"
        image_id = _coco_id(annotation, "image_id", label)
        if image_id in files:
            by_image.setdefault(image_id, []).append(annotation)
        else:
            dangling.append(f"{_shown(annotation.get('id', f'[{i}]'))} (image_id {image_id!r})")
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
    return UNASSIGNED


def _coco_images(url: str) -> str:
    """Where a COCO file's images are, the first folder that exists of: the split's folder beside
    ``annotations/`` (COCO 2017: ``annotations/instances_train2017.json`` beside ``train2017/``), ``images/<split>/``
    there (Datumaro's layout), ``images/`` there, ``images/`` beside the file; else the file's own folder."""
    folder = posixpath.dirname(url) if "://" in url else os.path.dirname(os.path.abspath(url))
    root = _annotation_folder(url)
    stem = posixpath.basename(url).rsplit(".", 1)[0]
    name = re.sub(r"^(instances|person_keypoints)_", "", stem)
    candidates = [*([_join(root, name), _join(root, f"images/{name}")] if root != folder else []),
                  _join(root, "images"), _join(folder, "images")]
    for candidate in candidates:
        fs, path = filesystem(candidate)
        if fs.isdir(path):
            return candidate
    return folder


def _coco_id(entry: Mapping[str, Any], key: str, where: str) -> Any:
    if key not in entry:
        raise TFRecorderError(f"{where} has no '{key}'")
    if not _is_id(entry[key]):
        raise TFRecorderError(f"{where}: {key} {_shown(entry[key])} is not an id (a number or text)")
    return entry[key]


def _is_id(value: Any) -> bool:
    return isinstance(value, (int, str)) or isinstance(value, float) and math.isfinite(value)


def _entry(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise TFRecorderError(f"{where} is {_json_kind(value)} ({_shown(value)}), not an object")
    return value


def _size(value: Any, where: str, name: str) -> None:
    """A COCO image's width or height: absent, or a whole number."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                              or not math.isfinite(value) or value != int(value)):
        raise TFRecorderError(f"{where}: {name} {_shown(value)} is not a whole number of pixels")


def _flag(value: Any, where: str, name: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        raise TFRecorderError(f"{where}: {name} {_shown(value)} is not 0 or 1") from None


def _four(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list) or len(value) != 4:
        raise TFRecorderError(f"{where}: bbox {_shown(value)} is not [x, y, width, height]")
    return value


# --- AutoML Vision CSV --------------------------------------------------------------------------------------

def _automl(url: str) -> pd.DataFrame:
    """AutoML Vision's object-detection CSV: ``set,image,label,x1,y1,x2,y2,x3,y3,x4,y4`` normalized, with the
    2-vertex form's empty pairs (``0.1,0.2,,,0.3,0.4,,``); a row of just ``set,image`` is an image without
    objects. A file whose rows are in two units (some vertices over 1: pixels) is refused."""
    with open_url(url) as f:
        text = _utf8(f.read(), f"AutoML Vision CSV {url!r}", "utf-8-sig")
    columns = _columns(())
    pixels: list[int] = []  # the lines of boxes with a vertex over 1, and how many are within [0, 1]
    normalized = 0
    reader = csv.reader(io.StringIO(text, newline=""), skipinitialspace=True)
    for values in reader:
        line = reader.line_num
        if not values or values == [""]:  # a blank line
            continue
        if len(values) > AUTOML_WIDTH:
            raise TFRecorderError(f"AutoML Vision CSV {url!r} line {line} has {len(values)} fields: a row has at "
                                  f"most {AUTOML_WIDTH} (set, image URI, label, then x,y of 4 vertices); remove "
                                  f"the others")
        values = [*values, *[""] * (AUTOML_WIDTH - len(values))]
        cells = [v.strip() for v in values]
        if cells[0].upper() not in (TRAIN, VALIDATION, TEST, UNASSIGNED) or not cells[1]:
            raise TFRecorderError(f"{url!r} line {line}: not an AutoML Vision object-detection row (set, image "
                                  f"URI, label, box): {_shown(','.join(values))}")
        where = f"{url!r} line {line}"
        numbers = [None if not c else _number(c, where, "vertex") for c in cells[3:]]
        given = [(x, y) for x, y in zip(numbers[0::2], numbers[1::2]) if x is not None and y is not None]
        if not cells[2] and not given:
            _add(columns, {SPLIT_COLUMN: cells[0].upper(), IMAGE_COLUMN: cells[1], LABEL_COLUMN: None,
                           **dict.fromkeys(BOX_COLUMNS)})
            continue
        if len(given) < 2 or not cells[2]:
            raise TFRecorderError(f"{where}: a box needs a label and two opposite vertices (x_min,y_min and "
                                  f"x_max,y_max), got {_shown(','.join(values))}")
        xs, ys = [x for x, _ in given], [y for _, y in given]
        if max(*xs, *ys) > 1:
            pixels.append(line)
        else:
            normalized += 1
        _add(columns, {SPLIT_COLUMN: cells[0].upper(), IMAGE_COLUMN: cells[1], LABEL_COLUMN: cells[2],
                       "xmin": min(xs), "ymin": min(ys), "xmax": max(xs), "ymax": max(ys)})
    if pixels and normalized:  # the table's units are read from its range: one row in pixels turns every box
        shown = ", ".join(map(str, pixels[:5])) + (", ..." if len(pixels) > 5 else "")
        raise SchemaError(f"AutoML Vision CSV {url!r} mixes units: {len(pixels)} rows have vertices over 1, in "
                          f"pixels (line {shown}), {normalized} are normalized to [0, 1] as AutoML's format says; "
                          f"give every vertex as a fraction of the image's width or height")
    return _frame(columns, ())


# --- shared -------------------------------------------------------------------------------------------------

def _columns(extra: tuple[str, ...]) -> dict[str, list[Any]]:
    """The long form's columns, empty: rows are added a value per column (a dict per row would hold each
    key again, several times the boxes' own size)."""
    return {name: [] for name in (*LONG_FORM, *extra)}


def _add(columns: dict[str, list[Any]], row: Mapping[str, Any]) -> None:
    for name, values in columns.items():
        values.append(row[name])


def _frame(columns: dict[str, list[Any]], extra: tuple[str, ...]) -> pd.DataFrame:
    """The long form: its columns in order, the box edges float, the format's counts nullable integers."""
    names = [*LONG_FORM, *extra]
    df = pd.DataFrame(columns, columns=names) if columns[SPLIT_COLUMN] else pd.DataFrame(columns=names)  # object
    df[list(BOX_COLUMNS)] = df[list(BOX_COLUMNS)].astype("float64")
    for column in extra:
        if column != "area":
            df[column] = df[column].astype("Int64")
    if "area" in extra:
        df["area"] = df["area"].astype("float64")
    return df


def _utf8(data: bytes, what: str, encoding: str = "utf-8") -> str:
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise TFRecorderError(f"{what} is not UTF-8 text: byte 0x{data[e.start]:02x} at line {line}; save it as "
                              f"UTF-8") from None


def _number(value: Any, where: str, name: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise TFRecorderError(f"{where}: {name} {_shown(value)} is not a number") from None
    if not math.isfinite(number):
        raise TFRecorderError(f"{where}: {name} {_shown(value)} is not a finite number")
    return number


def _int(value: str | None, where: str, name: str) -> int | None:
    """A whole number from an XML element's text (``500``, ``500.0``); None when absent or empty."""
    if value is None or not value.strip():
        return None
    try:
        return int(float(value))
    except (ValueError, OverflowError):  # not a number; inf or nan
        raise TFRecorderError(f"{where}: {name} {_shown(value)} is not a whole number") from None


def _shown(value: Any) -> str:
    """``value`` as a message quotes it: its repr, cut short."""
    text = repr(value)
    return text if len(text) <= SHOWN else f"{text[:SHOWN]}... ({len(text)} characters)"


def _json_kind(value: Any) -> str:
    kinds = {dict: "an object", list: "a list", str: "text", bool: "true/false", type(None): "null"}
    return kinds.get(type(value), "a number" if isinstance(value, (int, float)) else type(value).__name__)


def _url(url: str, fs: Any, path: str) -> str:
    return fs.unstrip_protocol(path) if "://" in url else path


def _join(folder: str, name: str) -> str:
    """A name from an annotation file in ``folder``, joined as given (``..`` kept: the fetch's root check sees
    it). A URL name is kept as it is, as is an absolute name under a local folder; under a remote folder an
    absolute name is on that store: a remote annotation file never names a local file."""
    if URL.match(name):
        return name
    if "://" in folder:
        if name.startswith("/"):
            scheme, rest = folder.split("://", 1)
            return f"{scheme}://{rest.split('/', 1)[0]}{name}"
        return posixpath.join(folder, name)
    return os.path.join(folder, name)
