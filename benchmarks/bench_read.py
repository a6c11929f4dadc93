"""Reading: load_dataset against the pipelines users write over the same JPEGs, in the same process, with the
quality of each as PSNR against Pillow's LANCZOS resize of the full-size decode."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks.common import interleaved_best, jpeg_table, print_table, work_dir

AUTOTUNE = None  # set once TensorFlow is imported
SIZE, BATCH, QUALITY_IMAGES, DECODE_IMAGES = (224, 224), 64, 16, 50


def consume(ds) -> int:
    count = 0
    for _ in ds:
        count += 1
    return count


def users_load(tf, antialias: bool = False):
    """What TF's tutorials write: read_file -> decode_jpeg(channels=3) (default IDCT) -> resize (bilinear)."""
    def load(path):
        image = tf.io.decode_jpeg(tf.io.read_file(path), channels=3)
        resized = tf.image.resize(image, SIZE, antialias=antialias)
        return tf.cast(tf.clip_by_value(tf.round(resized), 0, 255), tf.uint8)

    return load


def users_pipeline(tf, pattern: str, antialias: bool = False):
    """list_files -> map(load) -> batch -> prefetch, AUTOTUNE throughout."""
    files = tf.data.Dataset.list_files(pattern)
    return files.map(users_load(tf, antialias), num_parallel_calls=AUTOTUNE).batch(BATCH).prefetch(AUTOTUNE)


def keras_pipeline(tf, folder: str):
    """Keras' image_dataset_from_directory with its defaults (bilinear), no labels."""
    return tf.keras.utils.image_dataset_from_directory(folder, labels=None, image_size=SIZE, batch_size=BATCH,
                                                       shuffle=False, verbose=False)


def psnr(images, references) -> float:
    errors = [np.mean((np.asarray(a, np.float64) - np.asarray(r, np.float64)) ** 2) for a, r in zip(images, references)]
    return float(np.mean([10 * np.log10(255.0**2 / e) for e in errors]))


def image_case(tf, tfrecorder, work: Path, n: int, size: tuple[int, int], runs: int) -> list[tuple[str, ...]]:
    """The rows of one image size: ours and the baselines, speed ratio and PSNR."""
    from PIL import Image

    table = jpeg_table(n, size).assign(split="TRAIN")
    paths = table["image_uri"].tolist()
    folder = work / f"files-{size[0]}x{size[1]}"  # exactly these n files, for the pipelines that list a folder
    folder.mkdir()
    for path in paths:
        (folder / Path(path).name).symlink_to(path)
    folder = str(folder)
    out = work / f"images-{size[0]}x{size[1]}"
    tfrecorder.convert(table, str(out), progress=False, num_shards=8)
    ours = lambda: tfrecorder.load_dataset(str(out), split="TRAIN", batch_size=BATCH, image_size=SIZE)  # noqa: E731
    builders = {
        "ours": ours,
        "users": lambda: users_pipeline(tf, f"{folder}/*.jpg"),
        "users_aa": lambda: users_pipeline(tf, f"{folder}/*.jpg", antialias=True),
        "keras": lambda: keras_pipeline(tf, folder),
    }
    # Each pipeline is built once and iterated once a run, as training iterates its dataset once an epoch;
    # building it is timed apart (the build row).
    built = {key: build() for key, build in builders.items()}
    cases = {key: (lambda ds=ds: consume(ds)) for key, ds in built.items()}
    for fn in cases.values():  # warm caches
        fn()
    times = interleaved_best(cases, runs)
    build_times = interleaved_best(builders, runs)
    bound = decode_bound(tf, [Path(p).read_bytes() for p in paths[:DECODE_IMAGES]], size)

    def references(sample):
        return [np.asarray(Image.open(p).convert("RGB").resize(SIZE[::-1], Image.Resampling.LANCZOS)) for p in sample]

    sample = paths[:QUALITY_IMAGES]  # the users' and Keras' first images (in file order)
    reference = references(sample)
    first = next(ours().as_numpy_iterator())  # ours come in stored order: matched to their files by image_uri
    ours_paths = [uri.decode() for uri in first["image_uri"][:QUALITY_IMAGES]]
    quality = {
        "ours": psnr(first["image"][:QUALITY_IMAGES], references(ours_paths)),
        "users": psnr([users_load(tf)(p).numpy() for p in sample], reference),
        "users_aa": psnr([users_load(tf, True)(p).numpy() for p in sample], reference),
        "keras": psnr([x for batch in keras_pipeline(tf, folder).take(1) for x in batch.numpy()][:QUALITY_IMAGES],
                      reference),
    }
    rate = lambda key: f"{n / times[key]:,.0f} img/s, {quality[key]:.1f} dB"  # noqa: E731
    label = f"load_dataset {size[1]}x{size[0]} -> 224"
    names = {"users": "users' pipeline (bilinear, TF defaults)", "users_aa": "same with antialias=True",
             "keras": "Keras image_dataset_from_directory"}
    rows = [(label, rate("ours"), f"{names[k]}: {rate(k)}", f"{times[k] / times['ours']:.2f}x") for k in names]
    ratio, full_rate, scaled_rate = bound
    if ratio > 1:  # else no reduced scale covers 224 rows: both decode every pixel
        rows.append((f"{label}: decode bound", f"1/{ratio} scale: {scaled_rate:,.0f} img/s",
                     f"full decode: {full_rate:,.0f} img/s (one thread, in memory, CPU time)",
                     f"{scaled_rate / full_rate:.2f}x"))
    rows.append((f"{label}: building the pipeline", f"{build_times['ours'] * 1e3:.0f} ms",
                 f"users' pipeline: {build_times['users'] * 1e3:.0f} ms", "report"))
    return rows


def decode_bound(tf, blobs: list[bytes], size: tuple[int, int]) -> tuple[int, float, float]:
    """(ratio, full decode img/s, decode at ``ratio`` img/s): the JPEG decode alone, at full size and at the
    scale load_dataset picks for these images, one thread, by CPU time. Every other step of either pipeline
    is small beside it, so ``ratio``'s speedup bounds what load_dataset can gain over a full decode.
    """
    import time

    from tfrecorder.read.tf_image import JPEG_RATIOS, jpeg_scale

    ratio = JPEG_RATIOS[int(jpeg_scale(tf.constant(size[0]), tf.constant(size[1]), SIZE))]

    def rate(r: int) -> float:
        best = float("inf")
        for _ in range(3):
            start = time.process_time()
            for data in blobs:
                tf.io.decode_jpeg(data, channels=3, ratio=r, dct_method="INTEGER_ACCURATE")
            best = min(best, time.process_time() - start)
        return len(blobs) / best

    return ratio, rate(1), rate(ratio)


def tabular_table(rows: int, columns: int = 20) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    data = {"split": "TRAIN", "label": rng.integers(0, 10, rows)}
    for i in range(columns - 1):
        data[f"f{i}"] = rng.normal(size=rows) if i % 3 else rng.integers(0, 1000, rows)
    return pd.DataFrame(data)


def main(argv=None) -> None:
    global AUTOTUNE
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--images", type=int, default=1000, help="500x375 JPEGs")
    parser.add_argument("--large", type=int, default=300, help="1600x1200 JPEGs")
    parser.add_argument("--phone", type=int, default=200, help="4032x3024 JPEGs (12 MP)")
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    import tensorflow as tf

    import tfrecorder

    AUTOTUNE = tf.data.AUTOTUNE
    work = work_dir("bench-read-")
    rows = []
    for n, size in ((args.images, (375, 500)), (args.large, (1200, 1600)), (args.phone, (3024, 4032))):
        if n:
            rows += image_case(tf, tfrecorder, work, n, size, args.runs)

    tabular = tabular_table(args.rows)
    tfrecorder.convert(tabular, str(work / "tabular"), progress=False, num_shards=4, float_precision="float32")
    spec = tfrecorder.feature_spec(str(work / "tabular"))
    tab_shards = sorted(str(p) for p in (work / "tabular").glob("*.tfrecord"))
    ours_tab = lambda: consume(tfrecorder.load_dataset(str(work / "tabular"), split="TRAIN", batch_size=256))  # noqa
    single = lambda: consume(tf.data.TFRecordDataset(tab_shards).map(  # noqa: E731
        lambda r: tf.io.parse_single_example(r, spec), num_parallel_calls=AUTOTUNE).batch(256).prefetch(AUTOTUNE))
    raw = lambda: consume(tf.data.TFRecordDataset(tab_shards, num_parallel_reads=AUTOTUNE))  # noqa: E731
    ours_tab(), single(), raw()
    times = interleaved_best({"ours": ours_tab, "single": single, "raw": raw}, args.runs)
    rate = lambda key, unit="rows": f"{args.rows / times[key]:,.0f} {unit}/s"  # noqa: E731
    rows += [
        ("load_dataset tabular, batch 256", rate("ours"), f"map(parse_single_example): {rate('single')}",
         f"{times['single'] / times['ours']:.2f}x"),
        ("raw TFRecordDataset iteration", rate("raw", "rec"), "(no parsing, no decode)", "report"),
    ]
    print_table(f"Read: images -> 224x224, batch {BATCH} (speed, PSNR vs Pillow LANCZOS of the full decode); "
                f"{args.rows:,} tabular rows x 20; best of {args.runs} interleaved runs", rows)


if __name__ == "__main__":
    main()
