"""YOLO (IO edge): a YOLO dataset read into the long form, a row per object - an Ultralytics ``data.yaml`` (its
``path``, ``train``/``val``/``test`` as folders, ``.txt`` lists of images or lists of both, ``names`` as a list or
a dict, ``kpt_shape`` for pose), Roboflow's export of one (``train/images``, ``valid/images``, ``test/images``
beside a ``data.yaml`` that names them ``../train/images``), or a Darknet folder (``obj.names``, ``train.txt``,
and a label file beside each image, as CVAT's "YOLO 1.1" writes it).

Each image's labels are the ``.txt`` file at its path with the last ``images`` folder replaced by ``labels``
(Ultralytics' rule; beside the image when there is none), read by threads from an object store. A line
``class cx cy w h`` is a box, ``class x1 y1 ... xn yn`` a polygon (its box the extent of its points, its instance
mask the polygon: the ``instance_mask`` column, COCO's segmentation JSON), and with ``kpt_shape: [K, 2|3]``
``class cx cy w h`` then K points are keypoints. Coordinates are
normalized to the image as Ultralytics loads it (EXIF orientation applied), so the boxes are normalized edges in
the displayed frame (``Annotations.box_units``). A bad line (a class outside ``names``, a coordinate beyond [0, 1] by
more than ``TOLERANCE``, an odd polygon, a word that is not a number, the wrong count of values) refuses its image
only: its rows stay, and the fetch makes it a row error ``bad_annotation`` naming the file and line (the root's
``refused``). Every file under the root is a row, read to make one, or named in the result's ``skipped``, as is
a link to a folder outside the root (never listed).
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Mapping
from typing import Any

import numpy as np
import yaml

from tfrecorder.dataset.foreign import distinct_names
from tfrecorder.dataset.storage import filesystem
from tfrecorder.errors import SchemaError, TFRecorderError
from tfrecorder.schema import IMAGE_COLUMN, IMAGE_EXTENSIONS, LABEL_COLUMN, SPLIT_COLUMN
from tfrecorder.types import INSTANCE_MASK_COLUMN, KEYPOINTS_COLUMN
from tfrecorder.write.settings import Root
from tfrecorder.write.sources.annotated import Annotations, keypoint_names
from tfrecorder.write.sources.folders import IMAGES_BESIDE_LABELS, YAML_EXTENSIONS, yolo_evidence
from tfrecorder.write.sources.long_form import (
    BOX_COLUMNS,
    LONG_FORM,
    long_frame,
    path_url,
    quoted,
    utf8_text,
    windows_name,
)
from tfrecorder.write.sources.yolo_labels import Boxes, Found, YoloDataset, is_local, label_path, read_labels
from tfrecorder.write.splits import TEST, TRAIN, UNASSIGNED, VALIDATION

DARKNET_NAMES = ("obj.names", "obj.data")  # a Darknet folder's
LABEL_STUDIO_NAMES = "classes.txt"  # Label Studio's YOLO export: its classes beside images/ and labels/, no splits
YAML_SPLITS = {"train": TRAIN, "val": VALIDATION, "valid": VALIDATION, "validation": VALIDATION, "test": TEST}
DARKNET_LISTS = {"train": TRAIN, "valid": VALIDATION, "val": VALIDATION, "test": TEST}  # <name>.txt, obj.data keys
SHOWN_FILES = 5  # files a note names


def yolo_file(url: str) -> str | None:
    """The file a YOLO dataset at ``url`` is read by: ``url`` itself when it is a YAML file, a folder's Darknet
    ``obj.data``/``obj.names``, or the YAML file that describes it (``data.yaml``, or one with ``names:`` or
    ``nc:``); None for anything else. A folder of ``images/`` beside ``labels/`` without one is refused: nothing
    names its classes."""
    fs, path = filesystem(url)
    if not fs.isdir(path):
        return url if url.lower().endswith(YAML_EXTENSIONS) else None
    root = path.rstrip("/")
    names = {posixpath.basename(p.rstrip("/")) for p in fs.ls(root, detail=False)}
    found = next((n for n in DARKNET_NAMES if n in names), None) or yolo_evidence(fs, root)
    if not found:
        return None
    if found == IMAGES_BESIDE_LABELS and LABEL_STUDIO_NAMES in names:
        found = LABEL_STUDIO_NAMES
    if found in names:
        return f"{url.rstrip('/')}/{found}" if "://" in url else os.path.join(url, found)
    raise TFRecorderError(f"source {url!r} looks like a YOLO dataset ({found}) but has no data.yaml naming its "
                          f"classes: add one beside them (names: [...], train: ..., val: ...) and give it, or "
                          f"its folder")


def read_yolo(url: str, images_dir: str | None) -> Annotations:
    """The long form of the YOLO dataset read by ``url`` (a data.yaml, or a Darknet ``obj.data``/``obj.names``):
    a row per object, each image without objects one row with no label and box; ``keypoints`` with
    ``kpt_shape``. Beside it, the images a bad line refuses and those its lists name outside the root, the
    boxes' units, the class and keypoint names, and the notes the result gives (``annotations._rooted`` adds the
    root)."""
    fs, path = filesystem(url)
    darknet = posixpath.basename(path) in DARKNET_NAMES
    if posixpath.basename(path) == LABEL_STUDIO_NAMES:
        dataset = _label_studio(fs, url, path, images_dir)
    else:
        dataset = _darknet(fs, url, path, images_dir) if darknet else _ultralytics(fs, url, path, images_dir)
    if not dataset.images:
        where = "its images/ folder has no image" if posixpath.basename(path) == LABEL_STUDIO_NAMES else \
            f"its splits {'(train.txt, valid.txt, test.txt)' if darknet else '(train, val, test)'} are missing or empty"
        raise TFRecorderError(f"YOLO dataset {url!r} names no image: {where}")
    guard = Root(path_url(url, fs, dataset.root), url)
    labels = read_labels(dataset, guard)
    polygons = sum(shapes for *_, shapes in labels.found)
    extra = (*((KEYPOINTS_COLUMN,) if dataset.kpt_shape else ()), *((INSTANCE_MASK_COLUMN,) if polygons else ()))
    uris = [path_url(url, fs, image) for image in dataset.images]
    refused: dict[str, str] = {}
    for image, uri, (label_file, _, problems, _) in zip(dataset.images, uris, labels.found):
        if problems:
            more = f" (and {len(problems) - 1} more bad lines)" if len(problems) > 1 else ""
            refused[uri] = f"{path_url(url, fs, label_file or label_path(image, dataset.root))} {problems[0]}{more}"
    if labels.boxes is not None and not any(objects for _, objects, _, _ in labels.found):
        columns = _box_columns(labels.boxes, list(dataset.images.values()), uris)
    else:
        columns = _object_columns(labels.merged(), list(dataset.images.values()), uris, extra)
    frame = long_frame(columns, extra)
    outside = {uri: path_url(url, fs, listed) for uri, listed in  # an image outside: named by its list
               ((path_url(url, fs, image), listed) for image, listed in dataset.listed_by.items())
               if not guard.holds(uri)}
    if dataset.no_area:
        lines = sorted(dataset.no_area)
        shown = ", ".join(f"{path_url(url, fs, f)} line {n}" for f, n in lines[:SHOWN_FILES])
        dataset.warnings.append(f"{len(lines)} label lines are boxes of no area (a width or height of 0), not "
                                f"converted, as Ultralytics drops them when it trains: {shown}"
                                f"{' ...' if len(lines) > SHOWN_FILES else ''}")
    skipped, orphans = _skipped(dataset, {f for f, _, _, _ in labels.found if f is not None})
    if orphans:
        dataset.warnings.append(f"{len(orphans)} label files under {dataset.root!r} have no image in any split, "
                                f"their objects not converted: {_shown(orphans)}")
    if skipped:
        dataset.warnings.append(f"{len(skipped)} files under {dataset.root!r} are not rows and were skipped: "
                                f"{_shown(skipped)} (result.skipped lists them)")
    # its names, in their ids' order, are the label vocabulary: with ids 0 to n-1 (as Ultralytics numbers them)
    # class 0 stays id 0 and an unused class keeps its id; ids with gaps keep their order
    return Annotations(frame, refused=refused, listed=outside, box_units="normalized",
                       label_names=tuple(dataset.names[i] for i in sorted(dataset.names)),
                       keypoints=keypoint_names(dataset.kpt_names, None), warnings=tuple(dataset.warnings),
                       skipped=tuple(skipped))


def _object_columns(found: list[Found], splits: list[str], uris: list[str], extra: tuple[str, ...]) -> dict[str, Any]:
    """The long form's columns of each image's objects (one row of no label and no box for an image without)."""
    none = [(None, (None,) * 4, None, None)]
    rows = []  # a tuple a row, made columns once: thousands of images, a few rows each
    for split, uri, (_, objects, _, _) in zip(splits, uris, found):
        rows += [(split, uri, label, *edges, points, polygon) for label, edges, points, polygon in objects or none]
    kept = (*LONG_FORM, *extra)
    return {name: list(values) for name, values in zip((*LONG_FORM, KEYPOINTS_COLUMN, INSTANCE_MASK_COLUMN),
                                                       zip(*rows)) if name in kept}


def _box_columns(boxes: Boxes, splits: list[str], uris: list[str]) -> dict[str, Any]:
    """The long form's columns of boxes read at once, as ``_object_columns`` makes them: each image's boxes in
    its file's order, one row of no label and no box (NaN) for an image without, made an array at a time."""
    counts = np.bincount(boxes.image, minlength=len(uris))
    rows = np.maximum(counts, 1)
    image = np.repeat(np.arange(len(uris)), rows)
    first = np.cumsum(rows) - rows  # each image's first row
    at = first[boxes.image] + np.arange(len(boxes.image)) - (np.cumsum(counts) - counts)[boxes.image]
    label = np.full(len(image), None, object)
    label[at] = boxes.label
    edges = np.full((len(image), 4), np.nan)
    edges[at] = boxes.edges
    columns = {SPLIT_COLUMN: np.array(splits, object)[image], IMAGE_COLUMN: np.array(uris, object)[image],
               LABEL_COLUMN: label}
    columns.update((name, edges[:, i]) for i, name in enumerate(BOX_COLUMNS))
    return columns


# --- what the dataset's file says -----------------------------------------------------------------------------

def _ultralytics(fs: Any, url: str, path: str, images_dir: str | None) -> YoloDataset:
    data = _yaml(fs, url, path)
    folder = posixpath.dirname(path)
    root = _root(images_dir, folder)
    dataset = YoloDataset(fs, url, root, _names(url, data), read={path})
    given = data.get("path")
    base = root if images_dir is not None else _base(dataset, windows_name(given) if isinstance(given, str) else given,
                                                     folder)
    dataset.kpt_shape, dataset.kpt_names = _kpt_shape(url, data)
    for key, split in YAML_SPLITS.items():
        entries = data.get(key)
        if entries is None or entries == []:
            continue
        for entry in entries if isinstance(entries, list) else [entries]:
            if not isinstance(entry, str) or not entry.strip():
                raise TFRecorderError(f"YOLO data.yaml {url!r}: {key}: {quoted(entry)} is not a folder or a .txt "
                                      f"list of images")
            _add_entry(dataset, key, split, _resolved(fs, base, windows_name(entry.strip())))
    return dataset


def _yaml(fs: Any, url: str, path: str) -> dict[str, Any]:
    with fs.open(path, "rb") as f:
        text = utf8_text(f.read(), f"YOLO data.yaml {url!r}")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        where = getattr(e, "problem_mark", None)
        at = f" at line {where.line + 1}" if where is not None else ""
        raise TFRecorderError(f"{url!r} is not YAML{at}: {getattr(e, 'problem', None) or e}") from None
    if not isinstance(data, Mapping) or not any(k in data for k in YAML_SPLITS) or not (
            "names" in data or "nc" in data):
        raise TFRecorderError(f"{url!r} is not an Ultralytics data.yaml: it needs 'names' (the classes) and "
                              f"'train', 'val' or 'test' (the images)")
    return dict(data)


def _names(url: str, data: Mapping[str, Any]) -> dict[int, str]:
    """Class id -> name from ``names`` (a list, or a dict of ids), or ``class_<i>`` for each of ``nc``."""
    names = data.get("names")
    if names is None:
        count = data.get("nc")
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise TFRecorderError(f"YOLO data.yaml {url!r}: nc {quoted(count)} is not a number of classes")
        return {i: f"class_{i}" for i in range(count)}
    if isinstance(names, list):
        pairs = list(enumerate(names))
    elif isinstance(names, Mapping):
        pairs = list(names.items())
    else:
        raise TFRecorderError(f"YOLO data.yaml {url!r}: names {quoted(names)} is neither a list nor a dict of "
                              f"class ids to names")
    found: dict[int, str] = {}
    for key, name in pairs:
        if not isinstance(key, int) or isinstance(key, bool) or key < 0:
            raise TFRecorderError(f"YOLO data.yaml {url!r}: names: {quoted(key)} is not a class id (0, 1, ...)")
        if not isinstance(name, (str, int, float)) or isinstance(name, bool) or not str(name).strip():
            raise SchemaError(f"YOLO data.yaml {url!r}: class {key} has the name {quoted(name)}: every class needs "
                              f"a name; name it in 'names'")
        found[key] = str(name)
    if not found:  # every label line's class would be a bad line
        raise TFRecorderError(f"YOLO data.yaml {url!r}: names is empty: name the classes the label files' ids stand "
                              f"for (names: [cat, dog])")
    return distinct_names(found)


def _root(images_dir: str | None, folder: str) -> str:
    """The dataset's root: ``images_dir`` where given, else the folder of the file that describes it."""
    return filesystem(images_dir)[1].rstrip("/") if images_dir is not None else folder


def _kpt_shape(url: str, data: Mapping[str, Any]) -> tuple[tuple[int, int] | None, list[str] | None]:
    """``kpt_shape`` as (K, 2 or 3), and the K keypoints' names where ``kpt_names`` gives one list of them."""
    shape = data.get("kpt_shape")
    if shape is None:
        return None, None
    if not (isinstance(shape, list) and len(shape) == 2 and all(isinstance(v, int) for v in shape)
            and shape[0] > 0 and shape[1] in (2, 3)):
        raise TFRecorderError(f"YOLO data.yaml {url!r}: kpt_shape {quoted(shape)} is not [K, 2] or [K, 3] (K "
                              f"keypoints of x y, or x y visibility)")
    given = data.get("kpt_names")
    lists = list(given.values()) if isinstance(given, Mapping) else [given] if isinstance(given, list) else []
    names = lists[0] if lists and all(v == lists[0] for v in lists) else None
    if names is not None and (len(names) != shape[0] or not all(isinstance(n, str) for n in names)):
        names = None
    return (shape[0], shape[1]), names


def _base(dataset: YoloDataset, given: Any, folder: str) -> str:
    """The folder split entries are relative to: data.yaml's ``path`` (absolute, or relative to the yaml's folder)
    where it exists, else the yaml's folder (Ultralytics' rule when there is no ``path``)."""
    if given is None or given == "":
        return folder
    if not isinstance(given, str):
        raise TFRecorderError(f"YOLO data.yaml {dataset.url!r}: path {quoted(given)} is not a folder")
    base = given if given.startswith("/") or "://" in given else posixpath.normpath(posixpath.join(folder, given))
    base = filesystem(base)[1] if "://" in given else base
    if dataset.fs.isdir(base) and not _inside(dataset, base):
        dataset.warnings.append(f"YOLO data.yaml {dataset.url!r}: path {given!r} is outside the dataset's folder "
                                f"{dataset.root!r}, so it was not read: its splits were read from the yaml's own "
                                f"folder (give images_dir= the folder that holds the images to read there)")
        return folder
    if dataset.fs.isdir(base):
        return base.rstrip("/")
    dataset.warnings.append(f"YOLO data.yaml {dataset.url!r}: path {given!r} is not a folder here; its splits were "
                            f"read from the yaml's own folder")
    return folder


def _resolved(fs: Any, base: str, entry: str) -> str:
    """A split entry's path: under ``base`` unless absolute; a ``../`` one that does not exist is taken from
    ``base`` itself, as Ultralytics does (Roboflow's ``../train/images`` beside its data.yaml)."""
    if entry.startswith("/") or "://" in entry:
        return filesystem(entry)[1] if "://" in entry else posixpath.normpath(entry)
    path = posixpath.normpath(posixpath.join(base, entry))  # one spelling of each file: ./images, images//val
    if not fs.exists(path) and entry.startswith("../"):
        return posixpath.normpath(posixpath.join(base, entry[3:]))
    return path


def _add_entry(dataset: YoloDataset, key: str, split: str, path: str) -> None:
    """The images of one split entry: every image under a folder (sorted), or each line of a .txt list; one
    outside the dataset's root (``../``, an absolute path, a link out) is neither listed nor read."""
    fs = dataset.fs
    if fs.exists(path) and not _inside(dataset, path):
        dataset.warnings.append(f"YOLO dataset {dataset.url!r}: {key} names {path_url(dataset.url, fs, path)!r}, "
                                f"outside the dataset's folder {dataset.root!r}: not read, no {split} images from "
                                f"it (give images_dir= the folder that holds them to read there)")
        return
    if fs.isdir(path):
        found = [p for p in _files_under(dataset, path) if p.lower().endswith(IMAGE_EXTENSIONS)]
        for image in found:
            _add_image(dataset, image, split)
    elif fs.isfile(path):
        dataset.read.add(path)
        for image in _listed(dataset, path, darknet=False):
            _add_image(dataset, image, split)
            dataset.listed_by.setdefault(image, path)
    else:
        dataset.warnings.append(f"YOLO dataset {dataset.url!r}: {key} names {path_url(dataset.url, fs, path)!r}, "
                                f"which does not exist: no {split} images from it")


def _add_image(dataset: YoloDataset, image: str, split: str) -> None:
    """``image`` in ``split``; one that two splits name is refused: it would be trained and judged on."""
    given = dataset.images.setdefault(image, split)
    if given != split:
        raise SchemaError(f"YOLO dataset {dataset.url!r}: {path_url(dataset.url, dataset.fs, image)!r} is in both "
                          f"{given} and {split}: name each image in one split")


def _listed(dataset: YoloDataset, path: str, darknet: bool) -> list[str]:
    """The images a .txt list names, one a line: relative ones from the list's folder (Ultralytics' ``./``),
    and, in a Darknet list, without their first folder where they are not there (CVAT writes
    ``data/obj_train_data/a.jpg``, relative to the folder Darknet runs in)."""
    fs = dataset.fs
    with fs.open(path, "rb") as f:
        text = utf8_text(f.read(), f"YOLO image list {path_url(dataset.url, fs, path)!r}")
    folder = posixpath.dirname(path)
    images = []
    for line in text.splitlines():
        name = windows_name(line.strip())
        if not name:
            continue
        if name.startswith("/") or "://" in name:
            images.append(filesystem(name)[1] if "://" in name else name)
            continue
        image = posixpath.normpath(posixpath.join(folder, name))
        if darknet and "/" in name and not fs.exists(image):
            image = posixpath.join(folder, name.split("/", 1)[1])
        images.append(image)
    return images


def _darknet(fs: Any, url: str, path: str, images_dir: str | None) -> YoloDataset:
    """A Darknet folder: ``obj.data`` (``names = data/obj.names``, ``train = data/train.txt``, ...) where there is
    one, else ``obj.names`` and ``train.txt``, ``valid.txt``, ``test.txt`` beside it."""
    folder = posixpath.dirname(path)
    root = _root(images_dir, folder)
    settings = _obj_data(fs, url, f"{folder}/obj.data")
    names_file = _in_folder(fs, folder, settings.get("names", "obj.names"))
    guard = Root(path_url(url, fs, root), url)
    if fs.exists(names_file) and not guard.holds(path_url(url, fs, names_file)):
        raise TFRecorderError(f"Darknet dataset {url!r}: its class names file {settings.get('names', 'obj.names')!r} "
                              f"is outside the dataset's folder {root!r}: not read; put it in the folder")
    if not fs.isfile(names_file):
        raise TFRecorderError(f"Darknet dataset {url!r}: no {settings.get('names', 'obj.names')} naming its classes")
    dataset = YoloDataset(fs, url, root, _names_file(fs, url, names_file, "Darknet"), read={names_file})
    if fs.isfile(f"{folder}/obj.data"):
        dataset.read.add(f"{folder}/obj.data")
    for key, split in DARKNET_LISTS.items():
        listed = _in_folder(fs, folder, settings[key]) if key in settings else f"{folder}/{key}.txt"
        if fs.exists(listed) and not _inside(dataset, listed):
            dataset.warnings.append(f"Darknet dataset {url!r}: {key} names {path_url(url, fs, listed)!r}, outside "
                                    f"the dataset's folder {root!r}: not read, no {split} images from it")
            continue
        if fs.isfile(listed):
            dataset.read.add(listed)
            for image in _listed(dataset, listed, darknet=True):
                _add_image(dataset, image, split)
                dataset.listed_by.setdefault(image, listed)
    return dataset


def _names_file(fs: Any, url: str, path: str, kind: str) -> dict[int, str]:
    """Class id -> name from a file of one name a line (Darknet's ``obj.names``, Label Studio's ``classes.txt``),
    the ids counting its non-blank lines from 0."""
    with fs.open(path, "rb") as f:
        lines = [line.strip() for line in utf8_text(f.read(), f"{path_url(url, fs, path)!r}").splitlines()]
    if not any(lines):  # every label line's class would be a bad line
        raise TFRecorderError(f"{kind} dataset {url!r}: {path_url(url, fs, path)!r} names no class: name the "
                              f"classes, one a line, in the order of the label files' ids")
    return distinct_names(dict(enumerate(n for n in lines if n)))


def _label_studio(fs: Any, url: str, path: str, images_dir: str | None) -> YoloDataset:
    """Label Studio's YOLO export: ``classes.txt`` beside ``images/`` and ``labels/`` (and its ``notes.json``),
    no splits: every image under ``images/`` is UNASSIGNED, split by the conversion's fractions."""
    folder = posixpath.dirname(path)
    root = _root(images_dir, folder)
    dataset = YoloDataset(fs, url, root, _names_file(fs, url, path, "Label Studio"), read={path})
    images = f"{root}/images"
    for image in _files_under(dataset, images) if fs.isdir(images) else []:
        if image.lower().endswith(IMAGE_EXTENSIONS):
            _add_image(dataset, image, UNASSIGNED)
    return dataset


def _obj_data(fs: Any, url: str, path: str) -> dict[str, str]:
    """``obj.data``'s ``key = value`` lines (none when there is no such file)."""
    if not fs.isfile(path):
        return {}
    with fs.open(path, "rb") as f:
        text = utf8_text(f.read(), f"Darknet {path_url(url, fs, path)!r}")
    pairs = (line.split("=", 1) for line in text.splitlines() if "=" in line)
    return {key.strip(): value.strip() for key, value in pairs}


def _inside(dataset: YoloDataset, path: str) -> bool:
    """Whether ``path`` (a file or folder the dataset's own files name) is inside its root, links followed: the
    only place a YOLO dataset's lists, names and images are read from."""
    if dataset.guard is None:
        dataset.guard = Root(path_url(dataset.url, dataset.fs, dataset.root), dataset.url)
    return dataset.guard.holds(path_url(dataset.url, dataset.fs, path))


def _in_folder(fs: Any, folder: str, name: str) -> str:
    """A file obj.data names (``data/train.txt``: relative to where Darknet runs, the folder's parent): in the
    folder, or without its first folder where it is not."""
    name = windows_name(name)
    path = posixpath.join(folder, name)
    if not fs.exists(path) and "/" in name:
        return posixpath.join(folder, name.split("/", 1)[1])
    return path


def _files_under(dataset: YoloDataset, folder: str) -> list[str]:
    """``files_under`` a folder of the dataset: the root walked once (``_skipped`` walks it all), a folder in it
    read from that walk; walked itself where the walk has nothing under that name (a folder spelled another way,
    ``./images/train``, or reached through a link, which a walk does not follow)."""
    root = dataset.root
    if folder != root and not folder.startswith(root + "/"):
        return files_under(dataset.fs, folder)
    if dataset.files is None:
        dataset.files = files_under(dataset.fs, root, dataset.folder_links)
    if folder == root:
        return dataset.files
    prefix = folder.rstrip("/") + "/"
    return [p for p in dataset.files if p.startswith(prefix)] or files_under(dataset.fs, folder, dataset.folder_links)


def files_under(fs: Any, folder: str, folder_links: list[str] | None = None) -> list[str]:
    """Every file under ``folder``, sorted (listed by the system for a local one: fsspec asks each file's
    details); each link to a folder it meets, not followed, added to ``folder_links`` where given."""
    if not is_local(fs):
        return sorted(fs.find(folder))
    found, folders = [], [folder]
    while folders:  # os.walk's files (links to folders neither followed nor files), each path made once
        try:
            with os.scandir(folders.pop()) as entries:
                for entry in entries:
                    if not entry.is_dir():
                        found.append(entry.path)
                    elif not entry.is_symlink():
                        folders.append(entry.path)
                    elif folder_links is not None:
                        folder_links.append(entry.path)
        except OSError:  # a folder that cannot be listed has no files to give, as in os.walk
            continue
    return sorted(found)


# --- every file under the root --------------------------------------------------------------------------------

def _skipped(dataset: YoloDataset, labels: set[str]) -> tuple[list[str], list[str]]:
    """Every file under the root that is no row and was not read to make one, as ``"<path in it> (why)"``, and
    those of them that are label files without an image; a link to a folder outside the root is one too (its
    files are never listed). A local file used under another name (a split folder that is a link: the walk
    names its files by their own folder) is found by its real path."""
    root = dataset.root
    used = set(dataset.images) | labels | dataset.read
    skipped, orphans = [], []
    used_real: set[str] | None = None  # resolved once, and only where a file's name is not in ``used``
    files = _files_under(dataset, root)
    links_out = {link for link in dataset.folder_links if not _inside(dataset, link)}
    for path in sorted([*files, *links_out]) if links_out else files:
        if path in used:
            continue
        if is_local(dataset.fs):
            used_real = used_real if used_real is not None else {os.path.realpath(p) for p in used}
            if os.path.realpath(path) in used_real:
                continue
        inside = path[len(root) + 1:]
        if any(part.startswith(".") for part in inside.split("/")):
            why = "hidden"
        elif path in links_out:
            why = "a link to a folder outside the dataset's root: not read"
        elif path.endswith(".txt") and ("labels" in inside.split("/")[:-1] or posixpath.dirname(path)
                                        in dataset.label_folders):
            why = "a label file without an image"
            orphans.append(inside)
        elif path.lower().endswith(IMAGE_EXTENSIONS):
            why = "an image in no split"
        else:
            why = "not an image nor a label file"
        skipped.append(f"{inside} ({why})")
    return skipped, orphans


def _shown(items: list[str]) -> str:
    return ", ".join(items[:SHOWN_FILES]) + (", ..." if len(items) > SHOWN_FILES else "")
