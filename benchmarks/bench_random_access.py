"""Random access: single records read at random and decoded, from several threads (what a Grain or PyTorch
worker does), by ``tfrecorder.data_source`` over our TFRecord shards and their .tfindex, and over
``file_format="array_record"`` shards, against ``tfds.data_source`` over the ArrayRecord copy that TFDS's own
``convert_format`` makes of the same folder; writing ArrayRecord shards against TFRecord ones; and a Grain epoch
(the docs' recipe at 224x224, batch 64) against ``load_dataset``'s epoch of the same split, with what bounds it:
the same records decoded and resized by ``data_source`` in as many threads without Grain, and their JPEGs only
decoded, as ``data_source`` decodes them, in as many threads."""

from __future__ import annotations

import argparse
import io
import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from benchmarks.common import fresh, interleaved_best, jpeg_table, print_table, work_dir

THREADS = 4


def read_all(source, order: np.ndarray, decode, threads: int = THREADS) -> int:
    """Every index of ``order`` read (and decoded by ``decode``) by ``threads`` threads: the pixels touched, so
    that nothing is left lazy."""
    with ThreadPoolExecutor(threads) as pool:
        return sum(pool.map(lambda i: decode(source[int(i)]), order))


def epochs(tfrecord_dir: Path, runs: int) -> list[tuple[str, str, str, str]]:
    """The Grain epoch's rows (none without grain): its time and its bounds', each against load_dataset's."""
    try:
        import grain.python as grain
    except ImportError:
        return [("Grain epoch", "grain is not installed", "", "skipped")]
    from PIL import Image

    import tfrecorder
    from tfrecorder.dataset.example_proto import parse_example
    from tfrecorder.read.np_example import _jpeg as jpeg_pixels

    threads, size, batch = os.cpu_count() or 1, (224, 224), 64
    source = tfrecorder.data_source(str(tfrecord_dir), "TRAIN", image_size=size)
    raw = tfrecorder.data_source(str(tfrecord_dir), "TRAIN", decode=False)
    jpegs = [parse_example(raw[i], "", i).features.feature["image"].bytes_list.value[0] for i in range(len(raw))]
    order = np.random.default_rng(1).permutation(len(source))

    def grain_epoch() -> int:
        dataset = (grain.MapDataset.source(source).shuffle(seed=0).map(lambda record: record["image"])
                   .batch(batch))
        return sum(len(b) for b in dataset.to_iter_dataset(grain.ReadOptions(num_threads=threads)))

    def tf_epoch() -> int:
        dataset = tfrecorder.load_dataset(str(tfrecord_dir), "TRAIN", batch_size=batch, image_size=size,
                                          shuffle=True, seed=0)
        return sum(int(b["image"].shape[0]) for b in dataset)

    def decoded(data: bytes) -> int:  # as data_source decodes a JPEG it reads at full scale
        pixels = jpeg_pixels(data, 3)
        if pixels is None:
            with Image.open(io.BytesIO(data)) as picture:
                pixels = np.asarray(picture)
        return int(pixels.shape[0])

    def jpegs_decoded() -> int:
        with ThreadPoolExecutor(threads) as pool:
            return sum(pool.map(decoded, jpegs))

    cases = {"grain": grain_epoch, "tf": tf_epoch, "alone": lambda: read_all(source, order, lambda r: 1, threads),
             "decode": jpegs_decoded}
    cases["tf"]()  # TensorFlow's functions traced, as in every epoch after a training run's first
    times = interleaved_best(cases, runs)
    base = f"load_dataset epoch: {times['tf']:.2f} s"
    return [(f"Grain epoch ({len(source):,} records, {threads} threads)", f"{times['grain']:.2f} s", base,
             f"{times['tf'] / times['grain']:.2f}x"),
            ("  bound: data_source alone, same threads, no Grain", f"{times['alone']:.2f} s", base,
             f"{times['tf'] / times['alone']:.2f}x"),
            ("  bound: the JPEGs only decoded (as data_source does), same threads", f"{times['decode']:.2f} s", base,
             f"{times['tf'] / times['decode']:.2f}x")]


def tfds_converted(tfrecord_dir: Path, work: Path) -> Path:
    """A copy of the folder to which TFDS's convert_format (in place: its --out_dir cannot start from our files)
    added ArrayRecord shards."""
    from tensorflow_datasets.scripts.cli import convert_format_utils

    copy = work / "tfds" / "bench" / "1.0.0"
    shutil.copytree(tfrecord_dir, copy)
    convert_format_utils.convert_dataset(out_dir=None, out_file_format="array_record", dataset_version_dir=str(copy),
                                         num_workers=1)
    return copy


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--images", type=int, default=2000, help="500x375 JPEGs")
    parser.add_argument("--reads", type=int, default=2000, help="records read at random a run")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    import tensorflow_datasets as tfds

    import tfrecorder

    work = work_dir("bench-random-access-")
    table = jpeg_table(args.images).assign(split="TRAIN")
    tfrecord, array = work / "tfrecord", work / "array_record"
    write = {
        "tfrecord": lambda: tfrecorder.convert(table, str(fresh(tfrecord)), progress=False, overwrite=True),
        "array_record": lambda: tfrecorder.convert(table, str(fresh(array)), progress=False, overwrite=True,
                                                   file_format="array_record"),
    }
    write_times = interleaved_best(write, args.runs)
    theirs_dir = tfds_converted(tfrecord, work)

    order = np.random.default_rng(0).integers(0, args.images, args.reads)
    pixels = lambda record: int(record["image"].shape[0])  # noqa: E731 - the decoded image's rows
    sources = {
        "ours": tfrecorder.data_source(str(tfrecord), "TRAIN"),
        "ours_array": tfrecorder.data_source(str(array), "TRAIN"),
        "tfds": tfds.data_source("bench", data_dir=str(theirs_dir.parents[1]), split="train"),
        "ours_224": tfrecorder.data_source(str(tfrecord), "TRAIN", image_size=(224, 224)),
        "ours_crop": tfrecorder.data_source(str(tfrecord), "TRAIN", image_size=(224, 224), resize_mode="crop"),
    }
    cases = {key: (lambda s=source: read_all(s, order, pixels)) for key, source in sources.items()}
    for fn in cases.values():  # each source's files opened and in the page cache
        fn()
    times = interleaved_best(cases, args.runs)
    rate = lambda key: f"{args.reads / times[key]:,.0f} rec/s"  # noqa: E731
    tfds_name = "tfds.data_source over TFDS's convert_format ArrayRecord"
    rows = [
        ("data_source, TFRecord + .tfindex", rate("ours"), f"{tfds_name}: {rate('tfds')}",
         f"{times['tfds'] / times['ours']:.2f}x"),
        ("data_source, file_format='array_record'", rate("ours_array"), f"{tfds_name}: {rate('tfds')}",
         f"{times['tfds'] / times['ours_array']:.2f}x"),
        ("data_source, TFRecord, image_size=224 (resized, bilinear)", rate("ours_224"),
         f"same at full size: {rate('ours')}", "report"),
        ("data_source, TFRecord, image_size=224, resize_mode='crop'", rate("ours_crop"),
         f"stretch: {rate('ours_224')}", "report"),
        ("write file_format='array_record'", f"{args.images / write_times['array_record']:,.0f} img/s",
         f"TFRecord shards: {args.images / write_times['tfrecord']:,.0f} img/s",
         f"{write_times['tfrecord'] / write_times['array_record']:.2f}x"),
    ]
    rows += epochs(tfrecord, args.runs)
    print_table(f"Random access: {args.reads:,} records of {args.images:,} 500x375 JPEGs read at random, decoded, "
                f"{THREADS} threads; best of {args.runs} interleaved runs", rows)


if __name__ == "__main__":
    main()
