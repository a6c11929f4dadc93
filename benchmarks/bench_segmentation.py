"""Segmentation: writing image/mask pairs against DeepLab's loop (``build_voc2012_data.py``: both files
decoded for their sizes and channels, an Example each, one TFRecordWriter) - as DeepLab writes it
(TensorFlow decodes), with Pillow decoding, and with Pillow reading only the headers (a lower bound: no file
is checked) - and reading them at 256x256 against the hand-written parse-decode-resize pipeline for both."""

from __future__ import annotations

import argparse
import io
import json
import os
import random
from pathlib import Path

import pandas as pd
from PIL import Image, ImageDraw

from benchmarks.common import DATA, fresh, interleaved_best, jpeg_table, print_table, work_dir


def pair_table(n: int) -> pd.DataFrame:
    """``n`` scene JPEGs (500x375) with a grey PNG mask of 21 classes each (VOC's count), made once."""
    images = jpeg_table(n)
    folder = DATA / "masks-375x500"
    folder.mkdir(parents=True, exist_ok=True)
    masks = []
    for i in range(n):
        path = folder / f"{i:05d}.png"
        if not path.exists():
            rng = random.Random(i)
            mask = Image.new("L", (500, 375), 0)
            draw = ImageDraw.Draw(mask)
            for _ in range(rng.randint(1, 4)):
                x, y = rng.randrange(400), rng.randrange(300)
                shape = draw.ellipse if rng.random() < 0.5 else draw.rectangle
                shape((x, y, x + rng.randint(30, 200), y + rng.randint(30, 150)), fill=rng.randint(1, 20),
                      outline=255)
            mask.save(path)
        masks.append(str(path))
    return images[["split", "image_uri"]].assign(mask_uri=masks)


def deeplab_loop(table: pd.DataFrame, out: Path, sizes: str = "tensorflow") -> None:
    """build_voc2012_data.py's loop per split: read image and mask, their sizes, a size check, an Example
    (image/encoded, image/segmentation/class/encoded, ...), one writer. ``sizes``: "tensorflow" decodes both
    as DeepLab's ``ImageReader.read_image_dims`` does (``decode_jpeg(channels=3)``, ``decode_png(channels=1)``,
    here eager), "pillow" decodes both with Pillow, "header" reads only their headers with Pillow."""
    import tensorflow as tf

    def b(value):
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))

    def i(value):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))

    def size_of(data: bytes, channels: int) -> tuple[int, int]:
        if sizes == "tensorflow":
            decode = tf.io.decode_jpeg if channels == 3 else tf.io.decode_png
            height, width = decode(data, channels=channels).shape[:2]
            return width, height
        picture = Image.open(io.BytesIO(data))
        if sizes == "pillow":
            picture.load()
        return picture.size

    out.mkdir(parents=True, exist_ok=True)
    for split, rows in table.groupby("split"):
        with tf.io.TFRecordWriter(str(out / f"{split.lower()}.tfrecord")) as writer:
            for row in rows.itertuples():
                image_data = tf.io.gfile.GFile(row.image_uri, "rb").read()
                width, height = size_of(image_data, 3)
                seg_data = tf.io.gfile.GFile(row.mask_uri, "rb").read()
                seg_width, seg_height = size_of(seg_data, 1)
                if height != seg_height or width != seg_width:
                    raise RuntimeError("Shape mismatched between image and label.")
                name = os.path.basename(row.image_uri)
                example = tf.train.Example(features=tf.train.Features(feature={
                    "image/encoded": b(image_data), "image/filename": b(name.encode()), "image/format": b(b"jpeg"),
                    "image/height": i(height), "image/width": i(width), "image/channels": i(3),
                    "image/segmentation/class/encoded": b(seg_data), "image/segmentation/class/format": b(b"png"),
                }))
                writer.write(example.SerializeToString())


def hand_written_reader(files: list[str], size: tuple[int, int], batch: int):
    """Parse, decode both, resize (the mask with nearest-neighbour), batch."""
    import tensorflow as tf

    spec = {"image/encoded": tf.io.FixedLenFeature([], tf.string),
            "image/segmentation/class/encoded": tf.io.FixedLenFeature([], tf.string)}

    def parse(record):
        found = tf.io.parse_single_example(record, spec)
        image = tf.image.resize(tf.io.decode_jpeg(found["image/encoded"], channels=3), size)
        mask = tf.io.decode_png(found["image/segmentation/class/encoded"], channels=1)
        return image, tf.image.resize(mask, size, method="nearest")

    ds = tf.data.TFRecordDataset(files).map(parse, num_parallel_calls=tf.data.AUTOTUNE).batch(batch)
    return ds.prefetch(tf.data.AUTOTUNE)


def _drain(ds) -> int:
    return sum(1 for _ in ds)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pairs", type=int, default=1000, help="image/mask pairs (500x375)")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    import tfrecorder

    work = work_dir("bench-segmentation-")
    table = pair_table(args.pairs)
    for sizes in ("tensorflow", "pillow", "header"):
        deeplab_loop(table.head(20), work / "warm-loop", sizes)
    tfrecorder.convert(table.head(20), str(work / "warm"), progress=False)
    loop, ours = work / "loop", work / "ours"
    baseline = "DeepLab's loop (build_voc2012_data.py: TensorFlow decodes both for their sizes)"
    write = interleaved_best({
        baseline: lambda: deeplab_loop(table, fresh(loop)),
        "the same, Pillow decoding both": lambda: deeplab_loop(table, fresh(loop), "pillow"),
        "the same, Pillow reading only the headers (no file checked)":
            lambda: deeplab_loop(table, fresh(loop), "header"),
        "to_tfr, validate_images='header' (images and masks checked by their headers)":
            lambda: tfrecorder.convert(table, str(fresh(ours)), validate_images="header", progress=False),
        "to_tfr (defaults: every image and mask decoded and checked)":  # last: its files are read below
            lambda: tfrecorder.convert(table, str(fresh(ours)), progress=False),
    }, args.runs)
    rows = [(name, f"{seconds:.2f} s", f"{len(table) / seconds:,.0f} pairs/s",
             " / ".join(f"{write[base] / seconds:.2f}x" for base in list(write)[:3]))
            for name, seconds in write.items()]
    size, batch = (256, 256), 32
    hand_name = "hand-written parse, decode, resize (both), batch"
    ours_name = "load_dataset(image_size=(256, 256), as_supervised=True)"

    def hand():
        return hand_written_reader([str(loop / "train.tfrecord")], size, batch)

    def load():
        return tfrecorder.load_dataset(str(ours), "TRAIN", batch_size=batch, image_size=size, as_supervised=True)

    train = int((table["split"] == "TRAIN").sum())
    built = {hand_name: hand(), ours_name: load()}  # a multi-epoch fit builds its pipeline once
    for title, cases in (
        ("read TRAIN, pipeline built and iterated", {hand_name: lambda: _drain(hand()),
                                                     ours_name: lambda: _drain(load())}),
        ("read TRAIN, an epoch of a pipeline built once", {name: lambda ds=ds: _drain(ds)
                                                           for name, ds in built.items()}),
    ):
        read = interleaved_best(cases, args.runs)
        rows += [(f"{title}: {name}", f"{seconds:.2f} s", f"{train / seconds:,.0f} pairs/s",
                  f"{read[hand_name] / seconds:.2f}x") for name, seconds in read.items()]
    stride = json.loads((ours / "dataset.json").read_text())["masks"]["pixel_stride"]
    print_table(f"Segmentation: {len(table):,} JPEGs of 500x375 with grey PNG masks; best of {args.runs} "
                f"interleaved runs (ratio: the baseline's time over the case's; writing, against each of the "
                f"three loops; pixels per class counted in 1 mask of {stride} per split)", rows,
                ("case", "seconds", "throughput", "vs baseline"))


if __name__ == "__main__":
    main()
