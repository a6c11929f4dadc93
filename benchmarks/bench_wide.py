"""Wide tables: read_tfr of 200 rows x 2,500 to 10,000 float columns (one-hot features, embeddings spread over
columns) vs a per-record ``tf.train.Example`` loop into a DataFrame, in the same process."""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd

from benchmarks.common import interleaved_best, print_table, work_dir


def example_loop(files: list[str]) -> pd.DataFrame:
    """What users write: each record parsed into a tf.train.Example, its features read into a dict per row."""
    import tensorflow as tf

    rows = []
    for record in tf.data.TFRecordDataset(files).as_numpy_iterator():
        example = tf.train.Example.FromString(record)
        row = {}
        for name, feature in example.features.feature.items():
            kind = feature.WhichOneof("kind")
            values = getattr(feature, kind).value
            row[name] = values[0] if len(values) == 1 else list(values)
        rows.append(row)
    return pd.DataFrame(rows)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=200)
    parser.add_argument("--columns", type=int, nargs="+", default=[2_500, 5_000, 10_000])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    import tfrecorder

    work = work_dir("bench-wide-")
    table = []
    for columns in args.columns:
        rng = np.random.default_rng(0)
        df = pd.DataFrame(rng.random((args.rows, columns)).astype(np.float32),
                          columns=[f"feature_{i:05d}" for i in range(columns)])
        df.insert(0, "split", "TRAIN")
        out = str(work / f"c{columns}")
        result = tfrecorder.convert(df, out, progress=False)
        files = list(result.splits["TRAIN"].shards)
        best = interleaved_best({"ours": lambda out=out: tfrecorder.read_tfr(out),
                                 "loop": lambda files=files: example_loop(files)}, runs=args.runs)
        table.append((f"read_tfr, {args.rows} rows x {columns:,} columns", f"{best['ours']:.2f} s",
                      f"tf.train.Example loop: {best['loop']:.2f} s", f"{best['loop'] / best['ours']:.2f}x faster"))
    print_table("Wide tables (fastest of interleaved runs)", table)


if __name__ == "__main__":
    main()
