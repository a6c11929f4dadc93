"""Reading: load_dataset against hand-tuned tf.data pipelines over the same data, in the same process."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks.common import interleaved_medians, jpeg_table, print_table

AUTOTUNE = None  # set once TensorFlow is imported


def consume(ds) -> int:
    count = 0
    for _ in ds:
        count += 1
    return count


def files_pipeline(tf, paths, size, batch):
    """The tf.data guide's pipeline over JPEG files: list_files -> read_file -> decode -> resize -> batch."""
    def load(path):
        image = tf.io.decode_jpeg(tf.io.read_file(path), channels=3)
        return tf.cast(tf.clip_by_value(tf.round(tf.image.resize(image, size, antialias=True)), 0, 255), tf.uint8)

    ds = tf.data.Dataset.from_tensor_slices(paths)
    return ds.map(load, num_parallel_calls=AUTOTUNE).batch(batch).prefetch(AUTOTUNE)


def memory_pipeline(tf, blobs, size, batch):
    """The decode limit: JPEG bytes already in memory -> decode -> resize -> batch."""
    def load(data):
        image = tf.io.decode_jpeg(data, channels=3)
        return tf.cast(tf.clip_by_value(tf.round(tf.image.resize(image, size, antialias=True)), 0, 255), tf.uint8)

    ds = tf.data.Dataset.from_tensor_slices(blobs).cache()
    consume(ds)  # fill the cache before timing
    return ds.map(load, num_parallel_calls=AUTOTUNE).batch(batch).prefetch(AUTOTUNE)


def tabular_table(rows: int, columns: int = 20) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    data = {"split": "TRAIN", "label": rng.integers(0, 10, rows)}
    for i in range(columns - 1):
        data[f"f{i}"] = rng.normal(size=rows) if i % 3 else rng.integers(0, 1000, rows)
    return pd.DataFrame(data)


def main(argv=None) -> None:
    global AUTOTUNE
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--images", type=int, default=2000)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    import tensorflow as tf

    import tfrecorder


    AUTOTUNE = tf.data.AUTOTUNE
    work = Path(tempfile.mkdtemp(prefix="bench-read-"))
    table = jpeg_table(args.images).assign(split="TRAIN")
    paths = table["image_uri"].tolist()
    tfrecorder.convert(table, str(work / "images"), progress=False, num_shards=8)
    size, batch = (224, 224), 64

    ours = lambda: consume(tfrecorder.load_dataset(  # noqa: E731
        str(work / "images"), split="TRAIN", batch_size=batch, image_size=size, shuffle=True, seed=0))
    files = lambda: consume(files_pipeline(tf, paths, size, batch))  # noqa: E731
    in_memory = memory_pipeline(tf, [Path(p).read_bytes() for p in paths], size, batch)
    shards = sorted(str(p) for p in (work / "images").glob("*.tfrecord"))
    raw = lambda: consume(tf.data.TFRecordDataset(shards, num_parallel_reads=AUTOTUNE))  # noqa: E731
    for fn in (ours, files, raw):  # warm caches and tf.function tracing
        fn()
    times = interleaved_medians({"ours": ours, "files": files, "memory": lambda: consume(in_memory), "raw": raw},
                                args.runs)
    t_ours, t_files, t_memory, t_raw = times["ours"], times["files"], times["memory"], times["raw"]

    tabular = tabular_table(args.rows)
    tfrecorder.convert(tabular, str(work / "tabular"), progress=False, num_shards=4)

    spec = tfrecorder.feature_spec(str(work / "tabular"))
    tab_shards = sorted(str(p) for p in (work / "tabular").glob("*.tfrecord"))
    ours_tab = lambda: consume(tfrecorder.load_dataset(str(work / "tabular"), split="TRAIN", batch_size=256))  # noqa
    single = lambda: consume(tf.data.TFRecordDataset(tab_shards).map(  # noqa: E731
        lambda r: tf.io.parse_single_example(r, spec), num_parallel_calls=AUTOTUNE).batch(256).prefetch(AUTOTUNE))
    ours_tab(), single()
    times = interleaved_medians({"ours": ours_tab, "single": single}, args.runs)
    t_ours_tab, t_single = times["ours"], times["single"]

    n = args.images
    rate = lambda s, k=n, unit="img": f"{k / s:,.0f} {unit}/s"  # noqa: E731
    print_table(f"Read, {n} JPEGs -> decode + resize 224 + batch 64; {args.rows:,} tabular rows x 20; "
                f"median of {args.runs}", [
        ("load_dataset images", rate(t_ours), f"tf.data over JPEG files: {rate(t_files)}", f"{t_files / t_ours:.2f}x"),
        ("load_dataset images", rate(t_ours), f"decode from memory: {rate(t_memory)}", f"{t_memory / t_ours:.2f}x"),
        ("raw TFRecordDataset iteration", rate(t_raw, unit="rec"), "(no parsing, no decode)", "report"),
        ("load_dataset tabular, batch 256", rate(t_ours_tab, args.rows, "rows"),
         f"map(parse_single_example): {rate(t_single, args.rows, 'rows')}", f"{t_single / t_ours_tab:.2f}x"),
    ])


if __name__ == "__main__":
    main()
