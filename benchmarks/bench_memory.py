"""Memory: peak RSS of to_tfr for 10k vs 100k small-image rows, and of iterating load_dataset."""

from __future__ import annotations

import argparse
import resource

import numpy as np
import pandas as pd
from PIL import Image

from benchmarks.common import DATA, peak_rss_mib, print_table, run_child, work_dir


def small_pngs(n: int) -> pd.DataFrame:
    """``n`` 32x32 PNGs (made once under benchmarks/data) and their table."""
    folder = DATA / "png-32"
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    base = rng.integers(0, 256, (64, 32, 32, 3), dtype=np.uint8)
    paths = []
    for i in range(n):
        path = folder / f"{i:06d}.png"
        if not path.exists():
            Image.fromarray(np.roll(base[i % 64], i % 32, axis=0)).save(path)
        paths.append(str(path))
    return pd.DataFrame({"split": "TRAIN", "image_uri": paths, "label": [f"c{i % 10}" for i in range(n)]})


def _child(case: str, n: int, out: str) -> None:
    df = small_pngs(n)
    before = peak_rss_mib()
    frame = df.memory_usage(deep=True).sum() / 2**20
    import tfrecorder

    if case == "write":
        tfrecorder.convert(df, out, progress=False, validate_images="full")
    else:
        for _ in tfrecorder.load_dataset(out, split="TRAIN", batch_size=256):
            pass
    peak = peak_rss_mib()
    writers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # the largest forked shard writer
    print(f"{peak} {before} {frame} {writers}")


def measure(case: str, n: int, out: str) -> tuple[float, float, float, float]:
    line = run_child("benchmarks.bench_memory", case, "--images", str(n), "--out", out)
    return tuple(map(float, line.split()))  # type: ignore[return-value]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--images", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--out", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--sizes", default="10000,100000")
    args = parser.parse_args(argv)
    if args.child:
        return _child(args.child, args.images, args.out)
    rows = []
    work = work_dir("bench-memory-")
    for n in (int(v) for v in args.sizes.split(",")):
        small_pngs(n)  # make files outside the measured process
        out = str(work / f"out-{n}")
        peak, start, frame, writers = measure("write", n, out)
        forked = f"; each shard writer {writers:,.0f} MiB, pages shared with it counted in both" if writers else ""
        rows.append((f"to_tfr, {n:,} PNG rows", f"peak RSS {peak:,.0f} MiB{forked}",
                     f"before converting {start:,.0f} MiB (DataFrame {frame:,.1f} MiB)", f"+{peak - start:,.0f} MiB"))
        peak, start, _, _ = measure("read", n, out)
        rows.append((f"load_dataset iteration, {n:,} rows, batch 256", f"peak RSS {peak:,.0f} MiB",
                     f"before reading {start:,.0f} MiB", f"+{peak - start:,.0f} MiB"))
    print_table("Memory (each case in its own process)", rows)


if __name__ == "__main__":
    main()
