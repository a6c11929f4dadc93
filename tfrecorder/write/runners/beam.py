"""Beam writer: the pipelines a conversion runs on Beam, and ``WriteDataset``, the one users put in theirs.

Three ways in, one way on (``beam_steps.ConvertFiles``):

- CSV or Parquet files (``build_file_pipeline``): the pipeline reads them itself, so the submitting process
  never holds the table. A DataFrame takes this way too: ``convert`` writes it as Parquet parts under
  ``output_dir/_beam/input/`` (``stage_frame``).
- An image folder (``build_folder_pipeline``), listed by the pipeline (``ListImageFolder``: a worker per label
  folder), its rows staged there the same way.
- Rows of a user's own pipeline (``WriteDataset``: the folder claimed as the pipeline is built, then
  ``StageRows``), staged as Parquet parts by a hash of their content, every part typed as the whole PCollection
  is.

``beam_launch`` runs the pipelines ``convert`` builds here; a user's pipeline runs on its own.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Iterable, Iterator
from dataclasses import fields
from typing import Any

import apache_beam as beam
import numpy as np

from tfrecorder.dataset.storage import Folder
from tfrecorder.errors import SchemaError, TFRecorderError
from tfrecorder.schema import is_pil_image
from tfrecorder.types import ImageBytes
from tfrecorder.write.options import PIPELINE_SETTINGS, Options, as_schema
from tfrecorder.write.run.finish import convert_result
from tfrecorder.write.run.journal import Journal
from tfrecorder.write.run.lock import Lock, LockInfo
from tfrecorder.write.run.resume import Claim, begin_run, claim_folder, files_run_identity
from tfrecorder.write.runners.beam_steps import (
    INPUT_DIR,
    ConvertFiles,
    InputFile,
    ListImageFolder,
    forget_refused_run,
    stage_part,
)
from tfrecorder.write.settings import APPEND
from tfrecorder.write.sources import StagedRows, frame_as_arrow, frame_parts
from tfrecorder.write.table import summary_pass
from tfrecorder.write.table.schema_check import EMPTY_TABLE

logger = logging.getLogger(__name__)
_KEYWORDS = [f.name for f in fields(Options) if f.name not in PIPELINE_SETTINGS]  # what WriteDataset takes


# The pipelines convert runs ------------------------------------------------------------------------------

def stage_frame(parts: Iterable[Any], folder: Folder) -> StagedRows:
    """Write a DataFrame's Parquet parts (``sources.frame_parts``) under INPUT_DIR, for the pipeline to read as
    it reads any Parquet source: the files, found."""
    urls, size = [], 0
    for index, data in enumerate(parts):
        urls.append(stage_part(folder, f"part-{index:05d}.parquet", data))
        size += len(data)
    return StagedRows(folder.url_of(INPUT_DIR), tuple(urls), bytes=size)


def build_file_pipeline(pipeline: beam.Pipeline, job: summary_pass.FileJob, folder: Folder,
                        journal: Journal | None = None) -> None:
    """Add the steps of a conversion that reads its CSV or Parquet files itself (``ConvertFiles``). The job
    holds the files' names: its size does not grow with the table."""
    files = [InputFile(index, url) for index, url in enumerate(job.files.files)]
    _ = pipeline | "Files" >> beam.Create(files, reshuffle=False) | ConvertFiles(job, folder, journal)


def build_folder_pipeline(pipeline: beam.Pipeline, job: summary_pass.FileJob, folder: Folder,
                          journal: Journal | None = None) -> None:
    """Add the steps of a conversion of the image folder ``job.files.url``, listed by the pipeline
    (``ListImageFolder``) -> ``ConvertFiles``."""
    _ = pipeline | ListImageFolder(job.files.url, folder) | ConvertFiles(job, folder, journal)


# The public transform -------------------------------------------------------------------------------------

WRITE_DATASET = "WriteDataset"  # the runner dataset.json names for a conversion inside a user's pipeline


class WriteDataset(beam.PTransform):
    """Write a PCollection of rows - dicts of column -> value, the columns ``convert`` takes - as a tfrecorder
    dataset in ``output_dir``: the same shards, index files, errors.csv and dataset.json, byte for byte, as
    ``convert`` writes for a DataFrame of the same rows (dataset.json's ``runner`` aside, and errors.csv's row
    numbers: rows of a PCollection come in no order, so they are numbered in the order they are staged).

    ``schema`` and ``convert_options`` are ``convert``'s (``num_shards``, ``image_format``, ``overwrite``,
    ``storage_timeout``, ...); the runner and its options are the pipeline's own. The transform gives one
    element, the ``ConvertResult``, once dataset.json is written. A table with problems fails the pipeline
    with the SchemaError ``convert`` raises; running the same pipeline again after a failure resumes, keeping
    the shards already written.

    The rows are grouped by a hash of their content into Parquet parts under ``output_dir/_beam/input/`` (so
    the same rows make the same parts, in whatever order they come), all typed as one table - a column's
    kind is what every part's values allow, as ``convert`` types a DataFrame of all the rows - which the
    conversion then reads as it reads any Parquet source; nothing but file names moves through the rest of
    the pipeline.

    Examples:
        >>> import apache_beam as beam
        >>> from tfrecorder.beam import WriteDataset
        >>> rows = [{"split": "TRAIN", "x": float(i), "label": "ab"[i % 2]} for i in range(6)]
        >>> with beam.Pipeline() as pipeline:
        ...     results = (pipeline | beam.Create(rows) | WriteDataset(str(tmp_path / "beam"), num_shards=1)
        ...                | beam.Map(lambda result: result.rows.written))
        >>> sorted(p.name for p in (tmp_path / "beam").glob("*.tfrecord"))
        ['train-00000-of-00001.tfrecord']
    """

    def __init__(self, output_dir: str, schema: Any = None, **convert_options: Any):
        super().__init__()
        misplaced = [name for name in PIPELINE_SETTINGS if name in convert_options]
        if misplaced:
            raise TFRecorderError(
                f"WriteDataset({', '.join(f'{name}=...' for name in misplaced)}): these are settings of the pipeline "
                f"convert runs, or of the files it reads; WriteDataset writes your pipeline's rows: set the "
                f"pipeline's on it (its PipelineOptions)")
        unknown = sorted(set(convert_options) - {f.name for f in fields(Options)})
        if unknown:  # a misspelt keyword: one line naming it and the ones there are, not Options' TypeError
            raise TFRecorderError(f"WriteDataset({unknown[0]}=...): no such keyword; it takes schema= and convert's "
                                  f"keywords but the pipeline's: {', '.join(_KEYWORDS)}")
        self._conversion = Options(**convert_options).conversion()
        self._schema = as_schema(schema)
        self._url = str(output_dir)

    def expand(self, rows: beam.PCollection) -> beam.PCollection:
        conversion = self._conversion
        if conversion.mode == APPEND:  # write/run/append.py runs in convert's process, for now
            raise TFRecorderError("WriteDataset(mode='append'): appending runs on the local runner only, for now: "
                                  "call tfrecorder.convert(..., mode='append') on the new rows")
        conversion.options.check_file_format()
        folder = Folder.of(self._url, conversion.storage_timeout)
        staged = StagedRows(folder.url_of(INPUT_DIR))
        job = summary_pass.FileJob(staged, self._schema, conversion.options, conversion.fractions,
                                   conversion.float_precision, conversion.num_shards, WRITE_DATASET,
                                   summary_pass.PART_ROWS)
        journal = Journal(folder, release_lock=True)  # the pipeline's last step, or its refusal, unlocks
        claimed = rows.pipeline | "Claimed" >> beam.Create([_claim(folder, conversion.overwrite)], reshuffle=False)
        return (
            rows
            | "StageRows" >> StageRows(claimed, job, folder)
            | "Convert" >> ConvertFiles(job, folder, journal)
            | "Result" >> beam.Map(lambda manifest, started: convert_result(
                folder, manifest, time.time() - started, WRITE_DATASET), beam.pvalue.AsSingleton(claimed))
        )


class StageRows(beam.PTransform):
    """Rows -> their Parquet parts under INPUT_DIR (``InputFile``s), the folder ``claimed``: one part for
    every PART_ROWS rows, a row's part chosen by a hash of its content (so the same rows make the same parts
    in whatever order they come), every part typed as the whole PCollection is (``_part_kinds``: the
    columns and the kinds of their values merged over every part before any part is written, as a glob of
    CSVs is typed over every file), so the conversion reads the table ``convert`` reads for a DataFrame of
    the same rows; then the run begins (or resumes) with the parts' digests as its input."""

    def __init__(self, claimed: beam.PCollection, job: summary_pass.FileJob, folder: Folder):
        super().__init__()
        self._claimed, self._job, self._folder = claimed, job, folder

    def expand(self, rows: beam.PCollection) -> beam.PCollection:
        count = rows | "CountRows" >> beam.combiners.Count.Globally()
        grouped = (
            rows
            | "KeyRows" >> beam.Map(_keyed_row, beam.pvalue.AsSingleton(count))
            | "GroupParts" >> beam.GroupByKey()
        )
        schema = (
            grouped
            | "PartKinds" >> beam.Map(_part_kinds)
            | "AllKinds" >> beam.CombineGlobally(_merged_kinds)
            | "StagedSchema" >> beam.Map(_staged_schema, _image_columns(self._job.schema))
        )
        parts = grouped | "StageParts" >> beam.Map(_stage_rows_part, beam.pvalue.AsSingleton(schema), self._folder,
                                                   _image_columns(self._job.schema))
        return self._claimed | "BeginRun" >> beam.FlatMap(_begin, beam.pvalue.AsList(parts), self._job, self._folder,
                                                          beam.pvalue.AsSingleton(schema))


def _claim(folder: Folder, overwrite: bool) -> float:
    """Take the output folder for the pipeline (``resume.claim_folder``) as it is built, as ``convert`` takes it
    before it builds one: an unusable folder is refused before the pipeline runs, and no step of it has a side
    effect that a runner re-running a branch would repeat (the DaskRunner computes a side input again for each
    step that reads it). The time it was taken: the result's seconds count from it."""
    claim = claim_folder(folder, WRITE_DATASET, overwrite=overwrite)
    claim.lock.hand_to_pipeline()
    return time.time()


def _keyed_row(row: Any, count: int) -> tuple[int, tuple[bytes, Any]]:
    """A row and its content digest, keyed by the Parquet part it goes to: one part for every PART_ROWS rows,
    a row's part chosen by its digest, so the same rows make the same parts whatever their order."""
    if not isinstance(row, dict):
        raise TFRecorderError(f"WriteDataset takes rows as dicts of column -> value, not {type(row).__name__}: "
                              f"{_shown(row)}")
    digest = hashlib.blake2b(repr(sorted((str(k), _plain(v)) for k, v in row.items())).encode("utf-8"),
                             digest_size=16).digest()
    parts = max(1, -(-count // summary_pass.PART_ROWS))
    return int.from_bytes(digest[:8], "little") % parts, (digest, row)


def _plain(value: Any) -> Any:
    """A value as plain Python (numpy arrays and scalars as lists and numbers, a PIL image as its mode, size and
    pixels), so that its repr is whole."""
    if is_pil_image(value):
        return "PIL", value.mode, value.size, value.tobytes()
    return value.tolist() if hasattr(value, "tolist") else value


def _image_columns(schema: Any) -> tuple[str, ...]:
    """The columns a given schema types as the images themselves (staged as image structs)."""
    return tuple(name for name, col_type in (schema or {}).items() if col_type is ImageBytes)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


# What a group of rows says of its columns (``_part_kinds``): how many rows it has and, for each column, where it
# first appears (the digest of the first row holding it, in digest order, and its place in that row's keys) and
# one witness value of each kind of value it holds (``_witnesses``: a rank, the value of least rank kept).
_Kinds = tuple[int, dict[Any, tuple[tuple[bytes, int], dict[tuple[str, ...], tuple[Any, Any]]]]]
_MISSING = (("builtins.float", "nan"), (b"",), float("nan"))  # a row without the column: pandas gives it NaN


def _part_kinds(part: tuple[int, Iterable[tuple[bytes, Any]]]) -> _Kinds:
    """One part's rows, their columns and a witness of each kind of value they hold (``_Kinds``)."""
    _, keyed = part
    columns: dict[Any, tuple[tuple[bytes, int], dict[tuple[str, ...], tuple[Any, Any]]]] = {}
    holding: dict[Any, int] = {}
    rows = 0
    for digest, row in sorted(keyed, key=lambda keyed_row: keyed_row[0]):  # a kind's first witness is its least
        rows += 1
        for position, (name, value) in enumerate(row.items()):
            if name not in columns:
                columns[name], holding[name] = ((digest, position), {}), 0
            holding[name] += 1
            witnesses = columns[name][1]
            kind = _value_kind(value)
            if kind[0] in _INTEGERS:
                _witness(witnesses, (*kind, "least"), (int(value),), value)
                _witness(witnesses, (*kind, "greatest"), (-int(value),), value)
            elif kind not in witnesses:
                witnesses[kind] = ((digest,), value)
    for name, (_, witnesses) in columns.items():
        if holding[name] < rows:
            _witness(witnesses, *_MISSING)
    return rows, columns


def _merged_kinds(found: Iterable[_Kinds]) -> _Kinds:
    """The ``_Kinds`` of all these parts' rows together (in any order, in any grouping: Beam's combine)."""
    rows, merged = 0, {}  # type: tuple[int, dict[Any, Any]]
    for part_rows, columns in found:
        if not part_rows:
            continue
        for name in merged.keys() - columns.keys():  # none of this part's rows holds it
            _witness(merged[name][1], *_MISSING)
        for name, (first, witnesses) in columns.items():
            if name not in merged:
                merged[name] = (first, dict(witnesses))
                if rows:  # none of the earlier parts' rows held it
                    _witness(merged[name][1], *_MISSING)
                continue
            earlier, kept = merged[name]
            for kind, (rank, value) in witnesses.items():
                _witness(kept, kind, rank, value)
            merged[name] = (min(earlier, first), kept)
        rows += part_rows
    return rows, merged


def _witness(witnesses: dict[tuple[str, ...], tuple[Any, Any]], kind: tuple[str, ...], rank: Any, value: Any) -> None:
    if kind not in witnesses or rank < witnesses[kind][0]:
        witnesses[kind] = (rank, value)


# Each kind's witness is the value of least rank: for an integer, the least and the greatest (a column's range
# decides int64, uint64 or object: ranked by value); for any other value, the first in digest order (ranked by
# its row's digest), whatever the order the rows come in.
_INTEGERS = {f"{of.__module__}.{of.__qualname__}" for of in (int, np.int8, np.int16, np.int32, np.int64, np.uint8,
                                                               np.uint16, np.uint32, np.uint64)}
_PLAIN = {str: ("builtins.str",), bytes: ("builtins.bytes",), bool: ("builtins.bool",), int: ("builtins.int",),
          type(None): ("builtins.NoneType",)}  # kinds that need no look at the value


def _value_kind(value: Any) -> tuple[str, ...]:
    """What pandas and Arrow type a column by: a value's type, and for NaN, an array, a list or a time what
    more they look at (missing or not, dtype and dimensions, the kinds of the items, the time zone)."""
    of = type(value)
    if of in _PLAIN:
        return _PLAIN[of]
    name = f"{of.__module__}.{of.__qualname__}"
    if isinstance(value, (float, np.floating)) and value != value:
        return name, "nan"
    if isinstance(value, np.ndarray):
        return name, value.dtype.str, str(value.ndim)
    if isinstance(value, (list, tuple)):
        return name, *sorted({"/".join(_value_kind(item)) for item in value})
    if hasattr(value, "tzinfo"):
        return name, str(value.tzinfo)
    return (name,)


def _staged_schema(kinds: _Kinds, images: tuple[str, ...] = ()) -> Any:
    """The Arrow schema of every staged part: the one a DataFrame of all the rows gives (``frame_as_arrow``),
    found from a few rows that hold a witness of each kind of value of every column (pandas and Arrow type a
    column by the kinds of its values), the columns in the order they first appear in digest order. When
    Parquet cannot hold the rows as they are, what it cannot hold (a str: ``_begin`` refuses the rows)."""
    import pandas as pd

    _, columns = kinds
    names = sorted(columns, key=lambda name: columns[name][0])
    values = {name: [columns[name][1][kind][1] for kind in sorted(columns[name][1])] for name in names}
    height = max((len(found) for found in values.values()), default=0)
    witnesses = [{name: values[name][i % len(values[name])] for name in names} for i in range(height)]
    arrow = frame_as_arrow(pd.DataFrame.from_records(witnesses, columns=names), images)
    return arrow if isinstance(arrow, str) else arrow.schema


def _unstageable(reason: str) -> TFRecorderError:
    return TFRecorderError(f"WriteDataset stages its rows as Parquet, which cannot hold them as they are: {reason}. "
                           f"Give each column one kind of value")


def _stage_rows_part(part: tuple[int, Iterable[tuple[bytes, Any]]], schema: Any, folder: Folder,
                     images: tuple[str, ...] = ()) -> tuple[int, str, int, str] | str:
    """One part's rows, in digest order, as Parquet under INPUT_DIR with the whole PCollection's ``schema``
    (``_staged_schema``): its index, URL, size and SHA-256; or what Parquet cannot hold (a str), nothing
    written."""
    import pandas as pd

    if isinstance(schema, str):
        return schema
    index, keyed = part
    rows = [row for _, row in sorted(keyed, key=lambda keyed_row: keyed_row[0])]
    arrow = _as_staged(pd.DataFrame.from_records(rows, columns=schema.names), schema, images)
    if isinstance(arrow, str):
        return arrow
    (data,) = frame_parts(arrow, len(rows))
    url = stage_part(folder, f"part-{index:05d}.parquet", data)
    return index, url, len(data), hashlib.sha256(data).hexdigest()


def _as_staged(df: Any, schema: Any, images: tuple[str, ...] = ()) -> Any:
    """A part's rows as an Arrow table of the whole PCollection's ``schema``: each column cast to its type (a
    part of ints in a column of floats, a part where a column is missing or all null); or what Parquet
    cannot hold (a str)."""
    import pyarrow as pa

    arrow = frame_as_arrow(df, images)
    if isinstance(arrow, str) or arrow.schema.equals(schema, check_metadata=True):
        return arrow
    columns = []
    for wanted in schema:
        column = arrow.column(wanted.name)
        if column.type != wanted.type:
            try:
                column = (pa.chunked_array([pa.nulls(len(column), wanted.type)], wanted.type)
                          if column.null_count == len(column) else column.cast(wanted.type))
            except (pa.ArrowException, ValueError) as e:
                return f"column {wanted.name!r}: {e}"
        columns.append(column)
    return pa.Table.from_arrays(columns, schema=schema)


def _begin(claimed: float, staged: list[tuple[int, str, int, str] | str], job: summary_pass.FileJob, folder: Folder,
           schema: Any) -> Iterator[InputFile]:
    """Begin (or resume) the run of the staged rows - its identity: the parts' digests and the settings, as
    convert's for a DataFrame - and hand their files to the conversion's steps; or refuse rows that Parquet
    cannot hold as they are (``schema`` or a part says what, a str)."""
    parts = sorted(part for part in staged if not isinstance(part, str))
    refused = [reason for reason in (schema, *staged) if isinstance(reason, str)]
    journal = Journal(folder, release_lock=True)
    claim = Claim(Lock(folder, LockInfo.mine(WRITE_DATASET)), journal, journal.read_run())
    identity = files_run_identity([digest for *_, digest in parts], job.schema, job.options)
    try:
        if refused:
            raise _unstageable(refused[0])
        if not parts:
            raise SchemaError(EMPTY_TABLE)
        begin_run(claim, identity, None)
    except TFRecorderError:  # refused: the folder is left as it was (an earlier unfinished run kept)
        folder.remove(INPUT_DIR)
        if claim.earlier is None:
            forget_refused_run(folder, claim.journal)
        else:
            claim.lock.release()
        raise
    for index, url, size, _ in parts:
        yield InputFile(index, url, size)

