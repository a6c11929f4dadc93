"""Tables larger than memory: sources converted in many parts, spilled to files (write/table/summary_pass.py), give
the files a small table held in memory gives, and the same errors, without ever holding the table."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import tfrecorder
from tests.conftest import write_image
from tfrecorder.errors import SchemaError, TFRecorderError
from tfrecorder.write.run import spill_folder
from tfrecorder.write.table import summary_pass, validate


@pytest.fixture
def streamed(monkeypatch):
    """Convert every source as a table larger than memory: in parts of 1,000 rows spilled to files (none held in
    memory), in buckets of ~30 KB of source."""

    def on() -> None:
        monkeypatch.setattr(summary_pass, "MEMORY_SPILL_BYTES", 0)
        monkeypatch.setattr(summary_pass, "PART_ROWS", 1000)
        monkeypatch.setattr(summary_pass, "BUCKET_SOURCE_BYTES", 30_000)

    return on


def files_of(folder: Path) -> dict[str, str]:
    """Every file a conversion wrote, by name: its SHA-256 (dataset.json's without the runner that wrote it; not
    .conversion.json, the record of how it was made: runner, input, parts)."""
    found = {}
    for p in folder.iterdir():
        data = p.read_bytes() if p.is_file() and p.name != ".conversion.json" else None
        if p.name == "dataset.json":
            manifest = json.loads(data)
            assert manifest.pop("runner") in ("local", "DirectRunner")
            data = json.dumps(manifest).encode()
        if data is not None:
            found[p.name] = hashlib.sha256(data).hexdigest()
    return found


RUNNERS = pytest.mark.parametrize("runner", ["local", "DirectRunner"])  # Beam reads the files in the pipeline


def table(rows: int = 7000) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame({
        "split": rng.choice(["TRAIN", "TEST", "VALIDATION", "", "discard"], rows, p=[0.6, 0.15, 0.15, 0.05, 0.05]),
        "label": [f"class {i % 10}" for i in range(rows)],
        "n": rng.integers(-5, 5, rows),
        "x": rng.normal(size=rows),  # computed values: float32
        "t": 1_700_000_000 + np.arange(rows) * 0.25,  # times float32 would merge: float64, decided over every part
        "y": np.where(np.arange(rows) % 7 == 0, np.nan, 0.5),
        "flag": np.arange(rows) % 3 == 0,
        "note": [f"row {i}" if i % 9 else "ça, va" for i in range(rows)],
    })


@pytest.mark.parametrize("writers", ["in process", "forked"])
def test_streamed_sources_write_the_bytes_the_in_memory_path_writes(tmp_path, streamed, writers, request):
    if writers == "forked":  # as for tables of 50,000 rows or more
        request.getfixturevalue("forked")
    df = table()
    df.to_csv(tmp_path / "one.csv", index=False)
    (tmp_path / "parts").mkdir()
    shuffled = df.sample(frac=1, random_state=2)
    for i in range(7):
        shuffled.iloc[i * len(df) // 7:(i + 1) * len(df) // 7].to_csv(tmp_path / "parts" / f"p{i}.csv", index=False)
    df.to_parquet(tmp_path / "table.parquet")
    tfrecorder.convert(str(tmp_path / "one.csv"), str(tmp_path / "memory"), progress=False, num_shards=3)
    tfrecorder.convert(str(tmp_path / "table.parquet"), str(tmp_path / "memory-parquet"), progress=False,
                       num_shards=3)
    expected = files_of(tmp_path / "memory")
    streamed()
    for name, source in {"one": "one.csv", "parts": "parts/p*.csv", "parquet": "table.parquet"}.items():
        tfrecorder.convert(str(tmp_path / source), str(tmp_path / f"out-{name}"), progress=False, num_shards=3)
    assert len([n for n in expected if n.endswith(".tfrecord")]) == 9
    assert files_of(tmp_path / "out-one") == expected  # dataset.json, errors.csv and TFDS files included
    # other row numbers, the same records
    assert {n: h for n, h in files_of(tmp_path / "out-parts").items() if ".tf" in n} == \
           {n: h for n, h in expected.items() if ".tf" in n}
    # (Parquet keeps its types: rows without a split are assigned by the text of other values, typed apart)
    assert files_of(tmp_path / "out-parquet") == files_of(tmp_path / "memory-parquet")


@RUNNERS
def test_streamed_image_table_counts_every_row_and_finds_leaks(tmp_path, streamed, runner):
    rows = []
    for i in range(40):
        path = write_image(tmp_path / "img" / f"{i:02d}.jpg", "JPEG", "RGB", (12, 16 + i % 3), seed=i)
        rows.append({"split": "TRAIN" if i < 30 else "TEST", "image_uri": str(path), "label": "ab"[i % 2]})
    rows.append({"split": "TEST", "image_uri": rows[3]["image_uri"], "label": "b"})  # a leak
    rows.append({"split": "TRAIN", "image_uri": str(tmp_path / "img" / "missing.jpg"), "label": "a"})
    pd.DataFrame(rows).to_csv(tmp_path / "images.csv", index=False)
    tfrecorder.convert(str(tmp_path / "images.csv"), str(tmp_path / "memory"), progress=False)
    streamed()
    result = tfrecorder.convert(str(tmp_path / "images.csv"), str(tmp_path / "streamed"), progress=False,
                                runner=runner)
    assert files_of(tmp_path / "streamed") == files_of(tmp_path / "memory")
    assert result.rows.written == 41 and result.errors == 1 and result.warnings  # the leak is reported
    manifest = (tmp_path / "streamed" / "dataset.json").read_text()
    assert rows[3]["image_uri"] in manifest
    # the leak's rows in two files (read by two workers; Beam groups the URIs by range of their hash)
    (tmp_path / "parts").mkdir()
    pd.DataFrame(rows[:20]).to_csv(tmp_path / "parts" / "a.csv", index=False)
    pd.DataFrame(rows[20:]).to_csv(tmp_path / "parts" / "b.csv", index=False)
    tfrecorder.convert(str(tmp_path / "parts" / "*.csv"), str(tmp_path / "parts-out"), progress=False, runner=runner)
    assert files_of(tmp_path / "parts-out") == files_of(tmp_path / "memory")


@RUNNERS
def test_streamed_headerless_multi_label_csv(tmp_path, streamed, runner):
    lines = [f"{'TRAIN' if i % 4 else 'TEST'},img/{i}.jpg,{'cat' if i % 2 else 'dog'}" + (",fish" if i > 2500 else "")
             for i in range(3000)]
    (tmp_path / "automl.csv").write_text("\n".join(lines) + "\n")
    options = dict(progress=False, validate_images="header")
    nothing = "no row was written: the 3000 rows"  # no such images: every row in errors.csv, in both
    with pytest.raises(TFRecorderError, match=nothing):
        tfrecorder.convert(str(tmp_path / "automl.csv"), str(tmp_path / "memory"), **options)
    streamed()
    with pytest.raises(TFRecorderError, match=nothing):
        tfrecorder.convert(str(tmp_path / "automl.csv"), str(tmp_path / "streamed"), runner=runner, **options)
    assert files_of(tmp_path / "streamed") == files_of(tmp_path / "memory")


@RUNNERS
def test_streamed_table_gives_the_same_errors_and_writes_nothing(tmp_path, streamed, runner):
    df = table(5000).astype({"n": object})
    df.loc[4990, "split"] = "TRIAN"  # in the last part
    df.loc[[1, 4995], "n"] = ["many", "a few"]
    df.to_csv(tmp_path / "bad.csv", index=False)
    types = tfrecorder.types
    schema = {"split": types.SplitKey, "label": types.StringLabel, "n": types.IntegerInput, "x": types.FloatInput,
              "y": types.FloatInput, "flag": types.IntegerInput, "note": types.StringInput}
    with pytest.raises(SchemaError) as in_memory:
        tfrecorder.convert(str(tmp_path / "bad.csv"), str(tmp_path / "memory"), progress=False, schema=schema)
    streamed()
    with pytest.raises(SchemaError) as in_parts:
        tfrecorder.convert(str(tmp_path / "bad.csv"), str(tmp_path / "streamed"), progress=False, schema=schema,
                           runner=runner)
    assert str(in_parts.value) == str(in_memory.value)
    assert "'TRIAN'" in str(in_parts.value) and "row 4990" in str(in_parts.value)
    # a column the schema types as integers is parsed cell by cell: only the cells that are no number are named
    assert "column 'n': 2 values do not fit IntegerInput (int64), e.g. 'many' (rows 1, 4995)" in str(in_parts.value)
    assert not (tmp_path / "streamed").exists() or not os.listdir(tmp_path / "streamed")


@RUNNERS
def test_unseen_labels_and_missing_labels_name_rows_across_parts(tmp_path, streamed, runner):
    df = table(4000)
    df.loc[3999, ["split", "label"]] = ["TEST", "class never trained"]
    df.to_csv(tmp_path / "unseen.csv", index=False)
    with pytest.raises(SchemaError) as in_memory:
        tfrecorder.convert(str(tmp_path / "unseen.csv"), str(tmp_path / "memory"), progress=False)
    streamed()
    with pytest.raises(SchemaError) as in_parts:
        tfrecorder.convert(str(tmp_path / "unseen.csv"), str(tmp_path / "streamed"), progress=False, runner=runner)
    assert str(in_parts.value) == str(in_memory.value)
    assert "'class never trained'" in str(in_parts.value) and "row 3999" in str(in_parts.value)


def test_streamed_conversion_never_holds_the_whole_table(tmp_path, streamed, monkeypatch):
    table(6000).to_csv(tmp_path / "big.csv", index=False)
    streamed()
    seen: list[int] = []
    real = validate.validate_part

    def spy(df, *args, **kwargs):
        seen.append(len(df))
        return real(df, *args, **kwargs)

    monkeypatch.setattr(summary_pass, "validate_part", spy)
    result = tfrecorder.convert(str(tmp_path / "big.csv"), str(tmp_path / "out"), progress=False)
    assert sum(seen) == 6000 and max(seen) == 1000  # parts of PART_ROWS rows, each validated once
    assert result.rows.rows_in == 6000


@pytest.mark.parametrize("writers", ["in process", "forked"])
def test_streamed_run_stopped_by_a_bad_image_resumes_with_the_shards_it_wrote(tmp_path, streamed, writers, request):
    if writers == "forked":  # as for tables of 1,000 images or more: the shards before the bad one still finish
        request.getfixturevalue("forked")
    rows = []
    for i in range(60):
        path = write_image(tmp_path / "img" / f"{i:02d}.jpg", "JPEG", "RGB", (12, 16), seed=i)
        rows.append({"split": "TRAIN", "image_uri": str(path), "label": "ab"[i % 2], "i": i})
    pd.DataFrame(rows).to_csv(tmp_path / "images.csv", index=False)
    tfrecorder.convert(str(tmp_path / "images.csv"), str(tmp_path / "memory"), progress=False, num_shards=4)
    streamed()
    last = Path(tfrecorder.read_tfr(str(tmp_path / "memory"))["image_uri"].iloc[-1])  # in the last shard
    good = last.read_bytes()
    last.write_bytes(b"\xff\xd8 not a jpeg")
    out = tmp_path / "streamed"
    with pytest.raises(tfrecorder.errors.RowError, match=last.name):
        tfrecorder.convert(str(tmp_path / "images.csv"), str(out), progress=False, num_shards=4, on_error="raise")
    last.write_bytes(good)
    result = tfrecorder.convert(str(tmp_path / "images.csv"), str(out), progress=False, num_shards=4,
                                on_error="raise")
    assert result.resumed_shards == 3
    assert files_of(out) == files_of(tmp_path / "memory")


@pytest.mark.parametrize("path", ["in memory", "streamed"])
def test_a_typed_csv_column_names_only_the_cells_that_do_not_parse(tmp_path, streamed, path):
    from tfrecorder import types

    if path == "streamed":
        streamed()  # parts of 1,000 rows: the bad cells are in every part
    cells = [str(i) for i in range(3000)]
    for row in range(10, 3000, 500):
        cells[row] = "abc"
    cells[2999] = "n/a"
    pd.DataFrame({"split": ["TRAIN"] * 3000, "x": cells, "code": ["007"] * 3000}).to_csv(tmp_path / "t.csv",
                                                                                          index=False)
    schema = {"split": types.SplitKey, "x": types.IntegerInput, "code": types.IntegerInput}
    message = r"^column 'x': 7 values do not fit IntegerInput \(int64\), e\.g\. 'abc' \(rows 10, 510, 1010, 1510, "
    with pytest.raises(tfrecorder.SchemaError, match=message + r"2010, \.\.\. \(7 in all\)\)$"):
        tfrecorder.convert(str(tmp_path / "t.csv"), str(tmp_path / "out"), schema=schema, progress=False)
    good = pd.read_csv(tmp_path / "t.csv", dtype=str).iloc[:10]
    good.to_csv(tmp_path / "good.csv", index=False)
    tfrecorder.convert(str(tmp_path / "good.csv"), str(tmp_path / "good"), schema=schema, progress=False)
    back = tfrecorder.read_tfr(str(tmp_path / "good")).sort_values("x")
    assert back["x"].tolist() == list(range(10)) and set(back["code"]) == {7}  # parsed into the type given


@RUNNERS
def test_parquet_kinds_come_from_the_files_schema_on_every_runner(tmp_path, streamed, runner):
    import pyarrow as pa
    import pyarrow.parquet as pq

    streamed()  # parts of 1,000 rows: the first holds only empty lists and nulls
    pq.write_table(pa.table({
        "split": pa.array(["TRAIN", "TEST", "TRAIN"] * 1000),
        "scores": pa.array([[]] * 1000 + [[1.5, 2.5]] * 2000, pa.list_(pa.float64())),
        "blob": pa.array([None] * 1000 + [b"\x00\xff"] * 2000, pa.binary()),
    }), tmp_path / "t.parquet")
    tfrecorder.convert(str(tmp_path / "t.parquet"), str(tmp_path / "out"), runner=runner, progress=False)
    features = {f.name: (f.dtype, f.shape, f.source) for f in tfrecorder.read_manifest(str(tmp_path / "out")).features}
    assert features["scores"][:2] == ("float32", [None]) and features["blob"] == ("string", [], "bytes")
    back = tfrecorder.read_tfr(str(tmp_path / "out"))
    assert back["blob"].dropna().tolist() == [b"\x00\xff"] * 2000


@RUNNERS
def test_a_csv_of_long_records_converts_a_part_at_a_time_on_every_runner(tmp_path, streamed, runner):
    """Fewer than 3 records in the first 64 KiB: the part-wise path reads it (it used to fall back to reading the
    whole file locally, and to refuse it under Beam)."""
    df = pd.DataFrame({"split": ["TRAIN", "TEST"] * 5, "label": ["a"] * 10,
                       "text": [f"{i} " + "long text " * 10000 for i in range(10)]})  # ~100 KB a record
    df.to_csv(tmp_path / "long.csv", index=False)
    tfrecorder.convert(str(tmp_path / "long.csv"), str(tmp_path / "memory"), progress=False)
    streamed()
    from tfrecorder.write import sources

    assert isinstance(sources.table_source(str(tmp_path / "long.csv"), 1000), sources.TableFiles)  # part-wise
    tfrecorder.convert(str(tmp_path / "long.csv"), str(tmp_path / "parts"), runner=runner, progress=False)
    assert files_of(tmp_path / "parts") == files_of(tmp_path / "memory")


@pytest.mark.parametrize("kind", ["columns", "images with a broken one", "detection", "segmentation"])
def test_shards_written_in_segments_by_several_writers_hold_the_bytes_one_writer_writes(tmp_path, kind, forked,
                                                                                        monkeypatch):
    """A shard larger than a core's share of the rows is written in segments by forked writers, then joined: the
    files - records, .tfindex offsets, errors.csv, dataset.json's checksums and counts - are those of one writer
    per shard, for a table of columns, of images (a broken one among them), of boxes (an image's rows never
    split between segments) and of masks; and the spill folder with the segments is gone."""
    import tempfile

    from tfrecorder import sample_data
    from tfrecorder.write.runners import segments

    options = {}
    if kind == "columns":
        source = table(600)
    elif kind == "detection":
        source = sample_data.make_detection_scenes(str(tmp_path / "scenes"), n=30)
    elif kind == "segmentation":
        source = sample_data.make_segmentation_scenes(str(tmp_path / "scenes"), n=30)
        from tfrecorder.write.record import masks

        monkeypatch.setattr(masks, "MASK_PIXELS_SAMPLE", 5)  # pixels counted in 1 mask of 5: segments start
        # between counted ranks, and count the same masks as one writer does
    else:
        source = pd.DataFrame({"image_uri": [str(write_image(tmp_path / "img" / f"{i:02d}.jpg", seed=i))
                                             for i in range(40)], "label": ["ab"[i % 2] for i in range(40)]})
        (tmp_path / "img" / "13.jpg").write_bytes(b"\xff\xd8 not a jpeg")
        options = {"validate_images": "full"}
    tfrecorder.convert(source, str(tmp_path / "one"), progress=False, num_workers=1, **options)  # whole shards
    monkeypatch.setattr(segments, "SEGMENT_MIN_ROWS", 4)
    joined = []
    real_join = segments._join
    monkeypatch.setattr(segments, "_join", lambda *args: joined.append(len(args[0])) or real_join(*args))
    tfrecorder.convert(source, str(tmp_path / "segments"), progress=False, **options)
    assert joined and min(joined) >= 2  # TRAIN's shard, at least, in segments
    assert files_of(tmp_path / "segments") == files_of(tmp_path / "one")
    assert tfrecorder.verify(str(tmp_path / "segments")).ok
    stem = hashlib.sha256(str(tmp_path / "segments").encode()).hexdigest()[:12]  # its spill folder's name
    assert not list(Path(tempfile.gettempdir()).glob(f"{spill_folder.SPILL_PREFIX}{stem}-*"))
    if kind == "columns":  # a shard larger than SEGMENT_MAX_BYTES (one a user asked for) is written whole
        monkeypatch.setattr(segments, "SEGMENT_MAX_BYTES", 1000)
        joined.clear()
        tfrecorder.convert(source, str(tmp_path / "whole"), progress=False)
        assert not joined and files_of(tmp_path / "whole") == files_of(tmp_path / "one")
    if kind == "images with a broken one":  # the same first bad row stops both
        with pytest.raises(tfrecorder.errors.RowError) as whole:
            tfrecorder.convert(source, str(tmp_path / "one-raise"), progress=False, num_workers=1,
                               on_error="raise", **options)
        with pytest.raises(tfrecorder.errors.RowError) as segmented:
            tfrecorder.convert(source, str(tmp_path / "segments-raise"), progress=False, on_error="raise", **options)
        assert str(segmented.value) == str(whole.value)


def test_segments_are_joined_by_reads_where_the_kernel_cannot_copy_them(tmp_path, forked, monkeypatch):
    """A file system without ``copy_file_range`` (EXDEV between two, ENOSYS on an old kernel), even one that
    fails after copying a part: the segments are joined by reads and writes into the same bytes."""
    import errno
    import os

    from tfrecorder.write.runners import segments

    source = table(600)
    tfrecorder.convert(source, str(tmp_path / "one"), progress=False, num_workers=1)
    monkeypatch.setattr(segments, "SEGMENT_MIN_ROWS", 4)
    calls = []

    def copy_some_then_fail(src: int, dst: int, count: int) -> int:
        calls.append(count)
        if len(calls) % 2:  # a first call copies a part, the next one fails
            return os.write(dst, os.read(src, min(count, 1000)))
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(os, "copy_file_range", copy_some_then_fail)
    tfrecorder.convert(source, str(tmp_path / "segments"), progress=False)
    assert calls  # the kernel's copy was tried
    assert files_of(tmp_path / "segments") == files_of(tmp_path / "one")
    assert tfrecorder.verify(str(tmp_path / "segments")).ok


def test_a_segment_changed_before_its_join_is_one_line_naming_it(tmp_path, forked, monkeypatch):
    """A segment whose file is not the size its writer counted (changed in the temporary folder meanwhile) stops
    the run with one line naming the segment, not a shard built from it."""
    from dataclasses import replace

    from tfrecorder.write.runners import segments

    monkeypatch.setattr(segments, "SEGMENT_MIN_ROWS", 4)
    real_join = segments._join
    monkeypatch.setattr(segments, "_join", lambda pending, folder: real_join(
        [(unit, replace(result, bytes=result.bytes + 1)) for unit, result in pending], folder))
    with pytest.raises(tfrecorder.TFRecorderError, match=r"segments/.*bytes where its writer wrote") as e:
        tfrecorder.convert(table(600), str(tmp_path / "out"), progress=False)
    assert "\n" not in str(e.value) and "Errno" not in str(e.value)


def test_parts_read_ahead_belong_to_the_run_and_their_errors_reach_it():
    """The summary pass reads the next part in a thread: that read is the run's (its object-store deadline, and
    ``stop_requests`` ends it), a part that cannot be read raises its own error, and no thread is left."""
    import threading

    from tfrecorder.dataset import store_requests
    from tfrecorder.write.table.summary_pass import read_ahead

    def parts():
        yield store_requests.run_requests()
        yield store_requests.run_requests()
        raise tfrecorder.TFRecorderError("Parquet file 'b.parquet' cannot be read: bad page")

    before = threading.active_count()
    with store_requests.requests_of_run(storage_timeout=7) as run:
        seen = []
        with pytest.raises(tfrecorder.TFRecorderError, match="'b.parquet' cannot be read"):
            seen.extend(read_ahead(parts()))
    assert seen == [run, run]
    assert threading.active_count() == before
