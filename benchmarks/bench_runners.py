"""Runners: the same 2,000-JPEG table converted by local, DirectRunner in_memory and multi_processing, and the
DaskRunner on a ``distributed.LocalCluster`` of 2 worker processes (when ``apache-beam[dask]`` is installed), and
what each Beam runner costs before the first image (``--images 8000`` shows it amortised)."""

from __future__ import annotations

import argparse
import contextlib
import logging

from benchmarks.common import fresh, jpeg_table, median_seconds, print_table, work_dir


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--images", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    logging.getLogger("apache_beam").setLevel(logging.ERROR)
    import tfrecorder

    table = jpeg_table(args.images)
    work = work_dir("bench-runners-")
    cases = {
        "local": dict(runner="local", progress=False),
        "DirectRunner in_memory": dict(runner="DirectRunner", pipeline_options={"direct_running_mode": "in_memory"}),
        "DirectRunner multi_processing": dict(
            runner="DirectRunner",
            pipeline_options={"direct_running_mode": "multi_processing", "direct_num_workers": 2}),
    }
    with contextlib.ExitStack() as stack:
        try:
            from distributed import LocalCluster
        except ImportError:
            pass
        else:
            logging.getLogger("distributed").setLevel(logging.ERROR)
            cluster = stack.enter_context(LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None))
            cases["DaskRunner, 2 workers"] = dict(
                runner="DaskRunner", pipeline_options={"dask_client_address": cluster.scheduler_address})
        _measure(tfrecorder, table, work, cases, args)


def _measure(tfrecorder, table, work, cases, args) -> None:
    tfrecorder.convert(table.head(20), str(work / "warm-up"), progress=False)  # imports TF once, untimed
    seconds = {}
    for name, kwargs in cases.items():
        out = work / name.replace(" ", "_")
        seconds[name] = median_seconds(
            lambda out=out, kwargs=kwargs: tfrecorder.convert(table, str(out), num_shards=4, **kwargs),
            runs=args.runs, setup=lambda out=out: fresh(out).rmdir())
    for name in cases:
        files = sorted(p.name for p in (work / "local").glob("*.tfrecord"))
        same = all((work / "local" / f).read_bytes() == (work / name.replace(" ", "_") / f).read_bytes()
                   for f in files)
        assert same, f"{name} wrote different shards than local"
    base = seconds["local"]
    # What a Beam run costs before any image: building the pipeline, starting workers (which import Beam).
    small = table.head(20)
    startup = {name: median_seconds(
        lambda name=name: tfrecorder.convert(small, str(work / "startup"), num_shards=1, **cases[name]),
        runs=args.runs, setup=lambda: fresh(work / "startup").rmdir()) for name in cases}
    rows = [(name, f"{s:.2f} s", f"{base:.2f} s (local)", f"{base / s:.2f}x") for name, s in seconds.items()]
    rows += [(f"{name}, 20 images (start-up cost)", f"{s:.2f} s", f"{startup['local']:.2f} s (local)", "report")
             for name, s in startup.items() if name != "local"]
    print_table(f"Runners, {args.images} JPEGs, validate_images='full', median of {args.runs} (seconds)", rows)


if __name__ == "__main__":
    main()
