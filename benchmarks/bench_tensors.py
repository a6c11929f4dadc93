"""Tensor columns against the loop the tf.data guide teaches for them: a table of ``(128, 64)`` float32 arrays
(a spectrogram, an embedding matrix a row).

- Writing: ``convert`` with its defaults against ``tf.io.serialize_tensor`` per row, a ``tf.train.Example`` of
  it, one ``TFRecordWriter`` (the guide's "simplest way to handle non-scalar features"); and the bytes written
  against the arrays' own bytes.
- Reading: ``load_dataset(batch_size=64)`` against the pipeline users write for those records:
  ``TFRecordDataset`` -> ``parse_single_example`` -> ``tf.io.parse_tensor`` -> ``ensure_shape`` -> ``batch``,
  ``num_parallel_calls=AUTOTUNE``.

- Token ids: a column of 128-token ``input_ids`` lists against the same ids as 128 int columns, converted, and
  read padded (``pad=``) against the columns stacked.

``python -m benchmarks.bench_tensors`` (``--rows 20000`` for the issue's 655 MB; the default 5,000 rows is 164 MB,
what this 2-core machine's disk writes in a few seconds; ``--token-rows 1000000`` for the issue's million).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

import tfrecorder
from benchmarks.common import fresh, interleaved_medians, print_table, work_dir

SHAPE = (128, 64)


def table(rows: int) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame({"split": "TRAIN", "label": rng.integers(0, 10, rows),
                         "x": list(rng.standard_normal((rows, *SHAPE), dtype=np.float32))})


def guide_write(df: pd.DataFrame, out: Path) -> None:
    """The tf.data guide's way: serialize_tensor per row into a bytes feature, one TFRecordWriter."""
    import tensorflow as tf

    fresh(out)
    with tf.io.TFRecordWriter(str(out / "train.tfrecord")) as writer:
        for x, label in zip(df["x"], df["label"]):
            example = tf.train.Example(features=tf.train.Features(feature={
                "x": tf.train.Feature(bytes_list=tf.train.BytesList(value=[tf.io.serialize_tensor(x).numpy()])),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(label)])),
            }))
            writer.write(example.SerializeToString())


def ours_write(df: pd.DataFrame, out: Path) -> None:
    tfrecorder.convert(df, str(out), overwrite=True, progress=False)


def guide_read(out: Path) -> int:
    import tensorflow as tf

    spec = {"x": tf.io.FixedLenFeature([], tf.string), "label": tf.io.FixedLenFeature([], tf.int64)}

    def parse(record):
        example = tf.io.parse_single_example(record, spec)
        x = tf.ensure_shape(tf.io.parse_tensor(example["x"], tf.float32), SHAPE)
        return x, example["label"]

    ds = tf.data.TFRecordDataset(str(out / "train.tfrecord")).map(parse, num_parallel_calls=tf.data.AUTOTUNE)
    return sum(1 for _ in ds.batch(64).prefetch(tf.data.AUTOTUNE))


def ours_read(out: Path) -> int:
    return sum(1 for _ in tfrecorder.load_dataset(str(out), "TRAIN", batch_size=64, as_supervised=True,
                                                  features=["x", "label"]))


def token_tables(rows: int, length: int = 128) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A table of ``length``-token ``input_ids`` lists a row, and the same ids as ``length`` int columns."""
    rng = np.random.default_rng(1)
    ids = rng.integers(1, 30_000, (rows, length))
    labels = rng.integers(0, 2, rows)
    lists = pd.DataFrame({"split": "TRAIN", "label": labels, "input_ids": list(ids)})
    lists["input_ids"] = [row.tolist() for row in ids]  # Python lists, as a tokenizer gives them: ragged
    columns = pd.DataFrame({"split": "TRAIN", "label": labels, **{f"t{i}": ids[:, i] for i in range(length)}})
    return lists, columns


def tokens(rows: int, runs: int) -> list[tuple[str, str, str, str]]:
    """Token-id lists against the same ids as int columns: converting, and reading padded (``pad=``) against
    reading the columns (stacked into one tensor, as a model would take them)."""
    import tensorflow as tf

    lists, columns = token_tables(rows)
    folder = work_dir("tokens")
    names = [f"t{i}" for i in range(128)]

    def read_lists() -> int:
        ds = tfrecorder.load_dataset(str(folder / "lists"), "TRAIN", batch_size=256, pad={"input_ids": 128})
        return sum(1 for _ in ds)

    def read_columns() -> int:
        ds = tfrecorder.load_dataset(str(folder / "columns"), "TRAIN", batch_size=256)
        ds = ds.map(lambda b: tf.stack([b[n] for n in names], axis=1))
        return sum(1 for _ in ds)

    write = interleaved_medians({
        "lists": lambda: tfrecorder.convert(lists, str(folder / "lists"), overwrite=True, progress=False),
        "columns": lambda: tfrecorder.convert(columns, str(folder / "columns"), overwrite=True, progress=False)},
        runs)
    read = interleaved_medians({"lists": read_lists, "columns": read_columns}, runs)
    return [(f"convert {rows:,} rows of 128 token ids", f"{write['lists']:.2f} s (a list column)",
             f"{write['columns']:.2f} s (128 int columns)", f"{write['lists'] / write['columns']:.2f}x"),
            ("load_dataset, padded to 128, batch 256", f"{read['lists']:.2f} s (pad=)",
             f"{read['columns']:.2f} s (columns stacked)", f"{read['lists'] / read['columns']:.2f}x")]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--token-rows", type=int, default=100_000)
    args = parser.parse_args(argv)
    df = table(args.rows)
    folder = work_dir("tensors")
    ours, theirs = folder / "ours", folder / "guide"
    write = interleaved_medians({"ours": lambda: ours_write(df, ours), "guide": lambda: guide_write(df, theirs)},
                                args.runs)
    read = interleaved_medians({"ours": lambda: ours_read(ours), "guide": lambda: guide_read(theirs)}, args.runs)
    arrays = args.rows * int(np.prod(SHAPE)) * 4
    stored = sum(p.stat().st_size for p in ours.glob("train-*.tfrecord"))
    guide = (theirs / "train.tfrecord").stat().st_size
    mb = arrays / 1e6
    print_table(f"{args.rows:,} rows of {SHAPE} float32 ({mb:.0f} MB of arrays)", [
        ("write (convert, defaults)", f"{write['ours']:.2f} s", f"{write['guide']:.2f} s (serialize_tensor loop)",
         f"{write['guide'] / write['ours']:.2f}x"),
        ("read (load_dataset, batch 64)", f"{read['ours']:.2f} s", f"{read['guide']:.2f} s (parse_tensor pipeline)",
         f"{read['guide'] / read['ours']:.2f}x"),
        ("bytes written / arrays' bytes", f"{stored / arrays:.4f}", f"{guide / arrays:.4f}", ""),
    ])
    print_table("Token ids: a list column against int columns (time ratio: lower is better)",
                tokens(args.token_rows, args.runs))


if __name__ == "__main__":
    main()
