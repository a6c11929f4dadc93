"""statistics.pb and report.html: what statistics add to a conversion of 2,000 JPEGs (defaults against
statistics=False, interleaved), and report's time and size over a dataset of N small images.

    python -m benchmarks.bench_report [--images 2000] [--report-images 20000]
"""

from __future__ import annotations

import argparse
import os
import time

import tfrecorder
from benchmarks.common import fresh, interleaved_best, jpeg_table, work_dir
from tfrecorder.sample_data import make_sample_images


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--images", type=int, default=2000)
    parser.add_argument("--report-images", type=int, default=20000)
    args = parser.parse_args()
    root = work_dir("report")
    table = jpeg_table(args.images)
    cases = {name: (lambda on=on, name=name: tfrecorder.convert(table, str(fresh(root / name)), statistics=on,
                                                                progress=False))
             for name, on in (("statistics", True), ("no-statistics", False))}
    best = interleaved_best(cases, runs=3)
    print(f"convert {args.images} JPEGs: {best['statistics']:.2f} s with statistics, "
          f"{best['no-statistics']:.2f} s without ({best['statistics'] / best['no-statistics'] - 1:+.1%})")
    small = make_sample_images(str(root / "small"), n=args.report_images)
    out = fresh(root / "small-out")
    tfrecorder.convert(small, str(out), progress=False)
    os.remove(out / "statistics.pb")  # the report's worst case: statistics computed from the shards
    for label in ("computing statistics.pb", "reading statistics.pb"):
        start = time.perf_counter()
        page = tfrecorder.report(str(out))
        print(f"report of {args.report_images:,} images ({label}): {time.perf_counter() - start:.2f} s, "
              f"{os.path.getsize(page) / 2**20:.2f} MiB")
        if label.startswith("computing"):
            from tfrecorder.read.open import open_dataset
            from tfrecorder.summary.statistics import write_statistics

            write_statistics(*open_dataset(str(out))[:2])


if __name__ == "__main__":
    main()
