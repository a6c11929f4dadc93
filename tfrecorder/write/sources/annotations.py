"""Annotations (IO edge): object-detection tables in the formats people have - a Pascal VOC folder, COCO
``instances_*.json``, a YOLO dataset (``data.yaml``, Roboflow's export, Darknet), an AutoML Vision
object-detection CSV - read into one long form: a row per box.

The long form's columns (``LONG_FORM``): ``split, image_uri, label, xmin, ymin, xmax, ymax``, then what the
format adds (VOC: ``difficult``, ``truncated``; COCO: ``is_crowd`` (its ``iscrowd``), ``area``) and, where the
format records it, the size of the image the boxes were drawn on (``width``, ``height``). A row whose label and box are
empty is an image without objects. Coordinates are box edges in pixels counted from 0 (VOC's 1-based
inclusive pixels and COCO's ``[x, y, w, h]`` are turned into edges), or normalized to [0, 1] (AutoML; YOLO, whose
centres and sizes are turned into edges, its units said in ``Annotations.box_units``).

What comes in is untrusted and is checked as it is read: a wrong entry (an id, a file name, a size, a box) is a
one-line error naming the file, the entry and what is wrong, never a traceback; nothing is dropped without a
word (two images under one id, an annotation whose image is not listed, a box without a label, an AutoML file
in two units are SchemaErrors). VOC XML is parsed with defusedxml: a DTD or entity is refused. The dataset's
root travels with the long form in its ``Annotations`` (annotated.py): every name an annotation file gives must
resolve inside it, which the fetch enforces (``outside_folder``).

One reader per format, each building the long form (``long_form``): ``voc``, ``coco``, ``yolo``, ``automl``. This module
picks the reader for a path, roots what it read, and tells ``convert`` whether a source is annotations at all.
"""

from __future__ import annotations

import logging
import os
import posixpath
from dataclasses import replace
from typing import Any

import pandas as pd

from tfrecorder.dataset.storage import filesystem, open_url
from tfrecorder.errors import TFRecorderError
from tfrecorder.write.sources.annotated import Annotations
from tfrecorder.write.sources.automl import automl_like, read_automl
from tfrecorder.write.sources.coco import read_coco
from tfrecorder.write.sources.long_form import annotation_folder, path_url
from tfrecorder.write.sources.voc import read_voc, read_voc_segmentation
from tfrecorder.write.sources.yolo import read_yolo, yolo_file

logger = logging.getLogger(__name__)


def read_annotations(path: str, images_dir: str | None = None, task: str = "auto") -> pd.DataFrame:
    """Read object-detection annotations into a DataFrame of one row per box (``LONG_FORM``), or a VOC
    folder's segmentation masks into a row per image.

    Args:
        path: a Pascal VOC folder (``Annotations/*.xml`` beside ``JPEGImages/``, or XML files beside the
            images, as labelImg writes them), a COCO ``instances_*.json``, a YOLO dataset (an Ultralytics
            ``data.yaml`` or its folder, Roboflow's export of one, a Darknet folder of ``obj.names`` and
            ``train.txt``), or an AutoML Vision object-detection CSV (headerless:
            ``TRAIN,gs://b/img.jpg,car,0.1,0.2,,,0.3,0.4,,``, or its 4-vertex form). Local, gs:// or any fsspec
            URL.
        images_dir: where the images are, when not where the format says (VOC: ``JPEGImages/`` or beside
            the XML; COCO: beside the JSON, or ``images/`` there; YOLO: the dataset's root its splits are
            read from, instead of data.yaml's ``path`` or folder).
        task: ``"detection"`` (VOC's ``Annotations/``), ``"segmentation"`` (VOC's ``SegmentationClass/``
            palette PNGs: ``split, image_uri, mask_uri``, splits from ``ImageSets/Segmentation``), or
            ``"auto"``: a VOC folder's boxes where it has ``Annotations/``, else its masks.

    Returns:
        The boxes: ``split, image_uri, label, xmin, ymin, xmax, ymax`` (pixels from 0 for VOC and COCO,
        normalized for AutoML and YOLO) and the format's own columns (VOC ``difficult``, ``truncated``; COCO
        ``is_crowd``, ``area``; the annotated image's ``width``, ``height``; COCO's and YOLO pose's
        ``keypoints``). An image without objects is one row with an empty label and box. Splits: VOC's
        ``ImageSets/Main/{train,val,test}.txt`` (``trainval``: TRAIN or VALIDATION by a stable hash of the image
        id); COCO's from the file name (``instances_val2017.json``: VALIDATION); YOLO's train, val (or valid) and
        test; AutoML's own; else UNASSIGNED. A YOLO label file's bad line keeps its image's rows and names the
        line in ``attrs``: ``convert`` makes that image a row error (``bad_annotation``).

    Examples:
        >>> import json
        >>> coco = {"images": [{"id": 1, "file_name": "a.jpg", "width": 64, "height": 48}],
        ...         "annotations": [{"image_id": 1, "bbox": [8, 4, 16, 20], "category_id": 3, "iscrowd": 0,
        ...                          "area": 320.0}],
        ...         "categories": [{"id": 3, "name": "cat"}]}
        >>> _ = (tmp_path / "instances_train.json").write_text(json.dumps(coco))
        >>> boxes = tfrecorder.read_annotations(str(tmp_path / "instances_train.json"))
        >>> boxes[["split", "label", "xmin", "ymin", "xmax", "ymax"]].values.tolist()
        [['TRAIN', 'cat', 8.0, 4.0, 24.0, 24.0]]
    """
    return _read_logged(os.fspath(path), images_dir, task).as_frame()  # a DataFrame: what was found in its attrs


def _read_logged(url: str, images_dir: str | None, task: str = "auto") -> Annotations:
    """What the reader for ``url`` found, its warnings logged: said once, here (``Annotations.logged``),
    as convert says them only of a table no one has read yet."""
    if task not in ("auto", "detection", "segmentation"):
        raise TFRecorderError(f"task={task!r}: use 'auto', 'detection' or 'segmentation'")
    found = _read(url, images_dir, task)
    for warning in found.warnings:
        logger.warning("%s", warning)
    return replace(found, logged=True) if found.warnings or found.skipped else found


def _read(url: str, images_dir: str | None, task: str) -> Annotations:
    fs, fs_path = filesystem(url)
    if not fs.exists(fs_path):
        raise TFRecorderError(f"annotations {url!r} do not exist")
    yolo = yolo_file(url)
    if yolo is not None:
        fs, yolo_path = filesystem(yolo)
        return _rooted(read_yolo(yolo, images_dir), url, images_dir, path_url(yolo, fs, posixpath.dirname(yolo_path)))
    if fs.isdir(fs_path):
        root = fs_path.rstrip("/")
        if task == "segmentation" or (task == "auto" and fs.isdir(f"{root}/SegmentationClass")
                                      and not fs.isdir(f"{root}/Annotations")):
            return _rooted(read_voc_segmentation(url, images_dir), url, images_dir, path_url(url, fs, root))
        return _rooted(read_voc(url, images_dir), url, images_dir, path_url(url, fs, root))
    if url.lower().endswith(".json"):
        return _rooted(read_coco(url, images_dir), url, images_dir, annotation_folder(url))
    return Annotations(read_automl(url))  # no root: AutoML's format names every image by its full gs:// URI


def _rooted(found: Annotations, url: str, images_dir: str | None, folder: str) -> Annotations:
    """``found`` with the dataset's root the fetch checks names against: ``images_dir`` when given, else
    ``folder`` (the VOC folder, or the annotation file's folder or its parent) - an absolute local path, or a
    URL - and the annotation file or folder as given (``url``)."""
    root = images_dir if images_dir is not None else folder
    root = root.rstrip("/") if "://" in root else os.path.abspath(root)
    return replace(found, root=root, named_by=url)


def annotation_table(source: Any, images_dir: str | None = None) -> Annotations | None:
    """What ``source`` holds, read as ``read_annotations`` reads it (``images_dir`` as it takes it), when it is
    annotations ``convert`` takes directly - a Pascal VOC folder (``Annotations/``, or labelImg's XML files beside
    the images), a ``.json`` file (COCO), a YOLO dataset (a ``.yaml`` file, a folder it describes, a Darknet
    folder), or a headerless CSV of AutoML Vision's object-detection width - else None
    (any other table or folder; with ``images_dir``, a TFRecorderError: it names only annotation files' images)."""
    found = _annotation_url(source)
    if found is None:
        if images_dir is not None:
            raise TFRecorderError(f"images_dir={images_dir!r}: it says where the images of an annotation file (a VOC "
                                  f"folder, a COCO .json, an AutoML detection CSV) are; this source is a table, "
                                  f"whose image_uri column names its images itself")
        return None
    return _read_logged(found, images_dir)


def _annotation_url(source: Any) -> str | None:
    """``source``'s URL when it is annotations ``convert`` reads with ``read_annotations``, else None."""
    if not isinstance(source, (str, os.PathLike)) or any(c in os.fspath(source) for c in "*?["):
        return None
    url = os.fspath(source)
    fs, path = filesystem(url)
    if not fs.exists(path):
        return None
    if yolo_file(url) is not None:
        return url
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
        if automl_like(first.split(",")):
            return url
    return None
