"""Local writer: carries out ShardSpecs in-process, images fetched and checked by a thread pool."""

from __future__ import annotations

import multiprocessing
import os
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from contextlib import closing
from itertools import repeat
from typing import TypeVar

from tfrecorder._notebook import in_notebook
from tfrecorder.dataset.fetch import is_remote
from tfrecorder.dataset.storage import Folder
from tfrecorder.write.journal import Journal
from tfrecorder.write.options import WriteOptions
from tfrecorder.write.plan import ShardSpec
from tfrecorder.write.shard import ShardResult, serial_map, write_shard
from tfrecorder.write.stream import StreamedShard, write_streamed_shard
from tfrecorder.write.table import Table

T = TypeVar("T")
R = TypeVar("R")

# Shards of an image table written at once when its images are decoded by threads: while one is flushed to the
# disk (its fsync waits on the disk, not the CPU), the next is being encoded and written (2,000 JPEGs,
# validate_images="full": 0.82 s instead of 0.94). Header checks stay one shard at a time: that writer is all
# Python, and a second thread only adds GIL handoffs (0.35 s of CPU became 0.47, the time no better).
SHARDS_AT_ONCE = 2


class _Stopped(Exception):
    """A shard writer stops at its next row: another shard failed or the run was interrupted."""


def default_workers(remote: bool = True) -> int:
    """Threads for images: one per core for local files (decoding is the work; more threads only
    fight over the GIL), many more for remote URLs (most of each fetch is waiting on the network)."""
    cores = os.cpu_count() or 1
    return min(32, 8 * cores) if remote else cores


def ordered_map(pool: ThreadPoolExecutor, window: int) -> Callable[[Callable[[T], R], Iterable[T]], Iterator[R]]:
    """An ImageMapper running ``fn`` on the pool with at most ``window`` items in flight, results in order.

    The window bounds memory: image bytes are held only for rows between being fetched and written.
    """

    def mapper(fn: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
        pending: deque = deque()
        for item in items:
            pending.append(pool.submit(fn, item))
            if len(pending) >= window:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()

    return mapper


def image_threads(options: WriteOptions, remote: bool, workers: int | None = None) -> int:
    """Threads to fetch and check images with: ``workers`` if given; else one for header checks of local files
    (a little Python per image: threads would only add GIL handoffs), ``default_workers`` otherwise."""
    if workers is not None:
        return workers
    light = options.images.validate == "header" and options.images.format == "keep" and not options.images.size
    return 1 if light and not remote else default_workers(remote)


def show_progress(progress: bool | None) -> bool:
    """``progress`` if given; by default, a bar in terminals and notebooks but not in logs or pipes."""
    if progress is not None:
        return bool(progress)
    return in_notebook() or sys.stderr.isatty()


def write_local(
    plan: Sequence[ShardSpec],
    table: Table,
    folder: Folder,
    options: WriteOptions,
    *,
    progress: bool | None = None,
    workers: int | None = None,
    journal: Journal | None = None,
) -> list[ShardResult]:
    """Write every shard of ``plan`` in order, each recorded in ``journal`` once in place; one ShardResult each."""
    from tqdm.auto import tqdm

    locations = table.image_locations or []
    workers = image_threads(options, any(is_remote(u) for u in locations), workers) if locations else 1
    total = sum(len(s.rows) for s in plan)
    with ThreadPoolExecutor(max(1, workers), thread_name_prefix="tfrecorder") as pool, tqdm(
        total=total, unit="row", desc="to_tfr", disable=not show_progress(progress)
    ) as bar:
        mapper = ordered_map(pool, window=max(4 * workers, 32)) if workers > 1 else serial_map
        results = []
        with closing(_shards_at_once(plan, workers, lambda spec, tick: write_shard(
                spec, table.take(spec.rows), folder, options, mapper, tick), bar)) as written:
            for result in written:
                results.append(result)
                if journal is not None:
                    journal.record(result)
        return results


def _shards_at_once(plan: Sequence[T], image_threads: int, write: Callable[[T, Callable[[], None]], R],
                    bar) -> Iterator[R]:
    """``write(spec, on_row)`` of each shard of ``plan``, the results in plan order: SHARDS_AT_ONCE at a time
    when ``image_threads`` decode the images, else one after another.

    When one fails (or the caller stops), the others stop at their next row, leaving nothing in place."""
    at_once = SHARDS_AT_ONCE if image_threads > 1 else 1
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
        finally:
            stop.set()


def write_streamed(
    shards: Sequence[StreamedShard],
    folder: Folder,
    options: WriteOptions,
    *,
    progress: bool | None = None,
    workers: int | None = None,
    journal: Journal | None = None,
    remote: bool = False,
) -> list[ShardResult]:
    """Write the shards of a streamed table (``stream.plan``), each recorded in ``journal`` once in place.

    A table of columns only is encoding, all CPU: its shards are written in processes, one per core. Image
    tables are written a shard at a time, their images fetched and checked by threads (``write_local``;
    ``remote``: whether some images are remote URLs)."""
    from tqdm.auto import tqdm

    images = bool(shards) and shards[0].template.image_locations is not None
    processes = min(len(shards), os.cpu_count() or 1) if not images and sys.platform == "linux" else 1
    results: list[ShardResult] = []
    with tqdm(total=sum(s.stop - s.start for s in shards), unit="row", desc="to_tfr",
              disable=not show_progress(progress)) as bar:

        def done(shard: StreamedShard, result: ShardResult, counted: bool) -> None:
            results.append(result)
            if journal is not None:
                journal.record(result)
            if not counted:
                bar.update(shard.stop - shard.start)

        if processes > 1:
            # fork: spawn and forkserver would run the user's script again in each process (no __main__ guard
            # in notebooks and scripts); Arrow re-creates its thread pools after a fork. Linux only (macOS's
            # system libraries are not fork-safe).
            context = multiprocessing.get_context("fork")
            with ProcessPoolExecutor(processes, mp_context=context) as pool:
                written = pool.map(write_streamed_shard, shards, repeat(folder), repeat(options))
                for shard, result in zip(shards, written):
                    done(shard, result, False)
            return results
        threads = image_threads(options, remote, workers) if images else 1
        with ThreadPoolExecutor(max(1, threads), thread_name_prefix="tfrecorder") as pool:
            mapper = ordered_map(pool, window=max(4 * threads, 32)) if threads > 1 else serial_map
            with closing(_shards_at_once(shards, threads, lambda shard, tick: (
                    write_streamed_shard(shard, folder, options, mapper, tick)), bar)) as written:
                for shard, result in zip(shards, written):
                    done(shard, result, True)
    return results
