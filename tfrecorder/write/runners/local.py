"""Local writer: carries out ShardSpecs on this machine - shards in forked processes (one per core) or in
this process, images fetched and checked by a thread pool."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import logging
import multiprocessing
import os
import signal
import sys
import threading
import warnings
from collections.abc import Callable, Generator, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, ThreadPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import closing
from dataclasses import dataclass
from typing import Any, TypeVar

from tfrecorder import machine
from tfrecorder._notebook import in_notebook, progress_bar
from tfrecorder.dataset.connectors import of_type
from tfrecorder.dataset.storage import Folder
from tfrecorder.dataset.store_requests import stop_requests
from tfrecorder.errors import TFRecorderError
from tfrecorder.write.record.images import DECODE_MEMORY
from tfrecorder.write.record.shard import (
    ImageMapper,
    ShardResult,
    default_workers,
    ordered_map,
    serial_map,
    write_spilled_shard,
)
from tfrecorder.write.run.journal import Journal
from tfrecorder.write.runners.segments import Unit, joined, plan_units, segment_folder, segment_room
from tfrecorder.write.settings import WriteOptions
from tfrecorder.write.table.spill import SpilledShard

logger = logging.getLogger(__name__)
T = TypeVar("T")
R = TypeVar("R")

# The figures behind these three: benchmarks/CONSTANTS.md.
# Shards of an image table written at once in this process when its images are decoded by threads: while one
# is flushed to the disk (its fsync waits on the disk, not the CPU), the next is being encoded and written.
# Header checks stay one shard at a time: that writer is all Python, and a second thread only adds GIL handoffs.
SHARDS_AT_ONCE = 2
# Rows from which shards are written in forked processes, one per core, rather than in this process: below,
# starting the writers (forking a process holding TensorFlow) costs more than they save.
FORK_MIN_ROWS = {"images": 1_000, "columns": 10_000}
# Where images would be decoded on a thread per core in this process, forked writers (one core each) are used
# only if the largest shard holds at most this many even shares of the rows: a writer has one core.
FORK_BALANCE = 4 / 3
PROGRESS_SECONDS = 0.2  # how often the bar shows the rows written by forked writers
_PR_SET_PDEATHSIG = 1  # prctl(2)


class _Stopped(Exception):
    """A shard writer stops at its next row: another shard failed or the run was interrupted."""


@dataclass(frozen=True)
class Parallelism:
    """How shards are written: ``processes`` forked writers (1: in this process), ``shards`` written at once
    by threads of this process, each with ``image_threads`` threads fetching and checking its images."""

    processes: int = 1
    shards: int = 1
    image_threads: int = 1


def image_threads(options: WriteOptions, remote: bool, workers: int | None = None) -> int:
    """Threads to fetch and check images with: ``workers`` if given; else one for header checks of local files
    (a little Python per image: threads would only add GIL handoffs), ``default_workers`` otherwise."""
    if workers is not None:
        return workers
    light = options.images.validate == "header" and options.images.format == "keep" and not options.images.size
    return 1 if light and not remote else default_workers(remote)


def parallelism(sizes: Sequence[int], options: WriteOptions, *, images: bool, remote: bool,
                workers: int | None, local_output: bool = True) -> Parallelism:
    """How to write shards of ``sizes`` rows each (``images``: some are image rows; ``remote``: some images are
    remote URLs; ``workers``: the user's image threads, if they chose; ``local_output``: the shards go to a
    local folder).

    Encoding and checking local files is CPU work, much of it Python: from FORK_MIN_ROWS rows on, shards are
    written by forked processes, one per core (Linux: macOS's system libraries are not fork-safe), each
    with its share of the image threads. Where this process would decode images on a thread per core
    anyway, it forks only if no shard is much more than an even share of the rows (a process writes its
    shard on one core: a TRAIN shard of 80% of the rows would take longer than all of them on every core).
    Remote images are mostly waiting: threads of this process fetch them, and a user's ``workers`` keeps to
    threads too. Shards bound for an object store (gs://) are written by this process as well: uploading is
    waiting too, and a forked process must not use the parent's filesystem client (its event loop and
    connections stay behind in the parent)."""
    threads = image_threads(options, remote, workers) if images else 1
    rows, cores = sum(sizes), machine.cores()
    processes = min(len(sizes), cores)
    forked = (sys.platform == "linux" and processes > 1 and not remote and local_output and workers is None
              and rows >= FORK_MIN_ROWS["images" if images else "columns"]
              and (threads == 1 or max(sizes) * processes <= rows * FORK_BALANCE))
    if forked:
        return Parallelism(processes, 1, max(1, threads // processes))
    return Parallelism(1, SHARDS_AT_ONCE if threads > 1 else 1, threads)


def show_progress(progress: bool | None) -> bool:
    """``progress`` if given; by default, a bar in terminals and notebooks but not in logs or pipes."""
    if progress is not None:
        return bool(progress)
    return in_notebook() or sys.stderr.isatty()


# A shard writer: writes one item of a plan with an ImageMapper, calling its on_row() after each row.
ShardWriter = Callable[[T, ImageMapper, Callable[[], None]], ShardResult]


def write_shards(
    shards: Sequence[SpilledShard],
    folder: Folder,
    options: WriteOptions,
    *,
    progress: bool | None = None,
    workers: int | None = None,
    journal: Journal | None = None,
    remote: bool = False,
) -> list[ShardResult]:
    """Write every shard of ``shards`` (``planning.spilled_shards``), each recorded in ``journal`` once in place
    (``remote``: whether some images are remote URLs); one ShardResult each, in plan order."""
    images = bool(shards) and shards[0].template.image_locations is not None
    sizes = [s.spec.rows for s in shards]
    decide = functools.partial(parallelism, options=options, images=images, remote=remote, workers=workers,
                               local_output=folder.is_local)
    # Header checks of local images keep their bytes and are bound by the disk: joining segments copies what
    # the segments saved (benchmarks/CONSTANTS.md). Heavier rows - decoded images, columns encoded in Python -
    # are written in segments when one shard would hold a core's work alone; so are instance masks, drawn and
    # PNG-encoded by the shard's writer whatever the image check (benchmarks/bench_instance_masks.py).
    drawn = bool(shards) and any(of_type(c.type).object_mask for c in shards[0].template.features)
    disk_bound = images and image_threads(options, remote, workers) == 1 and not drawn
    units = None if disk_bound else plan_units(shards, options)
    if units is not None and (concurrency := decide([unit.shard.spec.rows for unit in units])).processes > 1:

        def write_unit(unit: Unit, mapper: ImageMapper, on_row: Callable[[], None]) -> ShardResult:
            if unit.segment is None:
                return write_spilled_shard(unit.shard, folder, options, mapper, on_row)
            target = segment_folder(unit.shard, unit.segment)
            with segment_room(unit.shard):  # a full TMPDIR, not output_dir
                target.makedirs()
                return write_spilled_shard(unit.shard, target, options, mapper, on_row, durable=False)

        return _write_all(units, concurrency, write_unit, sizes, progress, journal,
                          lambda written: joined(units, written, folder))
    concurrency = decide(sizes)
    return _write_all(shards, concurrency, lambda shard, mapper, on_row: write_spilled_shard(
        shard, folder, options, mapper, on_row), sizes, progress, journal)


def _write_all(plan: Sequence[T], concurrency: Parallelism, write: ShardWriter, sizes: Sequence[int],
               progress: bool | None, journal: Journal | None,
               results_of: Callable[[Iterator[ShardResult]], Iterator[ShardResult]] = lambda written: written,
               ) -> list[ShardResult]:
    results = []
    with progress_bar()(total=sum(sizes), unit="row", desc="to_tfr", disable=not show_progress(progress)) as bar:
        if concurrency.processes > 1:
            written = results_of(_in_processes(plan, concurrency, write, bar))
        else:
            written = results_of(_in_threads(plan, concurrency, write, bar))
        with closing(written):  # type: ignore[type-var]
            for result in written:
                results.append(result)
                if journal is not None:
                    journal.record(result)
    return results


def _mapper(pool: ThreadPoolExecutor | None, threads: int) -> ImageMapper:
    return ordered_map(pool, window=max(4 * threads, 32)) if pool is not None else serial_map


def _in_threads(plan: Sequence[T], concurrency: Parallelism, write: ShardWriter,
                bar) -> Generator[ShardResult, None, None]:
    """Shards written by this process: ``concurrency.shards`` at once, their images fetched by one shared pool."""
    pool = ThreadPoolExecutor(concurrency.image_threads, "tfrecorder") if concurrency.image_threads > 1 else None
    try:
        mapper = _mapper(pool, concurrency.image_threads)
        yield from _shards_at_once(plan, concurrency.shards, lambda item, tick: write(item, mapper, tick), bar)
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)


def _shards_at_once(plan: Sequence[T], at_once: int, write: Callable[[T, Callable[[], None]], R],
                    bar) -> Iterator[R]:
    """``write(spec, on_row)`` of each shard of ``plan``, ``at_once`` at a time, the results in plan order.

    When one fails (or the caller stops), the others stop at their next row, leaving nothing in place."""
    if at_once == 1:
        yield from (write(spec, bar.update) for spec in plan)
        return
    stop, lock = threading.Event(), threading.Lock()

    def tick() -> None:
        if stop.is_set():
            raise _Stopped
        with lock:
            bar.update(1)

    with ThreadPoolExecutor(at_once, thread_name_prefix="tfrecorder-shard") as shards:
        try:
            yield from ordered_map(shards, at_once)(lambda spec: write(spec, tick), plan)
        except BaseException:  # the other shards' store requests end now: their threads would hold the exit
            stop_requests()
            raise
        finally:
            stop.set()


def _in_processes(plan: Sequence[T], concurrency: Parallelism, write: ShardWriter,
                  bar) -> Generator[ShardResult, None, None]:
    """Shards written by ``concurrency.processes`` forked processes, the results in plan order.

    fork, not spawn or forkserver: those would run the user's script again in each process (no __main__
    guard in notebooks and scripts), and ``write`` and the table reach the writers without being pickled.
    Each writer counts its rows in shared memory (the bar shows them). When a shard fails, the shards after
    it stop at their next row and those before it finish, as when they are written one after another;
    when this process is interrupted, all stop (writers ignore Ctrl-C and leave the stopping to it). So
    nothing goes into place after the run failed."""
    context = multiprocessing.get_context("fork")
    rows = context.RawArray("q", len(plan))
    owners = context.RawArray("q", len(plan))  # the pid of the writer of each shard
    stop = context.RawValue("q", len(plan))  # shards from this one on stop at their next row
    pool = ProcessPoolExecutor(concurrency.processes, context, _start_writer,
                               (plan, write, concurrency, rows, owners, stop, os.getpid()))
    try:
        with warnings.catch_warnings(), _signals_held():
            # Python 3.12+ warns of fork() beside other threads (TensorFlow's, tqdm's): the writers use none of
            # the locks those threads hold.
            warnings.filterwarnings("ignore", "This process .* is multi-threaded", DeprecationWarning)
            futures = [pool.submit(_write_forked, i) for i in range(len(plan))]  # the first one forks
        shown = 0
        for index, future in enumerate(futures):
            while not future.done():  # woken by each shard that ends, to stop the shards after a failed one
                ahead = futures[index:index + 2 * concurrency.processes]  # the writers take shards in plan order
                wait([f for f in ahead if not f.done()], PROGRESS_SECONDS, FIRST_COMPLETED)
                shown = _show(bar, rows, shown)
                failed = (i for i, f in enumerate(ahead, index) if f.done() and f.exception() is not None)
                stop.value = min(stop.value, next(failed, len(plan) - 1) + 1)
            try:
                result = future.result()  # raises the shard's error
            except BrokenProcessPool as e:
                raise _writer_died(plan, pool, owners, futures, index) from e
            yield result
        _show(bar, rows, shown)  # rows of shards that ended after the last look
    except (KeyboardInterrupt, GeneratorExit):  # Ctrl-C, SIGTERM, or the caller stopped: a writer may be waiting
        # on a read, and a shard it has not finished is not in place
        for process in (getattr(pool, "_processes", None) or {}).values():
            process.terminate()
        raise
    finally:
        stop.value = 0
        pool.shutdown(wait=True, cancel_futures=True)


_REAP_SECONDS = 5  # how long to wait for each writer's end when one died: the executor is ending the others


def _writer_died(plan: Sequence[Any], pool: ProcessPoolExecutor, owners: Any, futures: Sequence[Any],
                 kept: int) -> TFRecorderError:
    """The error for a forked writer that died (most often by the out-of-memory killer's SIGKILL): which shard's
    writer, by which signal, and how to go on. The executor then ends the other writers with SIGTERM, so the
    writer that died is the one that ended another way. ``kept``: the shards recorded before it (plan order)."""
    processes = dict(getattr(pool, "_processes", None) or {})  # the executor's writers by pid: no public view
    for process in processes.values():  # the future fails as soon as a writer's pipe closes, which can be before
        process.join(_REAP_SECONDS)      # the writer is reaped: its exit status is known only once it is
    ended = {pid: p.exitcode for pid, p in processes.items() if p.exitcode is not None}
    pid, code = next(((pid, c) for pid, c in ended.items() if c != -signal.SIGTERM), next(iter(ended.items()),
                                                                                         (None, None)))
    unfinished = [i for i, f in enumerate(futures) if not (f.done() and f.exception() is None)]
    shard = next((i for i in unfinished if owners[i] == pid), unfinished[0] if unfinished else 0)
    name = getattr(plan[shard], "spec", plan[shard]).filename
    if code is not None and code < 0:
        cause = (f"was killed by {signal.Signals(-code).name}, most often by the kernel's out-of-memory killer: "
                 f"write with less memory at once (num_workers=1 writes the shards in this process, one at a "
                 f"time; a larger num_shards makes each smaller)")
    else:
        cause = f"ended unexpectedly (exit status {code})"
    return TFRecorderError(f"the process writing {name} {cause}. Run the same conversion again: it keeps the "
                           f"{kept} shards already written")


def _show(bar, rows, shown: int) -> int:
    done = sum(rows)
    if done > shown:
        bar.update(done - shown)
    return done


_forked: dict[str, Any] = {}  # in a forked writer: what _in_processes handed it
_HELD_SIGNALS = {signal.SIGINT, signal.SIGTERM}


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """Hold SIGINT and SIGTERM in this thread while it forks the writers: a writer starts with them held, so
    neither reaches the handlers it inherits (the command's, which raise) before ``_start_writer`` sets its
    own and lets them through. The parent's own signals wait the few milliseconds of the forks."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _start_writer(plan, write, concurrency: Parallelism, rows, owners, stop, parent: int) -> None:
    """Set up a forked writer: it dies with its parent, leaves Ctrl-C to it, and has its share of the memory
    budget for decoded pixels and its own image threads."""
    try:  # an orphan would go on writing into an output folder that a re-run may already be writing again
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (AttributeError, OSError):  # a libc without prctl: writers are forked on Linux only
        logger.debug("could not tie a shard writer's life to its parent's")
    if os.getppid() != parent:  # the parent ended before prctl
        os._exit(1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the command's handler: the parent stops the writers
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _HELD_SIGNALS)  # held since the fork (_signals_held)
    DECODE_MEMORY.limit = max(1, DECODE_MEMORY.limit // concurrency.processes)  # this writer's copy of the budget
    pool = ThreadPoolExecutor(concurrency.image_threads, "tfrecorder") if concurrency.image_threads > 1 else None
    _forked.update(plan=plan, write=write, rows=rows, owners=owners, stop=stop,
                   mapper=_mapper(pool, concurrency.image_threads))


def _write_forked(index: int) -> ShardResult:
    """In a forked writer: write shard ``index`` of the plan."""
    rows, stop = _forked["rows"], _forked["stop"]
    _forked["owners"][index] = os.getpid()

    def tick() -> None:
        if index >= stop.value:
            raise _Stopped
        rows[index] += 1

    return _forked["write"](_forked["plan"][index], _forked["mapper"], tick)
