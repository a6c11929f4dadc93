"""Frames: read_tfr, a dataset back into a pandas DataFrame with the original column names and dtypes."""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from PIL import Image

from tfrecorder.dataset import connectors, dtypes
from tfrecorder.dataset.boxes import turn
from tfrecorder.dataset.connectors import Connector
from tfrecorder.dataset.example_proto import parse_example
from tfrecorder.dataset.file_formats import format_of_file
from tfrecorder.dataset.layouts import DEFAULT, RecordLayout, first_class_id_of, layout_of
from tfrecorder.dataset.manifest import MANIFEST_NAME, FeatureInfo, Manifest
from tfrecorder.dataset.storage import Folder
from tfrecorder.dataset.store_requests import DEFAULT_STORAGE_TIMEOUT
from tfrecorder.errors import TFRecorderError
from tfrecorder.read import wire
from tfrecorder.read.open import check_shard, check_shards, open_dataset, reading, records_problem


def read_tfr(tfrecord_dir: str, split: str | None = None, columns: Sequence[str] | None = None,
             storage_timeout: float = DEFAULT_STORAGE_TIMEOUT, version: int | None = None) -> pd.DataFrame:
    """A dataset written by tfrecorder as a DataFrame: one row per record, in stored order.

    Columns carry their input names and pandas dtypes, as dataset.json records them (int8 ... uint64, nullable
    where values are missing; float16/32/64, a float64 column holding the float32 values stored; bool; category
    with its categories; datetime64 with its time zone; timedelta64; text as str; bytes as bytes; lists as
    lists); missing values are NA. Datasets without recorded dtypes give ints as int64 and floats as float32.
    String labels come back as names in the label column, with their ids in ``label_id``; images as
    their stored bytes with ``image_*`` columns. A detection dataset, in either ``record_format``, gives a row
    per box (an image without boxes one row), its edges as written; a split that wrote no record, an empty frame
    with the same columns. With ``split=None`` every split is read, in
    TRAIN, VALIDATION, TEST order. Reads with plain Python: TensorFlow is not imported. ``storage_timeout``:
    seconds one object-store (gs://) operation may take, its retries included.

    Args:
        tfrecord_dir: a dataset folder (ours, or others' TFRecords: a folder, a glob or a list of files).
        split: the split to read; None: every split.
        columns: the columns to read (None: every one).
        storage_timeout: seconds one object-store operation may take, its retries included.
        version: the dataset version to read (``tfrecorder.versions``): its shards and counts; None: the latest.

    Returns:
        A DataFrame, a row per record (a detection dataset: a row per box).

    Examples:
        >>> df = tfrecorder.read_tfr(dataset_dir, split="TRAIN", columns=["label", "weight"])
        >>> list(df.columns)
        ['label', 'weight']
    """
    with reading(tfrecord_dir, storage_timeout):
        return _read_tfr(*open_dataset(tfrecord_dir, storage_timeout, version), split, columns)


def _read_tfr(manifest: Manifest, folder: Folder, split: str | None, columns: Sequence[str] | None) -> pd.DataFrame:
    names = [manifest.split_name(split)] if split is not None else list(manifest.splits)
    layout = _Columns.of(manifest)
    available = layout.columns
    if columns is not None:
        missing = [c for c in columns if c not in available]
        if missing:
            raise TFRecorderError(f"columns {missing} are not in the dataset; it has {available}")
    # A detection dataset's every feature is read: the boxes need the image's size and orientation.
    wanted = set(available if columns is None or layout.boxes is not None else columns)
    if layout.label_column is not None and f"{layout.label_column}_id" in wanted:
        wanted.add(layout.label_column)
    features = [f for f in manifest.features if layout.read(f, wanted)]  # only these are decoded
    check_shards(manifest, folder, names)
    expected = sum(shard.records for name in names for shard in manifest.splits[name])
    collectors = [_Collector(f, expected) for f in features]
    rows = 0
    for name in names:
        for decoded in decoded_batches(manifest, folder, name, features):  # a batch of records at a time
            rows += decoded.records
            for collector, column in zip(collectors, decoded.columns):
                collector.add(column)
    # From each column's array, not a Series: pandas would align and copy the 10,000 Series of a wide table.
    frame = pd.DataFrame({_column_name(c.feature): c.array() for c in collectors},
                         index=pd.RangeIndex(rows), copy=False)  # rows even when records have no features
    label_column, where = layout.label_column, folder.url_of(MANIFEST_NAME)
    if layout.boxes is not None:
        frame = _one_row_per_box(frame, manifest, layout, where)
    elif label_column in frame:
        ids = frame[label_column]
        frame[f"{label_column}_id"] = ids
        frame[label_column] = _label_names(ids, manifest.vocabulary or [], where)
    return frame[[c for c in available if c in frame] if columns is None else list(columns)]


@dataclass(frozen=True)
class _Columns:
    """How a dataset's records become read_tfr's columns: a row per record; or for a detection dataset, in
    either record layout (``records``), a row per box with its edges as columns."""

    columns: list[str]  # what read_tfr gives, in order
    label_column: str | None  # the label's column (names; ids beside it in "<column>_id"), for string labels
    boxes: list[str] | None = None  # a detection dataset's box features: objects/bbox, or the four edges'
    box_columns: tuple[str, ...] = ()  # the edges' columns (xmin, ymin, xmax, ymax)
    label: str = ""  # the objects' label feature
    label_out: str = ""  # the objects' label column
    per_object: tuple[str, ...] = ()  # the objects' other features
    hidden: tuple[str, ...] = ()  # features read, not given (the names the Object Detection API stores by the ids)
    keypoints: tuple[str, ...] = ()  # the objects' keypoint features (objects.keypoints), given as one column
    keypoint_column: str = ""  # ... their input column: [x, y, v] * K an object, as the table gave them
    keypoint_count: int = 0
    records: RecordLayout = DEFAULT
    mask: str = ""  # the objects' instance masks' column as read (objects.instance_masks), given as MASK_COLUMN

    @classmethod
    def of(cls, manifest: Manifest) -> _Columns:
        label = manifest.label or {}
        vocabulary = manifest.vocabulary is not None
        available = [_column_name(f) for f in manifest.features]
        objects = manifest.objects
        if objects is None:
            label_column = label.get("column") if vocabulary else None
            if label_column in available:
                available.append(f"{label_column}_id")
            return cls(available, label_column)
        records = layout_of(manifest)
        label_feature = manifest.feature(objects["label"])
        column = label.get("column") or _column_name(label_feature)
        # each box feature's column: ours "xmin,ymin,xmax,ymax" (the four edges in one list), or an edge's own
        boxes = [f.name for f in records.box_features]
        held = [_column_name(manifest.feature(b)) for b in boxes]
        edges = tuple(edge for names, stored in zip(held, records.box_edges)
                      for edge in names.split(",", len(stored) - 1))
        text = records.class_text  # the class names a layout stores beside the ids: read_tfr gives the ids' names
        hidden = tuple(f.name for f in manifest.features if text is not None and f.name == text.name)
        keypoints = objects.get("keypoints") or {}
        points = tuple(keypoints.get("features", ()))
        masks = objects.get("instance_masks") or {}
        mask = _column_name(manifest.feature(masks["feature"])) if masks else ""
        available = [column if c == _column_name(label_feature) else c for c in available
                     if c not in hidden and c not in held and c not in points and c != mask]
        available[available.index(column):0] = edges  # the long form's order: edges first
        if points:
            available.append(keypoints["column"])
        if mask:
            available.append(MASK_COLUMN)
        if vocabulary:
            available.append(f"{column}_id")
        return cls(available, column if vocabulary else None, boxes, edges, label_feature.name, column,
                   tuple(objects.get("features", ())), hidden, points, keypoints.get("column", ""),
                   int(keypoints.get("count") or 0), records, mask)

    def read(self, feature: FeatureInfo, wanted: set[str]) -> bool:
        """Whether read_tfr decodes ``feature`` to give the ``wanted`` columns."""
        return self.boxes is not None or _column_name(feature) in wanted


def _one_row_per_box(frame: pd.DataFrame, manifest: Manifest, layout: _Columns, where: str) -> pd.DataFrame:
    """A detection dataset's records (a row per image, its objects in lists) as the long form it was written
    from: a row per box, its edges in the units written (dataset.json's ``box_units``) and in the frame of
    the picture as displayed; an image without objects one row, its label and box missing."""
    objects = manifest.objects or {}
    box_names = [_column_name(manifest.feature(b)) for b in layout.boxes or ()]
    label = _column_name(manifest.feature(str(layout.label)))
    per_object = [label, *(_column_name(manifest.feature(name)) for name in layout.per_object)]
    hidden = [_column_name(manifest.feature(h)) for h in layout.hidden]
    # A record may leave an object list out where it has no objects (other tools' Object Detection API records)
    lists = {name: [[] if v is None else v for v in frame[name]]
             for name in (*box_names, *per_object, *hidden, *layout.keypoints) if frame[name].isna().any()}
    frame = frame.assign(**lists) if lists else frame
    counts = np.fromiter(map(len, frame[label]), np.int64, len(frame))
    repeat = np.maximum(counts, 1)
    masks = [layout.mask] if layout.mask else []
    rows = frame.drop(columns=[*box_names, *per_object, *hidden, *layout.keypoints, *masks]).iloc[
        np.repeat(np.arange(len(frame)), repeat)]
    rows = rows.reset_index(drop=True)
    has = np.repeat(counts > 0, repeat)  # the rows that are objects (the others: images without any)
    records = layout.records
    flat = records.stored_boxes([_flat(frame[name]) for name in box_names])  # each object's, normalized
    orientations = _orientations(frame, manifest, records)
    object_orientations = np.repeat(orientations, counts)
    for orientation in np.unique(object_orientations):  # into the displayed picture's frame
        mine = object_orientations == orientation
        flat[mine] = turn(flat[mine], int(orientation))
    sizes = _displayed_sizes(frame, orientations, records) if objects.get("box_units") == "pixels" else None
    if sizes is not None:
        flat *= np.repeat(np.concatenate([sizes, sizes], axis=1), counts, axis=0)
    boxes = np.full((len(rows), 4), np.nan)
    boxes[has] = flat
    for i, name in enumerate(layout.box_columns):
        rows[name] = boxes[:, i]
    ids = [v for items in frame[label] for v in items]
    first = first_class_id_of(manifest)
    if manifest.vocabulary is not None and first:
        ids = [v - first for v in ids]  # the Object Detection API's count from 1
    values = {layout.label_out: ids, **{name: [v for items in frame[name] for v in items] for name in per_object[1:]},
              **({MASK_COLUMN: [v for items in frame[masks[0]] for v in items]} if masks else {})}  # a PNG an object
    if layout.label_column is not None:
        names = _label_names(pd.Series(ids, dtype="int64"), manifest.vocabulary or [], where).tolist()
        values = {**values, layout.label_column: names, f"{layout.label_column}_id": ids}
    for name, found in values.items():
        column = pd.Series([pd.NA] * len(rows), dtype=object)
        column[has] = found
        rows[name] = column if not found or isinstance(found[0], str) else pd.array(column.tolist())
    if layout.keypoints:  # a list an object; None for an image without objects
        points = np.full(len(rows), None, dtype=object)
        for at, given in zip(np.flatnonzero(has), _given_keypoints(frame, layout, object_orientations, sizes, counts)):
            points[at] = given
        rows[layout.keypoint_column] = points
    return rows


def _given_keypoints(frame: pd.DataFrame, layout: _Columns, orientations: np.ndarray, sizes: np.ndarray | None,
                     counts: np.ndarray) -> list[list[float]]:
    """Each object's keypoints as the table gave them: ``[x, y, v] * K`` in the units written and the frame of
    the picture as displayed (``orientations``: each object's; ``sizes``: each record's displayed (width,
    height) where the units are pixels); an unlabelled point (v 0) as 0, 0, 0."""
    count = layout.keypoint_count
    points, visibility = layout.records.stored_keypoints([_flat(frame[name]) for name in layout.keypoints], count)
    xy = np.concatenate([points[..., ::-1], points[..., ::-1]], axis=-1)  # each point a box of no size: x, y, x, y
    for orientation in np.unique(orientations):  # into the displayed picture's frame
        mine = orientations == orientation
        xy[mine] = turn(xy[mine].reshape(-1, 4), int(orientation)).reshape(-1, count, 4)
    xy = xy[..., :2]
    if sizes is not None:
        xy = xy * np.repeat(sizes, counts, axis=0)[:, None, :]
    given = np.concatenate([xy, visibility[..., None].astype(np.float64)], axis=-1)
    given[visibility == 0] = 0.0
    return [v.ravel().tolist() for v in given]


def _flat(lists: pd.Series) -> np.ndarray:
    """Every record's values of a list feature, one after another."""
    return np.array([v for values in lists for v in values], np.float64)


def _orientations(frame: pd.DataFrame, manifest: Manifest, records: RecordLayout) -> np.ndarray:
    """Each record's EXIF orientation: stored beside the image in our layout; in the Object Detection API's,
    read from the image's own bytes (its boxes are in the stored pixels' frame) when any image was turned."""
    if records.orientation is not None:
        return (frame[records.orientation.name].to_numpy() if records.orientation.name in frame
                else np.ones(len(frame), np.int64))
    turned = set((manifest.image or {}).get("orientations") or [1]) != {1}
    if not turned or records.image.name not in frame:
        return np.ones(len(frame), np.int64)
    return np.fromiter((_exif_orientation(data) for data in frame[records.image.name]), np.int64, len(frame))


def _exif_orientation(data: bytes) -> int:
    """The EXIF orientation (1-8) of encoded image bytes, read from its header; 1 when it has none."""
    try:
        with Image.open(io.BytesIO(data)) as image:
            value = image.getexif().get(_EXIF_ORIENTATION, 1)
    except Exception:  # noqa: BLE001 - an unreadable EXIF block counts as none, as viewers treat it
        return 1
    return value if isinstance(value, int) and 1 <= value <= 8 else 1


_EXIF_ORIENTATION = 0x0112


def _displayed_sizes(frame: pd.DataFrame, orientations: np.ndarray, records: RecordLayout) -> np.ndarray:
    """Each record's picture's (width, height) as displayed: stored so in our layout; the Object Detection API's
    layout stores the stored pixels' size, which a quarter turn (orientations 5-8) swaps."""
    sizes = frame[[records.width.name, records.height.name]].to_numpy(np.float64)
    if records.size_displayed:
        return sizes
    quarter = np.isin(orientations, (5, 6, 7, 8))
    sizes[quarter] = sizes[quarter][:, ::-1]
    return sizes


# Records decoded together: enough that numpy's cost per call vanishes, few enough to stay small in memory. A
# batch is never under _MIN_BATCH_RECORDS records (past the bytes bound): each feature costs a few numpy calls a
# batch, so batches that shrink as tables widen would make wide tables cost columns x columns.
_BATCH_RECORDS, _BATCH_BYTES, _MIN_BATCH_RECORDS = 16384, 1 << 23, 256


@dataclass(frozen=True)
class Decoded:
    """A batch of a split's records, decoded: ``columns`` holds one column per feature asked for, in that order."""

    records: int
    columns: list[wire.Numbers | wire.Binary | wire.Objects]


def decoded_batches(manifest: Manifest, folder: Folder, split: str, features: Sequence[FeatureInfo]):
    """``split``'s records a batch at a time, each feature of ``features`` decoded into a column: by the wire
    reader where the records allow, else by protobuf (SequenceExamples, a batch not in the plain layout). What
    read_tfr and the statistics' one pass over the shards read."""
    parse_record = layout_of(manifest).parse_record if layout_of(manifest).sequences else None
    for records, where, first in _batches(folder, manifest, split):
        decoded = None if parse_record is not None else wire.decode(records, features)
        if decoded is None:
            parse = parse_record or parse_example
            examples = [parse(r, where, first + i) for i, r in enumerate(records)]
            decoded = [_decoded(examples, f) for f in features]
        yield Decoded(len(records), decoded)


def _batches(folder: Folder, manifest: Manifest, split: str):
    """(records, shard URL, number of the first) for each batch of ``split``'s records, shard by shard;
    each shard checked against dataset.json as it is opened."""
    for shard in manifest.splits[split]:
        check_shard(folder, manifest, split, shard)  # as it is opened: a replaced file is an error
        url = folder.url_of(shard.file)
        held = 0
        with folder.open(shard.file) as f:
            batch: list[bytes] = []
            first = size = 0
            blocks = format_of_file(shard.file).read_blocks(f, folder, folder.join(shard.file), manifest.compression)
            try:
                for block in blocks:
                    if not batch:
                        first = block.first
                    batch.extend(block.records)
                    held += len(block.records)
                    size += sum(map(len, block.records))
                    if len(batch) >= _BATCH_RECORDS or (size >= _BATCH_BYTES and len(batch) >= _MIN_BATCH_RECORDS):
                        yield batch, url, first
                        batch, size = [], 0
            except TFRecorderError as e:
                raise TFRecorderError(f"{url}: {e}") from e
            if held != shard.records and shard.crc32c:  # ours: the shard checked, so dataset.json was edited
                raise TFRecorderError(f"{folder.url_of(MANIFEST_NAME)}: {records_problem(split, shard, held)}: "
                                      f"dataset.json was edited or damaged; convert again")
            if batch:
                yield batch, url, first


def _label_names(ids: pd.Series, vocabulary: list[str], where: str) -> pd.Series:
    """Label ids (one a row, or a list a row) as their names; an id beyond the vocabulary (a shortened one) is
    an error naming dataset.json, never a wrong name."""
    if ids.dtype == "int64":  # one label per row, none missing: a lookup, not a Python call per row
        _check_ids(ids.to_numpy(), vocabulary, where)
        return pd.Series(np.asarray(vocabulary, dtype=object)[ids.to_numpy()], index=ids.index, dtype="str")
    flat = [i for v in ids for i in (v if isinstance(v, list) else [] if pd.isna(v) else [v])]
    _check_ids(np.asarray(flat, np.int64), vocabulary, where)
    return ids.map(lambda v: [vocabulary[i] for i in v] if isinstance(v, list) else vocabulary[v])


def _check_ids(ids: np.ndarray, vocabulary: list[str], where: str) -> None:
    wrong = ids[(ids < 0) | (ids >= len(vocabulary))]
    if len(wrong):
        raise TFRecorderError(f"{where}: the records hold label id {wrong[0]}, beyond the label vocabulary of "
                              f"{len(vocabulary)} names: dataset.json was edited or damaged; convert again")


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
        if isinstance(column, wire.Binary) and not self._connector.plain:  # one bytes value a record, read by its kind
            column = wire.Objects([None if v is None else [v] for v in column.values.to_pylist()])
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
        if not self._connector.plain:
            objects, self._objects = self._objects, []
            if not self._connector.nested:  # a kind that reads its record's stored list itself
                return self._connector.values_column([None if v is None else self._connector.from_wire(v)
                                                      for v in objects])
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
    """The feature's kind of value, as dataset.json names it: scalar numbers (``numbers`` set) come from
    wire.decode as wire.Numbers."""
    return connectors.of(feature)


def _decoded(examples: list[Any], feature: FeatureInfo) -> wire.Numbers | wire.Binary | wire.Objects:
    """One feature over parsed Examples, as wire.decode gives it."""
    connector = _connector(feature)
    field, name, is_list = connector.field, feature.name, not connector.plain
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


MASK_COLUMN = "mask"  # read_tfr's column of each object's instance mask: its PNG (one channel, 0/1)


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
