"""Tensor connector (pure; TensorFlow imported by the methods that need it): an N-D array a record that keeps its
shape and dtype, stored as TFDS's ``tfds.features.Tensor`` stores one - its values flat in an Example list
(``encoding="none"``) or its bytes (``"bytes"``, ``"zlib"``) - so that TFDS reads it as it is.

A column of numpy arrays (rank 1 to 5; a 1-D column only where every array has one length: Python lists and 1-D
arrays of varying lengths stay ``ListOf`` lists) is claimed whole: its shape is the common shape of its rows
(None where the first dimension varies) and its dtype theirs (widened within integers or within floats where
rows differ). ``types.Tensor(shape=, dtype=)`` declares one."""

from __future__ import annotations

import math
import zlib
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from tfrecorder.dataset.connectors.base import TFDS_CLASS, Connector, object_array, object_hashes, refused
from tfrecorder.dataset.feature_info import FeatureInfo
from tfrecorder.errors import ImageError, SchemaError, describe_rows
from tfrecorder.types import Kind

DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "float16", "float32", "float64")
ENCODINGS = ("none", "bytes", "zlib")  # TFDS's tfds.features.Encoding values: convert's tensor_encoding choices
DEFAULT_ENCODING = "none"  # convert's tensor_encoding: each column's own default (float64 of a fixed shape: bytes)
MAX_RANK = 5


class Tensor(Connector):
    """An array of ``shape`` (a tuple of sizes, None for the first where rows differ) and ``dtype`` a record.

    With ``encoding="none"`` the values are a FloatList (float16, float32) or an Int64List (integers, bool) in C
    order, and float64 - which a FloatList would round - is stored as the int64 bits of each value where the
    shape varies (a TFDS reader cannot see those), else as bytes. ``"bytes"`` stores the array's little-endian
    bytes, ``"zlib"`` them compressed: one value a record, for a fixed shape."""

    def __init__(self, shape: Sequence[int | None], dtype: str, encoding: str | None = None):
        self._shape = tuple(None if d is None else int(d) for d in shape)
        if not 1 <= len(self._shape) <= MAX_RANK or any(d is not None and d < 0 for d in self._shape):
            raise ValueError(f"shape {list(shape)}: a tensor has 1 to {MAX_RANK} dimensions of sizes 0 and up")
        if None in self._shape[1:]:
            raise ValueError(f"shape {list(shape)}: only the first dimension may vary from row to row")
        self._dtype = np.dtype(dtype).name
        if self._dtype not in DTYPES:
            raise ValueError(f"dtype {dtype!r}: a tensor holds {', '.join(DTYPES)}")
        self._given = encoding  # None: convert's tensor_encoding decides (``stored_with``)
        if encoding is None:  # float64 of a fixed shape as its bytes: exact, and TFDS reads it
            encoding = "bytes" if self._dtype == "float64" and self._shape[0] is not None else "none"
        if encoding not in ENCODINGS:
            raise ValueError(f"encoding {encoding!r}: one of {', '.join(ENCODINGS)}")
        if encoding != "none" and self._shape[0] is None:
            raise ValueError(f"encoding {encoding!r} needs a fixed shape, not {list(shape)}: use 'none'")
        self._encoding = encoding

    def parameters(self) -> dict[str, Any]:
        return {"shape": list(self._shape), "dtype": self._dtype, "encoding": self._encoding}

    def __eq__(self, other: object) -> bool:
        # a given encoding is kept whatever tensor_encoding says, a default one follows it: two column types
        return super().__eq__(other) and (self._given is None) == (getattr(other, "_given", None) is None)

    __hash__ = Connector.__hash__

    def stored_with(self, encoding: str) -> Tensor:
        """This tensor stored with ``encoding`` (convert's ``tensor_encoding``) where its type gave none and its
        shape is fixed (the bytes of a varying shape would need theirs beside them); "none" leaves each its
        default."""
        if self._given is not None or encoding == DEFAULT_ENCODING or self._shape[0] is None:
            return self
        return Tensor(self._shape, self._dtype, encoding)

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self._dtype

    @property
    def shape(self) -> list[Any]:
        return list(self._shape)

    @property
    def _bits(self) -> bool:
        """float64 in an Int64List, as the bits of each value (a FloatList would round it)."""
        return self._dtype == "float64" and self._encoding == "none"

    @property
    def kind(self) -> Kind:  # type: ignore[override]
        if self._encoding != "none":
            return Kind.BYTES
        return Kind.FLOAT32 if np.dtype(self._dtype).kind == "f" and not self._bits else Kind.INT64

    @property
    def field(self) -> str:  # type: ignore[override]
        return {Kind.BYTES: "bytes_list", Kind.FLOAT32: "float_list", Kind.INT64: "int64_list"}[self.kind]

    @property
    def tf_dtype(self) -> str:  # type: ignore[override]
        return {Kind.BYTES: "string", Kind.FLOAT32: "float32", Kind.INT64: "int64"}[self.kind]

    @property
    def placeholder(self) -> Any:  # type: ignore[override]
        return {Kind.BYTES: b"", Kind.FLOAT32: 0.0, Kind.INT64: 0}[self.kind]

    missing = None
    object_missing = None

    @property
    def values_per_record(self) -> int | None:  # type: ignore[override]
        if self._encoding != "none":
            return 1
        return None if self._shape[0] is None else math.prod(self._shape)  # type: ignore[arg-type]

    @property
    def plain(self) -> bool:
        return False  # read back as an array, whatever its Example list holds

    @property
    def step_shape(self) -> list[int] | None:
        """A step a row of the first dimension, where it varies (frames ``[T, 8]``: 8 values a step); a step of no
        values would lose T."""
        rest = list(self._shape[1:])
        return rest if self._shape[0] is None and math.prod(rest) else None  # type: ignore[arg-type]

    # claiming a column
    @classmethod
    def claim(cls, series: pd.Series) -> Tensor | None:
        if series.dtype != object:
            return None
        values = series.tolist()
        if not isinstance(next((v for v in values if v is not None), None), np.ndarray):
            return None  # the usual object column (text, lists): told by its first value
        arrays = [(row, v) for row, v in enumerate(values) if v is not None]
        if not arrays or not all(isinstance(v, np.ndarray) and v.ndim >= 1 for _, v in arrays):
            return None
        if not all(v.dtype.name in DTYPES for _, v in arrays):
            return None
        name = series.name
        ranks = _rows_by(arrays, lambda v: v.ndim)
        if len(ranks) > 1:
            raise SchemaError(f"column {name!r} holds arrays of {len(ranks)} ranks ("
                              + "; ".join(f"{rank}-D in {describe_rows(rows, 3)}" for rank, rows in ranks.items())
                              + "): a tensor column's rows have one rank; reshape them to one")
        rank = next(iter(ranks))
        if rank > MAX_RANK:
            raise SchemaError(f"column {name!r} holds {rank}-D arrays: a tensor has at most {MAX_RANK} dimensions")
        shape = [sizes.pop() if len(sizes := {v.shape[d] for _, v in arrays}) == 1 else None for d in range(rank)]
        if rank == 1 and shape[0] is None:
            return None  # lists of varying length: ListOf, as before
        if None in shape[1:]:
            varying = [d for d, size in enumerate(shape) if size is None]
            first = arrays[0][1].shape
            other = next(v.shape for _, v in arrays if v.shape[varying[-1]] != first[varying[-1]])
            raise SchemaError(f"column {name!r}: the arrays' shapes differ in dimension {varying[-1]} (e.g. {first} "
                              f"and {other}): a tensor's rows may differ in their first dimension only")
        return cls(shape, _common_dtype(name, arrays))

    @classmethod
    def of_arrow(cls, arrow_type: Any, hf_feature: Any = None) -> Tensor | None:
        """The tensor a Parquet column holds by its own schema: Arrow's ``fixed_shape_tensor``, nested
        ``fixed_size_list``s, or a Hugging Face ``Array2D``-``Array5D`` (its ``huggingface`` metadata); None for
        any other column."""
        import pyarrow as pa

        if isinstance(hf_feature, dict) and str(hf_feature.get("_type", "")).startswith("Array"):
            try:
                return cls(hf_feature["shape"], hf_feature["dtype"])
            except (KeyError, TypeError, ValueError):
                return None
        if isinstance(arrow_type, pa.FixedShapeTensorType):
            shape, value = list(arrow_type.shape), arrow_type.value_type
        elif pa.types.is_fixed_size_list(arrow_type):
            shape, value = [], arrow_type
            while pa.types.is_fixed_size_list(value):
                shape.append(value.list_size)
                value = value.value_type
        else:
            return None
        try:
            return cls(shape, value.to_pandas_dtype().__name__ if value != pa.bool_() else "bool")
        except (TypeError, ValueError, NotImplementedError):
            return None

    # writing
    def check(self, value: Any, sources: set[str]) -> Any:
        array = _stacked(value)
        if array.ndim == 1 and len(self._shape) > 1 and None not in self._shape and \
                array.size == math.prod(self._shape):  # type: ignore[arg-type]
            array = array.reshape(self._shape)  # Arrow's fixed_shape_tensor, as pandas gives it: flat
        if array.dtype.name != self._dtype:
            if not np.can_cast(array.dtype, self._dtype, "safe"):
                raise TypeError(f"a {array.dtype} array")
            array = array.astype(self._dtype)
        if array.ndim != len(self._shape) or any(d is not None and d != n for d, n in zip(self._shape, array.shape)):
            # a row that breaks the shape its column was given: that row is an error, the others are written
            return refused(ImageError("tensor_shape", f"an array of shape {array.shape}, not of the column's "
                                                      f"shape {self._shape}"))
        sources.add("ndarray")
        return self._feature(array)

    feature_bytes = True  # each checked value is its serialized tf.train.Feature

    def _feature(self, array: np.ndarray) -> bytes:
        """``array`` as the serialized tf.train.Feature a record holds (what protobuf writes for it): a FloatList
        packed from the float32 bytes, an Int64List, or a BytesList of the array's little-endian bytes."""
        if self._encoding != "none":
            raw = np.ascontiguousarray(array, array.dtype.newbyteorder("<")).tobytes()
            raw = zlib.compress(raw) if self._encoding == "zlib" else raw
            return _nested(1, raw)  # Feature.bytes_list: BytesList.value
        if self.kind is Kind.FLOAT32:
            packed = np.ascontiguousarray(array, np.dtype("<f4"))
            return _nested(2, packed.data) if packed.size else b"\x12\x00"  # Feature.float_list: packed value
        from tfrecorder.dataset.example_proto import Feature

        ints = array.ravel().view(np.int64) if self._bits else array.ravel().astype(np.int64)
        feature = Feature()
        feature.int64_list.value.extend(ints.tolist())
        return feature.SerializeToString()

    def hashes(self, values: Sequence[Any] | np.ndarray) -> np.ndarray:
        """By the stored Feature's bytes."""
        return object_hashes(object_array(values))

    def arrow_type(self) -> Any:
        import pyarrow as pa

        return pa.large_binary()

    # tf.io
    def parse_spec(self, feature: FeatureInfo) -> Any:
        import tensorflow as tf

        wire = tf.as_dtype(self.tf_dtype)
        if self._shape[0] is None:
            return tf.io.RaggedFeature(wire)
        if self._encoding != "none":
            default = self._stored_zeros() if feature.nullable else None
            return tf.io.FixedLenFeature([], tf.string, default_value=default)
        default = np.zeros(self._shape, wire.as_numpy_dtype).tolist() if feature.nullable else None
        return tf.io.FixedLenFeature(list(self._shape), wire, default_value=default)

    def _stored_zeros(self) -> bytes:
        raw = np.zeros(self._shape, np.dtype(self._dtype).newbyteorder("<")).tobytes()
        return zlib.compress(raw) if self._encoding == "zlib" else raw

    def decode(self, tensor: Any) -> Any:
        import tensorflow as tf

        dtype = tf.as_dtype(self._dtype)
        if self._encoding != "none":
            if self._encoding == "zlib":
                tensor = tf.io.decode_compressed(tensor, compression_type="ZLIB")
            values = tf.io.decode_raw(tensor, tf.uint8 if dtype == tf.bool else dtype, little_endian=True)
            values = tf.cast(values, tf.bool) if dtype == tf.bool else values
            return tf.reshape(values, tf.concat([tf.shape(tensor), self._shape], 0))
        if self._bits:
            tensor = tf.bitcast(tensor, tf.float64) if not isinstance(tensor, tf.RaggedTensor) else \
                tensor.with_flat_values(tf.bitcast(tensor.flat_values, tf.float64))
        values = tf.cast(tensor, dtype) if tensor.dtype != dtype else tensor
        if self._shape[0] is not None:
            return values
        rest = list(self._shape[1:])
        if not isinstance(values, tf.RaggedTensor):  # one record: its flat values
            return tf.reshape(values, [-1, *rest])
        per_row = math.prod(rest)  # type: ignore[arg-type]
        return tf.RaggedTensor.from_row_lengths(tf.reshape(values.flat_values, [-1, *rest]),
                                                values.row_lengths() // per_row)

    # numpy
    def from_wire(self, items: list[Any]) -> np.ndarray:
        if self._encoding != "none":
            raw = bytes(items[0])
            raw = zlib.decompress(raw) if self._encoding == "zlib" else raw
            return np.frombuffer(raw, np.dtype(self._dtype).newbyteorder("<")).astype(self._dtype) \
                .reshape(self._shape)
        if self._bits:
            flat = np.asarray(items, np.int64).view(np.float64)
        else:
            flat = np.asarray(items, np.float32 if self.kind is Kind.FLOAT32 else np.int64).astype(self._dtype)
        return flat.reshape([-1 if d is None else d for d in self._shape])

    # TFDS
    def tfds(self, feature: FeatureInfo, context: Mapping[str, Any]) -> tuple[dict[str, Any] | None, str]:
        if self._bits:
            return None, ("float64 values of a varying shape, stored as the int64 bits of each (a FloatList would "
                          "round them)")
        return {"pythonClassName": TFDS_CLASS + "tensor_feature.Tensor",
                "tensor": {"shape": {"dimensions": [str(-1 if d is None else d) for d in self._shape]},
                           "dtype": self._dtype, "encoding": self._encoding}}, ""


def _nested(field: int, payload: Any) -> bytes:
    """Feature field ``field`` holding a list whose field 1 is ``payload`` (bytes, or a buffer of packed numbers),
    serialized as protobuf writes it, with one copy of the payload."""
    inner = _key(1, len(payload) if isinstance(payload, bytes) else payload.nbytes)
    return b"".join((_key(field, len(inner) + len(payload) if isinstance(payload, bytes) else len(inner) +
                          payload.nbytes), inner, payload))


def _key(field: int, size: int) -> bytes:
    """A length-delimited field's tag and length (a varint)."""
    out = bytearray([field << 3 | 2])
    while True:
        byte, size = size & 0x7F, size >> 7
        out.append(byte | (0x80 if size else 0))
        if not size:
            return bytes(out)


def _stacked(value: Any) -> np.ndarray:
    """An array from nested arrays and lists (a Parquet column of nested lists, as pandas gives it)."""
    array = np.asarray(value)
    if array.dtype == object and array.size:
        array = np.stack([_stacked(v) for v in array])
    return array


def _rows_by(arrays: list[tuple[int, np.ndarray]], key: Any) -> dict[Any, list[int]]:
    found: dict[Any, list[int]] = defaultdict(list)
    for row, value in arrays:
        found[key(value)].append(row)
    return dict(found)


def _common_dtype(name: Any, arrays: list[tuple[int, np.ndarray]]) -> str:
    """The dtype every row's values keep (integers widened among integers, floats among floats); a SchemaError
    naming the rows of each dtype where they are of kinds that do not mix."""
    dtypes = _rows_by(arrays, lambda v: v.dtype.name)
    if len(dtypes) == 1:
        return next(iter(dtypes))
    common = np.result_type(*dtypes).name
    kinds = {np.dtype(d).kind for d in dtypes}
    if common in DTYPES and (kinds <= {"i", "u"} or kinds == {"f"}) and all(
            np.can_cast(d, common, "safe") for d in dtypes):
        return common
    raise SchemaError(f"column {name!r} holds arrays of dtypes that do not mix without changing values ("
                      + "; ".join(f"{d} in {describe_rows(rows, 3)}" for d, rows in dtypes.items())
                      + "): cast them to one (np.ndarray.astype)")
