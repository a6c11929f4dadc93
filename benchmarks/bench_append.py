"""Appending: ``convert(..., mode="append")`` of 1,000 JPEGs to a dataset of 10,000, against converting the same
1,000 into a folder of their own (what an append adds: reading dataset.json and the 10,000 content keys, checking
each new image against them, the leakage report over both versions, dataset.json merged)."""

from __future__ import annotations

import argparse
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.common import fresh, jpeg_table, print_table, work_dir


def linked_copy(source: Path, target: Path) -> None:
    """``target`` a copy of dataset folder ``source`` made of hard links: an append never rewrites a file it finds
    (dataset.json is replaced by a rename), so the starting dataset stays as it was for the next run."""
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(source, target, copy_function=os.link)


def seconds(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--images", type=int, default=10000, help="500x375 JPEGs in the dataset appended to")
    parser.add_argument("--added", type=int, default=1000, help="500x375 JPEGs appended")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    import tfrecorder

    table = jpeg_table(args.images + args.added)  # no two files alike: none of the added is a duplicate
    base, added = table[: args.images], table[args.images:]
    work = work_dir("bench_append_")
    tfrecorder.convert(base, str(work / "start"), progress=False)

    def append() -> None:
        result = tfrecorder.convert(added, str(work / "appended"), mode="append", progress=False)
        assert result.rows.written == args.added and not result.errors

    def alone() -> None:
        tfrecorder.convert(added, str(work / "alone"), progress=False)

    appending, converting = float("inf"), float("inf")
    for _ in range(args.runs):  # interleaved, the best of each (README: the second core comes and goes)
        linked_copy(work / "start", work / "appended")
        appending = min(appending, seconds(append))
        fresh(work / "alone")
        converting = min(converting, seconds(alone))
    print_table(f"Appending {args.added:,} images to a dataset of {args.images:,} (best of {args.runs})", [
        (f"convert(mode='append') of {args.added:,} to {args.images:,}", f"{appending:.2f} s",
         f"the {args.added:,} converted alone: {converting:.2f} s", f"{appending / converting:.2f}x")])


if __name__ == "__main__":
    main()
