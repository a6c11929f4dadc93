"""Frames: read_tfr, a dataset back into a pandas DataFrame with the original column names and dtypes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from tfrecorder.dataset import dtypes
from tfrecorder.dataset.boxes import turn
from tfrecorder.dataset.connectors import Connector, connector_of
from tfrecorder.dataset.example_proto import parse_example
from tfrecorder.dataset.features import (
    DEFAULT_RECORD_FORMAT,
    IMAGE,
    IMAGE_HEIGHT,
    IMAGE_ORIENTATION,
    IMAGE_WIDTH,
)
from tfrecorder.dataset.manifest import FeatureInfo, Manifest
from tfrecorder.dataset.records import read_blocks
from tfrecorder.dataset.storage import DEFAULT_STORAGE_TIMEOUT, Folder
from tfrecorder.errors import TFRecorderError
from tfrecorder.read import wire
from tfrecorder.read.open import check_shard, check_shards, open_dataset, reading


def read_tfr(tfrecord_dir: str, split: str | None = None, columns: Sequence[str] | None = None,
             storage_timeout: float = DEFAULT_STORAGE_TIMEOUT) -> pd.DataFrame:
    """A dataset written by tfrecorder as a DataFrame: one row per record, in stored order.

    Columns carry their input names and pandas dtypes, as dataset.json records them (int8 ... uint64, nullable
    where values are missing; float16/32/64, a float64 column holding the float32 values stored; bool; category
    with its categories; datetime64 with its time zone; timedelta64; text as str; bytes as bytes; lists as
    lists); missing values are NA. Datasets without recorded dtypes give ints as int64 and floats as float32.
    String labels come back as names in the label column, with their ids in ``label_id``; images as
    their stored bytes with ``image_*`` columns. With ``split=None`` every split is read, in
    TRAIN, VALIDATION, TEST order. Reads with plain Python: TensorFlow is not imported. ``storage_timeout``:
    seconds one object-store (gs://) operation may take, its retries included.

    Examples:
        >>> df = tfrecorder.read_tfr(dataset_dir, split="TRAIN", columns=["label", "weight"])
        >>> list(df.columns)
        ['label', 'weight']
    """
    with reading(tfrecord_dir, storage_timeout):
        return _read_tfr(*open_dataset(tfrecord_dir, storage_timeout), split, columns)


def _read_tfr(manifest: Manifest, folder: Folder, split: str | None, columns: Sequence[str] | None) -> pd.DataFrame:
    names = [manifest.split_name(split)] if split is not None else list(manifest.splits)
    label = manifest.label or {}
    label_column = label.get("column") if manifest.vocabulary is not None else None
    available = [_column_name(f) for f in manifest.features]
    if label_column in available:
        available.append(f"{label_column}_id")
    if columns is not None:
        missing = [c for c in columns if c not in available]
        if missing:
            raise TFRecorderError(f"columns {missing} are not in the dataset; it has {available}")
    objects = manifest.objects
    if objects is not None and objects.get("record_format", DEFAULT_RECORD_FORMAT) != DEFAULT_RECORD_FORMAT:
        objects = None  # the Object Detection API's layout: a row per record, its objects' lists as they are
    if objects is not None:  # a row per box: the box's edges are columns, the objects/ lists are exploded
        box_columns = (manifest.feature(objects["bbox"]).column or "").split(",")
        available = [c for c in available if c != ",".join(box_columns)]
        available[available.index(str(label.get("column"))):0] = box_columns  # the long form's order: edges first
        if columns is not None:
            missing = [c for c in columns if c not in available]
            if missing:
                raise TFRecorderError(f"columns {missing} are not in the dataset; it has {available}")
        columns_given, columns = columns, None  # every feature read: the boxes need the image's size
    wanted = set(available if columns is None else columns)
    if objects is not None:
        wanted.add(",".join(box_columns))
    if label_column is not None and f"{label_column}_id" in wanted:
        wanted.add(label_column)
    features = [f for f in manifest.features if _column_name(f) in wanted]  # only these are decoded
    check_shards(manifest, folder, names)
    expected = sum(shard.records for name in names for shard in manifest.splits[name])
    collectors = [_Collector(f, expected) for f in features]
    rows = 0
    for name in names:
        for records, where, first in _batches(folder, manifest, name):  # a batch of records at a time
            rows += len(records)
            decoded = wire.decode(records, features)
            if decoded is None:  # not in the plain layout: protobuf decodes it
                examples = [parse_example(r, where, first + i) for i, r in enumerate(records)]
                decoded = [_decoded(examples, f) for f in features]
            for collector, column in zip(collectors, decoded):
                collector.add(column)
    # From each column's array, not a Series: pandas would align and copy the 10,000 Series of a wide table.
    frame = pd.DataFrame({_column_name(c.feature): c.array() for c in collectors},
                         index=pd.RangeIndex(rows), copy=False)  # rows even when records have no features
    if label_column in frame:
        ids = frame[label_column]
        frame[f"{label_column}_id"] = ids
        frame[label_column] = _label_names(ids, manifest.vocabulary or [])
    if objects is not None:
        frame = _one_row_per_box(frame, manifest, box_columns)
        return frame[[c for c in available if c in frame] if columns_given is None else list(columns_given)]
    return frame[list(columns)] if columns is not None else frame


def _one_row_per_box(frame: pd.DataFrame, manifest: Manifest, box_columns: list[str]) -> pd.DataFrame:
    """A detection dataset's records (a row per image, its objects in lists) as the long form it was written
    from: a row per box, its edges in the units written (dataset.json's ``box_units``) and in the frame of
    the picture as displayed; an image without objects one row, its label and box missing."""
    objects = manifest.objects or {}
    bbox = ",".join(box_columns)
    per_object = [_column_name(manifest.feature(name)) for name in
                  (objects["label"], *objects.get("features", ()))]
    per_object += [f"{per_object[0]}_id"] if f"{per_object[0]}_id" in frame else []
    counts = frame[per_object[0]].map(len).to_numpy()
    repeat = np.maximum(counts, 1)
    rows = frame.drop(columns=[bbox, *per_object]).iloc[np.repeat(np.arange(len(frame)), repeat)]
    rows = rows.reset_index(drop=True)
    has = np.repeat(counts > 0, repeat)  # the rows that are objects (the others: images without any)
    boxes = np.full((len(rows), 4), np.nan)
    flat = np.array([v for values in frame[bbox] for v in values], np.float64).reshape(-1, 4)[:, [1, 0, 3, 2]]
    orientations = np.repeat(frame[IMAGE_ORIENTATION.name].to_numpy() if IMAGE_ORIENTATION.name in frame
                             else np.ones(len(frame), int), counts)
    for orientation in np.unique(orientations):  # into the displayed picture's frame
        mine = orientations == orientation
        flat[mine] = turn(flat[mine], int(orientation))
    if objects.get("box_units") == "pixels":
        sizes = frame[[IMAGE_WIDTH.name, IMAGE_HEIGHT.name]].to_numpy(np.float64)
        flat *= np.repeat(np.concatenate([sizes, sizes], axis=1), counts, axis=0)
    boxes[has] = flat
    for i, name in enumerate(box_columns):
        rows[name] = boxes[:, i]
    for name in per_object:
        values = [v for items in frame[name] for v in items]
        column = pd.Series([pd.NA] * len(rows), dtype=object)
        column[has] = values
        rows[name] = column if not values or isinstance(values[0], str) else pd.array(column.tolist())
    return rows


# Records decoded together: enough that numpy's cost per call vanishes, few enough to stay small in memory. A
# batch is never under _MIN_BATCH_RECORDS records (past the bytes bound): each feature costs a few numpy calls a
# batch, so batches that shrink as tables widen would make wide tables cost columns x columns.
_BATCH_RECORDS, _BATCH_BYTES, _MIN_BATCH_RECORDS = 16384, 1 << 23, 256


def _batches(folder: Folder, manifest: Manifest, split: str):
    """(records, shard URL, number of the first) for each batch of ``split``'s records, shard by shard;
    each shard checked against dataset.json as it is opened."""
    for shard in manifest.splits[split]:
        check_shard(folder, shard, manifest.compression)  # as it is opened: a replaced file is an error
        url = folder.url_of(shard.file)
        with folder.open(shard.file) as f:
            batch: list[bytes] = []
            first = size = 0
            try:
                for block in read_blocks(f, manifest.compression):
                    if not batch:
                        first = block.first
                    batch.extend(block.records)
                    size += sum(map(len, block.records))
                    if len(batch) >= _BATCH_RECORDS or (size >= _BATCH_BYTES and len(batch) >= _MIN_BATCH_RECORDS):
                        yield batch, url, first
                        batch, size = [], 0
            except TFRecorderError as e:
                raise TFRecorderError(f"{url}: {e}") from e
            if batch:
                yield batch, url, first


def _label_names(ids: pd.Series, vocabulary: list[str]) -> pd.Series:
    if ids.dtype == "int64":  # one label per row, none missing: a lookup, not a Python call per row
        return pd.Series(np.asarray(vocabulary, dtype=object)[ids.to_numpy()], index=ids.index, dtype="str")
    return ids.map(lambda v: [vocabulary[i] for i in v] if isinstance(v, list) else vocabulary[v])


class _Collector:
    """One feature's values over the batches read so far: numbers in numpy arrays (with a mask of the
    missing ones), never a Python object per number; bytes and text in pyarrow arrays; lists as objects.

    Numbers go straight into arrays of the expected row count (dataset.json's): joining per-batch arrays
    at the end would hold every number column twice at once.
    """

    def __init__(self, feature: FeatureInfo, expected_rows: int):
        self.feature = feature
        self._arrays: list[np.ndarray] = []
        self._masks: list[np.ndarray] = []
        self._objects: list[Any] = []
        self._binary: list[pa.Array] = []
        self._filled = 0
        self._connector = _connector(feature)
        if self._connector.numbers is not None:
            self._arrays = [np.zeros(expected_rows, self._connector.numbers)]
            self._masks = [np.ones(expected_rows, bool)]

    def add(self, column: wire.Numbers | wire.Binary | wire.Objects) -> None:
        if isinstance(column, wire.Objects):
            self._objects.extend(_text(column.values, self.feature))
        elif isinstance(column, wire.Binary):
            self._binary.append(column.values)
        else:
            end = self._filled + len(column.values)
            if len(self._arrays) == 1 and end <= len(self._arrays[0]):
                self._arrays[0][self._filled:end] = column.values
                self._masks[0][self._filled:end] = column.missing
            else:  # more rows than dataset.json counts: arrays joined at the end
                self._arrays = [self._arrays[0][:self._filled], *self._arrays[1:], column.values]
                self._masks = [self._masks[0][:self._filled], *self._masks[1:], column.missing]
            self._filled = end

    def array(self) -> Any:
        """The feature as an array pandas takes as a column; what was collected is let go (the frame is built a
        column at a time)."""
        if self.feature.shape == [None]:
            objects, self._objects = self._objects, []
            array = np.empty(len(objects), dtype=object)
            array[:] = objects
            return array
        if self._connector.numbers is None:
            chunks, self._binary = self._binary, []
            text = _binary_array(pa.chunked_array(chunks, pa.large_binary()), self.feature)
            return dtypes.restore(text, None, self.feature.pandas)
        arrays, masks, self._arrays, self._masks = self._arrays, self._masks, [], []
        values = arrays[0][:self._filled] if len(arrays) == 1 else np.concatenate(arrays)
        missing = masks[0][:self._filled] if len(masks) == 1 else np.concatenate(masks)
        return dtypes.restore(self._connector.column(values, missing, self.feature), missing, self.feature.pandas)


def _connector(feature: FeatureInfo) -> Connector:
    """The feature's kind of value: scalar numbers (``numbers`` set) come from wire.decode as wire.Numbers."""
    return connector_of(feature, IMAGE.name)


def _decoded(examples: list[Any], feature: FeatureInfo) -> wire.Numbers | wire.Binary | wire.Objects:
    """One feature over parsed Examples, as wire.decode gives it."""
    connector = _connector(feature)
    field, name, is_list = connector.field, feature.name, feature.shape == [None]
    values: list[Any] = []
    for example in examples:
        fmap = example.features.feature
        if name not in fmap:
            values.append(None)
            continue
        items = list(getattr(fmap[name], field).value)
        values.append(items if is_list else (items[0] if items else None))
    if is_list:
        return wire.Objects(values)
    if connector.numbers is None:
        return wire.Binary(pa.array(values, type=pa.large_binary()))
    missing = np.fromiter((v is None for v in values), dtype=bool, count=len(values))
    return wire.Numbers(np.fromiter((0 if v is None else v for v in values), dtype=connector.numbers,
                                    count=len(values)), missing)


def _column_name(feature: FeatureInfo) -> str:
    return feature.column or feature.name


def _is_text(feature: FeatureInfo) -> bool:
    """Stored as bytes, read back as str: text columns, and another tool's bytes features (when UTF-8)."""
    return _connector(feature).text(feature)


def _text(values: list[Any], feature: FeatureInfo) -> list[Any]:
    """A list feature's bytes as str for a text feature; another tool's bytes that are not UTF-8 stay bytes."""
    if not _is_text(feature):
        return values
    try:
        return [[v.decode("utf-8") for v in items] if items is not None else None for items in values]
    except UnicodeDecodeError:
        _refuse_unless_foreign(feature)
        return values


def _binary_array(values: pa.ChunkedArray, feature: FeatureInfo) -> Any:
    """A scalar bytes feature's column: str for text (pyarrow-backed, as pandas stores text), else bytes objects."""
    if _is_text(feature):
        try:
            text = pa.chunked_array([chunk.view(pa.large_string()) for chunk in values.chunks], pa.large_string())
            text.validate(full=True)  # UTF-8 checked where the bytes lie: no copy
            return pd.array(text, dtype="str")
        except pa.ArrowInvalid:
            _refuse_unless_foreign(feature)
    return values.to_numpy(zero_copy_only=False)


def _refuse_unless_foreign(feature: FeatureInfo) -> None:
    """Bytes that are not UTF-8 in a text feature: an error for our text columns; another tool's bytes
    features (no source recorded) just stay bytes."""
    if feature.source == "str":
        raise TFRecorderError(f"feature {feature.name!r}: a stored text value is not UTF-8") from None
