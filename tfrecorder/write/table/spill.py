"""Spill: what the summary pass (``summary_pass``) leaves of a table, and reading it back.

A ``Summary`` holds the table's facts, its rows' counts per split and bucket (a range of content keys) with the
spill files that hold them, each split's size sample and its leak keys; a table of one part is held as validated
(``HeldPart``), and small spills in memory (``HeldRows``), carried to each shard. A ``SpilledShard`` names the
buckets its ranks fall in; ``shard_parts`` reads them back a bucket at a time, in key order, as validated rows
(a detection table's ranges moved to whole images: ``whole_groups``); ``image_uris`` reads back the image URIs
of given rows, for the errors and reports that name them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tfrecorder.dataset.storage import Folder
from tfrecorder.schema import Schema
from tfrecorder.write.settings import RunDigest
from tfrecorder.write.splits import WRITTEN_SPLITS
from tfrecorder.write.table import leakage
from tfrecorder.write.table.facts import Facts
from tfrecorder.write.table.plan import SAMPLE_ROWS, ShardSpec
from tfrecorder.write.table.table import IMAGE_DATA, Table
from tfrecorder.write.table.validate import finalize


@dataclass
class HeldPart:
    """A table of one part held in memory as ``validate_part`` gave it (a small table is never turned into
    Arrow and back): shards take their rows from it, in key order."""

    part: Table
    keys: np.ndarray
    rows: np.ndarray
    split_codes: np.ndarray
    _orders: dict[int, np.ndarray] = field(default_factory=dict)
    _finalized: Table | None = None

    def order(self, code: int) -> np.ndarray:
        """The positions of split ``code``'s rows in stored order: by content key, then row."""
        if code not in self._orders:
            mine = np.flatnonzero(self.split_codes == code)
            self._orders[code] = mine[np.lexsort((self.rows[mine], self.keys[mine]))]
        return self._orders[code]

    def shard(self, shard: SpilledShard) -> tuple[list[int], Table]:
        """The shard's row numbers and validated rows."""
        if self._finalized is None:
            self._finalized = finalize(self.part, shard.facts, shard.float_precision)
        order = self.order(WRITTEN_SPLITS.index(shard.spec.split))
        start, stop = shard.spec.start, shard.spec.stop
        if self.part.is_detection:
            start, stop = whole_groups(self.keys[order], start, stop)
        positions = order[start:stop]
        return self.rows[positions].tolist(), self._finalized.take(positions.tolist())


@dataclass
class HeldRows:
    """The rows a conversion keeps in this process's memory instead of in spill files (``MEMORY_SPILL_BYTES``): a
    table of one part, as validated, or the rows of spill files never written. The summary carries them to each
    shard of its plan (forked shard writers inherit them, none copied); Beam's workers hold none."""

    part: HeldPart | None = None
    files: dict[str, list[Any]] = field(default_factory=dict)  # spill file name -> its rows (pyarrow tables)
    # The images a table holds, each row's by its number, as its part was read (summary_pass.keeps_images): its
    # spilled rows are without them (no column IMAGE_DATA), and a shard takes them from here.
    images: dict[int, bytes | memoryview | None] | None = None

    def images_of(self, rows: Any) -> list[bytes | memoryview | None] | None:
        """The held images of spilled ``rows`` (a pyarrow table spilled without them), in their order; None
        where the rows hold their own, or none is held."""
        if self.images is None or IMAGE_DATA in rows.column_names:
            return None
        return [self.images[row] for row in rows["row"].to_pylist()]

    def release(self) -> None:
        """Let go of the rows and images held, once the conversion failed or ended: an error that is kept (a
        notebook keeps the last one) keeps its traceback's frames, and through them up to MEMORY_IMAGE_BYTES of
        a table's images. Emptied in place: a frame may hold the dicts themselves (``shard_parts``)."""
        self.files.clear()
        if self.images is not None:
            self.images.clear()
        self.part = None


@dataclass(frozen=True)
class SpilledShard:
    """One shard of a streamed table: its spec and where its rows are - ranks ``spec.start`` to ``spec.stop`` of
    its split's rows in key order, in ``buckets`` (each its spill files, one per writer, and the rank of its
    first row) - with what turns them into the validated table's rows (``template``, ``facts``)."""

    spec: ShardSpec
    buckets: tuple[tuple[tuple[str, ...], int], ...]
    spill: str  # the spill folder's URL
    template: Table  # a part's columns, without values (validate_part(...).take([]))
    facts: Facts  # the whole table's, without its problems and label rows: what finalize needs
    float_precision: str
    bytes_estimate: float | None = None  # its records' bytes, from the plan's sample (None: not estimated)
    held: HeldRows = field(default_factory=HeldRows, compare=False, repr=False)  # the summary's rows in memory


@dataclass
class Summary:
    """What the summary pass found: the table's facts, its rows per bucket and their spill files, the size
    sample, leak keys. Summaries of parts of a table (each file of a glob, read by a Beam worker) merge
    into the table's, in any order."""

    schema: Schema
    facts: Facts
    template: Table | None  # None: no row without problems was seen
    buckets: int
    counts: np.ndarray  # [bucket, split] rows of each written split (WRITTEN_SPLITS order)
    files: dict[tuple[int, int], tuple[str, ...]]  # (split code, bucket) -> its spill files' names
    sample: dict[str, Any]  # split -> pyarrow table of its SAMPLE_ROWS rows of smallest (key, row)
    run_digest: RunDigest | None = None
    uri_keys: list[leakage.KeyedRows] = field(default_factory=list)  # image rows' (URI hash, row, split code)
    remote: bool = False  # some images are remote URLs
    held: HeldRows = field(default_factory=HeldRows)  # rows in memory: a table of one part has its size sample there
    # A detection table's images: split code -> (its images' keys, sorted; each one's box rows). The plan gives a
    # split no shard that would be left empty (plan.whole_image_shards).
    images: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)

    def merge(self, other: Summary) -> Summary:
        """The summary of both parts (their spill files in one folder; no run digest: Beam's run is
        identified by its files)."""
        files = {key: tuple(sorted({*self.files.get(key, ()), *other.files.get(key, ())}))
                 for key in {*self.files, *other.files}}
        sample = {split: smallest([t for t in (self.sample.get(split), other.sample.get(split)) if t is not None])
                  for split in {*self.sample, *other.sample}}
        images = {code: image_rows([found for found in (self.images.get(code), other.images.get(code)) if found])
                  for code in {*self.images, *other.images}}
        return Summary(self.schema, self.facts.merge(other.facts),
                       self.template if self.template is not None else other.template, self.buckets,
                       self.counts + other.counts, files, sample, None, [*self.uri_keys, *other.uri_keys],
                       self.remote or other.remote, HeldRows(files={**self.held.files, **other.held.files}), images)


def image_rows(found: Sequence[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """The images of these parts of a split, each once (an image's boxes may be in several parts): their keys,
    sorted (the stored order), and each one's box rows."""
    if len(found) == 1:
        return found[0]
    keys, inverse = np.unique(np.concatenate([keys for keys, _ in found]), return_inverse=True)
    rows = np.bincount(inverse, weights=np.concatenate([rows for _, rows in found]), minlength=len(keys))
    return keys, rows.astype(np.int64)


HELD_SIZES = "image_data_bytes"  # a size sample's column: each held image's size, its bytes left behind


def sized(rows: Any, held: HeldRows | None = None) -> Any:
    """Spilled rows (a pyarrow table) for a size sample: each image the table holds replaced by empty bytes
    and its size kept (column HELD_SIZES), which is all the estimate reads of it - also of rows spilled without
    their images, which ``held`` holds. A sample of a split's rows is kept through the whole summary pass: with
    the bytes, a few dozen large images would outweigh a part."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if HELD_SIZES in rows.column_names:
        return rows
    if IMAGE_DATA not in rows.column_names:
        images = held.images_of(rows) if held is not None else None
        if images is None:
            return rows
        empty = pa.array([None if data is None else b"" for data in images], pa.large_binary())
        return (rows.add_column(rows.column_names.index("key"), IMAGE_DATA, empty)
                .append_column(HELD_SIZES, pa.array([None if d is None else len(d) for d in images], pa.int64())))
    data = rows[IMAGE_DATA]
    empty = pc.if_else(pc.is_null(data), pa.scalar(None, data.type), pa.scalar(b"", data.type))
    return (rows.set_column(rows.column_names.index(IMAGE_DATA), IMAGE_DATA, empty)
            .append_column(HELD_SIZES, pc.binary_length(data)))


def smallest(tables: list[Any]) -> Any:
    """The SAMPLE_ROWS rows of smallest (key, row) of ``tables`` (pyarrow tables of spilled rows)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    rows = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
    return rows.take(pc.sort_indices(rows, [("key", "ascending"), ("row", "ascending")])[:SAMPLE_ROWS])


def shard_parts(shard: SpilledShard) -> Iterator[tuple[list[int], Table]]:
    """The shard's rows, a bucket at a time: (row numbers, their validated table), in key order."""
    import pyarrow.compute as pc

    if shard.held.part is not None:
        yield shard.held.part.shard(shard)
        return
    spill = Folder.of(shard.spill)
    for names, first_rank in shard.buckets:
        rows = _read_bucket(spill, names, shard.held)
        rows = rows.take(pc.sort_indices(rows, [("key", "ascending"), ("row", "ascending")]))
        low, high = max(0, shard.spec.start - first_rank), min(rows.num_rows, shard.spec.stop - first_rank)
        if shard.template.is_detection:
            low, high = whole_groups(rows["key"].to_numpy(), low, high)
        rows = rows.slice(low, high - low)
        table = finalize(shard.template.with_values(rows, shard.held.images_of(rows)), shard.facts,
                         shard.float_precision)
        yield rows["row"].to_pylist(), table


def whole_groups(keys: np.ndarray, start: int, stop: int) -> tuple[int, int]:
    """Ranks ``start:stop`` of rows in key order (``keys``: a detection table's image keys, in that order)
    moved to whole images: a shard holds the images whose first box row falls in its range, so an image's
    boxes, whatever their number, make one record in one shard."""
    while 0 < start < len(keys) and keys[start] == keys[start - 1]:
        start += 1
    while 0 < stop < len(keys) and keys[stop] == keys[stop - 1]:
        stop += 1
    return start, max(start, stop)


def image_uris(summary: Summary, spill: Folder, rows: set[int]) -> dict[int, str]:
    """The image URIs of these ``rows`` (row numbers of the table), read back from the spill."""
    import pyarrow as pa
    import pyarrow.compute as pc

    held = summary.held.part
    if held is not None:  # its rows are numbered from 0
        return {row: held.part.image_uris[row] for row in rows}
    found: dict[int, str] = {}
    wanted = pa.array(sorted(rows), pa.int64())
    for code in range(len(WRITTEN_SPLITS)):
        for b in np.flatnonzero(summary.counts[:, code]).tolist():
            table = _read_bucket(spill, summary.files[(code, b)], summary.held).select(["row", "image_uri"])
            table = table.filter(pc.is_in(table["row"], value_set=wanted))
            found.update(zip(table["row"].to_pylist(), table["image_uri"].to_pylist()))
    return found


def _read_bucket(spill: Folder, names: Sequence[str], held: HeldRows) -> Any:
    """The rows of one (split, bucket): its spill files (one per writer; those ``held`` in memory from there), as
    one pyarrow table."""
    import pyarrow as pa

    tables = []
    for name in names:
        if name in held.files:
            tables.extend(held.files[name])
            continue
        with spill.fs.open(spill.join(name), "rb") as f:
            tables.append(pa.ipc.open_stream(f).read_all())
    return pa.concat_tables(tables) if len(tables) > 1 else tables[0]
