"""Beam launch: running a pipeline, or submitting it to Dataflow, and what running it gave.

A Dataflow submission runs in a thread of its own, given SUBMIT_SECONDS; a dry run or a job not waited for
returns once submitted. A failed pipeline's error is given back as the local runner raises it: a worker's
RowError or a table's SchemaError found in Beam's exception chain or its text, a lost object store as
StoreUnreachable.
"""

from __future__ import annotations

import contextlib
import difflib
import importlib
import re
import secrets
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import apache_beam as beam
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import PipelineOptions

from tfrecorder.dataset.storage import Folder
from tfrecorder.dataset.store_requests import StoreUnreachable
from tfrecorder.errors import RowError, SchemaError, TFRecorderError
from tfrecorder.types import BEAM_RUNNER_CLASSES
from tfrecorder.write.runners.beam_steps import BEAM_DIR, COUNTERS
from tfrecorder.write.settings import BeamOptions

CONSOLE_URL = "https://console.cloud.google.com/dataflow/jobs/{region}/{job_id}?project={project}"


@dataclass(frozen=True)
class BeamOutcome:
    """What running the pipeline gave: whether it finished, the job, its counters and options."""

    finished: bool
    job_id: str | None = None
    job_name: str | None = None
    job_url: str | None = None
    counters: dict[str, int] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)


def job_name(label: str | None) -> str:
    """A valid, unique Dataflow job name: ``tfrecorder-<label>-<utc time>-<random>``."""
    stem = re.sub(r"[^a-z0-9-]+", "-", (label or "").lower()).strip("-")
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    name = "-".join(p for p in ("tfrecorder", stem[:30].strip("-"), stamp, secrets.token_hex(3)) if p)
    return name


def pipeline_options(runner: str, folder: Folder, beam_options: BeamOptions) -> dict[str, Any]:
    """The pipeline options for ``runner`` (``beam_options`` already checked: ``beam_dispatch.convert_beam``)."""
    options: dict[str, Any] = {"runner": runner}
    if runner == "DataflowRunner":
        options.update(
            project=beam_options.project, region=beam_options.region, job_name=job_name(beam_options.job_label),
            temp_location=folder.url_of(f"{BEAM_DIR}/temp"), staging_location=folder.url_of(f"{BEAM_DIR}/staging"),
        )
        if beam_options.wheel:
            options["extra_packages"] = [beam_options.wheel]
    options.update(beam_options.pipeline)
    return options


def checked_options(runner: str, given: Mapping[str, Any]) -> dict[str, Any]:
    """``given`` as Beam takes them, each by the name Beam's option classes (the runner's own among them) keep
    it under: a flag's name (``dask_client_address``) or its destination (``address``) alike. An option none of
    them knows is a TFRecorderError naming it (Beam would drop it with a log line and run without it)."""
    runner_class(runner)  # its module imported: its options (DaskOptions, ...) are among Beam's option classes
    parsers: list[Any] = []
    PipelineOptions(flags=[]).get_all_options(add_extra_args_fn=parsers.append)
    names = {}
    for action in parsers[0]._actions:
        names[action.dest] = action.dest
        names.update((flag.lstrip("-"), action.dest) for flag in action.option_strings)
    if given.get("runner") not in (None, runner):
        raise TFRecorderError(f"pipeline_options={{'runner': {given['runner']!r}}}: give the runner as "
                              f"runner={given['runner']!r}, which the result and dataset.json then record")
    unknown = sorted(set(given) - set(names) - {"runner"})
    if unknown:
        close = difflib.get_close_matches(unknown[0], list(names), n=1)
        raise TFRecorderError(f"pipeline option {unknown[0]!r} is none of Beam's options for {runner}"
                              + (f": did you mean {close[0]!r}?" if close else ""))
    return {names[k]: v for k, v in given.items() if k != "runner"}


def runner_class(runner: str) -> type:
    """The class of a Beam runner by its name (``types.BEAM_RUNNER_CLASSES``) or dotted path (as ``check_runner``
    left it); a TFRecorderError when the path names something else."""
    from apache_beam.runners.runner import PipelineRunner

    module, _, name = BEAM_RUNNER_CLASSES.get(runner, runner).rpartition(".")
    found = getattr(importlib.import_module(module), name)
    if not (isinstance(found, type) and issubclass(found, PipelineRunner)):
        raise TFRecorderError(f"runner={runner!r} is not a Beam runner class (a PipelineRunner)")
    return found


def run_beam(build: Callable[[beam.Pipeline], None], options: dict[str, Any], *, wait: bool) -> BeamOutcome:
    """Run the pipeline ``build`` adds its steps to (``build_file_pipeline``, ``build_folder_pipeline``); wait for
    it (DirectRunner always) or return once the job is submitted (within SUBMIT_SECONDS)."""
    runner = options["runner"]
    dry_run = bool(options.get("dry_run"))
    waits = runner != "DataflowRunner" or wait and not dry_run

    def run() -> Any:
        given = {k: v for k, v in options.items() if k != "runner"}  # the runner object is given itself
        pipeline = beam.Pipeline(runner=_runner(runner), options=PipelineOptions(flags=[], **given))
        build(pipeline)
        return pipeline.run()

    with _temporary_folder_of_beam():
        result = None
        try:
            result = run() if runner != "DataflowRunner" else _submitted(run, options.get("job_name"))
            if waits:
                result.wait_until_finish()
        except Exception as e:  # Beam wraps worker errors; give the user ours back
            lost = _store_lost(e)
            if lost is not None:  # convert names the output folder and how to go on
                raise lost from e
            raise _our_error(e) or TFRecorderError(f"the Beam pipeline failed: {_last_line(e)}") from e
        finally:
            # The DaskRunner's result holds the client it connected to the cluster with: closed once the pipeline
            # has finished (left open, it logs errors for minutes once the cluster goes away).
            client = getattr(result, "client", None)
            if waits and client is not None:
                client.close()
    if waits:
        state = str(result.state)
        if "DONE" not in state:
            raise TFRecorderError(f"the Beam pipeline ended in state {state}")
        return BeamOutcome(True, counters=_counters(result), options=options,
                           **_job(result, options))
    return BeamOutcome(False, options=options, **_job(result, options))


# How long a Dataflow submission may take: Beam checks the options with Google's APIs, stages the files and
# creates the job, each call with its own retries; without a network answer it could wait for ever.
SUBMIT_SECONDS = 300.0


def _submitted(submit: Callable[[], Any], job_name: str | None) -> Any:
    """``submit()`` (building and submitting a Dataflow job) in a thread of its own, given SUBMIT_SECONDS: a
    submission that hangs is an error, not a process that never returns (the thread, a daemon, is left)."""
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["result"] = submit()
        except BaseException as e:  # noqa: BLE001 - handed to the caller's thread as it is
            outcome["error"] = e

    thread = threading.Thread(target=target, name="tfrecorder-dataflow-submit", daemon=True)
    thread.start()
    thread.join(SUBMIT_SECONDS)
    if thread.is_alive():
        raise TFRecorderError(
            f"submitting the Dataflow job {job_name} did not finish within {SUBMIT_SECONDS:.0f} s (Beam was still "
            f"waiting on Google Cloud: the project, the buckets, the staging upload or the job request); check the "
            f"network and credentials, and look for the job in the console before running again: it may still "
            f"have been created")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"]


@contextlib.contextmanager
def _temporary_folder_of_beam() -> Iterator[None]:
    """Beam leaves local temporary folders behind: a Dataflow submission's SDK dependency list and its copy of
    the pipeline's folder, and in IPython (notebooks) every pipeline's own /tmp/beam-pipeline-temp*. While a
    pipeline is built and run, Python's temporary folder is one of ours, removed with all of them afterwards.
    No runner reads them once the job has finished or been submitted; tfrecorder's own temporary files go
    elsewhere (the Beam runners spill under output_dir)."""
    folder = tempfile.mkdtemp(prefix="tfrecorder-beam-")
    saved = tempfile.tempdir
    tempfile.tempdir = folder
    try:
        yield
    finally:
        tempfile.tempdir = saved
        shutil.rmtree(folder, ignore_errors=True)


def _runner(name: str) -> Any:
    """The runner object for ``name``. For "DirectRunner", Beam's FnApiRunner itself: Beam's DirectRunner would
    first try its Prism runner, which downloads a binary from the internet and leaves a /tmp/beam-temp*
    folder behind when it cannot; FnApiRunner is what it falls back to, and honours direct_running_mode."""
    if name == "DirectRunner":
        from apache_beam.runners.portability.fn_api_runner import FnApiRunner

        return FnApiRunner()
    return runner_class(name)()


_WHILE_RUNNING = re.compile(r"\s*\[while running '[^']*'\]")
_RAISED = re.compile(r"tfrecorder\.errors\.(SchemaError|TFRecorderError): ([^\n]*)")


def _our_error(error: BaseException) -> TFRecorderError | None:
    """The error of ours a failed pipeline carries - a worker's RowError, or the SchemaError of a table with
    problems - as the local runner raises it: its type and message, without Beam's step names. Found in the
    exception's chain (Beam keeps the type when it can) or its text (a Dataflow job's log lines)."""
    row_error = RowError.find_in(str(error))
    if row_error is not None:
        return row_error
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, TFRecorderError) and type(seen) in (TFRecorderError, SchemaError):
            return type(seen)(_WHILE_RUNNING.sub("", str(seen)))
        seen = seen.__cause__ or seen.__context__
    found = _RAISED.search(str(error))
    if found is None:
        return None
    kind = SchemaError if found.group(1) == "SchemaError" else TFRecorderError
    return kind(_WHILE_RUNNING.sub("", found.group(2)))


def _store_lost(error: BaseException) -> StoreUnreachable | None:
    """The lost object store a failed pipeline's worker met (Beam keeps the exception in the chain when it runs
    the workers in this process)."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, StoreUnreachable):
            return StoreUnreachable(seen.cause, seen.seconds)
        seen = seen.__cause__ or seen.__context__
    return None


def _last_line(error: Exception) -> str:
    """The last non-blank line of an error: in Beam's wrapped worker errors, the original cause."""
    lines = [line for line in str(error).splitlines() if line.strip()]
    return lines[-1] if lines else type(error).__name__


def _job(result: Any, options: dict[str, Any]) -> dict[str, Any]:
    if options["runner"] != "DataflowRunner":
        return {}
    job = getattr(result, "job", None)
    job_id = getattr(job, "id", None) if job is not None and not callable(getattr(job, "id", None)) else None
    if job_id is None and hasattr(result, "job_id"):
        job_id = result.job_id()
    url = CONSOLE_URL.format(region=options["region"], job_id=job_id, project=options["project"]) if job_id else None
    return {"job_id": job_id or None, "job_name": options.get("job_name"), "job_url": url}


def _counters(result: Any) -> dict[str, int]:
    try:
        found = result.metrics().query(MetricsFilter().with_namespace(COUNTERS))["counters"]
    except (AttributeError, NotImplementedError, KeyError):
        return {}
    totals: dict[str, int] = {}
    for counter in found:
        totals[counter.key.metric.name] = totals.get(counter.key.metric.name, 0) + int(counter.committed or 0)
    return totals
