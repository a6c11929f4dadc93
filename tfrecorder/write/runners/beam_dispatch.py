"""Beam dispatch: a conversion on a Beam runner, from its source to its result - CSV or Parquet files, an image
folder or a DataFrame (staged as Parquet parts) handed to the pipeline that reads them (``beam``), the run started,
reused or resumed in its output folder, the pipeline run (``beam_launch``) and its result made.

This process never reads the table (a DataFrame's schema is checked here, as the local runner checks it); the
Beam modules are imported only once a Beam runner is asked for, so ``convert`` stays light.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import pandas as pd

from tfrecorder.dataset.connectors import Connector
from tfrecorder.dataset.connectors.base import staged
from tfrecorder.dataset.manifest import MANIFEST_NAME, Manifest
from tfrecorder.dataset.storage import Folder
from tfrecorder.errors import SchemaError, TFRecorderError
from tfrecorder.schema import Schema
from tfrecorder.types import ImageBytes
from tfrecorder.write.options import as_schema
from tfrecorder.write.run.finish import convert_result
from tfrecorder.write.run.result import ConvertResult
from tfrecorder.write.run.resume import (
    FinishedKey,
    Run,
    files_identity,
    files_run_identity,
    finished_key,
    record_finished,
    start_run,
)
from tfrecorder.write.run.run_edges import add_read_notes, full_disk_as_error, releasing_lock, reused
from tfrecorder.write.settings import Conversion, RunSettings
from tfrecorder.write.sources import (
    BeamInput,
    ListedFolder,
    StagedRows,
    beam_notes,
    frame_as_arrow,
    frame_parts,
    frame_vocabulary,
    image_bytes_columns,
    image_folder_url,
    is_hugging_face,
    match_table_files,
    part_rows,
    text_columns,
    unreadable,
)
from tfrecorder.write.table import summary_pass
from tfrecorder.write.table.schema_check import check_schema


def convert_beam(source: Any, folder: Folder, schema: Any, conversion: Conversion, run_settings: RunSettings, *,
                 label_names: tuple[str, ...] | None = None) -> ConvertResult:
    """Convert ``source`` with the Beam runner ``run_settings.runner``: CSV or Parquet files, an image folder, or a
    DataFrame (with ``label_names``, the class names its annotation format fixes); any other source is the error
    that says what ``source`` can be. The pipeline options are checked against Beam's own first, before the folder
    is touched, and kept by the names Beam reads them under."""
    from tfrecorder.write.runners.beam_launch import checked_options

    runner = run_settings.runner
    beam_options = replace(run_settings.beam, pipeline=checked_options(runner, run_settings.beam.pipeline))
    run_settings = replace(run_settings, beam=beam_options)

    def beam_files(files: BeamInput, given: Schema | None, identity: Any, **staged: Any) -> ConvertResult:
        job = summary_pass.FileJob(files, given, conversion.options, tuple(conversion.fractions),
                                   conversion.float_precision, conversion.num_shards, runner, summary_pass.PART_ROWS)
        return _convert_beam_files(job, folder, identity, conversion.overwrite, run_settings, **staged)

    if (matched := match_table_files(source)) is not None:
        return beam_files(matched, as_schema(schema), files_identity(matched))
    if (url := image_folder_url(source)) is not None:
        return beam_files(ListedFolder(url), as_schema(schema), ("image folder", url))
    if isinstance(source, pd.DataFrame):
        frame = _beam_frame(text_columns(source), as_schema(schema), conversion.options.tensor_encoding)
        return beam_files(StagedRows("", names=frame_vocabulary(source, label_names)), frame.schema, frame.digests,
                          parts=frame.parts, columns=tuple(frame.schema_columns),
                          plain_images=image_bytes_columns(source))
    if is_hugging_face(source):
        raise TFRecorderError(f"runner={runner!r} reads files, and a Hugging Face dataset is held by this process: "
                              f"convert it with runner='local', or save each split as Parquet "
                              f"(dataset.to_parquet('train.parquet')) and convert those files")
    raise unreadable(source)


@dataclass(frozen=True)
class _Frame:
    """A DataFrame for a Beam runner, as the Parquet parts its pipeline reads (``sources.frame_parts``)."""

    schema: Schema
    parts: Callable[[], Iterator[Any]]  # the parts' bytes, made anew on each call: never all held at once
    digests: list[str]  # each part's SHA-256: the run's input identity
    schema_columns: tuple[str, ...] = ()  # the frame's columns, for what its result says a schema leaves out


def _checked_features(df: pd.DataFrame, schema: Schema) -> pd.DataFrame:
    """``df`` with the columns of kinds whose checked values are serialized Features (tensors: arrays Parquet
    cannot hold as they are) checked here, each value staged as its check's result (``connectors.base.staged``),
    which the pipeline's check takes back: the same values the local runner stores."""
    kinds = {name: t.connector for name, t in schema.items()
             if isinstance(t.connector, Connector) and t.connector.feature_bytes}
    if not kinds:
        return df
    return df.assign(**{name: [staged(kind, v) for v in df[name].tolist()] for name, kind in kinds.items()})


def _beam_frame(df: pd.DataFrame, schema: Schema | None, tensor_encoding: str) -> _Frame:
    """``df`` staged for a Beam runner, its schema checked against (or inferred from) the whole frame as the
    local runner does it (tensors stored with convert's ``tensor_encoding``); a TFRecorderError naming the column
    when Parquet cannot hold its values as they are (``frame_as_arrow``): the pipeline reads the frame as
    Parquet."""
    schema = check_schema(df, schema, tensor_encoding=tensor_encoding)
    arrow = frame_as_arrow(_checked_features(df, schema), tuple(n for n, t in schema.items() if t is ImageBytes))
    if isinstance(arrow, str):
        raise TFRecorderError(f"a Beam runner reads a DataFrame as Parquet, which cannot hold this one's values as "
                              f"they are: {arrow}. Give each column one kind of value, or convert it with "
                              f"runner='local'")

    rows = part_rows(summary_pass.PART_ROWS, arrow.nbytes / max(1, arrow.num_rows))  # images: parts of PART_BYTES

    def parts() -> Iterator[Any]:
        return frame_parts(arrow, rows)

    return _Frame(schema, parts, [hashlib.sha256(part).hexdigest() for part in parts()], tuple(df.columns))


def _convert_beam_files(job: summary_pass.FileJob, folder: Folder, identity: Any, overwrite: bool,
                        run_settings: RunSettings, *, parts: Callable[[], Iterator[Any]] | None = None,
                        columns: tuple[str, ...] | None = None, plain_images: tuple[str, ...] = ()) -> ConvertResult:
    """A Beam conversion of CSV or Parquet files, read by the pipeline itself (``beam.build_file_pipeline``):
    this process lists the files and never reads the table; the run's identity is the input's
    ``identity`` and the settings, and the pipeline keeps the shards an earlier run of it finished.
    ``parts``: the Parquet parts of a DataFrame (``StagedRows``), written under output_dir once the run has
    started. A ``ListedFolder`` is listed by the pipeline (``beam.build_folder_pipeline``). What the result says
    of how the files are read (``sources.beam_notes``) is found here, before the run starts."""
    from tfrecorder.write.runners import beam, beam_steps

    notes = replace(beam_notes(job.files, columns), plain_images=plain_images)
    run_identity = files_run_identity(identity, job.schema, job.options)
    key = _pipeline_key(run_identity, job)
    run = start_run(folder, run_identity, None, overwrite=overwrite, runner=job.runner, key=key)
    with full_disk_as_error(folder), releasing_lock(run):
        if run.reused is not None:
            return add_read_notes(reused(folder, run.reused, job.runner), notes, job.schema)
        if parts is not None:
            names = job.files.names if isinstance(job.files, StagedRows) else None  # a DataFrame's
            job = replace(job, files=replace(beam.stage_frame(parts(), folder), names=names))
        try:
            build = beam.build_folder_pipeline if isinstance(job.files, ListedFolder) else beam.build_file_pipeline
            result = _convert_beam(lambda pipeline, journal: build(pipeline, job, folder, journal),
                                   folder, run, run_settings, key)
            return add_read_notes(result, notes, job.schema)
        except SchemaError:  # the pipeline refused the table (its files, schema or values) before any shard
            beam_steps.forget_refused_run(folder, run.journal)
            raise


def _pipeline_key(run_identity: str, job: summary_pass.FileJob) -> FinishedKey | None:
    """The FinishedKey of a pipeline's conversion. An image folder's run identity names only the folder (the
    pipeline lists it): its key adds the listing, each image's name, size and time, made here - but for
    Dataflow, whose submitting machine lists nothing (None: such a folder is never reused)."""
    if isinstance(job.files, ListedFolder):
        if job.runner == "DataflowRunner":
            return None
        from tfrecorder.write.sources.folders import folder_rows, label_folders

        listing = hashlib.sha256(run_identity.encode("utf-8"))
        for found in label_folders(job.files.url):
            listing.update(folder_rows(job.files.url, found)[1].encode("ascii"))
        run_identity = listing.hexdigest()
    return finished_key(run_identity, job.options, job.schema, runner=job.runner)


def _convert_beam(build: Any, folder: Folder, run: Run, run_settings: RunSettings,
                  key: FinishedKey | None = None) -> ConvertResult:
    """Run a Beam pipeline - ``build(pipeline, journal)`` adds its steps - and make its result; once it
    finished here, note ``key`` beside it (``record_finished``)."""
    from tfrecorder.write.runners import beam_launch

    runner, wait = run_settings.runner, run_settings.beam.wait
    options = beam_launch.pipeline_options(runner, folder, run_settings.beam)
    detached = runner == "DataflowRunner" and not wait and not options.get("dry_run")
    journal = replace(run.journal, release_lock=detached)
    with contextlib.ExitStack() as staged:
        if runner == "DataflowRunner" and "extra_packages" not in options:
            from tfrecorder.write.runners.dataflow_package import staged_sdist

            options["extra_packages"] = [staged.enter_context(staged_sdist())]  # removed once submitted
        outcome = beam_launch.run_beam(lambda pipeline: build(pipeline, journal), options, wait=wait)
    if detached and outcome.job_name:
        run.lock.hand_to_job(outcome.job_name)  # the job's last step removes it
    seconds = time.perf_counter() - run_settings.started
    extra: dict[str, Any] = dict(job_id=outcome.job_id, job_name=outcome.job_name, job_url=outcome.job_url,
                                 counters=outcome.counters, pipeline_options=outcome.options)
    if not outcome.finished:
        return ConvertResult(folder.url, {}, seconds, runner, **extra)
    manifest = Manifest.from_json(folder.read_text(MANIFEST_NAME), where=folder.url_of(MANIFEST_NAME))
    if key is not None and not detached:
        record_finished(folder, key)
    resumed = len(run.resumed) + outcome.counters.get("resumed", 0)
    return replace(convert_result(folder, manifest, seconds, runner, resumed=resumed), **extra)
