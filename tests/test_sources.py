"""Sources: CSV with and without header, relative paths, image folders in both layouts."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest

import tfrecorder
from tests.conftest import write_image
from tfrecorder.errors import SchemaError, TFRecorderError


@pytest.fixture
def image_tree(tmp_path):
    root = tmp_path / "data"
    for split, label, fmt in [("TRAIN", "cat", "PNG"), ("TRAIN", "dog", "JPEG"), ("TRAIN", "cat", "JPEG"),
                              ("VALIDATION", "dog", "PNG"), ("TEST", "cat", "JPEG")]:
        n = len(list(root.rglob("*"))) if root.exists() else 0
        write_image(root / "images" / split / label / f"{n}.{fmt.lower().replace('jpeg', 'jpg')}", fmt, seed=n)
    return root


def written(result):
    return {k: v.written for k, v in result.splits.items() if v.written}


def test_headerless_automl_csv_with_relative_paths(image_tree, tmp_path):
    lines = [f"{p.parts[-3]},{p.relative_to(image_tree).as_posix()},{p.parts[-2]}"
             for p in sorted((image_tree / "images").rglob("*.*"))]
    (image_tree / "data.csv").write_text("\n".join(lines) + "\n")
    result = tfrecorder.convert(str(image_tree / "data.csv"), str(tmp_path / "out"), progress=False)
    assert written(result) == {"TRAIN": 3, "VALIDATION": 1, "TEST": 1}
    assert tfrecorder.label_names(str(tmp_path / "out")) == ["cat", "dog"]
    test = tfrecorder.load_dataset(str(tmp_path / "out"), split="TEST")
    uris = [x["image_uri"].decode() for x in test.as_numpy_iterator()]
    assert uris == [lines[0].split(",")[1]]  # stored as written in the CSV


def test_csv_with_header_bom_crlf_and_quoted_commas(image_tree, tmp_path):
    paths = sorted((image_tree / "images").rglob("*.*"))
    body = "".join(f'{p.parts[-3]},"{p}",{p.parts[-2]},"note, with comma {i}"\r\n' for i, p in enumerate(paths))
    (tmp_path / "t.csv").write_bytes(("\ufeffsplit,image_uri,label,note\r\n" + body).encode("utf-8"))
    result = tfrecorder.convert(str(tmp_path / "t.csv"), str(tmp_path / "out"), progress=False)
    assert sum(written(result).values()) == 5
    test = tfrecorder.load_dataset(str(tmp_path / "out"), split="TEST")
    notes = [x["note"].decode() for x in test.as_numpy_iterator()]
    assert notes == ["note, with comma 0"]


def test_multi_label_headerless_csv(image_tree, tmp_path):
    paths = sorted((image_tree / "images").rglob("*.*"))
    lines = [f"{p.parts[-3]},{p},cat,dog" if i % 2 else f"{p.parts[-3]},{p},dog," for i, p in enumerate(paths)]
    (tmp_path / "m.csv").write_text("\n".join(lines))
    tfrecorder.convert(str(tmp_path / "m.csv"), str(tmp_path / "out"), progress=False)
    manifest = tfrecorder.read_manifest(str(tmp_path / "out"))
    assert manifest.label["multi_label"] and manifest.vocabulary == ["cat", "dog"]
    train = sorted(x["label"].tolist() for x in tfrecorder.load_dataset(str(tmp_path / "out"), split="TRAIN")
                   .as_numpy_iterator())
    assert train == [[0, 1], [0, 1], [1]]


def test_image_folder_with_split_folders(image_tree, tmp_path):
    result = tfrecorder.convert(str(image_tree / "images"), str(tmp_path / "out"), progress=False)
    assert written(result) == {"TRAIN": 3, "VALIDATION": 1, "TEST": 1}


def test_image_folder_without_split_folders_is_hashed(tmp_path):
    for i in range(12):
        write_image(tmp_path / "flat" / ("a", "b")[i % 2] / f"{i}.jpg", seed=i)
    result = tfrecorder.convert(str(tmp_path / "flat"), str(tmp_path / "out"), progress=False)
    assert sum(written(result).values()) == 12
    assert "TRAIN" in result.splits


def test_create_image_csv_round_trips(image_tree, tmp_path):
    df = tfrecorder.create_image_csv(str(image_tree / "images"), str(tmp_path / "t.csv"))
    again = pd.read_csv(tmp_path / "t.csv")
    assert again.columns.tolist() == ["split", "image_uri", "label"] and len(again) == len(df) == 5


def test_missing_source_and_empty_folder(tmp_path):
    with pytest.raises(TFRecorderError, match=r"source '.*nope.csv' does not exist"):
        tfrecorder.convert(str(tmp_path / "nope.csv"), str(tmp_path / "out"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(TFRecorderError, match=r"has no images laid out as"):
        tfrecorder.convert(str(tmp_path / "empty"), str(tmp_path / "out"))
    with pytest.raises(TFRecorderError, match=r"source=int: give a pandas DataFrame"):
        tfrecorder.convert(3, str(tmp_path / "out"))


def test_file_urls_and_paths_with_quotes_spaces_and_non_ascii(tmp_path):
    odd = write_image(tmp_path / "it's \"odd\", ça va.png", "PNG", seed=4)
    plain = write_image(tmp_path / "plain.jpg", seed=5)
    df = pd.DataFrame({"split": ["TRAIN", "TRAIN"], "image_uri": [str(odd), f"file://{plain}"], "label": [0, 1]})
    df.to_csv(tmp_path / "odd.csv", index=False)
    result = tfrecorder.convert(str(tmp_path / "odd.csv"), str(tmp_path / "out"), progress=False)
    assert result.splits["TRAIN"].written == 2 and result.errors == 0
    names = [x["image_name"].decode() for x in tfrecorder.load_dataset(str(tmp_path / "out"), split="TRAIN")
             .as_numpy_iterator()]
    assert sorted(names) == sorted([odd.name, "plain.jpg"])


def test_csv_with_newlines_in_quoted_values_extra_columns_and_blank_lines(image_tree, tmp_path):
    paths = sorted((image_tree / "images").rglob("*.*"))
    rows = [f'{p.parts[-3]},{p},{p.parts[-2]},"line one\nline two, {i}",{i},{i / 4},' for i, p in enumerate(paths)]
    (tmp_path / "t.csv").write_text("split,image_uri,label,note,n,x,empty\n" + "\n".join(rows) + "\n\n\n")
    result = tfrecorder.convert(str(tmp_path / "t.csv"), str(tmp_path / "out"), progress=False)
    assert result.rows.rows_in == 5 and result.rows.written == 5
    back = tfrecorder.read_tfr(str(tmp_path / "out"), split="TRAIN").sort_values("n")
    assert back["note"].tolist() == [f"line one\nline two, {i}" for i in (1, 2, 3)]  # rows 1-3 are TRAIN
    assert back["n"].tolist() == [1, 2, 3] and back["x"].tolist() == [0.25, 0.5, 0.75]
    assert back["empty"].isna().all()  # a column with no values at all: every value missing


def test_headerless_csv_without_split_column_and_with_rows_of_different_widths(image_tree, tmp_path):
    paths = sorted((image_tree / "images").rglob("*.*"))
    lines = [f"{p},cat" if i == 0 else f"{p},cat,dog" if i % 2 else f"{p},dog" for i, p in enumerate(paths)]
    (tmp_path / "u.csv").write_text("\n".join(lines) + "\n")
    # splits assigned by hash of the URI, all to TRAIN: hashed by the temporary paths, VALIDATION now and then
    # got a label TRAIN lacked (a SchemaError)
    result = tfrecorder.convert(str(tmp_path / "u.csv"), str(tmp_path / "out"), progress=False,
                                split_fractions=(1.0, 0.0, 0.0))
    assert result.rows.rows_in == 5 and result.rows.written == 5
    labels = tfrecorder.read_tfr(str(tmp_path / "out")).sort_values("image_uri")["label"].tolist()
    assert labels == [["cat"], ["cat", "dog"], ["dog"], ["cat", "dog"], ["dog"]]


@pytest.mark.parametrize("content, message", [
    (b"split,image_uri,label\nTRAIN,a.jpg,cat\nTRAIN,\"b\nc.jpg\",dog,extra\n",
     r"cannot be parsed: line 3 has 4 fields, the header has 3"),
    (b"split,image_uri,label\nTRAIN,a.jpg,cat,extra\nTRAIN,b.jpg,dog\n",
     r"cannot be parsed: line 2 has 4 fields, the header has 3"),
    (b"split,image_uri,label\n" + b"TRAIN,a.jpg,cat\n" * 9000 + b"TRAIN,b.jpg,dog,x\n",  # past the first 64 KiB
     r"cannot be parsed: line 9002 has 4 fields, the header has 3"),
    (b"split,image_uri,label\nTRAIN,caf\xe9.jpg,cat\n", r"is not UTF-8 text: .*byte 0xe9 at line 2"),
    (b"split,image_uri,label\n" + b"TRAIN,a.jpg,cat\n" * 9000 + b"TRAIN,\xff.jpg,cat\n",
     r"is not UTF-8 text: .*byte 0xff at line 9002"),
    (b"split,image_uri,label\n", r"the table is empty"),
    (b"", r"is empty"),
])
def test_bad_csv_files_are_clear_errors(tmp_path, content, message):
    (tmp_path / "bad.csv").write_bytes(content)
    with pytest.raises(TFRecorderError, match=message):
        tfrecorder.convert(str(tmp_path / "bad.csv"), str(tmp_path / "out"), progress=False)


def _shard_bytes(folder) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.glob("*.tfrecord"))}


def test_csv_glob_and_parquet_give_the_same_dataset_as_one_csv(image_tree, tmp_path):
    """A table kept as one CSV, as parts in two folders (relative image paths relative to each part's own
    folder, one column typed alike in every part though a part alone would type it otherwise), or as
    Parquet: the same records."""
    paths = sorted((image_tree / "images").rglob("*.*"))
    rows = [(p.parts[-3], p, p.parts[-2], i if i != 2 else 7, "007" if i == 0 else str(i)) for i, p in enumerate(paths)]
    header = "split,image_uri,label,weight,code\n"

    def line(split, path, label, weight, code, base):
        return f"{split},{os.path.relpath(path, base)},{label},{weight},{code}\n"

    (tmp_path / "whole.csv").write_text(header + "".join(line(*r, tmp_path) for r in rows))
    for i, part in enumerate((rows[:2], rows[2:3], rows[3:])):  # part 1 alone: "2" would read as a number
        folder = tmp_path / "parts" / f"p{i}"
        folder.mkdir(parents=True)
        (folder / f"part-{i}.csv").write_text(header + "".join(line(*r, folder) for r in part))
    whole = tfrecorder.convert(str(tmp_path / "whole.csv"), str(tmp_path / "a"), progress=False)
    parts = tfrecorder.convert(str(tmp_path / "parts" / "*" / "part-*.csv"), str(tmp_path / "b"), progress=False)
    assert written(parts) == written(whole) == {"TRAIN": 3, "VALIDATION": 1, "TEST": 1}
    a, b = tfrecorder.read_tfr(str(tmp_path / "a")), tfrecorder.read_tfr(str(tmp_path / "b"))
    columns = ["split", "label", "weight", "code", "image"]
    pd.testing.assert_frame_equal(a[columns], b[columns])
    assert "007" in a["code"].tolist() and "2" in a["code"].tolist()  # text in every part

    df = pd.DataFrame([(s, str(p), label, w, c) for s, p, label, w, c in rows],
                      columns=["split", "image_uri", "label", "weight", "code"])
    df.to_parquet(tmp_path / "table.parquet")
    (tmp_path / "no_extension").write_bytes((tmp_path / "table.parquet").read_bytes())
    from_df = tfrecorder.convert(df, str(tmp_path / "c"), progress=False)
    from_parquet = tfrecorder.convert(str(tmp_path / "table.parquet"), str(tmp_path / "d"), progress=False)
    tfrecorder.convert(str(tmp_path / "no_extension"), str(tmp_path / "e"), progress=False)  # found by PAR1
    assert written(from_parquet) == written(from_df)
    assert _shard_bytes(tmp_path / "d") == _shard_bytes(tmp_path / "c") == _shard_bytes(tmp_path / "e")


def test_parquet_keeps_nullable_integers_and_relative_paths(image_tree, tmp_path):
    paths = sorted((image_tree / "images").rglob("*.*"))
    df = pd.DataFrame({"image_uri": [p.relative_to(image_tree).as_posix() for p in paths],
                       "label": [p.parts[-2] for p in paths],
                       "count": pd.array([1, None, 3, 4, 123456789], dtype="Int64")})
    df.to_parquet(image_tree / "t.parquet")
    tfrecorder.convert(str(image_tree / "t.parquet"), str(tmp_path / "out"), progress=False)
    back = tfrecorder.read_tfr(str(tmp_path / "out")).sort_values("image_uri")
    assert str(back["count"].dtype) == "Int64"
    assert sorted(back["count"].dropna().tolist()) == [1, 3, 4, 123456789]


@pytest.mark.parametrize("name,content,message", [
    ("nothing-*.csv", None, "matches no file"),
    ("mixed-*", "mixed", "both CSV and Parquet"),
    ("cols-*.csv", "columns", "needs the same columns"),
])
def test_bad_globs_are_clear_errors(tmp_path, name, content, message):
    if content == "mixed":
        (tmp_path / "mixed-1.csv").write_text("image_uri,label\na.jpg,x\n")
        pd.DataFrame({"image_uri": ["b.jpg"], "label": ["y"]}).to_parquet(tmp_path / "mixed-2.parquet")
    elif content == "columns":
        (tmp_path / "cols-1.csv").write_text("image_uri,label\na.jpg,x\n")
        (tmp_path / "cols-2.csv").write_text("image_uri,label,weight\nb.jpg,y,1\n")
    with pytest.raises(TFRecorderError, match=message):
        tfrecorder.convert(str(tmp_path / name), str(tmp_path / "out"), progress=False)


def test_a_glob_refused_by_the_direct_runner_converts_once_fixed(tmp_path):
    """The pipeline reads the files, so it finds their columns differ (the same SchemaError as locally); the
    refused run leaves output_dir as it was, and the run with the file fixed needs no overwrite=True."""
    (tmp_path / "cols-1.csv").write_text("split,image_uri,label\nTRAIN,a.jpg,x\n")
    (tmp_path / "cols-2.csv").write_text("split,image_uri,label,weight\nTRAIN,b.jpg,y,1\n")
    options = dict(runner="DirectRunner", validate_images="header")
    with pytest.raises(SchemaError, match=r"'.*cols-2.csv' has columns .* every file of a glob needs the same"):
        tfrecorder.convert(str(tmp_path / "cols-*.csv"), str(tmp_path / "out"), **options)
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())
    (tmp_path / "cols-2.csv").write_text("split,image_uri,label\nTRAIN,b.jpg,y\n")
    with pytest.raises(TFRecorderError, match="no row was written: the 2 rows"):  # no such images
        tfrecorder.convert(str(tmp_path / "cols-*.csv"), str(tmp_path / "out"), **options)
    assert len(pd.read_csv(tmp_path / "out" / "errors.csv")) == 2


def test_the_same_rows_give_the_same_shards_however_they_are_ordered_or_split_into_files(tmp_path):
    """Records go to shards, and into order inside them, by the hash of each row's content: one CSV, the
    rows shuffled, seven CSV parts, Parquet and the DataFrame itself give byte-identical shards, locally
    and under the DirectRunner."""
    rng = np.random.default_rng(0)
    rows = 700
    df = pd.DataFrame({"split": rng.choice(["TRAIN", "TEST"], rows, p=[0.8, 0.2]),
                       "label": [f"class {i % 10}" for i in range(rows)],
                       "n": rng.integers(-5, 5, rows), "x": rng.normal(size=rows).astype(np.float32),
                       "note": [f"row {i}" if i % 9 else "ça, va" for i in range(rows)]})  # CSV: "" is missing
    df.to_csv(tmp_path / "one.csv", index=False)
    df.sample(frac=1, random_state=1).to_csv(tmp_path / "shuffled.csv", index=False)
    (tmp_path / "parts").mkdir()
    shuffled = df.sample(frac=1, random_state=2)
    for i in range(7):
        shuffled.iloc[i * rows // 7:(i + 1) * rows // 7].to_csv(tmp_path / "parts" / f"part-{i}.csv", index=False)
    df.to_parquet(tmp_path / "table.parquet")
    sources = {"one": str(tmp_path / "one.csv"), "shuffled": str(tmp_path / "shuffled.csv"),
               "parts": str(tmp_path / "parts" / "part-*.csv"), "parquet": str(tmp_path / "table.parquet"),
               "frame": df}
    runs = [(name, source, "local") for name, source in sources.items()]
    # Beam reads the files itself (a worker per file) and plans the shards from the merged summaries
    runs += [(f"{name} (DirectRunner)", sources[name], "DirectRunner") for name in ("parts", "parquet", "frame")]
    for name, source, runner in runs:
        tfrecorder.convert(source, str(tmp_path / "out" / name), num_shards=3, progress=False, runner=runner)
    expected = _shard_bytes(tmp_path / "out" / "one")
    assert len(expected) == 6
    for name, _, _ in runs:
        assert _shard_bytes(tmp_path / "out" / name) == expected, name


def test_a_table_sorted_by_class_gives_shards_with_the_classes_mixed(tmp_path):
    """Image folders and most exports list rows class by class; a small shuffle buffer then sees one class
    at a time. Shards filled by content hash hold (nearly) every class, in mixed order."""
    rows = 2000
    df = pd.DataFrame({"split": "TRAIN", "label": [f"class {i * 10 // rows}" for i in range(rows)],
                       "x": np.arange(rows, dtype=np.float32)})
    tfrecorder.convert(df, str(tmp_path / "out"), num_shards=8, progress=False)
    manifest = tfrecorder.read_manifest(str(tmp_path / "out"))
    for shard in manifest.splits["TRAIN"]:
        labels = tfrecorder.read_tfr(str(tmp_path / "out" / shard.file))["label"]  # read as a plain file: ids
        assert labels.nunique() >= 8, shard.file
        assert (labels.diff() != 0).sum() > len(labels) / 2  # classes interleaved, not in runs
