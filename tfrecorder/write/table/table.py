"""Table (pure data): the validated table every later stage reads - converted columns, splits and image URIs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from tfrecorder.dataset.connectors import BYTES, Connector, stored_connector
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

    @property
    def connector(self) -> Connector:
        """The connector of its values as held (a label's: its text, or the ids ``label_ids`` made of it)."""
        return stored_connector(self.kind, self.type.is_list, self.source)


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
    keypoint_count: int | None = None  # a detection table's keypoints an object (K; finalize decides)
    # A table that holds its images (types.ImageBytes): each row's encoded bytes, None where the row names a file
    # (image_locations) or has no image; None for a table of image URIs.
    image_data: list[bytes | None] | None = None

    @property
    def is_detection(self) -> bool:
        """A table of one row per box (box columns): rows of one image make one record."""
        return bool(self.schema.boxes)

    def order_keys(self) -> np.ndarray:
        """The key rows are spilled, ordered and sharded by: their content (``row_keys``), or for a detection
        table the image's URI, so that every box row of an image meets the others in one bucket whatever
        file or part it came from, and box rows given in another order make the same shards."""
        if self.is_detection:
            return BYTES.hashes(self.image_locations)
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
        images = self.image_uris if self.image_data is None else self.image_data  # held images: by their bytes
        parts = [(self.splits, BYTES), (images, BYTES),
                 *([(self.mask_uris, BYTES)] if self.mask_uris is not None else []),
                 *((c.values, c.connector) for c in ((label,) if label else ()) + self.features)]
        for values, connector in parts:
            if values is not None:
                keys = (keys * np.uint64(0x100000001B3)) ^ connector.hashes(values)  # column order counts
        return keys

    def to_arrow(self) -> Any:
        """The values as a pyarrow Table, a column each (splits, image URIs and locations, the images a table
        holds, then the label and extra columns in encoding order): what ``with_values`` reads back. Values
        only: schema and column types stay with the Table."""
        import pyarrow as pa

        columns = {"split": pa.array(self.splits, pa.string())}
        if self.image_uris is not None:
            columns["image_uri"] = pa.array(self.image_uris, pa.string())
            columns["image_location"] = pa.array(self.image_locations, pa.string())
        if self.image_data is not None:
            columns["image_data"] = pa.array(self.image_data, pa.large_binary())
        if self.mask_uris is not None:
            columns["mask_uri"] = pa.array(self.mask_uris, pa.string())
            columns["mask_location"] = pa.array(self.mask_locations, pa.string())
        for i, column in enumerate(self.columns):
            arrow = column.connector.arrow_type()
            if column is self.label and column.type.kind is Kind.BYTES:  # text labels: their ids, or in a part
                held = pa.string() if self.vocabulary is None else pa.int64()  # (validate_part) still the text
                arrow = pa.list_(held) if column.type.is_list else held
            columns[f"column_{i}"] = pa.array(column.values, arrow)
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
            image_data=arrow["image_data"].to_pylist() if self.image_data is not None else None,
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
            image_data=pick(self.image_data),
            mask_uris=pick(self.mask_uris),
            mask_locations=pick(self.mask_locations),
            label=replace(self.label, values=pick(self.label.values)) if self.label else None,
            features=tuple(replace(c, values=pick(c.values)) for c in self.features),
        )


def _texts(ids: list[Any] | np.ndarray, vocabulary: Sequence[str]) -> list[Any]:
    """Label ids (or lists of them, None where missing) as the vocabulary's text."""
    return [None if v is None else [vocabulary[i] for i in v] if isinstance(v, list) else vocabulary[v]
            for v in ids]
