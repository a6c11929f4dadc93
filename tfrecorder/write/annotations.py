"""Annotations (IO edge): object-detection tables in the formats people have - a Pascal VOC folder, COCO
``instances_*.json``, an AutoML Vision object-detection CSV - read into one long form: a row per box.

The long form's columns (``LONG_FORM``): ``split, image_uri, label, xmin, ymin, xmax, ymax``, then what the
format adds (VOC: ``difficult``, ``truncated``; COCO: ``is_crowd`` (its ``iscrowd``), ``area``) and, where the
format records it, the size of the image the boxes were drawn on (``width``, ``height``). A row whose label and box are
empty is an image without objects. Coordinates are box edges in pixels counted from 0 (VOC's 1-based
inclusive pixels and COCO's ``[x, y, w, h]`` are turned into edges), or normalized to [0, 1] (AutoML).
"""

from __future__ import annotations

import json
import os
import posixpath
import xml.etree.ElementTree as ElementTree
from collections.abc import Mapping
from typing import Any

import pandas as pd

from tfrecorder.dataset.storage import filesystem, open_url
from tfrecorder.errors import TFRecorderError
from tfrecorder.schema import IMAGE_COLUMN, LABEL_COLUMN, MASK_COLUMN, SPLIT_COLUMN
from tfrecorder.write.splits import DEFAULT_FRACTIONS, TEST, TRAIN, UNASSIGNED, VALIDATION, hash_fraction

BOX_COLUMNS = ("xmin", "ymin", "xmax", "ymax")
LONG_FORM = (SPLIT_COLUMN, IMAGE_COLUMN, LABEL_COLUMN, *BOX_COLUMNS)
SIZE_COLUMNS = ("width", "height")  # the image the boxes were drawn on, as the annotation says
VOC_SPLITS = {"train": TRAIN, "val": VALIDATION, "test": TEST}  # ImageSets/Main/<name>.txt
COCO_SPLITS = {"train": TRAIN, "val": VALIDATION, "test": TEST}  # instances_<name>2017.json
AUTOML_WIDTH = 11  # split, image, label, then x,y of 4 vertices: 2-vertex rows leave two pairs empty


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
            return _voc_segmentation(url, images_dir)
        return _voc(url, images_dir)
    if url.lower().endswith(".json"):
        return _coco(url, images_dir)
    return _automl(url)


def annotation_table(source: Any) -> pd.DataFrame | None:
    """``source`` read with ``read_annotations`` when it is annotations ``convert`` takes directly - a Pascal
    VOC folder (``Annotations/``, or labelImg's XML files beside the images), a ``.json`` file (COCO), or a
    headerless CSV of AutoML Vision's object-detection width - else None (any other table or folder)."""
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
        return read_annotations(url) if voc else None
    if url.lower().endswith(".json"):
        return read_annotations(url)
    if url.lower().endswith(".csv"):
        with open_url(url) as f:
            first = f.read(65536).split(b"\n", 1)[0].decode("utf-8-sig", "replace").strip()
        cells = first.split(",")
        if len(cells) == AUTOML_WIDTH and cells[0].strip().upper() in (TRAIN, VALIDATION, TEST, UNASSIGNED):
            return read_annotations(url)
    return None


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
    splits = _voc_splits(fs, root)
    rows: list[dict[str, Any]] = []
    for xml in files:
        with fs.open(xml, "rb") as f:
            try:
                tree = ElementTree.parse(f).getroot()
            except ElementTree.ParseError as e:
                raise TFRecorderError(f"Pascal VOC annotation {_url(url, fs, xml)!r} is not XML: {e}") from e
        name = tree.findtext("filename") or posixpath.basename(xml)[:-4] + ".jpg"
        image_id = posixpath.splitext(name)[0]
        folder = images_dir if images_dir is not None else _url(url, fs, posixpath.dirname(xml))
        image = {SPLIT_COLUMN: splits.get(image_id, UNASSIGNED), IMAGE_COLUMN: _join(folder, name),
                 "width": _int(tree.findtext("size/width")), "height": _int(tree.findtext("size/height"))}
        objects = tree.findall("object")
        for obj in objects:
            box = obj.find("bndbox")
            where = f"{_url(url, fs, xml)}: object {obj.findtext('name')!r}"
            edges = [_number(box.findtext(edge) if box is not None else None, where, edge) for edge in BOX_COLUMNS]
            # VOC counts pixels from 1, both ends included: as edges from 0, xmin and ymin move back one
            rows.append({**image, LABEL_COLUMN: (obj.findtext("name") or "").strip(),
                         "xmin": edges[0] - 1, "ymin": edges[1] - 1, "xmax": edges[2], "ymax": edges[3],
                         "difficult": _int(obj.findtext("difficult")) or 0,
                         "truncated": _int(obj.findtext("truncated")) or 0})
        if not objects:
            rows.append({**image, LABEL_COLUMN: None, **dict.fromkeys(BOX_COLUMNS),
                         "difficult": None, "truncated": None})
    return _frame(rows, ("difficult", "truncated", *SIZE_COLUMNS))


def _voc_segmentation(url: str, images_dir: str | None) -> pd.DataFrame:
    """A VOC folder's ``SegmentationClass/*.png`` (palette PNGs of class ids, 255 the border to ignore), each
    with its photo from ``JPEGImages/``: ``split, image_uri, mask_uri``, splits from ImageSets/Segmentation."""
    fs, root = filesystem(url)
    root = root.rstrip("/")
    masks = sorted(p for p in fs.ls(f"{root}/SegmentationClass", detail=False) if p.lower().endswith(".png"))
    if not masks:
        raise TFRecorderError(f"{url!r}: SegmentationClass/ holds no PNG masks")
    images = images_dir if images_dir is not None else _url(url, fs, f"{root}/JPEGImages")
    splits = _voc_splits(fs, root, "Segmentation")
    rows = []
    for mask in masks:
        image_id = posixpath.splitext(posixpath.basename(mask))[0]
        rows.append({SPLIT_COLUMN: splits.get(image_id, UNASSIGNED), IMAGE_COLUMN: _join(images, f"{image_id}.jpg"),
                     MASK_COLUMN: _url(url, fs, mask)})
    return pd.DataFrame(rows, columns=[SPLIT_COLUMN, IMAGE_COLUMN, MASK_COLUMN])


def _voc_splits(fs: Any, root: str, task: str = "Main") -> dict[str, str]:
    """Image id -> split from ImageSets/<task>/{train,val,test,trainval}.txt (trainval: TRAIN or VALIDATION by
    a stable hash of the id, in the default fractions' proportion)."""
    main = f"{root}/ImageSets/{task}"
    found: dict[str, str] = {}
    for name in ("trainval", *VOC_SPLITS):  # train/val/test, where given, over trainval's guess
        path = f"{main}/{name}.txt"
        if not fs.exists(path):
            continue
        with fs.open(path, "rb") as f:
            ids = [line.split()[0] for line in f.read().decode("utf-8").splitlines() if line.strip()]
        for image_id in ids:
            if name == "trainval":
                train = DEFAULT_FRACTIONS[0] / (DEFAULT_FRACTIONS[0] + DEFAULT_FRACTIONS[1])
                found[image_id] = TRAIN if hash_fraction(image_id) < train else VALIDATION
            else:
                found[image_id] = VOC_SPLITS[name]
    return found


# --- COCO ---------------------------------------------------------------------------------------------------

def _coco(url: str, images_dir: str | None) -> pd.DataFrame:
    with open_url(url) as f:
        try:
            data = json.loads(f.read().decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise TFRecorderError(f"COCO annotations {url!r} are not JSON: {e}") from e
    if not isinstance(data, Mapping) or not isinstance(data.get("images"), list):
        raise TFRecorderError(f"{url!r} is not COCO instances JSON: it has no 'images' list")
    categories = {c["id"]: c["name"] for c in data.get("categories", [])}
    split = _coco_split(url)
    folder = images_dir if images_dir is not None else _coco_images(url)
    by_image: dict[Any, list[Mapping[str, Any]]] = {}
    for annotation in data.get("annotations", []):
        by_image.setdefault(annotation["image_id"], []).append(annotation)
    rows: list[dict[str, Any]] = []
    for image in data["images"]:
        base = {SPLIT_COLUMN: split, IMAGE_COLUMN: _join(folder, image["file_name"]),
                "width": image.get("width"), "height": image.get("height")}
        annotations = by_image.get(image["id"], [])
        for annotation in annotations:
            where = f"{url}: annotation {annotation.get('id', '?')} of image {image['file_name']!r}"
            if annotation.get("category_id") not in categories:
                raise TFRecorderError(f"{where}: category_id {annotation.get('category_id')!r} is not in "
                                      f"'categories'")
            x, y, w, h = (_number(v, where, "bbox") for v in _four(annotation.get("bbox"), where))
            rows.append({**base, LABEL_COLUMN: categories[annotation["category_id"]],
                         "xmin": x, "ymin": y, "xmax": x + w, "ymax": y + h,
                         "is_crowd": int(annotation.get("iscrowd", 0)), "area": annotation.get("area")})
        if not annotations:
            rows.append({**base, LABEL_COLUMN: None, **dict.fromkeys(BOX_COLUMNS), "is_crowd": None, "area": None})
    return _frame(rows, ("is_crowd", "area", *SIZE_COLUMNS))


def _coco_split(url: str) -> str:
    """The split a COCO file's name says: instances_train2017.json is TRAIN; UNASSIGNED when it says none."""
    stem = posixpath.basename(url).lower().removesuffix(".json")
    for word, split in COCO_SPLITS.items():
        if f"_{word}" in stem or stem.startswith(word):
            return split
    return UNASSIGNED


def _coco_images(url: str) -> str:
    """Where a COCO file's images are: ``images/`` beside it if there is one, else its own folder."""
    parent = posixpath.dirname(url) if "://" in url else os.path.dirname(os.path.abspath(url))
    fs, path = filesystem(parent)
    return _join(parent, "images") if fs.isdir(f"{path.rstrip('/')}/images") else parent


def _four(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list) or len(value) != 4:
        raise TFRecorderError(f"{where}: bbox {value!r} is not [x, y, width, height]")
    return value


# --- AutoML Vision CSV --------------------------------------------------------------------------------------

def _automl(url: str) -> pd.DataFrame:
    """AutoML Vision's object-detection CSV: ``set,image,label,x1,y1,x2,y2,x3,y3,x4,y4`` normalized, with the
    2-vertex form's empty pairs (``0.1,0.2,,,0.3,0.4,,``); a row of just ``set,image`` is an image without
    objects."""
    with open_url(url) as f:
        table = pd.read_csv(f, header=None, dtype=str, keep_default_na=False, skipinitialspace=True,
                            names=range(AUTOML_WIDTH), encoding="utf-8-sig")
    rows = []
    for line, values in enumerate(table.itertuples(index=False, name=None), 1):
        cells = [v.strip() for v in values]
        if cells[0].upper() not in (TRAIN, VALIDATION, TEST, UNASSIGNED) or not cells[1]:
            raise TFRecorderError(f"{url!r} line {line}: not an AutoML Vision object-detection row (set, image "
                                  f"URI, label, box): {','.join(values)!r}")
        where = f"{url!r} line {line}"
        numbers = [None if not c else _number(c, where, "vertex") for c in cells[3:]]
        given = [(x, y) for x, y in zip(numbers[0::2], numbers[1::2]) if x is not None and y is not None]
        if not cells[2] and not given:
            rows.append({SPLIT_COLUMN: cells[0].upper(), IMAGE_COLUMN: cells[1], LABEL_COLUMN: None,
                         **dict.fromkeys(BOX_COLUMNS)})
            continue
        if len(given) < 2 or not cells[2]:
            raise TFRecorderError(f"{where}: a box needs a label and two opposite vertices (x_min,y_min and "
                                  f"x_max,y_max), got {','.join(values)!r}")
        xs, ys = [x for x, _ in given], [y for _, y in given]
        rows.append({SPLIT_COLUMN: cells[0].upper(), IMAGE_COLUMN: cells[1], LABEL_COLUMN: cells[2],
                     "xmin": min(xs), "ymin": min(ys), "xmax": max(xs), "ymax": max(ys)})
    return _frame(rows, ())


# --- shared -------------------------------------------------------------------------------------------------

def _frame(rows: list[dict[str, Any]], extra: tuple[str, ...]) -> pd.DataFrame:
    """The long form: its columns in order, the box edges float, the format's counts nullable integers."""
    df = pd.DataFrame(rows, columns=[*LONG_FORM, *extra])
    df[list(BOX_COLUMNS)] = df[list(BOX_COLUMNS)].astype("float64")
    for column in extra:
        if column != "area":
            df[column] = df[column].astype("Int64")
    if "area" in extra:
        df["area"] = df["area"].astype("float64")
    return df


def _number(value: Any, where: str, name: str) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise TFRecorderError(f"{where}: {name} {value!r} is not a number") from None


def _int(value: str | None) -> int | None:
    try:
        return int(float(value)) if value not in (None, "") else None
    except ValueError:
        return None


def _url(url: str, fs: Any, path: str) -> str:
    return fs.unstrip_protocol(path) if "://" in url else path


def _join(folder: str, name: str) -> str:
    if "://" in folder:
        return posixpath.join(folder, name)
    return os.path.join(folder, name)
