"""Images inside the table: a Parquet of embedded JPEGs laid out as Hugging Face writes an ``Image`` column
(``struct<bytes, path>``, row groups of 100 rows) against the same JPEGs given as files (a Parquet of
``image_uri``), default settings, in the same process, turn about; and the peak RSS of converting a large
Parquet of embedded images, in a process of its own (read, validated and spilled a part of PART_BYTES at a time).
``python -m benchmarks.bench_embedded --images 5000 --mib 2000``.
"""

from __future__ import annotations

import argparse

from benchmarks.common import interleaved_medians, jpeg_table, peak_rss_mib, print_table, run_child, work_dir

HF_ROW_GROUP = 100  # rows a row group: what datasets' to_parquet writes for image datasets


def embedded_parquet(table, path: str, copies: int = 1) -> int:
    """The JPEGs of ``table`` (``copies`` times over) as a Parquet of HF image structs beside split and label;
    returns its size in bytes. Written a row group at a time, so it is made in the memory of one."""
    import os

    import pyarrow as pa
    import pyarrow.parquet as pq

    image = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    schema = pa.schema([("split", pa.string()), ("image", image), ("label", pa.string())])
    rows = list(table[["split", "image_uri", "label"]].itertuples(index=False))
    with pq.ParquetWriter(path, schema) as writer:
        for copy in range(copies):
            for start in range(0, len(rows), HF_ROW_GROUP):
                group = rows[start:start + HF_ROW_GROUP]
                structs = []
                for _, uri, _ in group:
                    with open(uri, "rb") as f:
                        structs.append({"bytes": f.read(), "path": f"{copy}-{os.path.basename(uri)}"})
                writer.write_table(pa.table({"split": [r[0] for r in group], "image": pa.array(structs, image),
                                             "label": [r[2] for r in group]}, schema=schema))
    return os.path.getsize(path)


def speed(images: int) -> None:
    import tfrecorder

    table = jpeg_table(images)
    folder = work_dir("bench-embedded-")
    files = str(folder / "files.parquet")
    table[["split", "image_uri", "label"]].to_parquet(files, index=False)
    held = str(folder / "embedded.parquet")
    size = embedded_parquet(table, held) / 2**20
    cases = {
        "files": lambda: tfrecorder.convert(files, str(folder / "out-files"), overwrite=True, progress=False),
        "embedded": lambda: tfrecorder.convert(held, str(folder / "out-embedded"), overwrite=True, progress=False),
    }
    cases["keyed"] = lambda: keyed(held)
    cases["files"]()  # warm: imports, page cache
    seconds = interleaved_medians(cases, runs=7)
    ratio = seconds["embedded"] / seconds["files"]
    bound = (seconds["files"] + seconds["keyed"]) / seconds["files"]
    print_table(f"{images:,} JPEGs (~41 KB) inside a Parquet (HF struct<bytes, path>, {size:,.0f} MiB) vs as files", [
        ("convert, defaults (median of 7, turn about)", f"{images / seconds['embedded']:,.0f} images/s embedded",
         f"{images / seconds['files']:,.0f} images/s files (image_uri)", f"{ratio:.2f}x the time"),
        ("the images only read and keyed by their bytes, in one thread", f"{seconds['keyed']:.2f} s",
         f"files: {seconds['files']:.2f} s", f"{bound:.2f}x the time if nothing overlapped it")])


def keyed(path: str) -> int:
    """The image column of the Parquet at ``path`` read a part at a time (its images as memoryviews of the part,
    as a conversion reads them) and each image's row-key hash made, as the summary pass must before any shard is
    written (a row's key is its image's bytes): what a conversion of images held in a table costs beyond one of
    files, before it validates, spills or writes anything."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tfrecorder.write.sources.embedded import image_structs
    from tfrecorder.write.table.table import held_image_hashes

    rows = 0
    with pa.OSFile(path) as f:
        for batch in pq.ParquetFile(f, pre_buffer=False).iter_batches(batch_size=800, columns=["image"]):
            structs = image_structs(batch.column(0))
            rows += len(held_image_hashes([s["bytes"] for s in structs]))
    return rows


def _child(path: str, out: str) -> None:
    import tfrecorder

    before = peak_rss_mib()
    result = tfrecorder.convert(path, out, progress=False)
    print(f"{peak_rss_mib()} {before} {result.rows.written}")


def memory(mib: float) -> None:
    table = jpeg_table(10000)
    folder = work_dir("bench-embedded-memory-")
    path = str(folder / "embedded.parquet")
    one = embedded_parquet(table.head(100), str(folder / "one.parquet")) / 100  # bytes a row
    copies = max(1, round(mib * 2**20 / one / len(table)))
    size = embedded_parquet(table, path, copies) / 2**20
    peak, before, rows = map(float, run_child("benchmarks.bench_embedded", path, str(folder / "out")).split())
    print_table("Peak RSS converting a Parquet of embedded JPEGs (its own process)", [
        (f"{size:,.0f} MiB Parquet, {rows:,.0f} images", f"peak RSS {peak:,.0f} MiB",
         f"after the imports {before:,.0f} MiB", f"{peak / size:.2f}x the file")],
        header=("case", "peak", "baseline", "peak / file size"))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--images", type=int, default=5000, help="JPEGs in the speed case")
    parser.add_argument("--mib", type=float, default=2000.0, help="the memory case's Parquet size")
    args, rest = parser.parse_known_args(argv)
    if args.child:
        return _child(args.child, rest[0])
    speed(args.images)
    memory(args.mib)


if __name__ == "__main__":
    main()
