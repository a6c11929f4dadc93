"""Pascal VOC (IO edge): a VOC folder read into the long form - ``Annotations/*.xml`` (or labelImg's XML files
beside the images) as a row per box, or ``SegmentationClass/*.png`` as a row per image and its mask - with the
splits ``ImageSets/`` lists. The XML is untrusted: parsed with defusedxml, a DTD or entity refused.
"""

from __future__ import annotations

import posixpath
from typing import Any

import pandas as pd
from defusedxml import DefusedXmlException
from defusedxml import ElementTree as SafeElementTree

from tfrecorder.dataset.storage import filesystem
from tfrecorder.errors import SchemaError, TFRecorderError
from tfrecorder.schema import IMAGE_COLUMN, IMAGE_EXTENSIONS, LABEL_COLUMN, MASK_COLUMN, SPLIT_COLUMN
from tfrecorder.write.sources.annotated import Annotations
from tfrecorder.write.sources.folders import hidden_within
from tfrecorder.write.sources.long_form import (
    BOX_COLUMNS,
    SIZE_COLUMNS,
    add_row,
    empty_columns,
    finite_number,
    join_name,
    long_frame,
    path_url,
    quoted,
    utf8_text,
)
from tfrecorder.write.splits import DEFAULT_FRACTIONS, DISCARD, TEST, TRAIN, UNASSIGNED, VALIDATION, hash_fraction

VOC_SPLITS = {"train": TRAIN, "val": VALIDATION, "test": TEST}  # ImageSets/Main/<name>.txt


def read_voc(url: str, images_dir: str | None) -> Annotations:
    fs, root = filesystem(url)
    root = root.rstrip("/")
    annotations = f"{root}/Annotations"
    xml_dir = annotations if fs.isdir(annotations) else root
    # labelImg's layout (XML beside each image) in its subfolders too: a folder of batches loses none of them
    under = None if xml_dir == annotations else fs.find(root)  # the root walked once, where it is walked
    listed = fs.ls(xml_dir, detail=False) if under is None else under
    files = sorted(p for p in listed if p.lower().endswith(".xml") and not hidden_within(p[len(root) + 1:]))
    if not files:
        raise TFRecorderError(f"{url!r} is not a Pascal VOC folder: no Annotations/*.xml, nor XML files in it")
    given_dir = images_dir
    if images_dir is None and fs.isdir(f"{root}/JPEGImages"):
        images_dir = path_url(url, fs, f"{root}/JPEGImages")
    splits, warnings = _voc_splits(url, fs, root)
    columns = empty_columns(("difficult", "truncated", *SIZE_COLUMNS))
    unlisted: list[str] = []
    named_by: dict[str, str] = {}  # each image named, the first XML that names it
    refused: dict[str, str] = {}  # an image two XMLs name (one copied or renamed): its rows, bad_annotation
    for xml in files:
        where = path_url(url, fs, xml)
        tree = _voc_xml(fs, xml, where)
        name = tree.findtext("filename") or posixpath.basename(xml)[:-4] + ".jpg"
        image_id = posixpath.splitext(name)[0]
        folder = images_dir if images_dir is not None else path_url(url, fs, posixpath.dirname(xml))
        # the lists name VOC's image ids, each its XML's name (and its image's): they say which are used
        stem = posixpath.splitext(posixpath.basename(xml))[0]
        split = splits.get(stem) or splits.get(image_id, DISCARD if splits else UNASSIGNED)
        if split == DISCARD:
            unlisted.append(stem)
        uri = join_name(folder, name)
        if uri in named_by:  # merged, its record would hold the other picture's boxes too, off their objects
            refused[uri] = (f"is named by two annotation XMLs, {named_by[uri]} and {where} (<filename> {name!r}): "
                            f"one was copied or renamed; give each XML its own image's <filename>")
        named_by.setdefault(uri, where)
        image = {SPLIT_COLUMN: split, IMAGE_COLUMN: uri,
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
            edges = [finite_number(box.findtext(edge) if box is not None else None, at, edge) for edge in BOX_COLUMNS]
            if edges[0] > edges[2] or edges[1] > edges[3]:  # named here: the table's check names a row of its own
                raise SchemaError(f"Pascal VOC annotation {where!r}: object {obj.findtext('name')!r}: its box "
                                  f"(xmin {edges[0]:g}, ymin {edges[1]:g}, xmax {edges[2]:g}, ymax {edges[3]:g}) "
                                  f"needs xmin <= xmax and ymin <= ymax")
            # VOC counts pixels from 1, both ends included: as edges from 0, xmin and ymin move back one
            add_row(columns, {**image, LABEL_COLUMN: label,
                           "xmin": edges[0] - 1, "ymin": edges[1] - 1, "xmax": edges[2], "ymax": edges[3],
                           "difficult": _int(obj.findtext("difficult"), at, "<difficult>") or 0,
                           "truncated": _int(obj.findtext("truncated"), at, "<truncated>") or 0})
        if not objects:
            add_row(columns, {**image, LABEL_COLUMN: None, **dict.fromkeys(BOX_COLUMNS),
                           "difficult": None, "truncated": None})
    frame = long_frame(columns, ("difficult", "truncated", *SIZE_COLUMNS))
    if unlisted:
        warnings.append(f"{len(unlisted)} annotated images of {url!r} are in no ImageSets/Main list (train, val, "
                        f"test, trainval), which say the splits: discarded ({', '.join(unlisted[:5])}"
                        f"{', ...' if len(unlisted) > 5 else ''})")
    # images elsewhere (images_dir=) are not the folder's to name
    skipped = _unannotated(root, set(named_by), fs.find(root) if under is None else under) if given_dir is None else []
    if skipped:
        warnings.append(f"{len(skipped)} images under {url!r} have no annotation XML and were skipped: "
                        f"{', '.join(skipped[:5])}{', ...' if len(skipped) > 5 else ''} (result.skipped lists them)")
    return Annotations(frame, refused={uri: f"{uri} {why}" for uri, why in refused.items()} if refused else None,
                       warnings=tuple(warnings), skipped=tuple(skipped) if warnings else ())


def _unannotated(root: str, named: set[str], under: list[str]) -> list[str]:
    """The images in the folders the dataset's images are in (``JPEGImages/``, or the folders of its XML files)
    that no XML names: ``"<path in the root> (an image without an annotation XML)"``."""
    paths = {filesystem(n)[1] for n in named}
    folders = {posixpath.dirname(p) for p in paths}
    return [f"{p[len(root) + 1:]} (an image without an annotation XML)" for p in sorted(under)
            if posixpath.dirname(p) in folders and p not in paths and p.lower().endswith(IMAGE_EXTENSIONS)
            and not hidden_within(p[len(root) + 1:])]


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


def read_voc_segmentation(url: str, images_dir: str | None) -> Annotations:
    """A VOC folder's ``SegmentationClass/*.png`` (palette PNGs of class ids, 255 the border to ignore), each
    with its photo from ``JPEGImages/``: ``split, image_uri, mask_uri``, splits from ImageSets/Segmentation."""
    fs, root = filesystem(url)
    root = root.rstrip("/")
    masks = sorted(p for p in fs.ls(f"{root}/SegmentationClass", detail=False) if p.lower().endswith(".png"))
    if not masks:
        raise TFRecorderError(f"{url!r}: SegmentationClass/ holds no PNG masks")
    images = images_dir if images_dir is not None else path_url(url, fs, f"{root}/JPEGImages")
    splits, warnings = _voc_splits(url, fs, root, "Segmentation")
    rows = []
    for mask in masks:
        image_id = posixpath.splitext(posixpath.basename(mask))[0]
        rows.append({SPLIT_COLUMN: splits.get(image_id, UNASSIGNED), IMAGE_COLUMN: join_name(images, f"{image_id}.jpg"),
                     MASK_COLUMN: path_url(url, fs, mask)})
    frame = pd.DataFrame(rows, columns=[SPLIT_COLUMN, IMAGE_COLUMN, MASK_COLUMN])
    return Annotations(frame, warnings=tuple(warnings))


def _voc_splits(url: str, fs: Any, root: str, task: str = "Main") -> tuple[dict[str, str], list[str]]:
    """Image id -> split from ImageSets/<task>/{train,val,test,trainval}.txt (trainval: TRAIN or VALIDATION by
    a stable hash of the id, in the default fractions' proportion); and the warning naming the ids that two of
    train, val and test list (the last list's split is taken: a list said otherwise), if any."""
    main = f"{root}/ImageSets/{task}"
    found: dict[str, str] = {}
    listed: dict[str, str] = {}  # each id, the first of train/val/test that lists it
    twice: list[str] = []
    for name in ("trainval", *VOC_SPLITS):  # train/val/test, where given, over trainval's guess
        path = f"{main}/{name}.txt"
        if not fs.exists(path):
            continue
        with fs.open(path, "rb") as f:
            text = utf8_text(f.read(), f"Pascal VOC split list {path_url(url, fs, path)!r}")
        ids = [line.split()[0] for line in text.splitlines() if line.strip()]
        for image_id in ids:
            if name == "trainval":
                train = DEFAULT_FRACTIONS[0] / (DEFAULT_FRACTIONS[0] + DEFAULT_FRACTIONS[1])
                found[image_id] = TRAIN if hash_fraction(image_id) < train else VALIDATION
            else:
                found[image_id] = VOC_SPLITS[name]
                if listed.setdefault(image_id, name) != name:
                    twice.append(f"{image_id} ({listed[image_id]}, {name})")
    warning = (f"{len(twice)} image ids of {url!r} are in two of ImageSets/{task}'s lists (train, val, test), "
               f"each in the last's split: {', '.join(twice[:5])}{', ...' if len(twice) > 5 else ''}"
               ) if twice else None
    return found, [warning] if warning else []


def _int(value: str | None, where: str, name: str) -> int | None:
    """A whole number from an XML element's text (``500``, ``500.0``); None when absent or empty."""
    if value is None or not value.strip():
        return None
    try:
        return int(float(value))
    except (ValueError, OverflowError):  # not a number; inf or nan
        raise TFRecorderError(f"{where}: {name} {quoted(value)} is not a whole number") from None
