"""Scale: a tabular CSV converted by local, DirectRunner and a Dataflow dry run; what the job and the submitting
process cost as the table grows (10k rows against ``--rows``).

Each case runs in its own process (time and peak RSS of that process). The Dataflow dry run reads its CSV from
and writes to a GCS emulator on 127.0.0.1 (gcp-storage-emulator, from the test extras) and builds the job
without submitting it: its size is the pipeline proto Dataflow would receive
(``len(pipeline.to_runner_api().SerializeToString())``).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from benchmarks.bench_tabular import table
from benchmarks.common import peak_rss_mib, print_table, run_child, work_dir

SMALL = 10_000


def _child(case: str, csv: str, out: str) -> None:
    import apache_beam as beam  # imported before the clock, as TensorFlow is elsewhere: no data in it

    import tfrecorder

    job = {}
    run = beam.Pipeline.run

    def measured(pipeline, *args, **kwargs):  # the job as Dataflow would receive it
        job["bytes"] = len(pipeline.to_runner_api().SerializeToString())
        return run(pipeline, *args, **kwargs)

    beam.Pipeline.run = measured
    if case.startswith("frame"):  # the user's DataFrame, already in memory: read before the clock
        import pandas as pd

        csv = pd.read_csv(csv)
    before = peak_rss_mib()
    start = time.perf_counter()
    if case in ("local", "frame-local"):
        tfrecorder.convert(csv, out, progress=False)
    elif case in ("direct", "frame-direct"):
        tfrecorder.convert(csv, out, runner="DirectRunner")
    else:
        tfrecorder.convert(csv, out, runner="DataflowRunner", project="bench", region="us-central1",
                           dataflow_options={"dry_run": True, "no_auth": True, "sdk_location": "container"})
    import resource

    workers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # the largest shard-writing process
    print(json.dumps({"seconds": time.perf_counter() - start, "peak": peak_rss_mib(), "growth":
                      peak_rss_mib() - before, "job": job.get("bytes"), "workers": workers}))


def run(case: str, csv: Path | str, out: str, env: dict | None = None) -> dict:
    return json.loads(run_child("benchmarks.bench_scale", case, "--csv", str(csv), "--out", out, env=env))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--local-rows", default="100000,10000000",
                        help="more table sizes for the local runner's time per row and memory (comma-separated)")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--csv", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--out", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return _child(args.child, args.csv, args.out)
    from tests.servers import gcs_emulator, use_emulator

    work = work_dir("bench-scale-")
    csvs = {}
    for rows in (SMALL, args.rows):
        csvs[rows] = work / f"table-{rows}.csv"
        table(rows).to_csv(csvs[rows], index=False)
    (work / "parts").mkdir()
    shuffled = table(args.rows).sample(frac=1, random_state=0)  # the same rows, in another order and 3 files
    for i in range(3):
        shuffled.iloc[i * args.rows // 3:(i + 1) * args.rows // 3].to_csv(work / "parts" / f"{i}.csv", index=False)
    del shuffled
    local = run("local", csvs[args.rows], str(work / "local"))
    direct = run("direct", work / "parts" / "*.csv", str(work / "direct"))
    frame_local = run("frame-local", csvs[args.rows], str(work / "frame-local"))
    frame_direct = run("frame-direct", csvs[args.rows], str(work / "frame-direct"))
    shards = sorted(p.name for p in (work / "local").glob("*.tfrecord"))
    same = all((work / "local" / f).read_bytes() == (work / "direct" / f).read_bytes() for f in shards)
    frame_shards = sorted(p.name for p in (work / "frame-local").glob("*.tfrecord"))
    frame_same = all((work / "frame-local" / f).read_bytes() == (work / "frame-direct" / f).read_bytes()
                     for f in frame_shards)
    with gcs_emulator("bench") as address:
        import fsspec

        use_emulator(address)
        for rows, csv in csvs.items():  # the source on gs://, as a Dataflow job reads it
            fsspec.filesystem("gs").put(str(csv), f"gs://bench/in-{rows}/table.csv")
        env = {**os.environ, "STORAGE_EMULATOR_HOST": address}
        small = run("dataflow", f"gs://bench/in-{SMALL}/table.csv", "gs://bench/small", env)
        large = run("dataflow", f"gs://bench/in-{args.rows}/table.csv", "gs://bench/large", env)
    sizes = {args.rows: local}
    for rows in sorted(int(r) for r in args.local_rows.split(",") if r.strip()):
        csv = work / f"local-{rows}.csv"
        for start in range(0, rows, 1_000_000):  # written a million rows at a time: the table is never held
            part = table(min(1_000_000, rows - start), seed=start)
            part.to_csv(csv, index=False, header=start == 0, mode="a" if start else "w")
        sizes[rows] = run("local", csv, str(work / f"local-{rows}"))
        csv.unlink()
    base = sizes[args.rows]["seconds"] / args.rows
    print_table("Local runner by table size (20 columns; peak: the converting process, and its largest shard-"
                "writing process)", [
        (f"local, {rows:,} rows", f"{rows / r['seconds']:,.0f} rows/s, {r['seconds']:.1f} s",
         f"peak {r['peak']:,.0f} MiB + {r['workers']:,.0f} MiB per writer",
         f"{r['seconds'] / rows / base:.2f}x the time per row of {args.rows:,}")
        for rows, r in sorted(sizes.items())])
    n = f"{args.rows:,}"
    print_table(f"Scale: a {n}-row x 20-column CSV (each case in its own process)", [
        ("local", f"{local['seconds']:.1f} s, peak {local['peak']:,.0f} MiB", "", "report"),
        ("DirectRunner, the rows shuffled into 3 CSVs (a glob)", f"{direct['seconds']:.1f} s, peak "
         f"{direct['peak']:,.0f} MiB", f"local, one CSV: {local['seconds']:.1f} s",
         f"{direct['seconds'] / local['seconds']:.2f}x its time"),
        ("DirectRunner shards", "byte-identical" if same else "DIFFERENT", f"local's {len(shards)} shards", "check"),
        ("DirectRunner, the DataFrame (staged as Parquet, read by the pipeline)",
         f"{frame_direct['seconds']:.1f} s, +{frame_direct['growth']:,.0f} MiB",
         f"local, the DataFrame: {frame_local['seconds']:.1f} s, +{frame_local['growth']:,.0f} MiB",
         f"{frame_direct['seconds'] / frame_local['seconds']:.2f}x its time; shards "
         f"{'byte-identical' if frame_same else 'DIFFERENT'}"),
        (f"Dataflow dry run: job size, {n} rows", f"{large['job']:,} bytes", f"{SMALL:,} rows: {small['job']:,} bytes",
         f"{large['job'] / small['job']:.2f}x"),
        (f"Dataflow dry run: submitting process, {n} rows", f"{large['seconds']:.1f} s, peak {large['peak']:,.0f} MiB",
         f"{SMALL:,} rows: {small['seconds']:.1f} s, peak {small['peak']:,.0f} MiB",
         f"+{large['peak'] - small['peak']:,.0f} MiB"),
    ])


if __name__ == "__main__":
    main()
