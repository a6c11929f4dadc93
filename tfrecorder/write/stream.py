"""Stream: a CSV or Parquet source converted a part at a time, in bounded memory - a table larger than memory.

Three passes over the source, none of them holding the table:

1. (CSV only) ``sources.table_files`` reads each file once, to type each column as the whole table's text
   says (a column is numbers only if every part says so) and count the rows.
2. ``summarize`` validates each part (``validate.validate_part``) and merges the parts' ``Facts`` into the
   table's; it spills each part's rows, with their content keys (``Table.row_keys``), to files under a spill
   folder: one per split and key range ("bucket"). It keeps each split's SAMPLE_ROWS rows of smallest keys
   for the size estimate. A table with whole-table problems raises the SchemaError ``validate`` gives,
   before any shard is written.
3. ``write_streamed_shard`` writes one shard: a range of its split's rows in key order (``plan_shards``'
   rule, so the shards are the bytes the in-memory path writes), read from the buckets that range falls in,
   one bucket at a time. Shards are independent: the local runner writes them in processes, one per core.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from tfrecorder.dataset.fetch import FetchLimits, is_remote
from tfrecorder.dataset.storage import Folder
from tfrecorder.schema import Schema
from tfrecorder.write import leakage
from tfrecorder.write.encode import mean_record_bytes
from tfrecorder.write.plan import SAMPLE_ROWS, ShardSpec, shard_count, shard_filename
from tfrecorder.write.resume import Fingerprint
from tfrecorder.write.shard import ImageMapper, ShardResult, serial_map, write_shard_parts
from tfrecorder.write.sources import TableFiles
from tfrecorder.write.splits import WRITTEN_SPLITS
from tfrecorder.write.table import Table, text_hashes
from tfrecorder.write.validate import Facts, check_schema, finalize, validate_part

logger = logging.getLogger(__name__)

PART_ROWS = 100_000  # rows read, validated and spilled at a time
BUCKET_SOURCE_BYTES = 8 * 1024 * 1024  # source bytes per spill bucket: a bucket is what a shard writer holds
MAX_BUCKETS = 4096
SPILL_COMPRESSION = "lz4"  # spill files: fast to write and read back


@dataclass(frozen=True)
class StreamedShard:
    """One shard of a streamed table: its spec (without row numbers) and where its rows are - ranks ``start``
    to ``stop`` of its split's rows in key order, in ``buckets`` (each a spill file and the rank of its first
    row) - with what turns them into the validated table's rows (``template``, ``facts``)."""

    spec: ShardSpec
    start: int
    stop: int
    buckets: tuple[tuple[str, int], ...]
    spill: str  # the spill folder's URL
    template: Table  # a part's columns, without values (validate_part(...).take([]))
    facts: Facts  # the whole table's, without its problems and label rows: what finalize needs
    float_precision: str


@dataclass
class Summary:
    """What the summary pass found: the table's facts, its rows per bucket, the size sample, leak keys."""

    schema: Schema
    facts: Facts
    template: Table
    buckets: int
    counts: np.ndarray  # [bucket, split] rows of each written split (WRITTEN_SPLITS order)
    sample: dict[str, Any]  # split -> pyarrow table of its SAMPLE_ROWS rows of smallest (key, row)
    fingerprint: Fingerprint | None
    uri_keys: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=list)  # (hash, row, split)
    remote: bool = False  # some images are remote URLs


def bucket_count(files: TableFiles) -> int:
    """Spill buckets for a source of ``files.bytes`` (Parquet is about a quarter of the CSV's size)."""
    size = files.bytes * (4 if files.parquet else 1)
    return int(min(MAX_BUCKETS, max(1, -(-size // BUCKET_SOURCE_BYTES))))


def _bucket_of(keys: np.ndarray, buckets: int) -> np.ndarray:
    """The bucket of each key: ``buckets`` equal ranges of the 64-bit keys, in key order."""
    return ((keys >> np.uint64(32)) * np.uint64(buckets)) >> np.uint64(32)


def _bucket_name(split: str, bucket: int) -> str:
    return f"{split.lower()}-{bucket:05d}.arrow"


def summarize(files: TableFiles, schema: Schema | None, spill: Folder, *, fractions: Sequence[float],
              fingerprint: Any = None, part_rows: int | None = None) -> Summary:
    """The summary pass: validate every part, merge the facts, spill the rows by split and key range.

    Raises the SchemaError ``validate`` gives for the whole table (its problems, with their rows).
    ``fingerprint``: a callable(schema table) -> Fingerprint, fed each part's keys and image locations."""
    import pyarrow as pa
    import pyarrow.compute as pc

    buckets = bucket_count(files)
    writers: dict[tuple[int, int], Any] = {}
    codes = {split: i for i, split in enumerate(WRITTEN_SPLITS)}
    merged, template, digest = Facts(), None, None
    counts = np.zeros((buckets, len(WRITTEN_SPLITS)), np.int64)
    sample: dict[str, Any] = {}
    uri_keys: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    remote = False
    try:
        for df, base_dir, first_row in files.parts(part_rows or PART_ROWS):
            if first_row == 0:
                schema = check_schema(df, schema)
            part, facts = validate_part(df, schema, first_row=first_row, base_dir=base_dir, fractions=fractions)
            del df
            merged = merged.merge(facts)
            if merged.problems:
                continue  # the table fails: read on only to find every problem
            if template is None:
                template = part.take([])
                digest = fingerprint(template) if fingerprint is not None else None
            keys = part.row_keys()
            split_codes = np.array([codes.get(s, -1) for s in part.splits], np.int8)
            rows = np.arange(first_row, first_row + part.num_rows, dtype=np.int64)
            arrow = part.to_arrow().append_column("key", pa.array(keys)).append_column("row", pa.array(rows))
            if digest is not None:
                digest.add("keys", keys)
                digest.add("image_locations", part.image_locations)
            if part.image_uris is not None:
                uri_keys.append((text_hashes(part.image_uris), rows, split_codes))
                remote = remote or any(is_remote(u) for u in part.image_locations or () if u)
            bucket = _bucket_of(keys, buckets)
            for code, split in enumerate(WRITTEN_SPLITS):
                mine = np.flatnonzero(split_codes == code)
                if not len(mine):
                    continue
                order = mine[np.argsort(bucket[mine], kind="stable")]
                found, starts = np.unique(bucket[order], return_index=True)
                for b, start, stop in zip(found.tolist(), starts.tolist(), [*starts[1:].tolist(), len(order)]):
                    writer = writers.get((code, b))
                    if writer is None:
                        sink = spill.fs.open(spill.join(_bucket_name(split, b)), "wb")
                        options = pa.ipc.IpcWriteOptions(compression=SPILL_COMPRESSION)
                        writer = writers[(code, b)] = (sink, pa.ipc.new_stream(sink, arrow.schema, options=options))
                    writer[1].write_table(arrow.take(pa.array(order[start:stop])))
                    counts[b, code] += stop - start
                smallest = arrow.take(pa.array(mine))
                if split in sample:
                    smallest = pa.concat_tables([sample[split], smallest])
                by_key = pc.sort_indices(smallest, [("key", "ascending"), ("row", "ascending")])
                sample[split] = smallest.take(by_key[:SAMPLE_ROWS])
    finally:
        for sink, writer in writers.values():
            writer.close()
            sink.close()
    merged.check()
    assert schema is not None and template is not None  # a table without problems has rows
    return Summary(schema, merged, template, buckets, counts, sample, digest, uri_keys, remote)


def slim(facts: Facts) -> Facts:
    """``facts`` as the shard writers need them (finalize): without the problems and the labels' rows."""
    return replace(facts, problems={}, other_labels={})


def bytes_per_row(summary: Summary, float_precision: str, limits: FetchLimits) -> dict[str, float]:
    """Each split's mean record size from its SAMPLE_ROWS rows of smallest keys: ``convert``'s estimate."""
    import pyarrow.compute as pc

    estimate = {}
    for split, sample in summary.sample.items():
        by_row = sample.take(pc.sort_indices(sample, [("row", "ascending")]))
        rows = finalize(summary.template.with_values(by_row), summary.facts, float_precision)
        estimate[split] = mean_record_bytes(rows, limits)
    return estimate


def plan(summary: Summary, *, num_shards: int | None, compression: str | None, bytes_per_row: dict[str, float],
         spill: Folder, float_precision: str) -> list[StreamedShard]:
    """The shards of every written split, as ``plan_shards`` divides them: near-equal ranges of its rows in
    key order."""
    shards = []
    facts = slim(summary.facts)
    for code, split in enumerate(WRITTEN_SPLITS):
        counts = summary.counts[:, code]
        total = int(counts.sum())
        if not total:
            continue
        first_ranks = np.concatenate([[0], np.cumsum(counts)])
        count = shard_count(total, bytes_per_row.get(split, 0.0), num_shards)
        for index in range(count):
            start, stop = total * index // count, total * (index + 1) // count
            held = [(_bucket_name(split, b), int(first_ranks[b])) for b in range(summary.buckets)
                    if counts[b] and first_ranks[b] < stop and first_ranks[b + 1] > start]
            spec = ShardSpec(split, index, count, shard_filename(split, index, count, compression), ())
            shards.append(StreamedShard(spec, start, stop, tuple(held), spill.url, summary.template, facts,
                                        float_precision))
    return shards


def shard_parts(shard: StreamedShard) -> Iterator[tuple[list[int], Table]]:
    """The shard's rows, a bucket at a time: (row numbers, their validated table), in key order."""
    import pyarrow as pa
    import pyarrow.compute as pc

    spill = Folder.of(shard.spill)
    for name, first_rank in shard.buckets:
        with spill.fs.open(spill.join(name), "rb") as f:
            rows = pa.ipc.open_stream(f).read_all()
        rows = rows.take(pc.sort_indices(rows, [("key", "ascending"), ("row", "ascending")]))
        low, high = max(0, shard.start - first_rank), min(rows.num_rows, shard.stop - first_rank)
        rows = rows.slice(low, high - low)
        table = finalize(shard.template.with_values(rows), shard.facts, shard.float_precision)
        yield rows["row"].to_pylist(), table


def write_streamed_shard(shard: StreamedShard, folder: Folder, options: Any,
                         image_map: ImageMapper = serial_map, on_row: Any = None) -> ShardResult:
    """Write one shard of a streamed table (``write_shard`` for the rows ``shard_parts`` reads back)."""
    return write_shard_parts(shard.spec, shard_parts(shard), folder, options, image_map, on_row)


def uri_leaks(summary: Summary, spill: Folder) -> tuple[dict[str, Any], ...]:
    """Rows of one image URI in TRAIN and in VALIDATION/TEST (``Finish``'s same-URI leaks), found from the
    URIs' 64-bit hashes; the URI of each leak read back from the spill files."""
    if not summary.uri_keys:
        return ()
    keys = np.concatenate([k for k, _, _ in summary.uri_keys])
    rows = np.concatenate([r for _, r, _ in summary.uri_keys])
    splits = np.concatenate([s for _, _, s in summary.uri_keys])
    written = splits >= 0
    found, counts = np.unique(keys[written], return_counts=True)
    repeated = np.isin(keys, found[counts > 1]) & written
    if not repeated.any():
        return ()
    names = np.array(WRITTEN_SPLITS, dtype=object)
    leaks = leakage.find_leaks("same_uri", lambda: zip(keys[repeated].tolist(), rows[repeated].tolist(),
                                                       names[splits[repeated]].tolist()))
    if not leaks:
        return ()
    wanted = {entry["rows"][0] for entry in leaks}
    uris = _uris_of(summary, spill, wanted)
    return tuple({**entry, "image_uri": uris[entry["rows"][0]]} for entry in leaks)


def _uris_of(summary: Summary, spill: Folder, rows: set[int]) -> dict[int, str]:
    import pyarrow as pa
    import pyarrow.compute as pc

    found: dict[int, str] = {}
    wanted = pa.array(sorted(rows), pa.int64())
    for code, split in enumerate(WRITTEN_SPLITS):
        for b in np.flatnonzero(summary.counts[:, code]).tolist():
            with spill.fs.open(spill.join(_bucket_name(split, b)), "rb") as f:
                table = pa.ipc.open_stream(f).read_all().select(["row", "image_uri"])
            table = table.filter(pc.is_in(table["row"], value_set=wanted))
            found.update(zip(table["row"].to_pylist(), table["image_uri"].to_pylist()))
    return found


class SpillFolder:
    """A temporary local folder for the spill files, removed on exit."""

    def __enter__(self) -> Folder:
        self._path = tempfile.mkdtemp(prefix="tfrecorder-spill-")
        return Folder.of(self._path)

    def __exit__(self, *exc: Any) -> None:
        shutil.rmtree(self._path, ignore_errors=True)
