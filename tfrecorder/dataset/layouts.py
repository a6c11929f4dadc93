"""Record layouts: which keys a record keeps its values under - ours, or the TF Object Detection API's - one
object each, chosen once from ``record_format``.

A layout owns its key names, the name its encoder goes by (``write/record/encode.py``'s ``ENCODERS``), what it puts
in dataset.json, whether TFDS files are written for it, and which readers read it. Nothing else asks which
layout a dataset has: a new layout (ArrayRecord's, another API's keys) is one more instance here and its
encoder.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from tfrecorder.dataset import features
from tfrecorder.dataset.example_proto import flattened, parse_example, parse_sequence_example
from tfrecorder.dataset.features import Feature
from tfrecorder.dataset.manifest import Manifest
from tfrecorder.errors import TFRecorderError

# The long form's edges, the order read_tfr gives them in (dataset.json's objects.bbox lists ours' columns so).
_EDGES = ("xmin", "ymin", "xmax", "ymax")


@dataclass(frozen=True, eq=False)  # one instance per layout: compared by identity
class RecordLayout:
    """The keys a record is stored under, and what follows from them.

    ``name`` is the ``record_format`` value and the key of its encoder. ``box_features`` keep each object's
    box, ``box_edges`` saying which edges each holds, an object's values one after another; ``object_prefix``
    comes before an extra per-object column's name. ``label`` is where every label goes in this layout (None:
    the label column's own feature, ``label`` or ``objects/label``), counted from ``first_class_id`` where
    labels are names. ``not_read_by`` names the readers that refuse it, with their one-line reason."""

    name: str
    image: Feature  # the encoded image
    height: Feature
    width: Feature
    orientation: Feature | None  # the EXIF orientation beside the image; None: only the image's own bytes tell
    image_features: tuple[Feature, ...]  # every feature an image gives a record, in dataset.json's order
    masks: tuple[Feature, ...]  # a segmentation mask's features, the mask first
    box_features: tuple[Feature, ...]
    box_edges: tuple[tuple[str, ...], ...]
    object_label: Feature  # each object's class id
    keypoints: tuple[Feature, ...]  # each object's keypoints and their visibility (``keypoint_values``)
    class_text: Feature | None  # each object's class name beside its id
    object_prefix: str
    label: Feature | None = None
    first_class_id: int = 0
    label_map: str | None = None  # the file the class ids and names are written to beside the shards
    plain_tables: bool = True  # False: only detection and segmentation tables have records in this layout
    not_read_by: Mapping[str, str] = field(default_factory=dict)
    instance_mask: Feature | None = None  # each object's instance mask (a PNG an object)
    # Records are tf.train.SequenceExamples: sequences (``is_feature_list``) in its feature_lists, the rest in its
    # context, under this layout's keys
    sequences: bool = False
    refuses_detection: str | None = None  # why a detection table has no records in this layout (None: it has)

    def __repr__(self) -> str:
        return f"RecordLayout({self.name!r})"

    @property
    def size_displayed(self) -> bool:
        """Whether ``height`` and ``width`` are the picture's as displayed (else the stored pixels', before
        its EXIF orientation)."""
        return self.orientation is not None

    @property
    def object_features(self) -> tuple[Feature, ...]:
        """Each object's box, class name and class id, in dataset.json's order."""
        return (*self.box_features, *((self.class_text,) if self.class_text else ()), self.object_label)

    def object_key(self, column: str) -> str:
        """The key an extra column of a detection table is stored under: a value per object."""
        return f"{self.object_prefix}{column}"

    def member(self, key: str) -> str:
        """An object's feature's name among its object's features (``objects/bbox``: ``bbox``)."""
        return key.removeprefix(self.object_prefix)

    def read_name(self, key: str) -> str:
        """The name load_dataset gives a feature of this layout: the image, decoded, is ``image`` in every
        layout (it no longer holds the encoded bytes its key names); the others keep their keys."""
        return features.IMAGE.name if key == self.image.name else key

    def label_key(self, feature: str) -> str:
        """The key a table's label is stored under (``feature``: our layout's, ``label`` or ``objects/label``)."""
        return self.label.name if self.label is not None else feature

    def keypoint_values(self, points: np.ndarray, visibility: np.ndarray) -> list[list[Any]]:
        """Each keypoint feature's flat values for ``points`` (``[N, K, 2]``: normalized y, x) and their
        ``visibility`` (``[N, K]``): ours keeps (y, x) pairs and the visibility; the Object Detection API's y, x
        and visibility apart."""
        if len(self.keypoints) == 2:
            return [points.ravel().tolist(), visibility.ravel().tolist()]
        return [points[..., 0].ravel().tolist(), points[..., 1].ravel().tolist(), visibility.ravel().tolist()]

    def stored_keypoints(self, values: Sequence[np.ndarray], count: int) -> tuple[np.ndarray, np.ndarray]:
        """Every object's ``[K, 2]`` normalized (y, x) and ``[K]`` visibility from the flat values of each keypoint
        feature (``keypoints``' order), ``count`` (K) an object: ``keypoint_values`` undone."""
        if len(self.keypoints) == 2:
            points = np.asarray(values[0], np.float64).reshape(-1, count, 2)
        else:
            points = np.stack([np.asarray(v, np.float64).reshape(-1, count) for v in values[:2]], axis=-1)
        return points, np.asarray(values[-1], np.int64).reshape(-1, count)

    def bbox_entry(self) -> str | list[str]:
        """dataset.json's ``objects.bbox``: the one box feature's name, or the list of them."""
        names = [f.name for f in self.box_features]
        return names[0] if len(names) == 1 else names

    def class_ids(self, labels: Sequence[int], named: bool) -> list[int]:
        """The class ids stored for ``labels`` (indices into the vocabulary where ``named``)."""
        return [label + self.first_class_id for label in labels] if named else list(labels)

    def stored_boxes(self, values: Sequence[np.ndarray]) -> np.ndarray:
        """Every object's normalized ``[xmin, ymin, xmax, ymax]`` from the flat values of each box feature
        (``box_features``' order)."""
        order = [edge for edges in self.box_edges for edge in edges]
        held = np.concatenate([np.asarray(v, np.float64).reshape(-1, len(edges))
                               for v, edges in zip(values, self.box_edges)], axis=1)
        return held[:, [order.index(edge) for edge in _EDGES]]

    def box_values(self, boxes: np.ndarray) -> list[list[float]]:
        """Each box feature's flat values for ``boxes`` (a row per object: ymin, xmin, ymax, xmax)."""
        stored = ("ymin", "xmin", "ymax", "xmax")
        return [boxes[:, [stored.index(edge) for edge in edges]].ravel().tolist() for edges in self.box_edges]

    def side_files(self, vocabulary: Sequence[str] | None) -> dict[str, str]:
        """The files a detection dataset in this layout has beside its shards (name -> text)."""
        if self.label_map is None:
            return {}
        items = [(i + self.first_class_id, name) for i, name in enumerate(vocabulary)] if vocabulary else []
        return {self.label_map: "".join(f"item {{\n  id: {i}\n  name: {json.dumps(name)}\n}}\n" for i, name in items)}

    def parse_record(self, data: bytes, where: str, index: int) -> Any:
        """A record as the tf.train.Example (protobuf) readers read: as it is, or a SequenceExample's context and
        feature lists in one (``example_proto.flattened``); a TFRecorderError naming ``where`` and ``index``."""
        if self.sequences:
            return flattened(parse_sequence_example(data, where, index))
        return parse_example(data, where, index)

    def check_reader(self, reader: str) -> None:
        """Refuse, in one line, a reader that does not read this layout."""
        why = self.not_read_by.get(reader)
        if why is not None:
            raise TFRecorderError(why)


DEFAULT = RecordLayout(
    name="tfrecorder",
    image=features.IMAGE, height=features.IMAGE_HEIGHT, width=features.IMAGE_WIDTH,
    orientation=features.IMAGE_ORIENTATION, image_features=features.IMAGE_FEATURES,
    masks=(features.SEGMENTATION_MASK,),
    box_features=(features.OBJECT_BBOX,), box_edges=(("ymin", "xmin", "ymax", "xmax"),),
    object_label=features.OBJECT_LABEL, class_text=None, object_prefix=f"{features.OBJECTS}/",
    keypoints=(features.OBJECT_KEYPOINTS, features.OBJECT_KEYPOINT_VISIBILITY),
    instance_mask=features.OBJECT_MASK,
)

# record_format="tf_object_detection": a detection record under the keys of the TF Object Detection API
# (its using_your_own_dataset.md), read by Model Garden's TfExampleDecoder; label_map.pbtxt beside the shards.
# Its decoders apply no EXIF orientation: the size is the stored pixels', boxes are in their frame, and class
# ids count from 1 (0 is its background). load_dataset reads it so too (the image decoded without its EXIF turn,
# boxes from the four edges, labels less first_class_id): ours, and other tools' (read/infer_od.py).
_OD = "tf_object_detection"
OBJECT_DETECTION = RecordLayout(
    name=_OD,
    image=features.OD_IMAGE, height=features.OD_HEIGHT, width=features.OD_WIDTH,
    orientation=None, image_features=features.OD_IMAGE_FEATURES,
    masks=(features.OD_MASK, features.OD_MASK_FORMAT),
    box_features=tuple(features.OD_BOX_EDGES.values()), box_edges=tuple((e,) for e in features.OD_BOX_EDGES),
    object_label=features.OD_CLASS_LABEL, class_text=features.OD_CLASS_TEXT, object_prefix="image/object/",
    keypoints=features.OD_KEYPOINTS, instance_mask=features.OD_OBJECT_MASK,
    label=features.OD_CLASS_LABEL, first_class_id=1, label_map="label_map.pbtxt", plain_tables=False,
    not_read_by={
        "data_source": f"this dataset was written with record_format={_OD!r}, for TF Model Garden's decoders; "
                       f"data_source decodes the default record_format: pass decode=False for the serialized "
                       f"records, or convert again without record_format=",
        "tfds": f"record_format={_OD!r} keeps the Object Detection API's keys; convert with the default "
                f"record_format for TFDS",
    },
)

# record_format="sequence_example": a record a row as a tf.train.SequenceExample (tf.io.parse_sequence_example),
# our keys; its sequences (token ids, frames [T, 8]) a Feature a step. TFDS reads tf.train.Examples only.
_SEQUENCES = "sequence_example"
SEQUENCE_EXAMPLE = replace(
    DEFAULT, name=_SEQUENCES, sequences=True,
    refuses_detection=f"record_format={_SEQUENCES!r} writes a SequenceExample a row, and a detection table's rows "
                      f"are boxes, gathered into a record per image: convert it with the default record_format",
    not_read_by={"tfds": f"record_format={_SEQUENCES!r}: TFDS reads tf.train.Examples, not SequenceExamples; "
                         f"convert with the default record_format for TFDS"},
)

LAYOUTS: dict[str, RecordLayout] = {layout.name: layout for layout in (DEFAULT, OBJECT_DETECTION, SEQUENCE_EXAMPLE)}
RECORD_FORMATS = tuple(LAYOUTS)  # record_format's choices, the default first
DEFAULT_RECORD_FORMAT = DEFAULT.name


def layout_of(manifest: Manifest) -> RecordLayout:
    """The layout a dataset's records have, as its dataset.json records it."""
    name = (manifest.objects or manifest.masks or manifest.sequences or {}).get("record_format",
                                                                                DEFAULT_RECORD_FORMAT)
    if name not in LAYOUTS:
        raise TFRecorderError(f"dataset.json says record_format={name!r}, which this version of tfrecorder does "
                              f"not know ({', '.join(RECORD_FORMATS)}): upgrade tfrecorder")
    return LAYOUTS[name]


def first_class_id_of(manifest: Manifest) -> int:
    """The class id a dataset's label 0 stands for: its layout's ``first_class_id``, or for others' records that
    hold a lower id (the Object Detection API's background, 0, where an export counts from 0) the lowest they
    hold (``objects.first_class_id``, which only a manifest inferred from them has)."""
    found = (manifest.objects or {}).get("first_class_id")
    return int(found) if isinstance(found, int) else layout_of(manifest).first_class_id


def is_feature_list(connector: Any, role: str) -> bool:
    """Whether a SequenceExample keeps a feature (its ``connector`` and dataset.json's ``role``) in its
    feature_lists: a feature column (not the label) whose kind is a sequence (``Connector.step_shape``: a list's
    values, a tensor whose first dimension varies)."""
    return role == "feature" and connector.step_shape is not None


def feature_lists_of(manifest: Manifest) -> tuple[str, ...]:
    """The features a dataset's records keep as SequenceExample feature lists (dataset.json's
    ``sequences.feature_lists``); none for tf.train.Example records."""
    return tuple((manifest.sequences or {}).get("feature_lists") or ())


def sequences_entry(feature_lists: Sequence[str]) -> dict[str, Any]:
    """dataset.json's ``sequences`` of a dataset of SequenceExamples keeping ``feature_lists`` as feature lists."""
    return {"record_format": SEQUENCE_EXAMPLE.name, "feature_lists": list(feature_lists)}
