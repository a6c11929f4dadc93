"""Others' Object Detection TFRecords (CVAT, Roboflow, Datumaro, the Object Detection API's own scripts): the
manifest entries that make records under the TF Object Detection API's keys (``layouts.OBJECT_DETECTION``) a
detection dataset - ``objects`` naming that layout, each per-object feature an ``Objects`` connector, the label
names - so every reader reads them as it reads a detection dataset written with
``record_format="tf_object_detection"``.

Label names come from a ``label_map.pbtxt`` beside the files (``item { id: 1 name: 'cat' }``; its
``display_name`` where it has one, as the Object Detection API's own label_map_util takes it), else from the
records' ``image/object/class/text``; an id neither names is called by its number. Class ids count from the
layout's ``first_class_id`` (1): the names are the vocabulary from there, labels indices into it.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tfrecorder.dataset import connectors
from tfrecorder.dataset.example_proto import parse_example
from tfrecorder.dataset.foreign import distinct_names
from tfrecorder.dataset.layouts import OBJECT_DETECTION
from tfrecorder.dataset.manifest import FeatureInfo
from tfrecorder.errors import TFRecorderError
from tfrecorder.types import Kind

logger = logging.getLogger(__name__)

LAYOUT = OBJECT_DETECTION
_LABEL_KEY = LAYOUT.object_label.name.encode()  # found in a record's bytes before it is parsed
_BOX_KEY = LAYOUT.box_features[0].name.encode()


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
    most: int = 0
    uneven: dict[str, str] = field(default_factory=dict)  # image/object/ lists whose length differed from the
    # objects': the first record where it did ("<file> record <n>: <key> holds <k> values for <m> objects")
    empty: Counter = field(default_factory=Counter)  # records without objects, by split

    def add(self, split: str, record: bytes, where: str, number: int) -> None:
        counts = self.ids.setdefault(split, Counter())
        if _LABEL_KEY not in record and _BOX_KEY not in record:  # no objects: Datumaro leaves the keys out
            self.empty[split] += 1
            return
        stored = parse_example(record, where, number).features.feature
        labels = list(stored[LAYOUT.object_label.name].int64_list.value) if LAYOUT.object_label.name in stored \
            else []  # boxes without class ids: uneven below
        counts.update(labels)
        self.empty[split] += not labels
        self.most = max(self.most, len(labels))
        text = stored.get(LAYOUT.class_text.name) if LAYOUT.class_text else None
        for label, name in zip(labels, text.bytes_list.value if text is not None else ()):
            self.texts.setdefault(label, name.decode("utf-8", "replace"))
        for key, values in stored.items():
            if key.startswith(LAYOUT.object_prefix) and key not in self.uneven:
                kind = values.WhichOneof("kind")
                held = len(getattr(values, kind).value) if kind is not None else len(labels)
                if held != len(labels):
                    self.uneven[key] = f"{where} record {number}: {key} holds {held} values for {len(labels)} objects"


def vocabulary(tally: ObjectTally, names: Mapping[int, str]) -> list[str] | None:
    """The label names by index (class id less ``first_class_id``): the label map's, else the records' class
    text, else the id itself; None when an id lies below ``first_class_id`` (no name could be found for it)."""
    seen = {i for counts in tally.ids.values() for i in counts}
    first = LAYOUT.first_class_id
    if any(i < first for i in seen) or any(i < first for i in names):
        return None
    last = max([*seen, *names], default=first - 1)
    return list(distinct_names({class_id: names.get(class_id) or tally.texts.get(class_id) or str(class_id)
                                for class_id in range(first, last + 1)}).values())


def detection_entries(features: list[FeatureInfo], tally: ObjectTally, names: Mapping[int, str]
                      ) -> tuple[list[FeatureInfo], dict[str, Any], dict[str, Any]] | None:
    """The features (each per-object one an ``Objects`` connector), the label entry and the objects entry that
    make inferred records of the Object Detection API's layout a detection dataset; None when its class ids
    cannot be named (an id under ``first_class_id``)."""
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
    counts = {split: {vocab[i - LAYOUT.first_class_id]: n for i, n in sorted(found.items())}
              for split, found in tally.ids.items()}
    objects = {"record_format": LAYOUT.name, "bbox": [f.name for f in LAYOUT.box_features],
               "bbox_format": "rel_yxyx", "frame": "stored", "label": label, "box_units": "normalized",
               "features": extra, "counts": counts, "clipped": 0, "max_objects": tally.most}
    label_entry = {"column": "label", "feature": label, "type": "StringLabel", "vocabulary": vocab,
                   "multi_label": False}
    return kept, label_entry, objects
