"""Scalar connectors: integers (and booleans, datetimes), float32, float64 (as its bits), bytes, text and class
ids - a value per record, or per object inside ``Objects``."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from tfrecorder.dataset import dtypes
from tfrecorder.dataset.connectors.base import (
    MISSING_HASH,
    TFDS_CLASS,
    BytesValues,
    FloatValues,
    IntValues,
    missing_mask,
    object_array,
    object_hashes,
)
from tfrecorder.dataset.feature_info import FeatureInfo
from tfrecorder.types import Kind

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


class Int64(IntValues):
    """Integers and booleans (``source`` "bool": given back as booleans), datetimes as counts of their unit."""

    numbers = np.int64
    quick_type = int
    item_cast: ClassVar[Any] = int

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

    def whole_column(self, series: pd.Series) -> tuple[list[Any] | np.ndarray, str] | None:
        times = dtypes.as_int64(series)
        if times is not None:  # datetimes and timedeltas: counts of their unit
            counts, missing = times
            return (counts, "int") if not missing.any() else (
                [None if m else c for c, m in zip(counts.tolist(), missing.tolist())], "int")
        dtype = series.dtype
        if isinstance(dtype, np.dtype) and dtype.kind in "bi":
            return series.to_numpy(dtype=np.int64), "bool" if dtype.kind == "b" else "int"
        return None

    def hashes(self, values: Sequence[Any] | np.ndarray) -> np.ndarray:
        from pandas.util import hash_array

        if isinstance(values, np.ndarray):
            return hash_array(values.astype(np.int64))
        ints = np.array([0 if v is None else v for v in values], dtype=np.int64)
        return np.where(missing_mask(values), MISSING_HASH, hash_array(ints))

    def arrow_type(self) -> Any:
        import pyarrow as pa

        return pa.int64()

    def column(self, values: np.ndarray, missing: np.ndarray, feature: FeatureInfo) -> Any:
        any_missing = bool(missing.any())
        source = "int" if feature.role == "label" else feature.source or "int"
        if source == "bool":
            flags = values.astype(bool)
            return pd.arrays.BooleanArray(flags, missing) if any_missing else flags
        return pd.arrays.IntegerArray(values, missing) if any_missing else values


class ClassLabel(Int64):
    """A class id whose names are the label vocabulary (dataset.json's ``label``): a TFDS ``ClassLabel``."""

    def tfds(self, feature: FeatureInfo, context: Mapping[str, Any]) -> tuple[dict[str, Any] | None, str]:
        vocabulary = (context.get("label") or {})["vocabulary"]
        return {"pythonClassName": TFDS_CLASS + "class_label_feature.ClassLabel",
                "classLabel": {"numClasses": str(len(vocabulary))}}, ""


class Float32(FloatValues):
    """Numbers stored as float32, the ``FloatList`` every reader expects. Until the whole column's facts decide
    its storage (``float_precision``), values are kept as float64: the spilled parts' Arrow type."""

    numbers = np.float32
    quick_type = float
    item_cast: ClassVar[Any] = float

    def check(self, value: Any, sources: set[str]) -> float:
        if isinstance(value, str) and _NUMBER_TEXT.fullmatch(value):
            value = float(value)  # text a schema types as numbers (a CSV column with a few bad cells)
        if isinstance(value, (str, bytes)) or not isinstance(value, (int, float, np.number, np.bool_)):
            raise TypeError("not a number")
        result = float(value)  # beyond float32's range too: the column's facts decide its storage
        sources.add("float")
        return result

    def whole_column(self, series: pd.Series) -> tuple[list[Any] | np.ndarray, str] | None:
        dtype = series.dtype
        if not isinstance(dtype, np.dtype) or dtype.kind not in "iuf":
            return None
        array = series.to_numpy(dtype=np.float64)  # whole numbers too (pixel edges)
        if dtype.kind == "f" and np.isnan(array).any():
            return [None if v != v else v for v in array.tolist()], "float"
        return array, "float"

    def hashes(self, values: Sequence[Any] | np.ndarray) -> np.ndarray:
        # By the value's float32, however the whole column is stored: the key must not wait for that decision
        # (a part of a table has the keys of the whole), and 0.1 given as float32 (Parquet, a DataFrame) or as
        # text (CSV) is the same value stored. Rows that differ only beyond float32 share a key.
        from pandas.util import hash_array

        floats = self.floats(values)
        missing = np.isnan(floats)
        with np.errstate(over="ignore"):  # values beyond float32's range hash as its infinity
            rounded = np.where(missing, 0.0, floats).astype(np.float32)
        return np.where(missing, MISSING_HASH, hash_array(rounded))

    def floats(self, values: Sequence[Any] | np.ndarray) -> np.ndarray:
        """Checked values as float64, NaN where missing."""
        if isinstance(values, np.ndarray):
            return values
        return np.array([np.nan if v is None else v for v in values], dtype=np.float64)

    def arrow_type(self) -> Any:
        import pyarrow as pa

        return pa.float64()

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
    item_cast: ClassVar[Any] = int

    def stored(self, value: Any) -> int:
        return float64_bits(value)

    def floats(self, values: Sequence[Any] | np.ndarray) -> np.ndarray:
        if isinstance(values, np.ndarray):
            return values.view(np.float64)
        bits = np.array([0 if v is None else v for v in values], dtype=np.int64).view(np.float64)
        return np.where(missing_mask(values), np.nan, bits)

    def arrow_type(self) -> Any:
        import pyarrow as pa

        return pa.int64()

    def decode(self, tensor: Any) -> Any:
        import tensorflow as tf

        return tf.bitcast(tensor, tf.float64)

    def column(self, values: np.ndarray, missing: np.ndarray, feature: FeatureInfo) -> Any:
        return super().column(values.view(np.float64), missing, feature)

    def array(self, values: Any) -> Any:
        return np.asarray(values, dtype=np.int64).view(np.float64)

    def tfds(self, feature: FeatureInfo, context: Mapping[str, Any]) -> tuple[dict[str, Any] | None, str]:
        return None, "float64, stored as the int64 bits of each value (tf.train.Example has no float64 list)"


def float64_bits(value: float) -> int:
    """A float64 as the int64 its bits spell (how a float64 is stored)."""
    return int(np.float64(value).view(np.int64))


Float64.object_missing = float64_bits(float("nan"))


class Bytes(BytesValues):
    """Bytes given as bytes: given back as bytes, a TFDS string ``Scalar``."""

    quick_type = str

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

    def whole_column(self, series: pd.Series) -> tuple[list[Any] | np.ndarray, str] | None:
        dtype = series.dtype
        if not (isinstance(dtype, pd.StringDtype) or (isinstance(dtype, np.dtype) and dtype.kind == "O")):
            return None
        values = series.tolist()
        try:  # every value a str (the usual text column): encoded in one pass
            return [v.encode("utf-8") for v in values], "str"
        except AttributeError:  # missing values, bytes or other types: the checked path
            return None

    def hashes(self, values: Sequence[Any] | np.ndarray) -> np.ndarray:
        return object_hashes(object_array(values))

    def arrow_type(self) -> Any:
        import pyarrow as pa

        return pa.binary()


class Text(Bytes):
    """Text, stored as UTF-8 bytes: given back as str, a TFDS ``Text``."""

    def text(self, feature: FeatureInfo) -> bool:
        return True

    def tfds(self, feature: FeatureInfo, context: Mapping[str, Any]) -> tuple[dict[str, Any] | None, str]:
        return {"pythonClassName": TFDS_CLASS + "text_feature.Text", "text": {}}, ""


# Text that spells a number, for columns the schema types as numbers (what pandas and Arrow parse, spaces around
# allowed): a CSV column is text as a whole when a few of its cells are not numbers, and only those are wrong.
_INTEGER_TEXT = re.compile(r"\s*[+-]?\d+\s*")
_NUMBER_TEXT = re.compile(r"\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*|\s*[+-]?(inf|infinity)\s*", re.IGNORECASE)
