"""Nesting connectors: ``ListOf`` (a list of values of one kind per record) and ``Objects`` (a value of one kind
per object of a detection record, as TFDS's ``Sequence`` of a ``FeaturesDict``). Both take everything but their
shape from the connector they hold."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tfrecorder.dataset.connectors.base import TFDS_CLASS, Connector, object_array, object_hashes
from tfrecorder.dataset.feature_info import FeatureInfo
from tfrecorder.types import Kind


class _Nested(Connector):
    abstract = True  # named by nesting (``ListOf(<item>)``), never registered
    values_per_record = None
    nested = True

    def __init__(self, item: Connector):
        self.item = item

    def parameters(self) -> dict[str, Any]:
        return self.item.parameters()

    @property
    def kind(self) -> Kind:  # type: ignore[override]
        return self.item.kind

    @property
    def field(self) -> str:  # type: ignore[override]
        return self.item.field

    @property
    def tf_dtype(self) -> str:  # type: ignore[override]
        return self.item.tf_dtype

    @property
    def object_missing(self) -> Any:  # type: ignore[override]
        return self.item.object_missing

    @property
    def in_picture(self) -> bool:  # type: ignore[override]
        return self.item.in_picture

    @property
    def values_per_point(self) -> int:  # type: ignore[override]
        return self.item.values_per_point

    @property
    def numbers(self) -> Any:  # type: ignore[override]
        return None  # lists are read as objects, never as a column of numbers

    @property
    def name(self) -> str:
        return f"{type(self).__name__}({self.item.name})"

    @property
    def shape(self) -> list[Any]:
        return [None]

    def parse_spec(self, feature: FeatureInfo) -> Any:
        import tensorflow as tf

        return tf.io.RaggedFeature(tf.as_dtype(self.item.tf_dtype))

    def decode(self, tensor: Any) -> Any:
        """Each value decoded by the item (float64 from its bits), the lists kept."""
        import tensorflow as tf

        if isinstance(tensor, tf.RaggedTensor):
            return tensor.with_flat_values(self.item.decode(tensor.flat_values))
        return self.item.decode(tensor)

    def text(self, feature: FeatureInfo) -> bool:
        return self.item.text(feature)

    def array(self, values: Any) -> Any:
        return self.item.array(values)


class ListOf(_Nested):
    """A list of values of one kind per record (empty allowed; None where the row has no list)."""

    abstract = True

    @property
    def step_shape(self) -> list[int] | None:
        return [] if self.item.values_per_record == 1 else None  # a step a value (a token id)

    def check(self, value: Any, sources: set[str]) -> list[Any]:
        return [self.item.check(v, sources) for v in value]

    def hashes(self, values: Sequence[Any] | np.ndarray) -> np.ndarray:
        """By the repr of each list's stored values (an int given as 1 or 1.0 hashes alike)."""
        cast = self.item.item_cast
        return object_hashes(object_array([None if v is None else repr([cast(x) for x in v] if cast else list(v))
                                           for v in values]))

    def arrow_type(self) -> Any:
        import pyarrow as pa

        return pa.list_(self.item.arrow_type())

    def tfds(self, feature: FeatureInfo, context: Mapping[str, Any]) -> tuple[dict[str, Any] | None, str]:
        inner, why = self.item.tfds(feature, context)
        if inner is None:
            return None, why
        return {"pythonClassName": TFDS_CLASS + "sequence_feature.Sequence",
                "sequence": {"feature": inner, "length": "-1"}}, ""


class Objects(_Nested):
    """A value of ``item``'s kind for each object of a detection record (its box rows, grouped by image): one
    list per feature, an object's values at the same place in each list, ``item.values_per_object`` of them an
    object (a box's 4 edges). A missing value of an object is stored as ``item.object_missing``. TFDS reads the
    features together as a ``Sequence`` of a ``FeaturesDict`` (``tfds`` gives the item's entry in it)."""

    abstract = True

    def object_shape(self, feature: FeatureInfo) -> list[int]:
        """One object's value's shape (``[]``: one value; a box ``[4]``; keypoints ``[K, 2]``)."""
        return self.item.object_shape(feature)

    def gathered(self, tensor: Any, feature: FeatureInfo) -> Any:
        """A record's parsed list as one value per object (``[N, *object_shape]``)."""
        import tensorflow as tf

        shape = self.object_shape(feature)
        return tf.reshape(tensor, [-1, *shape]) if shape else tensor

    def follow(self, values: dict[str, Any], name: str, frame: Any) -> tuple[dict[str, Any], Any]:
        return self.item.follow(values, name, frame)

    def follow_array(self, values: dict[str, Any], name: str, frame: Any) -> tuple[dict[str, Any], Any]:
        return self.item.follow_array(values, name, frame)

    def tfds(self, feature: FeatureInfo, context: Mapping[str, Any]) -> tuple[dict[str, Any] | None, str]:
        return self.item.tfds(feature, context)
