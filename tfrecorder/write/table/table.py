"""Table (pure data): the validated table every later stage reads - converted columns, splits and image URIs."""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from tfrecorder.dataset.connectors import BYTES, Connector, stored_connector
from tfrecorder.schema import Schema
from tfrecorder.types import ColumnType, Kind

IMAGE_DATA = "image_data"  # to_arrow's column of the images a table holds


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
        """The connector of its values as held (a label's: its text, or the ids ``label_ids`` made of it; a column
        typed for a connector, ``types.column_type``: that one)."""
        if isinstance(self.type.connector, Connector):
            return self.type.connector
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
    image_data: list[bytes | memoryview | None] | None = None

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
        def hashed(values: Any, connector: Connector = BYTES) -> np.ndarray | None:
            return None if values is None else connector.hashes(values)

        hashes = [hashed(self.splits), self._image_hashes(), hashed(self.mask_uris),
                  *(hashed(c.values, c.connector) for c in ((label,) if label else ()) + self.features)]
        for found in hashes:
            if found is not None:
                keys = (keys * np.uint64(0x100000001B3)) ^ found  # column order counts
        return keys

    def _image_hashes(self) -> np.ndarray | None:
        """Each row's image as ``row_keys`` hashes it: its URI; an image the table holds by its bytes
        (``held_image_hashes``), and by its name where the row names a file instead."""
        if self.image_data is None:
            return BYTES.hashes(self.image_uris) if self.image_uris is not None else None
        held = np.array([data is not None for data in self.image_data], bool)
        return np.where(held, held_image_hashes(self.image_data), BYTES.hashes(self.image_uris))

    def to_arrow(self, images: bool = True) -> Any:
        """The values as a pyarrow Table, a column each (splits, image URIs and locations, masks' URIs and
        locations, the label and extra columns in encoding order, then the images a table holds, unless
        ``images`` is False): what ``with_values`` reads back. Values only: schema and column types stay with
        the Table."""
        import pyarrow as pa

        columns = {"split": pa.array(self.splits, pa.string())}
        if self.image_uris is not None:
            columns["image_uri"] = pa.array(self.image_uris, pa.string())
            columns["image_location"] = pa.array(self.image_locations, pa.string())
        if self.mask_uris is not None:
            columns["mask_uri"] = pa.array(self.mask_uris, pa.string())
            columns["mask_location"] = pa.array(self.mask_locations, pa.string())
        for i, column in enumerate(self.columns):
            arrow = column.connector.arrow_type()
            if column is self.label and column.type.kind is Kind.BYTES:  # text labels: their ids, or in a part
                held = pa.string() if self.vocabulary is None else pa.int64()  # (validate_part) still the text
                arrow = pa.list_(held) if column.type.is_list else held
            columns[f"column_{i}"] = pa.array(column.values, arrow)
        if self.image_data is not None and images:
            columns[IMAGE_DATA] = binary_array(self.image_data)
        return pa.table(columns)

    def with_values(self, arrow: Any, image_data: list[bytes | memoryview | None] | None = None) -> Table:
        """This table (a template: ``table.take([])``) holding the values of ``arrow``, from ``to_arrow``;
        ``image_data``: the images of a table that holds them, where ``arrow`` was made without them."""
        columns = [arrow[f"column_{i}"].to_pylist() for i in range(len(self.columns))]
        label = replace(self.label, values=columns.pop(0)) if self.label else None
        images = self.image_uris is not None
        return replace(
            self, num_rows=arrow.num_rows, splits=arrow["split"].to_pylist(),
            image_uris=arrow["image_uri"].to_pylist() if images else None,
            image_locations=arrow["image_location"].to_pylist() if images else None,
            image_data=(image_data if image_data is not None else arrow[IMAGE_DATA].to_pylist())
            if self.image_data is not None else None,
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


def held_image_hashes(values: Sequence[bytes | memoryview | None]) -> np.ndarray:
    """64-bit hashes of the images a table holds (0 for None), for ``row_keys``: each one's CRC-32 above its
    length. The rows' order is all that rests on them - equal ones are ordered by row, and leaks are found by
    the writers' content keys (``leakage.content_key``) - so a CRC does, at a quarter of SipHash's or SHA-256's
    time: the images' bytes are most of what a table that holds them hashes."""
    return np.array([0 if v is None else zlib.crc32(v) << 32 | len(v) & 0xFFFFFFFF for v in values], np.uint64)


def binary_array(values: Sequence[bytes | memoryview | None]) -> Any:
    """Images a table holds (bytes, or memoryviews of a Parquet part's buffer: ``embedded.image_structs``) as a
    pyarrow large_binary array, their bytes copied once (``pa.array`` takes no memoryview)."""
    import pyarrow as pa

    given = [v is not None for v in values]
    offsets = np.zeros(len(values) + 1, np.int64)
    np.cumsum([0 if v is None else len(v) for v in values], out=offsets[1:])
    validity = None if all(given) else pa.array(given).buffers()[1]
    return pa.LargeBinaryArray.from_buffers(pa.large_binary(), len(values), [
        validity, pa.py_buffer(offsets), pa.py_buffer(b"".join(v for v in values if v is not None))])


def _texts(ids: list[Any] | np.ndarray, vocabulary: Sequence[str]) -> list[Any]:
    """Label ids (or lists of them, None where missing) as the vocabulary's text."""
    return [None if v is None else [vocabulary[i] for i in v] if isinstance(v, list) else vocabulary[v]
            for v in ids]
