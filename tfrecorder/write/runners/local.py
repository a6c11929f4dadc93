"""Local writer: carries out ShardSpecs in-process, images fetched and checked by a thread pool."""

from __future__ import annotations

import os
import sys
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from tfrecorder._notebook import in_notebook
from tfrecorder.dataset.fetch import is_remote
from tfrecorder.dataset.storage import Folder
from tfrecorder.write.journal import Journal
from tfrecorder.write.options import WriteOptions
from tfrecorder.write.plan import ShardSpec
from tfrecorder.write.shard import ShardResult, serial_map, write_shard
from tfrecorder.write.table import Table

T = TypeVar("T")
R = TypeVar("R")


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
    remote = any(is_remote(u) for u in locations)
    if workers is None:
        # Header checks of local files are a little Python per image: threads would only add GIL handoffs.
        light = options.images.validate == "header" and options.images.format == "keep" and not options.images.size
        workers = 1 if (light and not remote) or not locations else default_workers(remote)
    total = sum(len(s.rows) for s in plan)
    with ThreadPoolExecutor(max(1, workers), thread_name_prefix="tfrecorder") as pool, tqdm(
        total=total, unit="row", desc="to_tfr", disable=not show_progress(progress)
    ) as bar:
        mapper = ordered_map(pool, window=max(4 * workers, 32)) if workers > 1 else serial_map
        tick = lambda: bar.update(1)
        results = []
        for spec in plan:
            results.append(write_shard(spec, table.take(spec.rows), folder, options, mapper, tick))
            if journal is not None:
                journal.record(results[-1])
        return results
