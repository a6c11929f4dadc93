"""Others' Object Detection TFRecords (CVAT, Roboflow, Datumaro, the Object Detection API's own scripts): the
manifest entries that make records under the TF Object Detection API's keys (``layouts.OBJECT_DETECTION``) a
detection dataset - ``objects`` naming that layout, each per-object feature an ``Objects`` connector, the label
names - so every reader reads them as it reads a detection dataset written with
``record_format="tf_object_detection"``.

Label names come from a ``label_map.pbtxt`` beside the files (``item { id: 1 name: 'cat' }``; its
``display_name`` where it has one, as the Object Detection API's own label_map_util takes it), else from the
records' ``image/object/class/text``; an id neither names is called by its number. Class ids count from the
layout's ``first_class_id`` (1), or from the lowest id a record holds where one holds less (0: an export that
counts from 0; no record decides for the others by leaving every box unread): the names are the vocabulary from
there, labels indices into it, an id between two that no record holds nor the map names kept by its number (the
Object Detection API's own count, COCO's 90 ids for 80 classes).

What convert would refuse is said once as the files are opened (``od_warnings``): boxes that are NaN, of no area
or outside the picture, and class ids the label map does not name.
"""

from __future__ import annotations

import logging
import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tfrecorder.dataset import connectors
from tfrecorder.dataset.example_proto import parse_example
from tfrecorder.dataset.foreign import class_names
from tfrecorder.dataset.layouts import OBJECT_DETECTION
from tfrecorder.dataset.manifest import FeatureInfo
from tfrecorder.errors import TFRecorderError
from tfrecorder.types import Kind

logger = logging.getLogger(__name__)

LAYOUT = OBJECT_DETECTION
_LABEL_KEY = LAYOUT.object_label.name.encode()  # found in a record's bytes before it is parsed
_BOX_KEY = LAYOUT.box_features[0].name.encode()
_IMAGE_KEY = LAYOUT.image.name.encode()
_EDGES = tuple(edge for edges in LAYOUT.box_edges for edge in edges)  # the box features' edges, in their order
# The first bytes of the images tf.io.decode_image takes (its ClassifyFileFormat): anything else is "Unknown image
# file format" to it. JPEG, PNG, GIF, BMP, JPEG XL (its codestream, its container); WebP below.
_IMAGE_SIGNATURES = (b"\xff\xd8\xff", b"\x89PNG\r\n\x1a\n", b"GIF8", b"BM", b"\xff\x0a", b"\x00\x00\x00\x0cJXL ")
_WEBP = re.compile(rb"RIFF....WEBP", re.DOTALL)


def is_object_detection(names: Iterable[str]) -> bool:
    """Whether records holding features ``names`` are in the Object Detection API's layout: its encoded image,
    the four box edges and the class ids."""
    keys = {LAYOUT.image.name, *(f.name for f in LAYOUT.box_features), LAYOUT.object_label.name}
    return keys <= set(names)


@dataclass
class ObjectTally:
    """What every record of a split holds, counted as the files are read once: its objects' class ids (with the
    names ``image/object/class/text`` gives them), the most objects a record holds, and, for each per-object
    list, whether it held a value per object in every record."""

    ids: dict[str, Counter] = field(default_factory=dict)
    texts: dict[int, str] = field(default_factory=dict)
    first_seen: dict[int, str] = field(default_factory=dict)  # each class id's first record ("<file> record <n>")
    most: int = 0
    uneven: dict[str, str] = field(default_factory=dict)  # image/object/ lists whose length differed from the
    # objects': the first record where it did ("<file> record <n>: <key> holds <k> values for <m> objects")
    empty: Counter = field(default_factory=Counter)  # records without objects, by split
    bad_boxes: Counter = field(default_factory=Counter)  # boxes convert refuses, by BOX_PROBLEMS' kind
    first_bad_box: dict[str, str] = field(default_factory=dict)  # each kind's first ("<file> record <n>: ...")
    undecodable: dict[str, list[Any]] = field(default_factory=dict)  # records whose image/encoded no decoder
    # takes, by split: [how many, the first ("<file> record <n>: ...")]

    def add(self, split: str, record: bytes, where: str, number: int) -> None:
        counts = self.ids.setdefault(split, Counter())
        if _LABEL_KEY not in record and _BOX_KEY not in record:  # no objects: Datumaro leaves the keys out
            self.empty[split] += 1
            if _IMAGE_KEY in record:
                self._check_image(parse_example(record, where, number).features.feature, split, where, number)
            return
        stored = parse_example(record, where, number).features.feature
        self._check_image(stored, split, where, number)
        labels = list(stored[LAYOUT.object_label.name].int64_list.value) if LAYOUT.object_label.name in stored \
            else []  # boxes without class ids: uneven below
        counts.update(labels)
        self.empty[split] += not labels
        self.most = max(self.most, len(labels))
        for label in labels:
            self.first_seen.setdefault(label, f"{where} record {number}")
        text = stored.get(LAYOUT.class_text.name) if LAYOUT.class_text else None
        for label, name in zip(labels, text.bytes_list.value if text is not None else ()):
            self.texts.setdefault(label, name.decode("utf-8", "replace"))
        edges = [stored[f.name].float_list.value if f.name in stored else () for f in LAYOUT.box_features]
        if labels and all(len(held) == len(labels) for held in edges):  # else uneven, below
            self._check_boxes(edges, where, number)
        for key, values in stored.items():
            if key.startswith(LAYOUT.object_prefix) and key not in self.uneven:
                kind = values.WhichOneof("kind")
                held = len(getattr(values, kind).value) if kind is not None else len(labels)
                if held != len(labels):
                    self.uneven[key] = f"{where} record {number}: {key} holds {held} values for {len(labels)} objects"

    def _check_image(self, stored: Any, split: str, where: str, number: int) -> None:
        """Count a record whose image/encoded is no image TensorFlow decodes (by its first bytes: its decode would
        stop a pipeline with an error naming no file), the first named."""
        held: Sequence[bytes] = stored[LAYOUT.image.name].bytes_list.value if LAYOUT.image.name in stored else []
        data = held[0] if len(held) == 1 else b""
        if data.startswith(_IMAGE_SIGNATURES) or _WEBP.fullmatch(data[:12]):
            return
        found = self.undecodable.setdefault(split, [0, None])
        found[0] += 1
        if found[1] is None:
            problem = (f"{LAYOUT.image.name} holds {len(held)} values" if len(held) > 1 else
                       f"{LAYOUT.image.name} is empty" if not data else
                       f"{LAYOUT.image.name} is no image TensorFlow decodes (JPEG, PNG, GIF, BMP, WebP or JPEG XL; "
                       f"it starts {data[:16]!r})")
            found[1] = f"{where} record {number}: {problem}"

    def _check_boxes(self, edges: list[Any], where: str, number: int) -> None:
        """Count a record's boxes that convert would refuse (``edges``: each box feature's values, an object's
        at the same place in each)."""
        for i, values in enumerate(zip(*edges)):
            box = dict(zip(_EDGES, values))
            problem = _box_problem(box)
            if problem is not None:
                self.bad_boxes[problem] += 1
                shown = ", ".join(f"{edge} {box[edge]:g}" for edge in ("xmin", "ymin", "xmax", "ymax"))
                self.first_bad_box.setdefault(problem, f"{where} record {number} object {i} ({shown})")


# The boxes convert refuses, each as the warning calls them (first that applies)
BOX_PROBLEMS = {"nan": "NaN", "inverted": "of no area (xmin >= xmax or ymin >= ymax)",
                "outside": "outside the picture (an edge outside [0, 1])"}


def _box_problem(box: dict[str, float]) -> str | None:
    if any(math.isnan(v) for v in box.values()):
        return "nan"
    if not (box["xmin"] < box["xmax"] and box["ymin"] < box["ymax"]):
        return "inverted"
    return "outside" if min(box.values()) < 0 or max(box.values()) > 1 else None


_MOST_CLASS_IDS = 100_000  # names from the first class id to the last: past it, an id is no class of a label set


def class_ids(tally: ObjectTally) -> set[int]:
    """Every class id a record holds."""
    return {i for counts in tally.ids.values() for i in counts}


def first_class_id(tally: ObjectTally) -> int:
    """The class id label 0 stands for: the layout's (1), or the lowest id a record holds where that is less."""
    return min([LAYOUT.first_class_id, *class_ids(tally)])


def vocabulary(tally: ObjectTally, names: Mapping[int, str]) -> list[str] | None:
    """The label names by index (class id less ``first_class_id``): the label map's, else the records' class
    text, else the id itself; None when the ids span more than ``_MOST_CLASS_IDS`` (no label set: a damaged
    record's). A label map's ids under the first (its background, 0) are not classes of the records."""
    first = first_class_id(tally)
    last = max([*class_ids(tally), *names], default=first - 1)
    if last - first >= _MOST_CLASS_IDS:
        return None
    return list(class_names(range(first, last + 1), names, tally.texts).values())


def detection_entries(features: list[FeatureInfo], tally: ObjectTally, names: Mapping[int, str]
                      ) -> tuple[list[FeatureInfo], dict[str, Any], dict[str, Any]] | None:
    """The features (each per-object one an ``Objects`` connector), the label entry and the objects entry that
    make inferred records of the Object Detection API's layout a detection dataset; None when its class ids
    cannot be named (``vocabulary``)."""
    vocab = vocabulary(tally, names)
    if vocab is None:
        return None
    boxes = [tally.uneven[f.name] for f in LAYOUT.box_features if f.name in tally.uneven]
    if boxes:  # which box is which object's is unknown: no record could be read as objects
        raise TFRecorderError(f"{boxes[0]}: its object lists differ in length, so which box is which object's is "
                              f"unknown; tfrecorder.convert the files to list such records in errors.csv and keep "
                              f"the rest")
    edges = {f.name: edge for f, edges in zip(LAYOUT.box_features, LAYOUT.box_edges) for edge in edges}
    label, text = LAYOUT.object_label.name, LAYOUT.class_text.name if LAYOUT.class_text else None
    kept: list[FeatureInfo] = []
    extra: list[str] = []
    for f in features:
        # a list however many values the sample's records held (one object each: a value each)
        per_object = f.name.startswith(LAYOUT.object_prefix) and f.name not in tally.uneven
        if f.name == LAYOUT.image.name:
            f = FeatureInfo(f.name, "image", f.dtype, [], connector=connectors.IMAGE.name)
        elif per_object:
            role = "box" if f.name in edges else "label" if f.name in (label, text) else "feature"
            item = connectors.BY_KIND[Kind(f.dtype)]
            column = edges.get(f.name) or ("label" if f.name == label else None)
            f = FeatureInfo(f.name, role, f.dtype, [None], connector=connectors.objects_of(item).name, column=column)
            if role == "feature":
                extra.append(f.name)
        elif f.role == "image":  # another scalar that looked like an image: plain bytes here
            f = FeatureInfo(f.name, "feature", f.dtype, f.shape, nullable=f.nullable, default=f.default)
        kept.append(f)
    first = first_class_id(tally)
    counts = {split: {vocab[i - first]: n for i, n in sorted(found.items())} for split, found in tally.ids.items()}
    objects = {"record_format": LAYOUT.name, "bbox": [f.name for f in LAYOUT.box_features],
               "bbox_format": "rel_yxyx", "frame": "stored", "label": label, "box_units": "normalized",
               "features": extra, "counts": counts, "clipped": 0, "max_objects": tally.most, "first_class_id": first}
    label_entry = {"column": "label", "feature": label, "type": "StringLabel", "vocabulary": vocab,
                   "multi_label": False}
    return kept, label_entry, objects


def od_warnings(tally: ObjectTally, names: Mapping[int, str], label_map_url: str | None,
                vocab: list[str]) -> list[str]:
    """What the records hold that convert would refuse or name otherwise than they say, one line each, for the
    log as the files are opened: class ids under the layout's first (its background, 0), ids the label map does
    not name, boxes that are NaN, of no area or outside the picture."""
    first = first_class_id(tally)
    found: Counter = Counter()
    for counts in tally.ids.values():
        found.update(counts)
    out = []

    def shown(ids: list[int]) -> str:
        listed = ", ".join(f"{i} {vocab[i - first]!r} ({found[i]} object{'s' * (found[i] != 1)}, first "
                           f"{tally.first_seen[i]})" for i in ids[:_SHOWN])
        return listed + (f" and {len(ids) - _SHOWN} more" if len(ids) > _SHOWN else "")

    below = sorted(i for i in found if i < LAYOUT.first_class_id)
    if below:
        out.append(f"class ids under {LAYOUT.first_class_id}, the Object Detection API's first (0 is its "
                   f"background): {shown(below)}; each is a class here, labels counting from {first} (label_names() "
                   f"names them)")
    unnamed = sorted(i for i in found if i not in names and i >= LAYOUT.first_class_id)
    if label_map_url is not None and unnamed:
        out.append(f"{label_map_url} does not name the class ids {shown(unnamed)}: each is named by the first class "
                   f"text a record gives it, else by its number, as convert names it (ids between them that no "
                   f"record holds by their number); add them to the label map to name them")
    if tally.bad_boxes:
        kinds = ", ".join(f"{tally.bad_boxes[kind]} {BOX_PROBLEMS[kind]} (first {tally.first_bad_box[kind]})"
                          for kind in BOX_PROBLEMS if kind in tally.bad_boxes)
        out.append(f"{sum(tally.bad_boxes.values())} boxes convert would refuse are read as they are: {kinds}; "
                   f"tfrecorder.convert the files to list their records in errors.csv and keep the rest")
    for split, (count, first_record) in tally.undecodable.items():
        out.append(f"{first_record}" + (f" (and {count - 1} more records of {split})" if count > 1 else "") +
                   f": convert would refuse it, and load_dataset and show refuse to decode {split}'s images; read_tfr "
                   f"gives its bytes")
    return out


_SHOWN = 5  # class ids a warning lists
