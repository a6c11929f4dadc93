"""Feature connectors (pure; TensorFlow, pyarrow and PIL imported by the methods that need them): one class per
kind of value a record holds, in the style of TFDS's ``FeatureConnector``.

Each kind knows, in one place (``base.Connector`` lists what it answers): how an input value is checked and a
plain column converted at once, its content hash and Arrow type, the Example list it is stored in, what a
missing value is stored and read as, its ``tf.io`` parse spec and decode, where the picture's geometry takes it,
the numpy column ``read_tfr`` builds from the wire values, and its entry in TFDS's ``features.json``.
``ListOf(item)`` is a list of values a record, ``Objects(item)`` a value for each object of a detection record.

Every stage asks the connector of a feature: dataset.json names it (``FeatureInfo.connector``, read with ``of``),
the writer picks it (``stored_connector`` for a column, the feature table's for a derived feature) and asks an
input column's (``of_type``) what to do with it, so that no stage outside this package names a kind;
``connector_of`` guesses it only for a dataset.json written before names were (0.3 and older) or another tool's
records. This module makes connectors by name and parameters (``named``); the classes register themselves as
they are defined (``base.REGISTERED``). Adding a kind of value is a subclass of ``Connector`` in a module of its
own, inside the package or outside it (``tfrecorder.Connector``): docs/how-it-works.md, "Adding a kind of value".
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from tfrecorder.dataset.connectors.audio import Audio
from tfrecorder.dataset.connectors.base import REGISTERED, TFDS_CLASS, Connector
from tfrecorder.dataset.connectors.images import Image, Mask
from tfrecorder.dataset.connectors.media import Media
from tfrecorder.dataset.connectors.nested import ListOf, Objects
from tfrecorder.dataset.connectors.places import (
    VISIBILITY,
    BoundingBoxes,
    InstanceMask,
    Keypoints,
    KeypointVisibility,
)
from tfrecorder.dataset.connectors.scalars import (
    INT64_MAX,
    INT64_MIN,
    Bytes,
    ClassLabel,
    Float32,
    Float64,
    Int64,
    Text,
    float64_bits,
)
from tfrecorder.dataset.connectors.tensors import Tensor
from tfrecorder.dataset.connectors.video import Video
from tfrecorder.dataset.feature_info import FeatureInfo
from tfrecorder.types import ColumnType, Kind

__all__ = ["INT64_MAX", "INT64_MIN", "TFDS_CLASS", "VISIBILITY", "Audio", "BoundingBoxes", "Bytes", "ClassLabel",
           "Connector", "Float32", "Float64", "Image", "InstanceMask", "Int64", "KeypointVisibility", "Keypoints",
           "ListOf", "Mask", "Media", "Objects", "Tensor", "Text", "Video", "float64_bits"]

INT64, FLOAT32, FLOAT64, BYTES, TEXT, IMAGE, CLASS_LABEL = (Int64(), Float32(), Float64(), Bytes(), Text(), Image(),
                                                           ClassLabel())
BOX = BoundingBoxes()
KEYPOINTS, KEYPOINT_VISIBILITY = Keypoints(), KeypointVisibility()
MASK = Mask()
INSTANCE_MASK = InstanceMask()
SCALARS: tuple[Connector, ...] = (INT64, FLOAT32, FLOAT64, TEXT)  # a connector of each stored kind
BY_KIND: dict[Kind, Connector] = {c.kind: c for c in SCALARS}
# What a list read from another tool's record holds: each list's own kind (float64 is ours alone).
KINDS_BY_FIELD: dict[str, Kind] = {c.field: c.kind for c in (INT64, FLOAT32, BYTES)}

# The built-in connectors by the name dataset.json gives them (``REGISTERED`` has every class, plug-ins too).
NAMED: dict[str, Connector] = {c.name: c for c in (INT64, FLOAT32, FLOAT64, BYTES, TEXT, IMAGE, MASK, CLASS_LABEL,
                                                     BOX, KEYPOINTS, KEYPOINT_VISIBILITY, INSTANCE_MASK)}
_NESTING = {"ListOf": ListOf, "Objects": Objects}
_NESTED_NAME = re.compile(r"(ListOf|Objects)\((\w+)\)")
# Every connector asked for, by name and parameters: readers ask per feature and batch, and a kind is one object
_INSTANCES: dict[tuple[str, str], Connector] = {(name, "{}"): c for name, c in NAMED.items()}


def named(name: str, parameters: Mapping[str, Any] | None = None) -> Connector:
    """The connector dataset.json calls ``name``, made with its ``parameters`` (KeyError: no connector of that
    name is defined - a plug-in's module not imported, or a newer tfrecorder's kind; TypeError or ValueError:
    parameters its class refuses)."""
    key = (name, json.dumps(parameters, sort_keys=True) if parameters else "{}")
    found = _INSTANCES.get(key)
    if found is None:
        match = _NESTED_NAME.fullmatch(name)
        if match is not None:
            found = _NESTING[match[1]](named(match[2], parameters))
        elif name in REGISTERED:
            found = REGISTERED[name](**(parameters or {}))
        else:
            raise KeyError(name)
        _INSTANCES[key] = found
    return found


def of(feature: FeatureInfo) -> Connector:
    """The connector of a feature of a dataset.json as read (``Manifest.from_json`` names every one)."""
    return named(feature.connector, feature.parameters)  # type: ignore[arg-type]


def field_of(feature: FeatureInfo) -> str:
    """The Example list dataset.json says ``feature``'s records hold: its connector's where its dtype is the one its
    connector gives, else its dtype's (so that an edited dtype is seen against the records)."""
    connector = of(feature)
    if feature.dtype != connector.dtype and feature.dtype in Kind.__members__.values():
        return BY_KIND[Kind(feature.dtype)].field
    return connector.field


def list_of(item: Connector) -> Connector:
    return named(f"ListOf({item.name})", item.parameters())


def objects_of(item: Connector) -> Connector:
    return named(f"Objects({item.name})", item.parameters())


def stored_connector(kind: Kind, is_list: bool = False, source: str | None = None) -> Connector:
    """The connector of a column being written: its stored kind, whether it holds lists, its values' source."""
    scalar = BYTES if kind is Kind.BYTES and source == "bytes" else BY_KIND[kind]
    return list_of(scalar) if is_list else scalar


def of_type(col_type: type[ColumnType]) -> Connector:
    """The connector of an input column type's values, for what a stage asks of their kind: the one the type names
    (``ColumnType.connector``), else its stored kind's (a list's where it holds lists).

    Args:
        col_type: a column type of ``tfrecorder.types`` (the class itself).

    Returns:
        The connector (its attributes answer: ``object_points``, ``object_mask``, ``layout_keyed``, ...).
    """
    if isinstance(col_type.connector, Connector):  # a type made for a connector (types.column_type)
        return col_type.connector
    return named(col_type.connector) if col_type.connector else stored_connector(col_type.kind, col_type.is_list)


def connector_of(feature: FeatureInfo, image_feature: str, label: Mapping[str, Any] | None = None,
                 per_object: bool = False) -> Connector:
    """The connector of a feature a dataset.json lists without naming it (one of 0.3 or older, or inferred from
    another tool's records), guessed from its dtype, role and name as readers did before names were written
    (``image_feature``: the name the image is stored under; ``label``: dataset.json's label entry, whose
    vocabulary makes the label a ClassLabel; ``per_object``: a value per object of a detection record).
    ``Manifest.from_json`` alone calls it."""
    kind = Kind(feature.dtype)
    if feature.role == "box" and kind is Kind.FLOAT32 and per_object:
        return objects_of(BOX)
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
    if per_object:
        return objects_of(scalar)
    return list_of(scalar) if feature.shape == [None] else scalar
