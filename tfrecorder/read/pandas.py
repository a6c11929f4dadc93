"""Frames: read_tfr, a dataset back into a pandas DataFrame with the original column names and dtypes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import fsspec
import numpy as np
import pandas as pd

from tfrecorder.dataset.example_proto import parse_example
from tfrecorder.dataset.features import FIELDS, IMAGE
from tfrecorder.dataset.manifest import FeatureInfo, Manifest
from tfrecorder.dataset.records import read_records
from tfrecorder.dataset.storage import Folder
from tfrecorder.errors import TFRecorderError
from tfrecorder.read.open import check_shard, check_shards, open_dataset
from tfrecorder.types import Kind

_NULLABLE_DTYPES = {"int": "Int64", "bool": "boolean", "float": "float32", "str": "str", "bytes": object}
_DTYPES = {"int": "int64", "bool": "bool", "float": "float32", "str": "str", "bytes": object}


def read_tfr(tfrecord_dir: str, split: str | None = None, columns: Sequence[str] | None = None) -> pd.DataFrame:
    """A dataset written by tfrecorder as a DataFrame: one row per record, in stored order.

    Columns carry their input names and dtypes (ints as int64, or Int64 when some were missing;
    floats as float32, as stored; text as str; bytes as bytes; lists as lists); missing values are NA.
    String labels come back as names in the label column, with their ids in ``label_id``; images as
    their stored bytes with ``image_*`` columns. With ``split=None`` every split is read, in
    TRAIN, VALIDATION, TEST order. Reads with plain Python: TensorFlow is not imported.

    Example:
        >>> df = tfrecorder.read_tfr(dataset_dir, split="TRAIN", columns=["label", "weight"])
        >>> list(df.columns)
        ['label', 'weight']
    """
    manifest, folder = open_dataset(tfrecord_dir)
    names = [manifest.split_name(split)] if split is not None else list(manifest.splits)
    check_shards(manifest, folder, names)
    features = manifest.features
    records = [r for name in names for r in _records(folder, manifest, name)]
    data = {_column_name(f): _values(records, f) for f in features}
    frame = pd.DataFrame({name: _series(values, f) for f, (name, values) in zip(features, data.items())},
                         index=pd.RangeIndex(len(records)))  # rows even when records have no features
    vocabulary = manifest.vocabulary
    label = manifest.label or {}
    if vocabulary is not None and label.get("column") in frame:
        column = label["column"]
        ids = frame[column]
        frame[f"{column}_id"] = ids
        frame[column] = ids.map(lambda v: [vocabulary[i] for i in v] if isinstance(v, list) else vocabulary[v])
    if columns is not None:
        missing = [c for c in columns if c not in frame.columns]
        if missing:
            raise TFRecorderError(f"columns {missing} are not in the dataset; it has {list(frame.columns)}")
        frame = frame[list(columns)]
    return frame


def _records(folder: Folder, manifest: Manifest, split: str) -> list[Any]:
    out = []
    for shard in manifest.splits[split]:
        check_shard(folder, shard, manifest.compression)  # as it is opened: a replaced file is an error
        with fsspec.open(folder.url_of(shard.file), "rb") as f:
            try:
                out.extend(parse_example(r, shard.file, i) for i, r in enumerate(read_records(f, manifest.compression)))
            except TFRecorderError as e:
                raise TFRecorderError(f"{folder.url_of(shard.file)}: {e}") from e
    return out


def _column_name(feature: FeatureInfo) -> str:
    return feature.column or feature.name


def _values(records: list[Any], feature: FeatureInfo) -> list[Any]:
    field, name, is_list = FIELDS[feature.dtype], feature.name, feature.shape == [None]
    text = feature.dtype == "string" and feature.source in ("str", None) and feature.name != IMAGE.name
    values: list[Any] = []
    for record in records:
        fmap = record.features.feature
        if name not in fmap:
            values.append(None)
            continue
        items = list(getattr(fmap[name], field).value)
        values.append(items if is_list else (items[0] if items else None))
    if text:
        try:
            values = [_decode(v) for v in values]
        except UnicodeDecodeError:
            if feature.source == "str":
                raise TFRecorderError(f"feature {name!r}: a stored text value is not UTF-8") from None
            # another tool's bytes that are not text: they stay bytes
    return values


def _decode(value: Any) -> Any:
    if isinstance(value, list):
        return [v.decode("utf-8") for v in value]
    return value.decode("utf-8") if value is not None else None


def _series(values: list[Any], feature: FeatureInfo) -> pd.Series:
    if feature.shape == [None]:
        return pd.Series(values, dtype=object)
    if feature.dtype == Kind.FLOAT64:  # stored as the int64 bits of each value; a missing one is NaN
        bits = np.array([0 if v is None else v for v in values], dtype=np.int64).view(np.float64)
        return pd.Series(np.where([v is None for v in values], np.nan, bits), dtype="float64")
    source = feature.source or {"int64": "int", "float32": "float", "string": "str"}[feature.dtype]
    if feature.name == IMAGE.name or any(isinstance(v, bytes) for v in values):
        source = "bytes"
    elif feature.role == "label":
        source = "int"  # ids; names are restored from the vocabulary
    dtype = _NULLABLE_DTYPES[source] if any(v is None for v in values) else _DTYPES[source]
    return pd.Series(values, dtype=dtype)



