"""Feature connectors (pure; TensorFlow imported by the methods that need it): one class per kind of value a
record holds, in the style of TFDS's ``FeatureConnector``.

Each kind knows, in one place: how an input value is checked and converted (``check``), the tf.train.Example
list it is stored in and the placeholder a reused Example holds (``field``, ``placeholder``), the value a
missing one reads as (``missing``), its ``tf.io`` parse spec and decode, the numpy column ``read_tfr`` builds
from the wire values, and its entry in TFDS's ``features.json``. Every stage asks the connector of a feature:
dataset.json names it (``FeatureInfo.connector``, read with ``of``), the writer picks it (``stored_connector`` for
a column, the feature table's for a derived feature); ``connector_of`` guesses it only for a dataset.json written
before names were (0.3 and older) or another tool's records. Adding a kind of value is adding a class here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from tfrecorder.dataset.feature_info import FeatureInfo
from tfrecorder.types import Kind

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
TFDS_CLASS = "tensorflow_datasets.core.features."
_TFDS_IMAGE_FORMATS = {"jpeg", "png", "bmp"}  # decode_image gives GIF and WebP as 4-D animations


class Connector:
    """A scalar kind of value: one value per record (or none, where the feature is nullable)."""

    kind: ClassVar[Kind]
    field: ClassVar[str]  # the tf.train.Example list that holds it (the Feature's oneof ``kind``)
    tf_dtype: ClassVar[str]  # what tf.io reads that list as
    placeholder: ClassVar[Any]  # stands in an Example's slot until a row's own value is set
    missing: ClassVar[Any]  # what a missing value reads as, as dataset.json writes it ("NaN": JSON has no NaN)
    numbers: ClassVar[Any] = None  # the numpy dtype of its wire values (scalar numbers); None: bytes

    @property
    def name(self) -> str:
        """What dataset.json calls it (``named`` gives it back): its class's name."""
        return type(self).__name__

    # writing
    def check(self, value: Any, sources: set[str]) -> Any:
        """An input value as stored (TypeError, ValueError or OverflowError when it is not one of this kind);
        ``sources`` collects the Python type it was given as (dataset.json's ``source``)."""
        raise NotImplementedError

    def stored(self, value: Any) -> Any:
        """A checked value as its Example list holds it."""
        return value

    # tf.io
    def parse_spec(self, feature: FeatureInfo) -> Any:
        """The ``tf.io.parse_example`` spec of the feature."""
        import tensorflow as tf

        dtype = tf.as_dtype(self.tf_dtype)
        if feature.nullable:
            return tf.io.FixedLenFeature([], dtype, default_value=self.stored(self._default(feature.default)))
        return tf.io.FixedLenFeature([], dtype)

    def _default(self, default: Any) -> Any:
        return default

    def decode(self, tensor: Any) -> Any:
        """The parsed tensor as the value it stands for."""
        return tensor

    # read_tfr
    def column(self, values: np.ndarray, missing: np.ndarray, feature: FeatureInfo) -> Any:
        """The pandas column of a scalar number feature from its wire values and the mask of missing ones."""
        raise NotImplementedError

    def text(self, feature: FeatureInfo) -> bool:
        """Whether read_tfr gives its bytes back as str."""
        return False

    # TFDS
    def tfds(self, feature: FeatureInfo, context: Mapping[str, Any]) -> tuple[dict[str, Any] | None, str]:
        """Its features.json entry, or None and why TFDS cannot read it. ``context``: dataset.json's ``label``
        and ``image`` entries."""
        return {"pythonClassName": TFDS_CLASS + "scalar.Scalar",
                "tensor": {"shape": {}, "dtype": feature.dtype, "encoding": "none"}}, ""


class Int64(Connector):
    """Integers and booleans (``source`` "bool": given back as booleans), datetimes as counts of their unit."""

    kind = Kind.INT64
    field = "int64_list"
    tf_dtype = "int64"
    placeholder = 0
    missing = 0
    numbers = np.int64

    def check(self, value: Any, sources: set[str]) -> int:
        if isinstance(value, (bool, np.bool_)):
            sources.add("bool")
            return int(value)
        if isinstance(value, (int, np.integer)):
            result = int(value)
        elif isinstance(value, (float, np.floating)) and float(value).is_integer():
            result = int(value)
        elif isinstance(value, str) and _INTEGER_TEXT.fullmatch(value):
            result = int(value)  # text a schema types as integers (a CSV column with a few bad cells, "007")
        else:
            raise TypeError("not an integer")
        if not INT64_MIN <= result <= INT64_MAX:
            raise OverflowError("outside int64")
        sources.add("int")
        return result

    def column(self, values: np.ndarray, missing: np.ndarray, feature: FeatureInfo) -> Any:
        any_missing = bool(missing.any())
        source = "int" if feature.role == "label" else feature.source or "int"
        if source == "bool":
            flags = values.astype(bool)
            return pd.arrays.BooleanArray(flags, missing) if any_missing else flags
        return pd.arrays.IntegerArray(values, missing) if any_missing else values


class Float32(Connector):
    """Numbers stored as float32, the ``FloatList`` every reader expects."""

    kind = Kind.FLOAT32
    field = "float_list"
    tf_dtype = "float32"
    placeholder = 0.0
    missing = "NaN"
    numbers = np.float32

    def check(self, value: Any, sources: set[str]) -> float:
        if isinstance(value, str) and _NUMBER_TEXT.fullmatch(value):
            value = float(value)  # text a schema types as numbers (a CSV column with a few bad cells)
        if isinstance(value, (str, bytes)) or not isinstance(value, (int, float, np.number, np.bool_)):
            raise TypeError("not a number")
        result = float(value)  # beyond float32's range too: the column's facts decide its storage
        sources.add("float")
        return result

    def _default(self, default: Any) -> float:
        return float(default)

    def column(self, values: np.ndarray, missing: np.ndarray, feature: FeatureInfo) -> Any:
        values[missing] = np.nan  # in place: no second copy of the column
        return values


class Float64(Float32):
    """Numbers float32 would change the meaning of (``float_precision``). tf.train.Example has no float64
    list: each value is stored as the int64 its IEEE-754 bits spell, read back with a bitcast."""

    kind = Kind.FLOAT64
    field = "int64_list"
    tf_dtype = "int64"
    placeholder = 0
    numbers: ClassVar[Any] = np.int64  # the wire values are the float64s' int64 bits

    def stored(self, value: Any) -> int:
        return float64_bits(value)

    def decode(self, tensor: Any) -> Any:
        import tensorflow as tf

        return tf.bitcast(tensor, tf.float64)

    def column(self, values: np.ndarray, missing: np.ndarray, feature: FeatureInfo) -> Any:
        return super().column(values.view(np.float64), missing, feature)

    def tfds(self, feature: FeatureInfo, context: Mapping[str, Any]) -> tuple[dict[str, Any] | None, str]:
        return None, "float64, stored as the int64 bits of each value (tf.train.Example has no float64 list)"


def float64_bits(value: float) -> int:
    """A float64 as the int64 its bits spell (how a float64 is stored)."""
    return int(np.float64(value).view(np.int64))


class Bytes(Connector):
    """Bytes given as bytes: given back as bytes, a TFDS string ``Scalar``."""

    kind = Kind.BYTES
    field = "bytes_list"
    tf_dtype = "string"
    placeholder = b""
    missing = ""

    def check(self, value: Any, sources: set[str]) -> bytes:
        if isinstance(value, (bytes, np.bytes_)):
            sources.add("bytes")
            return bytes(value)
        if isinstance(value, (str, np.str_)):
            sources.add("str")
            return str(value).encode("utf-8")
        if isinstance(value, (int, float, np.number, np.bool_)):
            sources.add("str")
            return str(value).encode("utf-8")
        raise TypeError("not text")


class Text(Bytes):
    """Text, stored as UTF-8 bytes: given back as str, a TFDS ``Text``."""

    def text(self, feature: FeatureInfo) -> bool:
        return True

    def tfds(self, feature: FeatureInfo, context: Mapping[str, Any]) -> tuple[dict[str, Any] | None, str]:
        return {"pythonClassName": TFDS_CLASS + "text_feature.Text", "text": {}}, ""


class Image(Bytes):
    """An image: its encoded bytes (or raw pixels), a TFDS ``Image`` where TFDS can decode it."""

    def tfds(self, feature: FeatureInfo, context: Mapping[str, Any]) -> tuple[dict[str, Any] | None, str]:
        image = context.get("image") or {}
        if image.get("format") == "raw":
            return None, "raw pixels: TFDS's Image decodes encoded files only (convert with image_format='png')"
        odd = sorted(set(image.get("formats") or []) - _TFDS_IMAGE_FORMATS)
        if odd:
            return None, (f"{', '.join(odd)} images: TFDS decodes them as 4-D animations "
                          f"(convert with image_format='png')")
        channels = image.get("channels") or [3]
        depth = channels[0] if len(channels) == 1 and channels[0] != 2 else 3
        return {"pythonClassName": TFDS_CLASS + "image_feature.Image",
                "image": {"shape": {"dimensions": ["-1", "-1", str(depth)]}, "dtype": "uint8"}}, ""


class Mask(Image):
    """A segmentation mask: a PNG of class ids, one channel; a TFDS ``Image`` of shape ``[-1, -1, 1]`` (TFDS's
    ``segmentation_mask`` convention)."""

    def tfds(self, feature: FeatureInfo, context: Mapping[str, Any]) -> tuple[dict[str, Any] | None, str]:
        return {"pythonClassName": TFDS_CLASS + "image_feature.Image",
                "image": {"shape": {"dimensions": ["-1", "-1", "1"]}, "dtype": "uint8", "encodingFormat": "png"}}, ""


class ClassLabel(Int64):
    """A class id whose names are the label vocabulary (dataset.json's ``label``): a TFDS ``ClassLabel``."""

    def tfds(self, feature: FeatureInfo, context: Mapping[str, Any]) -> tuple[dict[str, Any] | None, str]:
        vocabulary = (context.get("label") or {})["vocabulary"]
        return {"pythonClassName": TFDS_CLASS + "class_label_feature.ClassLabel",
                "classLabel": {"numClasses": str(len(vocabulary))}}, ""


class ListOf(Connector):
    """A list of values of one kind per record (empty allowed; None where the row has no list)."""

    def __init__(self, item: Connector):
        self.item = item

    @property
    def kind(self) -> Kind:  # type: ignore[override]
        return self.item.kind

    @property
    def field(self) -> str:  # type: ignore[override]
        return self.item.field

    @property
    def numbers(self) -> Any:  # type: ignore[override]
        return None  # lists are read as objects, never as a column of numbers

    @property
    def name(self) -> str:
        return f"ListOf({self.item.name})"

    def check(self, value: Any, sources: set[str]) -> list[Any]:
        return [self.item.check(v, sources) for v in value]

    def parse_spec(self, feature: FeatureInfo) -> Any:
        import tensorflow as tf

        return tf.io.RaggedFeature(tf.as_dtype(self.item.tf_dtype))

    def text(self, feature: FeatureInfo) -> bool:
        return self.item.text(feature)

    def tfds(self, feature: FeatureInfo, context: Mapping[str, Any]) -> tuple[dict[str, Any] | None, str]:
        inner, why = self.item.tfds(feature, context)
        if inner is None:
            return None, why
        return {"pythonClassName": TFDS_CLASS + "sequence_feature.Sequence",
                "sequence": {"feature": inner, "length": "-1"}}, ""


class BoundingBoxes(Connector):
    """A detection record's boxes: 4 float32 values an object (``[ymin, xmin, ymax, xmax]``, normalized), a
    TFDS ``BBoxFeature`` per object."""

    kind = Kind.FLOAT32
    field = "float_list"
    tf_dtype = "float32"
    placeholder = 0.0
    missing = "NaN"

    def parse_spec(self, feature: FeatureInfo) -> Any:
        import tensorflow as tf

        return tf.io.RaggedFeature(tf.float32)

    def tfds(self, feature: FeatureInfo, context: Mapping[str, Any]) -> tuple[dict[str, Any] | None, str]:
        return {"pythonClassName": TFDS_CLASS + "bounding_boxes.BBoxFeature",
                "boundingBox": {"shape": {"dimensions": ["4"]}, "dtype": "float32", "bboxFormat": "REL_YXYX"}}, ""


INT64, FLOAT32, FLOAT64, BYTES, TEXT, IMAGE, CLASS_LABEL = (Int64(), Float32(), Float64(), Bytes(), Text(), Image(),
                                                           ClassLabel())
BOXES = BoundingBoxes()
MASK = Mask()
SCALARS: tuple[Connector, ...] = (INT64, FLOAT32, FLOAT64, TEXT)  # a connector of each stored kind
BY_KIND: dict[Kind, Connector] = {c.kind: c for c in SCALARS}
# What a list read from another tool's record holds: each list's own kind (float64 is ours alone).
KINDS_BY_FIELD: dict[str, Kind] = {c.field: c.kind for c in (INT64, FLOAT32, BYTES)}


# Every connector by the name dataset.json gives it; a list's is ``ListOf(<its item's name>)``.
NAMED: dict[str, Connector] = {c.name: c for c in (INT64, FLOAT32, FLOAT64, BYTES, TEXT, IMAGE, MASK, CLASS_LABEL,
                                                     BOXES)}
_LIST_NAME = re.compile(r"ListOf\((\w+)\)")


def named(name: str) -> Connector:
    """The connector dataset.json calls ``name`` (KeyError: none of this tfrecorder's)."""
    if name in NAMED:
        return NAMED[name]
    if name not in _LISTS:
        match = _LIST_NAME.fullmatch(name)
        if match is None or match[1] not in NAMED:
            raise KeyError(name)
        _LISTS[name] = ListOf(NAMED[match[1]])  # kept: readers ask for it per feature and batch
    return _LISTS[name]


_LISTS: dict[str, Connector] = {}


def of(feature: FeatureInfo) -> Connector:
    """The connector of a feature of a dataset.json as read (``Manifest.from_json`` names every one)."""
    return named(feature.connector)  # type: ignore[arg-type]


def stored_connector(kind: Kind, is_list: bool = False, source: str | None = None) -> Connector:
    """The connector of a column being written: its stored kind, whether it holds lists, its values' source."""
    scalar = BYTES if kind is Kind.BYTES and source == "bytes" else BY_KIND[kind]
    return ListOf(scalar) if is_list else scalar


def connector_of(feature: FeatureInfo, image_feature: str, label: Mapping[str, Any] | None = None) -> Connector:
    """The connector of a feature a dataset.json lists without naming it (one of 0.3 or older, or inferred from
    another tool's records), guessed from its dtype, role and name as readers did before names were written
    (``image_feature``: the name the image is stored under; ``label``: dataset.json's label entry, whose
    vocabulary makes the label a ClassLabel). ``Manifest.from_json`` alone calls it."""
    kind = Kind(feature.dtype)
    if feature.role == "box" and kind is Kind.FLOAT32:
        return BOXES
    if feature.role == "mask" and kind is Kind.BYTES and feature.shape == []:
        return MASK if feature.name.endswith(("mask", "encoded")) else TEXT
    if feature.name == image_feature and kind is Kind.BYTES:
        scalar: Connector = IMAGE
    elif feature.role == "label" and kind is Kind.INT64 and (label or {}).get("vocabulary") is not None:
        scalar = CLASS_LABEL
    elif kind is Kind.BYTES:
        scalar = BYTES if feature.source == "bytes" else TEXT
    else:
        scalar = BY_KIND[kind]
    return ListOf(scalar) if feature.shape == [None] else scalar


# Text that spells a number, for columns the schema types as numbers (what pandas and Arrow parse, spaces around
# allowed): a CSV column is text as a whole when a few of its cells are not numbers, and only those are wrong.
_INTEGER_TEXT = re.compile(r"\s*[+-]?\d+\s*")
_NUMBER_TEXT = re.compile(r"\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*|\s*[+-]?(inf|infinity)\s*", re.IGNORECASE)
