"""The remote shard cache: an epoch of a gs:// split (the tests' GCS emulator on 127.0.0.1) read with
``cache_dir=`` once its copies are made, against the same epoch of the local split; and opening it, copies made."""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from benchmarks.common import fresh, interleaved_best, jpeg_table, print_table, work_dir

os.environ["GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT"] = "false"  # before gcsfs is imported (tests/conftest.py)


def cache_rows(local: str, remote: str, cache_dir: str, runs: int) -> list[tuple[str, str, str, str]]:
    import tfrecorder

    options = dict(batch_size=64, image_size=(224, 224), shuffle=True, seed=0)
    start = time.perf_counter()
    cached = tfrecorder.load_dataset(remote, "TRAIN", cache_dir=cache_dir, **options)
    opened = time.perf_counter() - start
    direct = tfrecorder.load_dataset(local, "TRAIN", **options)

    def epoch(ds) -> int:
        return sum(int(b["image"].shape[0]) for b in ds)

    assert epoch(cached) == epoch(direct)  # the first epochs: both warm
    times = interleaved_best({"local": lambda: epoch(direct), "cached": lambda: epoch(cached)}, runs)
    return [("opening the gs:// split, its 8 shards copied to cache_dir", f"{opened:.2f} s", "", "report"),
            ("a later epoch of the gs:// split read with cache_dir=", f"{times['cached']:.2f} s",
             f"the local split's epoch: {times['local']:.2f} s", f"{times['local'] / times['cached']:.2f}x")]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--images", type=int, default=1000, help="500x375 JPEGs")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    import fsspec

    import tfrecorder
    from tests.servers import gcs_emulator, use_emulator

    work = work_dir("bench-cache-")
    local = fresh(work / "local")
    tfrecorder.convert(jpeg_table(args.images).assign(split="TRAIN"), str(local), num_shards=8, progress=False)
    with gcs_emulator("bench") as address:
        use_emulator(address)
        fs = fsspec.filesystem("gs")
        for path in Path(local).iterdir():
            if path.is_file():
                fs.pipe(f"gs://bench/data/{path.name}", path.read_bytes())
        rows = cache_rows(str(local), "gs://bench/data", str(work / "cache"), args.runs)
    print_table("The remote shard cache", rows)


if __name__ == "__main__":
    main()
