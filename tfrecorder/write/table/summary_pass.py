"""The summary pass: every table converted a part at a time, in bounded memory - the one path of every source
and runner; what it leaves, and reading it back, is ``spill``'s.

Three passes over the source (``sources.TableFiles``: CSV and Parquet files; ``sources.FrameSource``: a
DataFrame or an image folder's listing), none of them holding a table larger than memory:

1. (CSV only) ``sources.table_source`` reads each file once, to type each column as the whole table's text
   says (a column is numbers only if every part says so) and count the rows; a small file of one part is
   kept as parsed.
2. ``summarize`` validates each part (``validate.validate_part``) and merges the parts' ``Facts`` into the
   table's; the ``Spiller`` spills each part's rows, with their content keys (``Table.row_keys``), by split
   and key range ("bucket"): a table of one part is held as validated (``HeldPart``), the first
   MEMORY_SPILL_BYTES of a larger one's rows in memory, the rest to files in a spill folder; the images a
   table holds stay in memory as read, its rows spilled without them (``keeps_images``). It keeps each
   split's SAMPLE_ROWS rows of smallest keys for the size estimate. A table with whole-table problems raises
   the SchemaError ``Facts.check`` gives, before any shard is written.
3. ``planning.plan_table`` divides each split's rows into ``plan.plan_shards``' ranges of ranks in key order, and
   ``shard.write_spilled_shard`` writes one: its rows read from the buckets its range falls in, one bucket at a
   time (``spill.shard_parts``). Shards are independent: the local runner writes them in processes, one per core.

The Beam runners run the same passes as pipeline steps (``runners.beam``): a worker per file types it
(``sources.file_facts``) and summarizes it (``file_summary``, spilling under ``output_dir/_beam/rows/``);
the files' summaries merge (``Summary.merge``) into the one ``planning.plan_table`` divides into shards. What
such a pipeline is given (``FileJob``) is found by the submitting process, which never reads the table.
"""

from __future__ import annotations

import itertools
import logging
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from tfrecorder.dataset.connectors import BYTES
from tfrecorder.dataset.storage import Folder
from tfrecorder.errors import SchemaError
from tfrecorder.schema import Schema, image_value_kind, is_missing
from tfrecorder.types import ImageBytes
from tfrecorder.write.settings import is_remote
from tfrecorder.write.sources import BeamInput, Source, TableFiles
from tfrecorder.write.sources.long_form import is_relative
from tfrecorder.write.splits import WRITTEN_SPLITS
from tfrecorder.write.table import leakage
from tfrecorder.write.table.facts import Facts
from tfrecorder.write.table.plan import SAMPLE_ROWS
from tfrecorder.write.table.schema_check import DEFAULT_TENSOR_ENCODING, check_schema
from tfrecorder.write.table.spellings import Spellings
from tfrecorder.write.table.spill import HeldPart, HeldRows, Summary, image_rows, sized, smallest
from tfrecorder.write.table.table import Table
from tfrecorder.write.table.validate import validate_part

logger = logging.getLogger(__name__)

PART_ROWS = 100_000  # rows read, validated and spilled at a time
BUCKET_SOURCE_BYTES = 8 * 1024 * 1024  # source bytes per spill bucket: a bucket is what a shard writer holds
MAX_BUCKETS = 320  # a writer holds a file open per split and bucket: under the usual limit of 1,024 open files
REMOTE_SPILL_BLOCK = 2 ** 18  # gs:// spill files (Beam): upload in 256 KiB blocks, so 3 x 320 open ones fit
SPILL_COMPRESSION = "lz4"  # spill files: fast to write and read back
# Spilled rows a conversion in this process keeps in memory before it writes them to its spill folder: a small
# table never touches the disk (TFDS's Shuffler buffers the same way). Forked shard writers inherit them.
MEMORY_SPILL_BYTES = 32 * 1024 * 1024
# A file of images (Parquet) up to this size, uncompressed, is kept in memory as its parts are read (so are a
# DataFrame's arrays or PIL images, encoded as read): its rows spill without their images, which the forked
# shard writers take from memory (no copy into the spill and back). A larger one spills its images with their
# rows, in the memory of a few parts (``keeps_images``).
MEMORY_IMAGE_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class FileJob:
    """A conversion of CSV or Parquet files that the pipeline reads itself: what the submitting process knows
    (the files, found and sized, never read) and the settings."""

    files: BeamInput
    schema: Schema | None
    options: Any
    fractions: tuple[float, ...]
    float_precision: str
    num_shards: int | None
    runner: str
    part_rows: int  # rows read, validated and spilled at a time (PART_ROWS)


def bucket_count(files: Source, schema: Schema) -> int:
    """Spill buckets for a source of ``files.bytes``: a Parquet file of text is about a quarter of its rows'
    size in memory; a table that holds its images is counted at its images' size, uncompressed (a Parquet of
    BMPs shrinks many times over; of JPEGs, not at all)."""
    if ImageBytes in schema.values():
        size = max(files.bytes, getattr(files, "data_bytes", 0))
    else:
        size = files.bytes * (4 if files.parquet else 1)
    return int(min(MAX_BUCKETS, max(1, -(-size // BUCKET_SOURCE_BYTES))))


def summarize(files: Source, schema: Schema | None, spill: Folder, *, fractions: Sequence[float],
              run_digest: Any = None, part_rows: int | None = None,
              tensor_encoding: str = DEFAULT_TENSOR_ENCODING, vocabulary: Any = None) -> Summary:
    """The summary pass: validate every part, merge the facts, spill the rows by split and key range.

    Raises the SchemaError ``validate`` gives for the whole table (its problems, with their rows).
    ``run_digest``: a callable(schema table) -> RunDigest, fed each part's keys and image locations;
    ``tensor_encoding``: convert's (``check_schema``); ``vocabulary``: a callable(Facts) -> the label names an
    append keeps (``append.vocabulary_rule``: the dataset's, extended or not), or None."""
    parts = files.parts(part_rows or PART_ROWS)
    first = next(parts, None)
    schema = _first_part_schema(first, schema, files, tensor_encoding)

    def spilled(rows: Iterator[tuple[pd.DataFrame, Any, int]], spellings: Spellings | None = None) -> Summary:
        spiller = Spiller(schema, bucket_count(files, schema), spill, "all", fractions=fractions, run_digest=run_digest,
                          memory_bytes=MEMORY_SPILL_BYTES, spellings=spellings, images=keeps_images(files, schema))
        return spiller.spill(rows)

    summary = spilled(itertools.chain([first] if first is not None else [], parts))
    aliased = summary.facts.spellings.aliased() if summary.facts.spellings and not summary.facts.problems else {}
    if aliased:  # parts name one file in two ways: summarized again, each file under its first name in the table
        logger.info("%d image files are named in several ways in different parts; summarizing again", len(aliased))
        summary = spilled(files.parts(part_rows or PART_ROWS), Spellings(frozenset(aliased)))
    try:
        summary = class_names(summary, files)
        names = vocabulary(summary.facts) if vocabulary is not None and not summary.facts.problems else None
        if names is not None:  # an append's labels: the dataset's ids stay theirs
            summary.facts = replace(summary.facts, names=names)
        summary.facts.check()
    except BaseException:  # a table that fails keeps none of its rows or images with its error
        summary.held.release()
        raise
    return summary


def keeps_images(files: Source, schema: Schema) -> bool:
    """Whether a conversion in this process keeps the images a table holds in memory, as its parts were read,
    rather than spilling them: a Hugging Face Dataset's (mapped, or in memory already) and a DataFrame's encoded
    images are only referenced; a file's, and the arrays or PIL images of a frame (encoded as its parts are
    read), when they are at most MEMORY_IMAGE_BYTES."""
    column = next((name for name, kind in schema.items() if kind is ImageBytes), None)
    if column is None:
        return False
    if isinstance(files, TableFiles):
        return max(files.bytes, files.data_bytes) <= MEMORY_IMAGE_BYTES
    frame = getattr(files, "frame", None)
    if frame is not None and column in frame.columns:
        first = next((value for value in frame[column] if not is_missing(value)), None)
        if image_value_kind(first) not in ("bytes", "struct"):
            return files.bytes <= MEMORY_IMAGE_BYTES
    return True


def class_names(summary: Summary, files: Any) -> Summary:
    """The summary with the class names its source fixes (a Hugging Face ClassLabel's - a Dataset's, or a Parquet
    file's that datasets wrote -, a YOLO dataset's) as its label vocabulary, in their order: the label ids stay
    the ids it gave them. Each name is trimmed as labels are (``validate``); two that are then one are refused."""
    names = getattr(files, "vocabulary", None)
    if names is not None and summary.facts.label is not None:
        trimmed = [str(n).strip() for n in names]
        blank = next((n for n in names if not str(n).strip()), None)
        if blank is not None:
            raise SchemaError(f"column {summary.facts.label!r}: class name {blank!r} is blank: every class needs a "
                              f"name (its rows' labels would be empty)")
        twice = next((n for i, n in enumerate(trimmed) if n in trimmed[:i]), None)
        if twice is not None:
            given = [repr(n) for n in names if str(n).strip() == twice]
            raise SchemaError(f"column {summary.facts.label!r}: class names {', '.join(given)} are one label once "
                              f"their spaces are trimmed, as every label is: give each class its own name")
        summary.facts = replace(summary.facts, names=tuple(trimmed))
    return summary


def file_summary(files: TableFiles, index: int, schema: Schema, spill: Folder, *, fractions: Sequence[float],
                 part_rows: int | None = None) -> Summary:
    """The summary of one file of ``files`` (its spill files tagged with its index), to merge with the
    others' (``Summary.merge``): a Beam worker's share of the summary pass. Checks nothing of the whole."""
    spiller = Spiller(schema, bucket_count(files, schema), spill, f"{index:05d}", fractions=fractions)
    return spiller.spill(files.file_parts(index, part_rows or PART_ROWS))


def table_schema(files: Source, schema: Schema | None, part_rows: int | None = None,
                 tensor_encoding: str = DEFAULT_TENSOR_ENCODING) -> Schema:
    """The schema ``summarize`` uses: ``schema`` checked against (or inferred from) the table's first part."""
    return _first_part_schema(next(files.parts(part_rows or PART_ROWS), None), schema, files, tensor_encoding)


def _first_part_schema(first: tuple[pd.DataFrame, Any, int] | None, schema: Schema | None,
                       files: Source, tensor_encoding: str) -> Schema:
    """``schema``, or the one inferred from the first part's columns: their kinds from a Parquet file's own
    schema, from the whole file's text for a CSV (``TableFiles.kinds``), never from the part's values alone;
    a frame held in memory is judged whole (``FrameSource.schema_frame``)."""
    arrow = files.arrow_schema() if isinstance(files, TableFiles) and files.parquet and schema is None else None
    return check_schema(files.schema_frame(first[0] if first is not None else None), schema, arrow,
                        tensor_encoding)


_END = object()


def read_ahead(items: Iterator[Any]) -> Iterator[Any]:
    """``items``, the next one made in a thread while the caller works on this one: a part's read (Parquet
    decoding, a CSV's parse) waits on no lock for much of its time, so it overlaps the previous part's
    validation and spill. Holds two parts at most. The reads run in the caller's context, so that they belong
    to its run (``store_requests.requests_of_run``: its object-store deadline, and ``stop_requests`` ends them)."""
    import contextvars
    from concurrent.futures import ThreadPoolExecutor

    context = contextvars.copy_context()  # entered by one read at a time

    def read() -> Any:
        return context.run(next, items, _END)

    with ThreadPoolExecutor(1, thread_name_prefix="tfrecorder-read-ahead") as pool:
        pending = pool.submit(read)
        while (item := pending.result()) is not _END:
            pending = pool.submit(read)
            yield item
            del item


class Spiller:
    """Validates parts of a table and spills their rows, with their content keys, per (split, bucket) - to
    files named ``<split>-<bucket>-<tag>.arrow`` in the spill folder, or, up to ``memory_bytes`` of them, held
    in this process's memory under those names - ; ``close`` gives the Summary of what it saw. ``images``: the
    images a table holds are kept in memory (``HeldRows.images``) and its rows spilled without them."""

    def __init__(self, schema: Schema, buckets: int, spill: Folder, tag: str, *, fractions: Sequence[float],
                 run_digest: Any = None, memory_bytes: int = 0, spellings: Spellings | None = None,
                 images: bool = False):
        self._schema, self._buckets, self._spill, self._tag = schema, buckets, spill, tag
        self._spellings = spellings
        self._memory_bytes = memory_bytes
        self._first: HeldPart | None = None  # the first part, held whole while it is the only one
        self._held: dict[tuple[int, int], list[Any]] | None = {} if memory_bytes else None
        self._held_bytes = 0
        self._held_images: dict[int, bytes | memoryview | None] | None = {} if images else None  # by row
        self._fractions, self._run_digest = fractions, run_digest
        self._writers: dict[tuple[int, int], Any] = {}
        self._facts, self._digest = Facts(), None
        self._template: Table | None = None
        self._counts = np.zeros((buckets, len(WRITTEN_SPLITS)), np.int64)
        self._sample: dict[str, Any] = {}
        self._uri_keys: list[leakage.KeyedRows] = []
        self._remote = False
        self._images: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}  # split code -> each part's images

    def add(self, df: pd.DataFrame, base_dir: Any, first_row: int) -> None:
        part, facts = validate_part(df, self._schema, first_row=first_row, base_dir=base_dir,
                                    fractions=self._fractions, spellings=self._spellings)
        self._facts = self._facts.merge(facts)
        if self._facts.problems:
            return  # the table fails: read on only to find every problem
        if self._template is None:
            self._template = part.take([])
            self._digest = self._run_digest(self._template) if self._run_digest is not None else None
        keys = part.order_keys()
        codes = {split: i for i, split in enumerate(WRITTEN_SPLITS)}
        split_codes = np.array([codes.get(s, -1) for s in part.splits], np.int8)
        rows = np.arange(first_row, first_row + part.num_rows, dtype=np.int64)
        if self._digest is not None:
            self._digest.add("keys", part.row_keys() if part.is_detection else keys)
            self._digest.add("image_locations", part.image_locations)
            if any(is_relative(u) for u in part.image_locations or ()):
                # a DataFrame's relative paths name other files from another working directory
                self._digest.add("working_directory", os.getcwd())
        if part.image_uris is not None:
            if part.image_data is None:  # a held image's name (its row, a struct's path) is no file in two splits
                self._uri_keys.append((BYTES.hashes(part.image_uris), rows, split_codes))
            self._remote = self._remote or any(is_remote(u) for u in part.image_locations or () if u)
        if part.is_detection:
            for code in np.unique(split_codes[split_codes >= 0]).tolist():
                self._images.setdefault(code, []).append(np.unique(keys[split_codes == code], return_counts=True))
        held = HeldPart(part, keys, rows, split_codes)
        if self._first is not None:  # a second part: the first one is spilled as the rest are, counted again
            first, self._first = self._first, None
            self._counts[:] = 0
            self._sample = {}
            self._spill_part(first)
        elif self._held is not None and not self._writers and not self._held:
            self._first = held
            self._count(held)
            return
        self._spill_part(held)

    def _count(self, held: HeldPart) -> None:
        """Count the held part's rows by split and bucket (its size sample is its rows of smallest keys:
        ``planning.bytes_per_row`` takes them from it)."""
        bucket = leakage.key_range(held.keys, self._buckets)
        for code in range(len(WRITTEN_SPLITS)):
            stored = held.order(code)
            if len(stored):
                self._counts[:, code] += np.bincount(bucket[stored], minlength=self._buckets)

    def _spill_part(self, held: HeldPart) -> None:
        """Spill a part's rows by split and bucket (to memory or files: ``_put``), and add to the size sample."""
        import pyarrow as pa

        part, keys, rows, split_codes = held.part, held.keys, held.rows, held.split_codes
        images = self._held_images
        arrow = part.to_arrow(images=images is None).append_column("key", pa.array(keys)).append_column(
            "row", pa.array(rows))
        if images is not None and part.image_data is not None:
            images.update(zip(rows.tolist(), part.image_data))
        bucket = leakage.key_range(keys, self._buckets)
        for code, split in enumerate(WRITTEN_SPLITS):
            mine = np.flatnonzero(split_codes == code)
            if not len(mine):
                continue
            order = mine[np.argsort(bucket[mine], kind="stable")]
            found, starts = np.unique(bucket[order], return_index=True)
            ordered = arrow.take(pa.array(order))  # one gather, then a slice (no copy) a bucket
            for b, start, stop in zip(found.tolist(), starts.tolist(), [*starts[1:].tolist(), len(order)]):
                self._put(code, b, ordered.slice(start, stop - start))
                self._counts[b, code] += stop - start
            earlier = self._sample.get(split)
            candidates = mine[np.lexsort((rows[mine], keys[mine]))[:SAMPLE_ROWS]]  # only these can be smallest
            sample = sized(arrow.take(pa.array(candidates)), HeldRows(images=images))
            self._sample[split] = smallest([sample, *([earlier] if earlier is not None else [])])
        if self._held is not None and self._held_bytes > self._memory_bytes:
            self._write_held()

    def spill(self, parts: Iterator[tuple[pd.DataFrame, Any, int]]) -> Summary:
        """``add`` each part, the next one read meanwhile (``read_ahead``), then ``close``."""
        try:
            for df, base_dir, first_row in read_ahead(parts):
                self.add(df, base_dir, first_row)
                del df  # freed before the part after the next is read
        except BaseException:  # a part that cannot be read, Ctrl-C: what is held is not kept with the error
            self.close().held.release()
            self._first, self._held, self._held_images = None, None, None
            raise
        summary = self.close()
        return summary

    def _put(self, code: int, bucket: int, rows: Any) -> None:
        """Spill ``rows`` of split ``code`` in ``bucket``: held in memory until ``_write_held``, then to files."""
        if self._held is None:
            self._writer(code, bucket, rows.schema).write_table(rows)
            return
        self._held.setdefault((code, bucket), []).append(rows)
        self._held_bytes += rows.nbytes

    def _write_held(self) -> None:
        """Write the rows held in memory to the spill folder, once MEMORY_SPILL_BYTES of them are (and every row
        after them: ``_put``)."""
        held, self._held = self._held or {}, None
        for (code, bucket), tables in held.items():
            writer = self._writer(code, bucket, tables[0].schema)
            for table in tables:
                writer.write_table(table)

    def _writer(self, code: int, bucket: int, schema: Any) -> Any:
        import pyarrow as pa

        writer = self._writers.get((code, bucket))
        if writer is None:
            remote = {"block_size": REMOTE_SPILL_BLOCK} if "gs" in self._spill.protocols else {}
            sink = self._spill.fs.open(self._spill.join(self._name(code, bucket)), "wb", **remote)
            held = ImageBytes in self._schema.values()  # encoded images do not compress: LZ4 would only cost time
            options = pa.ipc.IpcWriteOptions(compression=None if held else SPILL_COMPRESSION)
            writer = self._writers[(code, bucket)] = (sink, pa.ipc.new_stream(sink, schema, options=options))
        return writer[1]

    def _name(self, code: int, bucket: int) -> str:
        return f"{WRITTEN_SPLITS[code].lower()}-{bucket:05d}-{self._tag}.arrow"

    def close(self) -> Summary:
        """Close the spill files; the Summary of the parts added."""
        for sink, writer in self._writers.values():
            writer.close()
            sink.close()
        held = HeldRows()
        if self._first is not None:
            held.part = self._first
            counted = {(code, b) for code, b in zip(*np.nonzero(self._counts.T))}
            files: dict[tuple[int, int], tuple[str, ...]] = {
                (int(code), int(b)): (self._name(int(code), int(b)),) for code, b in counted}
        elif self._held is not None:
            held.files = {self._name(*key): rows for key, rows in self._held.items()}
            files = {key: (self._name(*key),) for key in self._held}
        else:
            files = {key: (self._name(*key),) for key in self._writers}
        held.images = self._held_images if self._first is None else None  # a held part has its own
        images = {code: image_rows(found) for code, found in self._images.items()}
        return Summary(self._schema, self._facts, self._template, self._buckets, self._counts, files,
                       self._sample, self._digest, self._uri_keys, self._remote, held, images)
