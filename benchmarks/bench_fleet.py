"""The reader on a fleet: an epoch of ``load_dataset`` through a tf.data service of 2 local worker processes
(``distributed_epoch``, every record once) against the same epoch read directly; opening a dataset of 1,000
shards (every shard checked once, ``open.check_opened``) and its first and second epochs."""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import time

import pandas as pd

from benchmarks.common import fresh, interleaved_best, jpeg_table, print_table, work_dir


def _service(workers: int) -> tuple[str, list[subprocess.Popen]]:
    """A dispatcher and ``workers`` workers on 127.0.0.1, each a process of its own."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    service = "tf.data.experimental.service"
    codes = [f"{service}.DispatchServer({service}.DispatcherConfig(port={port})).join()"] + [
        f"{service}.WorkerServer({service}.WorkerConfig(dispatcher_address='127.0.0.1:{port}', "
        f"worker_address='127.0.0.1:%port%', port=0)).join()"] * workers
    servers = [subprocess.Popen([sys.executable, "-c", f"import tensorflow as tf; {code}"],
                                stderr=subprocess.DEVNULL) for code in codes]
    return f"grpc://127.0.0.1:{port}", servers


def service_rows(folder: str, runs: int) -> list[tuple[str, str, str, str]]:
    import tensorflow as tf

    import tfrecorder

    options = dict(batch_size=64, image_size=(224, 224), shuffle=True, seed=0)
    address, servers = _service(2)
    jobs = iter(range(10**6))
    try:
        def direct() -> int:
            return sum(int(b["image"].shape[0]) for b in tfrecorder.load_dataset(folder, "TRAIN", **options))

        def served(compression: str | None = "AUTO") -> int:
            ds = tfrecorder.load_dataset(folder, "TRAIN", cardinality=False, **options)
            ds = ds.apply(tf.data.experimental.service.distribute("distributed_epoch", address, compression=compression,
                                                                  job_name=f"epoch-{next(jobs)}"))
            return sum(int(b["image"].shape[0]) for b in ds)

        assert served() == direct()  # and the workers have started
        times = interleaved_best({"direct": direct, "served": served, "uncompressed": lambda: served(None)}, runs)
    finally:
        for server in servers:
            server.kill()
    baseline = f"the same epoch read directly: {times['direct']:.2f} s"
    return [(f"epoch through a tf.data service, 2 local workers (distributed_epoch{words})", f"{times[key]:.2f} s",
             baseline, f"{times['direct'] / times[key]:.2f}x")
            for key, words in (("served", ""), ("uncompressed", ", compression=None"))]


def many_shards_rows(folder: str, runs: int) -> list[tuple[str, str, str, str]]:
    """Opening the dataset of many shards, and its first and second epochs: each the best of ``runs``."""
    import tfrecorder

    opened, first, second = [], [], []
    for _ in range(runs):
        start = time.perf_counter()
        ds = tfrecorder.load_dataset(folder, "TRAIN", batch_size=256)
        opened.append(time.perf_counter() - start)
        for epochs in (first, second):
            start = time.perf_counter()
            sum(int(b["x"].shape[0]) for b in ds)
            epochs.append(time.perf_counter() - start)
    return [("opening 1,000 shards (every one checked)", f"{min(opened):.2f} s", "", "report"),
            ("epoch 2, 20,000 rows in 1,000 shards", f"{min(second):.2f} s", f"epoch 1: {min(first):.2f} s",
             f"{min(first) / min(second):.2f}x")]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--images", type=int, default=1000, help="500x375 JPEGs")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--shards-only", action="store_true", help="only the dataset of 1,000 shards")
    args = parser.parse_args(argv)
    import tfrecorder

    work = work_dir("bench-fleet-")
    rows = 20_000
    table = pd.DataFrame({"split": ["TRAIN"] * rows, "x": range(rows), "note": [f"row {i}" for i in range(rows)]})
    shards = str(fresh(work / "shards"))
    tfrecorder.convert(table, shards, num_shards=1000, progress=False)
    found = many_shards_rows(shards, args.runs)
    if not args.shards_only:
        images = str(fresh(work / "images"))
        tfrecorder.convert(jpeg_table(args.images).assign(split="TRAIN"), images, num_shards=8, progress=False)
        found = service_rows(images, args.runs) + found
    print_table("The reader on a fleet", found)


if __name__ == "__main__":
    main()
