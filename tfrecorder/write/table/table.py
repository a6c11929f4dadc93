"""Table (pure data): the validated table every later stage reads - converted columns, splits and image URIs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from tfrecorder.schema import Schema
from tfrecorder.types import ColumnType, Kind


@dataclass(frozen=True)
class Column:
    """One input column, converted: values are int, float, bytes, lists of them, or None (missing).

    A numeric column without missing values keeps its values in a numpy array (8 bytes a value
    instead of ~36 for a list of Python numbers); ``Table.take`` hands each shard a plain list.
    """

    name: str
    feature: str
    type: type[ColumnType]
    nullable: bool
    source: str  # python type of the input values: int, bool, float, str or bytes
    values: list[Any] | np.ndarray  # float64-stored columns hold each value's bits as an int
    stored_as: Kind | None = None  # the kind written, when it is not the type's (float64 for a float column)
    float64_reason: str | None = None  # what float32 would have done to a float column stored as float64
    pandas: dict[str, Any] | None = None  # the input's pandas dtype (dataset.dtypes.describe), for read_tfr

    @property
    def kind(self) -> Kind:
        """The kind its values are written as."""
        return self.stored_as or self.type.kind


@dataclass(frozen=True)
class Table:
    """The validated table: every column converted, every row with a known split."""

    schema: Schema
    num_rows: int
    splits: list[str]
    image_uris: list[str | None] | None  # as written in the input, credentials in URLs redacted
    image_locations: list[str | None] | None  # what to fetch (relative paths resolved)
    label: Column | None
    vocabulary: list[str] | None
    features: tuple[Column, ...]
    box_units: str | None = None  # a detection table's: "pixels" or "normalized" (finalize decides)
    mask_uris: list[str | None] | None = None  # a segmentation table's masks, as written (credentials redacted)
    mask_locations: list[str | None] | None = None  # ... and what to fetch

    @property
    def is_detection(self) -> bool:
        """A table of one row per box (box columns): rows of one image make one record."""
        return bool(self.schema.boxes)

    def order_keys(self) -> np.ndarray:
        """The key rows are spilled, ordered and sharded by: their content (``row_keys``), or for a detection
        table the image's URI, so that every box row of an image meets the others in one bucket whatever
        file or part it came from, and box rows given in another order make the same shards."""
        if self.is_detection:
            return text_hashes(self.image_locations)
        return self.row_keys()

    @property
    def columns(self) -> tuple[Column, ...]:
        """Label (if any) and extra columns, in encoding order."""
        return ((self.label,) if self.label else ()) + self.features

    def row_keys(self) -> np.ndarray:
        """A 64-bit hash of each row's content - split, image URI, label and every column, as validated -
        that does not depend on the row's position, on how the input held it (a DataFrame, a CSV, Parquet) or
        on what the whole table decides (label ids, float32 or float64 storage): the same rows give the same
        keys whatever their order or files, and a part of a table (validate_part) the keys its rows have in
        the whole. Shards are filled and ordered by it."""
        keys = np.zeros(self.num_rows, np.uint64)
        label = self.label
        if label is not None and self.vocabulary is not None:  # label ids: hashed as the text they stand for
            label = replace(label, values=_texts(label.values, self.vocabulary), stored_as=Kind.BYTES)
        parts = [(self.splits, Kind.BYTES, False), (self.image_uris, Kind.BYTES, False),
                 *([(self.mask_uris, Kind.BYTES, False)] if self.mask_uris is not None else []),
                 *((c.values, c.kind, c.type.is_list) for c in ((label,) if label else ()) + self.features)]
        for values, kind, is_list in parts:
            if values is not None:
                keys = (keys * np.uint64(0x100000001B3)) ^ _hashes(values, kind, is_list)  # column order counts
        return keys

    def to_arrow(self) -> Any:
        """The values as a pyarrow Table, a column each (splits, image URIs and locations, then the label and
        extra columns in encoding order): what ``with_values`` reads back. Values only: schema and column
        types stay with the Table."""
        import pyarrow as pa

        columns = {"split": pa.array(self.splits, pa.string())}
        if self.image_uris is not None:
            columns["image_uri"] = pa.array(self.image_uris, pa.string())
            columns["image_location"] = pa.array(self.image_locations, pa.string())
        if self.mask_uris is not None:
            columns["mask_uri"] = pa.array(self.mask_uris, pa.string())
            columns["mask_location"] = pa.array(self.mask_locations, pa.string())
        for i, column in enumerate(self.columns):
            label = column is self.label  # text labels: ids, or in a part (validate_part) still the text
            columns[f"column_{i}"] = pa.array(column.values, _arrow_type(column, label, self.vocabulary is None))
        return pa.table(columns)

    def with_values(self, arrow: Any) -> Table:
        """This table (a template: ``table.take([])``) holding the values of ``arrow``, from ``to_arrow``."""
        columns = [arrow[f"column_{i}"].to_pylist() for i in range(len(self.columns))]
        label = replace(self.label, values=columns.pop(0)) if self.label else None
        images = self.image_uris is not None
        return replace(
            self, num_rows=arrow.num_rows, splits=arrow["split"].to_pylist(),
            image_uris=arrow["image_uri"].to_pylist() if images else None,
            image_locations=arrow["image_location"].to_pylist() if images else None,
            mask_uris=arrow["mask_uri"].to_pylist() if self.mask_uris is not None else None,
            mask_locations=arrow["mask_location"].to_pylist() if self.mask_uris is not None else None,
            label=label, features=tuple(replace(c, values=v) for c, v in zip(self.features, columns)))

    def take(self, rows: Sequence[int]) -> Table:
        """The table of just ``rows`` (positions), in that order: what one shard's writer needs."""

        def pick(values: list[Any] | np.ndarray | None) -> list[Any] | None:
            if isinstance(values, np.ndarray):
                return values[np.asarray(rows, dtype=np.intp)].tolist()
            return None if values is None else [values[i] for i in rows]

        return replace(
            self,
            num_rows=len(rows),
            splits=pick(self.splits),
            image_uris=pick(self.image_uris),
            image_locations=pick(self.image_locations),
            mask_uris=pick(self.mask_uris),
            mask_locations=pick(self.mask_locations),
            label=replace(self.label, values=pick(self.label.values)) if self.label else None,
            features=tuple(replace(c, values=pick(c.values)) for c in self.features),
        )


def _arrow_type(column: Column, label: bool, text: bool) -> Any:
    """The Arrow type of a column's values: the same for every part of a table, whatever values it holds."""
    import pyarrow as pa

    bytes_type = (pa.string() if text else pa.int64()) if label else pa.binary()
    base = {Kind.BYTES: bytes_type, Kind.INT64: pa.int64(), Kind.FLOAT32: pa.float64(),
            Kind.FLOAT64: pa.int64()}[column.kind]
    return pa.list_(base) if column.type.is_list else base


def _hashes(values: list[Any] | np.ndarray, kind: Kind, is_list: bool) -> np.ndarray:
    """pandas' stable 64-bit hash of each value as it is stored: numbers by their value as the kind stores
    them (an int held as 1 or 1.0, in an array or a list, hashes alike), text and bytes by their contents,
    lists by the repr of their stored values; a missing value by itself."""
    from pandas.util import hash_array

    if is_list:
        cast = {Kind.FLOAT32: float, Kind.INT64: int, Kind.FLOAT64: int}.get(kind)
        return hash_array(_objects([None if v is None else repr([cast(x) for x in v] if cast else list(v))
                                    for v in values]))
    if kind is Kind.BYTES:
        return text_hashes(values)
    if kind in (Kind.FLOAT32, Kind.FLOAT64):
        # By the value's float32, however the whole column is stored: the key must not wait for that decision
        # (a part of a table has the keys of the whole), and 0.1 given as float32 (Parquet, a DataFrame) or as
        # text (CSV) is the same value stored. Rows that differ only beyond float32 share a key.
        floats = _float64(values, kind)
        missing = np.isnan(floats)
        with np.errstate(over="ignore"):  # values beyond float32's range hash as its infinity
            rounded = np.where(missing, 0.0, floats).astype(np.float32)
        return np.where(missing, _MISSING, hash_array(rounded))
    if isinstance(values, np.ndarray):
        return hash_array(values.astype(np.int64))
    missing = np.fromiter((v is None for v in values), dtype=bool, count=len(values))
    ints = np.array([0 if v is None else v for v in values], dtype=np.int64)
    return np.where(missing, _MISSING, hash_array(ints))


_MISSING = np.uint64(0x9E3779B97F4A7C15)  # the hash of a missing number


def _float64(values: list[Any] | np.ndarray, kind: Kind) -> np.ndarray:
    """A float column's values as float64 (NaN where missing): float64-stored ones are held as their bits."""
    if kind is Kind.FLOAT32:
        return values if isinstance(values, np.ndarray) else np.array(
            [np.nan if v is None else v for v in values], dtype=np.float64)
    if isinstance(values, np.ndarray):
        return values.view(np.float64)
    bits = np.array([0 if v is None else v for v in values], dtype=np.int64).view(np.float64)
    return np.where(np.fromiter((v is None for v in values), bool, len(values)), np.nan, bits)


def _texts(ids: list[Any] | np.ndarray, vocabulary: Sequence[str]) -> list[Any]:
    """Label ids (or lists of them, None where missing) as the vocabulary's text."""
    return [None if v is None else [vocabulary[i] for i in v] if isinstance(v, list) else vocabulary[v]
            for v in ids]


def text_hashes(values: Sequence[Any] | np.ndarray) -> np.ndarray:
    """pandas' stable 64-bit hash of each text or bytes value (None by itself)."""
    from pandas.util import hash_array

    return hash_array(_objects(values))


def _objects(values: Sequence[Any] | np.ndarray) -> np.ndarray:
    """``values`` as a 1-D object array (``np.array`` would make a list of lists 2-D)."""
    array = np.empty(len(values), dtype=object)
    array[:] = list(values)
    return array
