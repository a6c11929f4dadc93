"""Tabular: a table with no images (20 columns) converted by to_tfr vs a row-by-row tf.train.Example loop."""

from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks.common import fresh, peak_rss_mib, print_table, run_child, work_dir


def table(rows: int, seed: int = 0) -> pd.DataFrame:
    """``rows`` x 20 columns: split, int label, 6 ints, 6 floats, 6 short strings."""
    rng = np.random.default_rng(seed)
    data = {"split": rng.choice(["TRAIN", "VALIDATION", "TEST"], rows, p=[0.8, 0.1, 0.1]),
            "label": rng.integers(0, 10, rows)}
    for i in range(6):
        data[f"i{i}"] = rng.integers(-1000, 1000, rows)
        data[f"f{i}"] = rng.normal(size=rows)
        data[f"s{i}"] = rng.choice(["alpha", "beta", "gamma", "delta"], rows)
    return pd.DataFrame(data)


def row_loop(df: pd.DataFrame, out: Path) -> None:
    """The usual hand-written converter: one tf.train.Example built from a dict per row."""
    import tensorflow as tf

    def feature(value):
        if isinstance(value, str):
            return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value.encode()]))
        if isinstance(value, float):
            return tf.train.Feature(float_list=tf.train.FloatList(value=[value]))
        return tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))

    columns = list(df.columns)
    with tf.io.TFRecordWriter(str(out)) as writer:
        for row in df.itertuples(index=False, name=None):
            example = tf.train.Example(features=tf.train.Features(
                feature={c: feature(v) for c, v in zip(columns, row)}))
            writer.write(example.SerializeToString())


def _reader_child(case: str, out: str) -> None:
    """Read the dataset at ``out`` back: read_tfr (all columns, or 3) or iterating load_dataset (batch 256)."""
    import tfrecorder

    if case == "load_dataset":  # each reader's modules imported before the clock and the memory count start
        import tensorflow as tf

        tf.constant(0)
    else:
        import tfrecorder.read.pandas  # noqa: F401 - pandas, numpy and pyarrow
    before = peak_rss_mib()
    start = time.perf_counter()
    if case == "load_dataset":
        for ds in tfrecorder.load_dataset(out, batch_size=256).values():
            for _ in ds:
                pass
        frame = 0.0
    else:
        df = tfrecorder.read_tfr(out, columns=["label", "i0", "s0"] if case == "read_tfr_columns" else None)
        frame = df.memory_usage(deep=True).sum() / 2**20
    seconds = time.perf_counter() - start
    print(f"{seconds} {peak_rss_mib() - before} {frame}")


def _child(case: str, rows: int, out: str) -> None:
    if case in ("read_tfr", "read_tfr_columns", "load_dataset"):
        return _reader_child(case, out)
    df = table(rows)
    start = time.perf_counter()
    if case == "ours":
        import tfrecorder

        tfrecorder.convert(df, out, progress=False)
    else:
        row_loop(df, Path(out) / "all.tfrecord")
    seconds = time.perf_counter() - start
    peak = peak_rss_mib()
    writers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # the largest forked shard writer
    print(f"{seconds} {peak} {df.memory_usage(deep=True).sum() / 2**20} {writers}")


def run(case: str, rows: int, out: str) -> tuple[float, ...]:
    return tuple(map(float, run_child("benchmarks.bench_tabular", case, "--rows", str(rows), "--out", out).split()))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--out", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return _child(args.child, args.rows, args.out)
    work = work_dir("bench-tab-")
    out = str(work / "ours")
    ours, ours_peak, frame, writers = run("ours", args.rows, out)
    loop, loop_peak, _, _ = run("loop", args.rows, str(fresh(work / "loop")))
    read, read_growth, read_frame = run("read_tfr", args.rows, out)
    some, some_growth, some_frame = run("read_tfr_columns", args.rows, out)
    iterate, iterate_growth, _ = run("load_dataset", args.rows, out)
    print_table(f"Tabular, {args.rows:,} rows x 20 columns (each case in its own process)", [
        ("to_tfr local", f"{args.rows / ours:,.0f} rows/s ({ours:.1f} s)",
         f"row-by-row Example loop: {args.rows / loop:,.0f} rows/s ({loop:.1f} s)", f"{loop / ours:.2f}x faster"),
        ("peak RSS", f"{ours_peak:,.0f} MiB; each shard writer: {writers:,.0f} MiB (pages shared with the first "
         "counted in both)", f"loop: {loop_peak:,.0f} MiB (DataFrame: {frame:,.0f} MiB)", "report"),
        ("read_tfr, every column", f"{read:.1f} s", f"iterating load_dataset, batch 256: {iterate:.1f} s",
         f"{read / iterate:.2f}x its time"),
        ("read_tfr, every column: memory", f"+{read_growth:,.0f} MiB at the peak",
         f"the DataFrame it returns: {read_frame:,.0f} MiB", f"{read_growth / read_frame:.2f}x"),
        ("read_tfr, columns=[label, i0, s0]", f"{some:.1f} s, +{some_growth:,.0f} MiB",
         f"the DataFrame it returns: {some_frame:,.0f} MiB", f"{some_growth / some_frame:.2f}x"),
    ])


if __name__ == "__main__":
    main()
