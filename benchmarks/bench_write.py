"""Writing: to_tfr against the tutorial loop, the `cat` limit, and TFRecorder 2.0's raw-pixel format."""

from __future__ import annotations

import argparse
import base64
import os
import subprocess
from pathlib import Path

import numpy as np
from PIL import Image

from benchmarks.common import fresh, input_bytes, interleaved_best, jpeg_table, print_table, work_dir


def tutorial_loop(paths, labels, out: Path) -> None:
    """The seed tutorial's writer: read_file -> tf.train.Example -> TFRecordWriter, one image at a time."""
    import tensorflow as tf

    with tf.io.TFRecordWriter(str(out)) as writer:
        for path, label in zip(paths, labels):
            data = tf.io.read_file(path)
            feature = {
                "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[data.numpy()])),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[label])),
            }
            writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())


def checked_loop(paths, labels, out: Path) -> None:
    """The tutorial loop with the check a hand-written script adds so that no broken image reaches training:
    ``tf.io.decode_image`` of each file before it is written (what ``validate_images="full"`` guarantees)."""
    import tensorflow as tf

    with tf.io.TFRecordWriter(str(out)) as writer:
        for path, label in zip(paths, labels):
            data = tf.io.read_file(path)
            tf.io.decode_image(data, channels=3, expand_animations=False)
            feature = {
                "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[data.numpy()])),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[label])),
            }
            writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())


def decode_limit(blobs: list[bytes]) -> None:
    """The floor of validate_images="full": libjpeg-turbo's 1/8-scale check of bytes in memory, one thread per core."""
    import os
    from concurrent.futures import ThreadPoolExecutor

    import simplejpeg

    def check(data: bytes) -> None:
        simplejpeg.decode_jpeg(data, colorspace="GRAY", min_height=1, min_width=1, min_factor=8)

    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        list(pool.map(check, blobs, chunksize=16))


def cat_files(paths, out: Path, durable: bool = False) -> None:
    """The physical limit: the same bytes copied into one file by `cat` (then, if ``durable``, fsynced: the
    limit for a copy that survives a power loss, as our shards do)."""
    with open(out, "wb") as f:
        subprocess.run(["cat", *paths], stdout=f, check=True)
        if durable:
            os.fsync(f.fileno())


def tfrecorder2_format(paths, out: Path) -> None:
    """TFRecorder 2.0's records: URL-safe base64 of decoded pixels plus their shape, gzip-compressed."""
    import tensorflow as tf

    options = tf.io.TFRecordOptions(compression_type="GZIP")
    with tf.io.TFRecordWriter(str(out), options) as writer:
        for path in paths:
            pixels = np.asarray(Image.open(path).convert("RGB"))
            feature = {
                "image": tf.train.Feature(bytes_list=tf.train.BytesList(
                    value=[base64.urlsafe_b64encode(pixels.tobytes())])),
                "image_height": tf.train.Feature(int64_list=tf.train.Int64List(value=[pixels.shape[0]])),
                "image_width": tf.train.Feature(int64_list=tf.train.Int64List(value=[pixels.shape[1]])),
                "image_channels": tf.train.Feature(int64_list=tf.train.Int64List(value=[3])),
            }
            writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())


def whole_shards(run) -> None:
    """``run()`` with every shard written by one writer: the local runner's segments turned off."""
    from tfrecorder.write.runners import segments

    kept = segments.SEGMENT_MIN_ROWS
    segments.SEGMENT_MIN_ROWS = 2**62
    try:
        run()
    finally:
        segments.SEGMENT_MIN_ROWS = kept


def speedup(ratio: float) -> str:
    return f"{ratio:.2f}x faster" if ratio >= 1 else f"{ratio:.2f}x (slower)"


def size_case(tfrecorder, table, work: Path, runs: int) -> tuple[list[tuple[str, str, str, str]], dict[str, float]]:
    """The rows for one table of JPEGs: ours (header and full checks; 4 shards, and the default shards too) against
    the loop, `cat` and decode limits."""
    paths, labels = table["image_uri"].tolist(), [int(v[-1]) for v in table["label"]]
    for path in paths:  # warm the page cache
        Path(path).read_bytes()
    out = work / "ours"

    def ours(validate: str, num_shards: int | None = 4) -> None:
        fresh(out).rmdir()
        tfrecorder.convert(table, str(out), validate_images=validate, progress=False, num_shards=num_shards)

    blobs = [Path(p).read_bytes() for p in paths]
    times = interleaved_best({
        "header": lambda: ours("header"),
        "header_default": lambda: ours("header", None),  # the shards a user gets: ~128 MiB each
        "full": lambda: ours("full"),
        "full_default": lambda: ours("full", None),
        "full_default_whole": lambda: whole_shards(lambda: ours("full", None)),
        "tutorial": lambda: tutorial_loop(paths, labels, work / "tutorial.tfrecord"),
        "checked": lambda: checked_loop(paths, labels, work / "checked.tfrecord"),
        "cat": lambda: cat_files(paths, work / "cat.bin"),
        "cat_fsync": lambda: cat_files(paths, work / "cat.bin", durable=True),
        "decode": lambda: decode_limit(blobs),
    }, runs)
    ours_header, ours_full, tutorial, cat = times["header"], times["full"], times["tutorial"], times["cat"]
    fresh(out).rmdir()
    ours("header")
    ours_bytes = sum(p.stat().st_size for p in out.glob("*.tfrecord"))
    source_bytes = input_bytes(paths)
    n = len(paths)
    mb = source_bytes / 1e6
    rate = lambda seconds: f"{n / seconds:,.0f} img/s ({mb / seconds:,.0f} MB/s)"  # noqa: E731
    return times, [
        # The defaults first (validate_images="full", default shards): the figures the README quotes.
        (f"{n:,} JPEGs: to_tfr, defaults (full check, default shards)", rate(times["full_default"]),
         f"tutorial loop (checks nothing): {rate(tutorial)}", speedup(tutorial / times["full_default"])),
        (f"{n:,} JPEGs: to_tfr, defaults (full check, default shards)", rate(times["full_default"]),
         f"tutorial loop + decode_image check: {rate(times['checked'])}",
         speedup(times["checked"] / times["full_default"])),
        (f"{n:,} JPEGs: to_tfr, validate_images=\"header\", default shards", rate(times["header_default"]),
         f"tutorial loop (checks nothing): {rate(tutorial)}", speedup(tutorial / times["header_default"])),
        (f"{n:,} JPEGs: to_tfr, header", rate(ours_header), f"tutorial loop: {rate(tutorial)}",
         speedup(tutorial / ours_header)),
        (f"{n:,} JPEGs: to_tfr, header", rate(ours_header), f"cat: {rate(cat)}",
         f"{cat / ours_header:.2f}x of the limit"),
        (f"{n:,} JPEGs: to_tfr, header", rate(ours_header), f"cat, then fsync: {rate(times['cat_fsync'])}",
         f"{times['cat_fsync'] / ours_header:.2f}x of the limit"),
        (f"{n:,} JPEGs: to_tfr, header, default shards", rate(times["header_default"]),
         f"cat, then fsync: {rate(times['cat_fsync'])}",
         f"{times['cat_fsync'] / times['header_default']:.2f}x of the limit"),
        (f"{n:,} JPEGs: to_tfr, full", rate(ours_full), f"tutorial loop: {rate(tutorial)}",
         speedup(tutorial / ours_full)),
        (f"{n:,} JPEGs: to_tfr, full, default shards", rate(times["full_default"]),
         f"the same, each shard by one writer (no segments): {rate(times['full_default_whole'])}",
         f"{times['full_default_whole'] / times['full_default']:.2f}x"),
        (f"{n:,} JPEGs: to_tfr, full", rate(ours_full), f"decode limit (1/8-scale check, all cores, in memory): "
         f"{rate(times['decode'])}", f"{times['decode'] / ours_full:.2f}x of the limit"),
        (f"{n:,} JPEGs: output size, keep bytes", f"{ours_bytes / 1e6:.1f} MB", f"inputs: {source_bytes / 1e6:.1f} MB",
         f"{ours_bytes / source_bytes:.3f}x"),
    ]


def cost_rows(times: dict[int, dict[str, float]]) -> list[tuple[str, str, str, str]]:
    """Each case's fixed cost per call and cost per image, from a straight line through the smallest and the
    largest table's times."""
    small, large = min(times), max(times)

    def cost(key: str) -> tuple[float, float]:
        per_image = (times[large][key] - times[small][key]) / (large - small)
        return times[small][key] - small * per_image, per_image

    def text(key: str) -> str:
        fixed, per_image = cost(key)
        return f"{fixed * 1e3:.0f} ms + {per_image * 1e6:.0f} us/image"

    label = f"cost per call + per image ({small:,} and {large:,} JPEGs)"
    return [
        (f"{label}: to_tfr, header", text("header"), f"cat: {text('cat')}", f"{cost('cat')[1] / cost('header')[1]:.2f}x"
         " per image"),
        (f"{label}: to_tfr, header", text("header"), f"cat, then fsync: {text('cat_fsync')}",
         f"{cost('cat_fsync')[1] / cost('header')[1]:.2f}x per image"),
        (f"{label}: to_tfr, full", text("full"), f"decode limit: {text('decode')}",
         f"{cost('decode')[1] / cost('full')[1]:.2f}x per image"),
    ]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--images", type=int, nargs="+", default=[2000, 10000], help="table sizes (500x375 JPEGs)")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    import tfrecorder

    work = work_dir("bench-write-")
    tables = {n: jpeg_table(n) for n in args.images}
    warm = tables[args.images[0]].head(20)  # TensorFlow and our imports, before anything is timed
    tutorial_loop(warm["image_uri"].tolist(), [0] * len(warm), work / "warm.tfrecord")
    checked_loop(warm["image_uri"].tolist(), [0] * len(warm), work / "warm-checked.tfrecord")
    tfrecorder.convert(warm, str(work / "warm"), progress=False)
    rows, times = [], {}
    for n in args.images:
        times[n], found = size_case(tfrecorder, tables[n], work, args.runs)
        rows += found
    if len(args.images) > 1:
        rows += cost_rows(times)

    subset = tables[args.images[0]]["image_uri"].tolist()[:200]
    tfrecorder2_format(subset, work / "tfr2.tfrecord.gz")
    tfr2_bytes = (work / "tfr2.tfrecord.gz").stat().st_size
    subset_bytes = input_bytes(subset)
    rows.append(("TFRecorder 2.0 format (200 images)", f"{subset_bytes / 1e6:.1f} MB (inputs)",
                 f"raw pixels, gzip: {tfr2_bytes / 1e6:.1f} MB", f"{tfr2_bytes / subset_bytes:.1f}x larger"))
    print_table(f"Write, JPEGs of 500x375 (~{subset_bytes / len(subset) / 1e3:.0f} KB), warm cache, best of "
                f"{args.runs} interleaved runs", rows)


if __name__ == "__main__":
    main()
