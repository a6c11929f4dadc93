"""Beam steps: the conversion's stages as composite PTransforms, the way Beam's own ``WriteToTFRecord`` is built.

``ConvertFiles`` takes the files of a table (CSV or Parquet) and runs ``summary_pass``'s passes as steps:
``SummarizeFiles`` (a worker per file typing, validating and spilling it under ``output_dir/_beam/rows/``),
``PlanShards`` (one step merging the files' summaries and planning the shards), ``WriteShards`` and
``WriteMetadata``; ``ListImageFolder`` lists an image folder into such files. The steps move file names, never
rows or image bytes, so the job's size does not grow with the table (Dataflow refuses job requests over about
20 MB: with rows inside, near 1.4M rows).

The worker that gets a shard reads its rows, fetches the images and writes it with the local runner's shard
writer, and a last step, inside the pipeline, writes errors.csv and dataset.json, then removes the row files,
so a Dataflow job that outlives the submitting process still leaves a complete, self-describing dataset.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

import apache_beam as beam
from apache_beam.metrics import Metrics

from tfrecorder.dataset.manifest import Manifest
from tfrecorder.dataset.storage import Folder
from tfrecorder.errors import TFRecorderError
from tfrecorder.schema import Schema
from tfrecorder.write.record.shard import ShardResult, default_workers, ordered_map, write_spilled_shard
from tfrecorder.write.run import planning
from tfrecorder.write.run.finish import Finish
from tfrecorder.write.run.journal import Journal
from tfrecorder.write.sources import (
    FileFacts,
    TableFiles,
    file_facts,
    folder_rows,
    frame_as_arrow,
    frame_parts,
    label_folders,
    listing_frame,
    no_images,
    table_files,
)
from tfrecorder.write.table import leakage, spill, summary_pass

COUNTERS = "tfrecorder"
BEAM_DIR = "_beam"  # in output_dir: Dataflow's temp and staging folders, and the rows handed to the workers
ROWS_DIR = f"{BEAM_DIR}/rows"
INPUT_DIR = f"{BEAM_DIR}/input"  # a DataFrame handed to a Beam runner, as Parquet parts the pipeline reads


class _WriteShard(beam.DoFn):
    """Writes one shard of a table the pipeline read (its rows from the spill files), or keeps the one an
    earlier run of the same conversion finished; counts rows, written records, errors and bytes."""

    def __init__(self, folder: Folder, options, journal: Journal | None = None):
        self._folder = folder
        self._options = options
        self._journal = journal
        self._counters = {n: Metrics.counter(COUNTERS, n) for n in ("rows", "written", "errors", "bytes", "resumed")}
        self._pool: ThreadPoolExecutor | None = None

    def setup(self) -> None:
        workers = default_workers()
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="tfrecorder")
        self._mapper = ordered_map(self._pool, window=4 * workers)

    def teardown(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()

    def process(self, shard: spill.SpilledShard):
        earlier = self._journal.finished([shard.spec]) if self._journal is not None else {}
        if shard.spec.filename in earlier:
            self._counters["resumed"].inc()
            yield earlier[shard.spec.filename]
            return
        result = write_spilled_shard(shard, self._folder, self._options, self._mapper)
        if self._journal is not None:
            self._journal.record(result)
        self._counters["rows"].inc(shard.spec.rows)
        self._counters["written"].inc(result.records)
        self._counters["errors"].inc(len(result.failures))
        self._counters["bytes"].inc(result.bytes)
        yield result


def _finish(results: list[ShardResult], planned: _Planned, same_bytes: list[list[dict[str, Any]]],
            folder: Folder, journal: Journal | None) -> Manifest:
    """The last step: errors.csv, the TFDS files and dataset.json from every shard's result (the same-bytes
    leaks found a range of content keys at a time); then the rows handed to the workers and the run's
    records go."""
    manifest = planned.finish.write(folder, results, [leak for leaks in same_bytes for leak in leaks])
    _remove_rows(folder)
    if journal is not None:
        journal.complete()
    return manifest


@dataclass(frozen=True)
class _Planned:
    """The plan step's output: the shards to write and what the last step needs."""

    shards: tuple[spill.SpilledShard, ...]
    finish: Finish


@dataclass(frozen=True)
class InputFile:
    """A file of the table the pipeline reads: its place in the table's order (gaps allowed), its URL and,
    for a listing the pipeline wrote, its size and the identity of what was listed."""

    index: int
    url: str
    bytes: int = 0
    identity: str | None = None


@dataclass(frozen=True)
class _Input:
    """The table the pipeline reads (a side input): its files, schema and listed input's identity."""

    files: TableFiles
    schema: Schema
    identity: str | None
    positions: dict[str, int]  # each file's place in ``files``, by URL


def _read_file(file: InputFile, job: summary_pass.FileJob) -> tuple[InputFile, FileFacts]:
    """A worker's share of the typing pass: one file's rows, columns and their kinds."""
    return file, file_facts(file.url, job.files.parquet, job.part_rows)


def _read_input(found: list[tuple[InputFile, FileFacts]], job: summary_pass.FileJob, folder: Folder,
                journal: Journal | None) -> _Input:
    """The table from every file's facts, and its schema (checked against, or inferred from, its first rows)."""
    found = sorted(found, key=lambda f: f[0].index)
    listed = [file.identity for file, _ in found if file.identity is not None]
    if not found:  # an image folder without images
        forget_refused_run(folder, journal)
        raise no_images(job.files.url)
    matched = replace(job.files, files=tuple(file.url for file, _ in found),
                      bytes=job.files.bytes or sum(file.bytes for file, _ in found))
    files = table_files(matched, [facts for _, facts in found])
    identity = hashlib.sha256("".join(listed).encode("ascii")).hexdigest() if listed else None
    schema = summary_pass.table_schema(files, job.schema, job.part_rows, job.options.tensor_encoding)
    return _Input(files, schema, identity, {url: position for position, url in enumerate(files.files)})


def _summarize_file(file: InputFile, table: _Input, job: summary_pass.FileJob,
                    folder: Folder) -> tuple[int, spill.Summary, dict[int, leakage.KeyedRows]]:
    """A worker's share of the summary pass: one file validated and spilled under ROWS_DIR; its summary, and
    its image rows' URI hashes by range (for ``_range_leaks``), which the summary no longer carries."""
    rows = _spill_folder(folder)
    rows.makedirs()
    summary = summary_pass.file_summary(table.files, table.positions[file.url], table.schema, rows,
                                 fractions=job.fractions, part_rows=job.part_rows)
    return file.index, replace(summary, uri_keys=[]), leakage.key_ranges(summary.uri_keys)


def _range_leaks(group: tuple[int, Iterable[leakage.KeyedRows]], kind: str) -> list[dict[str, Any]]:
    """The leaks of ``kind`` among one range of keys, the rows of that range from every file or shard."""
    return leakage.range_leaks(kind, list(group[1]))


def _plan(summaries: list[tuple[int, spill.Summary]], table: _Input, same_uri: list[list[dict[str, Any]]],
          job: summary_pass.FileJob, folder: Folder, journal: Journal | None) -> _Planned:
    """The whole table's summary (the files' merged in file order), checked - a table with problems fails
    the job with the SchemaError the local runner gives, before any shard - then divided into shards."""
    ordered = [summary for _, summary in sorted(summaries, key=lambda s: s[0])]
    summary = ordered[0]
    for other in ordered[1:]:
        summary = summary.merge(other)
    summary = summary_pass.class_names(summary, table.files)
    try:
        summary.facts.check()
        shards, finish = planning.plan_table(summary, _spill_folder(folder), job.options, job.runner,
                                             num_shards=job.num_shards, float_precision=job.float_precision,
                                             same_uri=[leak for leaks in same_uri for leak in leaks])
    except TFRecorderError:
        forget_refused_run(folder, journal)  # in the job: a Dataflow job may have no one waiting for it
        raise
    if table.identity is not None and journal is not None:
        journal.keep_if_same_input(table.identity)  # an image folder changed since an interrupted run
    return _Planned(tuple(shards), finish)


def forget_refused_run(folder: Folder, journal: Journal | None) -> None:
    """A table refused before any shard was written: leave output_dir as it was (no spill, no run records), so
    the run with the table fixed starts afresh."""
    _remove_rows(folder)
    if journal is not None:  # a lock the pipeline holds (WriteDataset, a Dataflow job not waited for) goes too
        journal.complete() if journal.release_lock else journal.clear()


def _remove_rows(folder: Folder) -> None:
    """Remove the rows this conversion put in output_dir for its workers (a staged DataFrame, spill files)."""
    folder.remove(INPUT_DIR)
    folder.remove(ROWS_DIR)
    folder.remove_empty_dir(BEAM_DIR)



def stage_part(folder: Folder, name: str, data: Any) -> str:
    """Write a Parquet part of the input under INPUT_DIR; its URL."""
    path = f"{INPUT_DIR}/{name}"
    with folder.create(path, durable=False) as f:  # lost in a crash, it is written again by the re-run
        f.write(data)
    return folder.url_of(path)


def _spill_folder(folder: Folder) -> Folder:
    return Folder.of(folder.url_of(ROWS_DIR))


class ListImageFolder(beam.PTransform):
    """PBegin -> the image folder's rows as Parquet parts under INPUT_DIR (``InputFile``s): one step lists its label
    folders (two levels of folders), a worker per label folder lists its images, and their rows go to a part
    each (with a split column when any image is under a split folder, as ``sources.image_folder_table``)."""

    def __init__(self, url: str, folder: Folder):
        super().__init__()
        self._url, self._folder = url, folder

    def expand(self, pipeline: beam.pvalue.PBegin) -> beam.PCollection:
        listed = (
            pipeline
            | "Folder" >> beam.Create([self._url], reshuffle=False)
            | "LabelFolders" >> beam.FlatMap(lambda url: enumerate(label_folders(url)))
            | "SpreadFolders" >> beam.Reshuffle()
            | "ListImages" >> beam.Map(lambda task, url: (task[0], *folder_rows(url, task[1])), self._url)
        )
        with_split = (
            listed
            | "UnderSplits" >> beam.Map(lambda found: any(split is not None for split, _, _ in found[1]))
            | "AnyUnderSplits" >> beam.CombineGlobally(any)
        )
        return listed | "StageListing" >> beam.FlatMap(_stage_listing, beam.pvalue.AsSingleton(with_split),
                                                        self._folder)


def _stage_listing(found: tuple[int, list[tuple[str | None, str, str]], str], with_split: bool,
                   folder: Folder) -> Iterator[InputFile]:
    """One label folder's rows as a Parquet part under INPUT_DIR (none for a folder without images)."""
    index, rows, identity = found
    if not rows:
        return
    (data,) = frame_parts(frame_as_arrow(listing_frame(rows, with_split)), len(rows))
    yield InputFile(index, stage_part(folder, f"folder-{index:05d}.parquet", data), len(data), identity)


class ConvertFiles(beam.PTransform):
    """``InputFile``s of CSV or Parquet -> the dataset's Manifest, once dataset.json is written:
    ``summary_pass``'s passes as composite steps - ``SummarizeFiles`` (type each file, a worker per file; the
    table and its schema; validate and spill each file), ``PlanShards`` (merge the summaries, the same-URI leaks
    found by range of URI hash, check, plan), ``WriteShards``, then ``WriteMetadata`` (errors.csv, TFDS files,
    dataset.json)."""

    def __init__(self, job: summary_pass.FileJob, folder: Folder, journal: Journal | None):
        super().__init__()
        self._job, self._folder, self._journal = job, folder, journal

    def expand(self, files: beam.PCollection) -> beam.PCollection:
        job, folder, journal = self._job, self._folder, self._journal
        table, summarized = files | "SummarizeFiles" >> SummarizeFiles(job, folder, journal)
        planned = summarized | "PlanShards" >> PlanShards(table, job, folder, journal)
        written = planned | "WriteShards" >> WriteShards(job, folder, journal)
        return written | "WriteMetadata" >> WriteMetadata(planned, folder, journal)


class SummarizeFiles(beam.PTransform):
    """``InputFile``s -> (the table: a singleton; each file's (index, Summary, URI hashes by range))."""

    def __init__(self, job: summary_pass.FileJob, folder: Folder, journal: Journal | None):
        super().__init__()
        self._job, self._folder, self._journal = job, folder, journal

    def expand(self, files: beam.PCollection) -> tuple[beam.PCollection, beam.PCollection]:
        table = (
            files
            | "SpreadFiles" >> beam.Reshuffle()
            | "TypeFiles" >> beam.Map(_read_file, self._job)
            | "AllFiles" >> beam.combiners.ToList()
            | "Table" >> beam.Map(_read_input, self._job, self._folder, self._journal)
        )
        summarized = (
            files
            | "SpreadSummaries" >> beam.Reshuffle()
            | "Summarize" >> beam.Map(_summarize_file, beam.pvalue.AsSingleton(table), self._job, self._folder)
        )
        return table, summarized


class PlanShards(beam.PTransform):
    """The files' summaries -> one ``_Planned``: merged, checked (a table with problems fails here, before any
    shard), divided into shards; image rows grouped by range of URI hash, so no worker holds every URI."""

    def __init__(self, table: beam.PCollection, job: summary_pass.FileJob, folder: Folder, journal: Journal | None):
        super().__init__()
        self._table, self._job, self._folder, self._journal = table, job, folder, journal

    def expand(self, summarized: beam.PCollection) -> beam.PCollection:
        same_uri = (
            summarized
            | "UriRanges" >> beam.FlatMap(lambda summarized: summarized[2].items())
            | "GroupByUri" >> beam.GroupByKey()
            | "SameUri" >> beam.Map(_range_leaks, "same_uri")
        )
        return (
            summarized
            | "Summaries" >> beam.Map(lambda summarized: summarized[:2])
            | "AllSummaries" >> beam.combiners.ToList()
            | "Plan" >> beam.Map(_plan, beam.pvalue.AsSingleton(self._table), beam.pvalue.AsList(same_uri),
                                 self._job, self._folder, self._journal)
        )


class WriteShards(beam.PTransform):
    """The plan -> a ShardResult per shard, each written by one worker (or kept from an earlier run)."""

    def __init__(self, job: summary_pass.FileJob, folder: Folder, journal: Journal | None):
        super().__init__()
        self._job, self._folder, self._journal = job, folder, journal

    def expand(self, planned: beam.PCollection) -> beam.PCollection:
        return (
            planned
            | "Shards" >> beam.FlatMap(lambda plan: plan.shards)
            | "Spread" >> beam.Reshuffle()
            | "Write" >> beam.ParDo(_WriteShard(self._folder, self._job.options, self._journal))
        )


class WriteMetadata(beam.PTransform):
    """The shards' results -> the Manifest, once errors.csv, the TFDS files and dataset.json are written; the
    same-bytes leaks found by grouping written images by range of content key."""

    def __init__(self, planned: beam.PCollection, folder: Folder, journal: Journal | None):
        super().__init__()
        self._planned, self._folder, self._journal = planned, folder, journal

    def expand(self, written: beam.PCollection) -> beam.PCollection:
        same_bytes = (
            written
            | "ContentRanges" >> beam.FlatMap(_content_ranges)
            | "GroupByContent" >> beam.GroupByKey()
            | "SameBytes" >> beam.Map(_range_leaks, "same_bytes")
        )
        return (
            written  # with their content keys (16 bytes an image): the last step keeps them beside the shards
            | "Collect" >> beam.combiners.ToList()
            | "WriteManifest" >> beam.Map(_finish, beam.pvalue.AsSingleton(self._planned),
                                          beam.pvalue.AsList(same_bytes), self._folder, self._journal)
        )


def _content_ranges(result: ShardResult) -> Iterator[tuple[int, leakage.KeyedRows]]:
    """A shard's written images' content keys and rows, by range of key (``leakage.key_ranges``)."""
    yield from leakage.key_ranges([result.keyed_content()]).items()


