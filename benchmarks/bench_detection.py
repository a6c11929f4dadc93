"""Detection: writing a box table against the Object Detection API's ``generate_tfrecord.py`` loop, and reading
it at 512x512 with padded boxes against the hand-written parse users copy from the same tutorials."""

from __future__ import annotations

import argparse
import io
import os
import random
from collections import namedtuple
from pathlib import Path

import pandas as pd

from benchmarks.common import (
    bytes_feature,
    float_feature,
    fresh,
    int64_feature,
    interleaved_best,
    jpeg_table,
    print_table,
    work_dir,
)

CLASSES = ("car", "person", "dog", "cat", "bicycle")


def box_table(n: int) -> pd.DataFrame:
    """``n`` scene JPEGs (500x375) with 1-5 boxes each (3 on average), in pixels: the long form."""
    images = jpeg_table(n)
    rng = random.Random(0)
    rows = []
    for image in images.itertuples():
        for _ in range(rng.randint(1, 5)):
            w, h = rng.randint(20, 250), rng.randint(20, 180)
            x, y = rng.randint(0, 500 - w), rng.randint(0, 375 - h)
            rows.append((image.split, image.image_uri, rng.choice(CLASSES), x, y, x + w, y + h))
    return pd.DataFrame(rows, columns=["split", "image_uri", "label", "xmin", "ymin", "xmax", "ymax"])


# --- the baseline: generate_tfrecord.py, as the Object Detection API tutorials give it ------------------------

def class_text_to_int(row_label: str) -> int | None:
    if row_label == "car":
        return 1
    elif row_label == "person":
        return 2
    elif row_label == "dog":
        return 3
    elif row_label == "cat":
        return 4
    elif row_label == "bicycle":
        return 5
    return None


def _split(df: pd.DataFrame, group: str) -> list:
    data = namedtuple("data", ["filename", "object"])
    gb = df.groupby(group)
    return [data(filename, gb.get_group(x)) for filename, x in zip(gb.groups.keys(), gb.groups)]


def _create_tf_example(group, tf):
    with tf.io.gfile.GFile(group.filename, "rb") as fid:
        encoded_jpg = fid.read()
    from PIL import Image

    image = Image.open(io.BytesIO(encoded_jpg))  # only for its size
    width, height = image.size
    filename = os.path.basename(group.filename).encode("utf8")
    xmins, xmaxs, ymins, ymaxs, classes_text, classes = [], [], [], [], [], []
    for _, row in group.object.iterrows():
        xmins.append(row["xmin"] / width)
        xmaxs.append(row["xmax"] / width)
        ymins.append(row["ymin"] / height)
        ymaxs.append(row["ymax"] / height)
        classes_text.append(row["label"].encode("utf8"))
        classes.append(class_text_to_int(row["label"]))

    b, f, i = bytes_feature, float_feature, int64_feature  # dataset_util's, as the script calls them

    return tf.train.Example(features=tf.train.Features(feature={
        "image/height": i([height]), "image/width": i([width]), "image/filename": b([filename]),
        "image/source_id": b([filename]), "image/encoded": b([encoded_jpg]), "image/format": b([b"jpg"]),
        "image/object/bbox/xmin": f(xmins), "image/object/bbox/xmax": f(xmaxs),
        "image/object/bbox/ymin": f(ymins), "image/object/bbox/ymax": f(ymaxs),
        "image/object/class/text": b(classes_text), "image/object/class/label": i(classes),
    }))


def generate_tfrecord(table: pd.DataFrame, out: Path) -> None:
    """generate_tfrecord.py, run once per split's CSV as its README says: groupby filename, Pillow for the
    size, an Example per image, one TFRecordWriter; no box is checked."""
    import tensorflow as tf

    out.mkdir(parents=True, exist_ok=True)
    for split, examples in table.rename(columns={"image_uri": "filename"}).groupby("split"):
        writer = tf.io.TFRecordWriter(str(out / f"{split.lower()}.record"))
        for group in _split(examples, "filename"):
            writer.write(_create_tf_example(group, tf).SerializeToString())
        writer.close()


# --- reading ------------------------------------------------------------------------------------------------

def hand_written_reader(files: list[str], size: tuple[int, int], batch: int):
    """The parse the same tutorials give: VarLenFeature per coordinate, decode_jpeg, resize, padded_batch."""
    import tensorflow as tf

    spec = {"image/encoded": tf.io.FixedLenFeature([], tf.string),
            "image/object/class/label": tf.io.VarLenFeature(tf.int64),
            **{f"image/object/bbox/{k}": tf.io.VarLenFeature(tf.float32) for k in ("ymin", "xmin", "ymax", "xmax")}}

    def parse(record):
        found = tf.io.parse_single_example(record, spec)
        image = tf.image.resize(tf.io.decode_jpeg(found["image/encoded"], channels=3), size)
        boxes = tf.stack([tf.sparse.to_dense(found[f"image/object/bbox/{k}"])
                          for k in ("ymin", "xmin", "ymax", "xmax")], axis=1)
        return image, boxes, tf.sparse.to_dense(found["image/object/class/label"])

    ds = tf.data.TFRecordDataset(files).map(parse, num_parallel_calls=tf.data.AUTOTUNE)
    ds = ds.padded_batch(batch, padded_shapes=([*size, 3], [None, 4], [None]),
                         padding_values=(0.0, -1.0, tf.constant(-1, tf.int64)))
    return ds.prefetch(tf.data.AUTOTUNE)


def _drain(ds) -> int:
    return sum(1 for _ in ds)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--images", type=int, default=2000, help="scene JPEGs (500x375), 1-5 boxes each")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    import tfrecorder

    work = work_dir("bench-detection-")
    table = box_table(args.images)
    warm = table[table["image_uri"].isin(table["image_uri"].unique()[:20])]
    generate_tfrecord(warm, work / "warm-loop")
    tfrecorder.convert(warm, str(work / "warm"), progress=False)

    outputs = {"loop": work / "loop", "ours": work / "ours", "ours-od": work / "ours-od"}
    write = interleaved_best({
        "generate_tfrecord.py loop": lambda: generate_tfrecord(table, fresh(outputs["loop"])),
        "to_tfr, validate_images='header' (every box checked against the header's size)":
            lambda: tfrecorder.convert(table, str(fresh(outputs["ours"])), validate_images="header",
                                       progress=False),
        "to_tfr, record_format='tf_object_detection'":
            lambda: tfrecorder.convert(table, str(fresh(outputs["ours-od"])), record_format="tf_object_detection",
                                       progress=False),
        "to_tfr (defaults: every image decoded, every box checked)":  # last: its files are read below
            lambda: tfrecorder.convert(table, str(fresh(outputs["ours"])), progress=False),
    }, args.runs)
    base = write["generate_tfrecord.py loop"]
    images = table["image_uri"].nunique()
    rows = [(name, f"{seconds:.2f} s", f"{images / seconds:,.0f} images/s", f"{base / seconds:.2f}x")
            for name, seconds in write.items()]

    size, batch = (512, 512), 32
    train = [str(outputs["loop"] / "train.record")]
    read = interleaved_best({
        "hand-written parse (VarLenFeature, decode_jpeg, resize, padded_batch)":
            lambda: _drain(hand_written_reader(train, size, batch)),
        "load_dataset(image_size=(512, 512), max_objects=5)":
            lambda: _drain(tfrecorder.load_dataset(str(outputs["ours"]), "TRAIN", batch_size=batch,
                                                   image_size=size, max_objects=5)),
    }, args.runs)
    train_images = table.loc[table["split"] == "TRAIN", "image_uri"].nunique()
    base = read["hand-written parse (VarLenFeature, decode_jpeg, resize, padded_batch)"]
    rows += [(f"read TRAIN: {name}", f"{seconds:.2f} s", f"{train_images / seconds:,.0f} images/s",
              f"{base / seconds:.2f}x") for name, seconds in read.items()]
    print_table(f"Detection: {images:,} JPEGs of 500x375, {len(table):,} boxes; best of {args.runs} interleaved "
                f"runs (ratio: the baseline's time over the case's)", rows,
                ("case", "seconds", "throughput", "vs baseline"))
    print_table(f"What the speed buys: the same table with {DAMAGED:.0%} of its JPEGs cut short (a broken download)",
                damage_rows(table, work), ("writer", "images listed as errors", "records TensorFlow cannot decode",
                                           "the training run"))


DAMAGED = 0.01  # of the images, cut to half their bytes


def damage_rows(table: pd.DataFrame, work: Path) -> list[tuple[str, str, str, str]]:
    """Each writer on a copy of ``table`` whose images include DAMAGED cut-short JPEGs: the images it listed as
    errors, and the records it wrote that TensorFlow's decode_jpeg refuses (each would stop training)."""
    import tfrecorder

    uris = sorted(table["image_uri"].unique())
    cut = {uri: str(work / "damaged" / f"{i}.jpg") for i, uri in enumerate(uris[::round(1 / DAMAGED)])}
    os.makedirs(work / "damaged", exist_ok=True)
    for uri, copy in cut.items():
        data = Path(uri).read_bytes()
        Path(copy).write_bytes(data[:len(data) // 2])
    damaged = table.assign(image_uri=table["image_uri"].map(lambda u: cut.get(u, u)))
    generate_tfrecord(damaged, fresh(work / "loop-damaged"))
    rows = [("generate_tfrecord.py loop", "0", undecodable(sorted(str(p) for p in (work / "loop-damaged").iterdir()),
                                                           "image/encoded"))]
    for name, validate in (("to_tfr, validate_images='header'", "header"), ("to_tfr (defaults)", "full")):
        out = fresh(work / f"ours-damaged-{validate}")
        result = tfrecorder.convert(damaged, str(out), validate_images=validate, progress=False)
        listed = len(pd.read_csv(out / "errors.csv")["image_uri"].unique()) if result.errors else 0
        rows.append((name, str(listed), undecodable([str(p) for p in sorted(out.glob("*.tfrecord"))], "image")))
    return [(name, listed, str(bad), "stops at the first of them" if bad else "runs")
            for name, listed, bad in rows]


def undecodable(files: list[str], key: str) -> int:
    """Records of ``files`` whose JPEG under ``key`` TensorFlow's decode_jpeg refuses."""
    import tensorflow as tf

    spec = {key: tf.io.FixedLenFeature([], tf.string)}
    bad = 0
    for record in tf.data.TFRecordDataset(files):
        try:
            tf.io.decode_jpeg(tf.io.parse_single_example(record, spec)[key])
        except tf.errors.InvalidArgumentError:
            bad += 1
    return bad


if __name__ == "__main__":
    main()
