"""Tensor columns against the loop the tf.data guide teaches for them: a table of ``(128, 64)`` float32 arrays
(a spectrogram, an embedding matrix a row).

- Writing: ``convert`` with its defaults against ``tf.io.serialize_tensor`` per row, a ``tf.train.Example`` of
  it, one ``TFRecordWriter`` (the guide's "simplest way to handle non-scalar features"); and the bytes written
  against the arrays' own bytes.
- Reading: ``load_dataset(batch_size=64)`` against the pipeline users write for those records:
  ``TFRecordDataset`` -> ``parse_single_example`` -> ``tf.io.parse_tensor`` -> ``ensure_shape`` -> ``batch``,
  ``num_parallel_calls=AUTOTUNE``.

``python -m benchmarks.bench_tensors`` (``--rows 20000`` for the issue's 655 MB; the default 5,000 rows is 164 MB,
what this 2-core machine's disk writes in a few seconds).
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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5_000)
    parser.add_argument("--runs", type=int, default=3)
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


if __name__ == "__main__":
    main()
