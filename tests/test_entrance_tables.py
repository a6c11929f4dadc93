"""The table entrance (issue #41): DataFrames, CSVs and image folders that used to lose data without a word, or
end in a traceback, are read as meant or refused in one line that says what to do."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import tfrecorder
from tests.conftest import write_image
from tfrecorder import types
from tfrecorder.errors import SchemaError, TFRecorderError


def _images(folder: Path, n: int = 4) -> list[str]:
    return [str(write_image(folder / f"a{i}.jpg", seed=i)) for i in range(n)]


def _convert(source, out: Path, **options):
    return tfrecorder.convert(source, str(out), progress=False, **options)


# --- 1. a column of image paths without an image column ------------------------------------------------------

def test_a_column_of_image_paths_without_an_image_column_is_refused(tmp_path):
    """A table whose images are in ``filename`` (or ``Path``, judged by its values too) converted into text-only
    records; it is refused naming the column and the schema that reads them, and a schema silences it."""
    paths = _images(tmp_path / "img")
    df = pd.DataFrame({"split": ["TRAIN"] * 4, "filename": paths, "label": list("abab")})
    with pytest.raises(SchemaError, match=r"column 'filename' holds image paths \(e\.g\. '.*a0\.jpg'\) but the "
                                          r"table has no image column.*schema=\{'split': types\.SplitKey, "
                                          r"'filename': types\.ImageUri, 'label': types\.StringLabel\}.*"
                                          r"types\.StringInput"):
        _convert(df, tmp_path / "refused")
    csv = tmp_path / "table.csv"
    df.rename(columns={"filename": "Path"}).to_csv(csv, index=False)
    with pytest.raises(SchemaError, match="column 'Path' holds image paths"):
        _convert(str(csv), tmp_path / "refused_csv")
    photos = df.rename(columns={"filename": "photo"})  # any name: every value an image path
    with pytest.raises(SchemaError, match="column 'photo' holds image paths"):
        _convert(photos, tmp_path / "refused_any_name")

    schema = {"split": types.SplitKey, "filename": types.ImageUri, "label": types.StringLabel}
    _convert(df, tmp_path / "images", schema=schema)
    assert len(tfrecorder.read_tfr(str(tmp_path / "images"))["image"]) == 4
    schema["filename"] = types.StringInput
    _convert(df, tmp_path / "text", schema=schema)
    assert "image" not in tfrecorder.read_tfr(str(tmp_path / "text")).columns
    notes = pd.DataFrame({"split": ["TRAIN"] * 2, "file": ["notes.txt", "a.pdf"], "label": ["a", "b"]})
    assert _convert(notes, tmp_path / "no_images").rows.written == 2  # not image paths: text, as before


# --- 2. a CSV separated by semicolons, tabs or pipes --------------------------------------------------------

@pytest.mark.parametrize("separator, name", [(";", "semicolon"), ("\t", "tab"), ("|", "pipe")])
def test_a_csv_of_another_separator_is_read_with_it_and_the_result_says_so(tmp_path, separator, name):
    """``split;image_uri;label`` used to be one column (no images, splits by hash); it is read with its separator,
    as a comma-separated copy is, and the result says so."""
    paths = _images(tmp_path / "img")
    rows = [("TRAIN", p, label) for p, label in zip(paths, "abab")]
    (tmp_path / "t.csv").write_text("".join(separator.join(r) + "\n" for r in [("split", "image_uri", "label"),
                                                                                *rows]))
    (tmp_path / "c.csv").write_text("".join(",".join(r) + "\n" for r in [("split", "image_uri", "label"), *rows]))
    result = _convert(str(tmp_path / "t.csv"), tmp_path / "out")
    assert result.splits["TRAIN"].written == 4
    assert any(f"read as {name}-separated: its first line holds {name}s and no comma" in w for w in result.warnings)
    comma = _convert(str(tmp_path / "c.csv"), tmp_path / "comma")
    assert Path(result.splits["TRAIN"].shards[0]).read_bytes() == Path(comma.splits["TRAIN"].shards[0]).read_bytes()


def test_a_csv_whose_first_line_holds_several_separators_is_refused(tmp_path):
    (tmp_path / "t.csv").write_text("split;image_uri|label\nTRAIN;a.jpg|cat\n")
    with pytest.raises(TFRecorderError, match=r"t\.csv': its first line holds no comma but semicolons and pipes, "
                                              r"so its separator cannot be told; save it comma-separated"):
        _convert(str(tmp_path / "t.csv"), tmp_path / "out")


def test_the_direct_runner_reads_a_semicolon_csv_as_the_local_runner_does(tmp_path):
    paths = _images(tmp_path / "img")
    (tmp_path / "t.csv").write_text("split;image_uri;label\n" + "".join(f"TRAIN;{p};{c}\n" for p, c in
                                                                        zip(paths, "abab")))
    local = _convert(str(tmp_path / "t.csv"), tmp_path / "local")
    direct = _convert(str(tmp_path / "t.csv"), tmp_path / "direct", runner="DirectRunner")
    assert direct.splits["TRAIN"].written == 4
    assert Path(local.splits["TRAIN"].shards[0]).read_bytes() == Path(direct.splits["TRAIN"].shards[0]).read_bytes()


# --- 3. folders of other layouts, skipped files, valid/ --------------------------------------------------------

def _yolo(root: Path, data_yaml: bool = True) -> Path:
    for split, n in (("train", 3), ("valid", 1)):
        for i in range(n):
            write_image(root / split / "images" / f"{split}{i}.jpg", seed=i)
            (root / split / "labels").mkdir(parents=True, exist_ok=True)
            (root / split / "labels" / f"{split}{i}.txt").write_text("0 0.5 0.5 0.2 0.2\n")
    if data_yaml:
        (root / "data.yaml").write_text("train: ../train/images\nval: ../valid/images\nnc: 1\nnames: ['a']\n")
    return root


def test_a_yolo_folder_or_its_data_yaml_is_read_as_yolo_and_one_without_a_yaml_refused(tmp_path):
    """A YOLO/Roboflow folder became a classification dataset labelled images/train (valid/ dropped) and its
    data.yaml was read as a CSV (rows all not_found): both are read as the YOLO dataset they are (its boxes, valid/
    as VALIDATION); a folder of images/ beside labels/ with nothing naming its classes is refused in one line."""
    root = _yolo(tmp_path / "yolo")
    for source, out in ((root, "out"), (root / "data.yaml", "out_yaml")):
        result = _convert(str(source), tmp_path / out)
        assert {s: r.written for s, r in result.splits.items()} == {"TRAIN": 3, "VALIDATION": 1}
        assert tfrecorder.read_tfr(result.tfrecord_dir)["label"].tolist() == ["a"] * 4  # a row per box
    with pytest.raises(TFRecorderError, match=r"looks like a YOLO dataset \(train/images beside train/labels/.*\) "
                                              r"but has no data.yaml naming its classes"):
        _convert(str(_yolo(tmp_path / "no_yaml", data_yaml=False)), tmp_path / "out", runner="DirectRunner")
    (tmp_path / "flat" / "labels").mkdir(parents=True)
    (tmp_path / "flat" / "labels" / "a0.txt").write_text("0 0.5 0.5 0.2 0.2\n")
    _images(tmp_path / "flat" / "images")
    with pytest.raises(TFRecorderError, match=r"looks like a YOLO dataset \(images/ beside labels/ of \.txt"):
        _convert(str(tmp_path / "flat"), tmp_path / "out")


def test_an_image_folder_reads_valid_as_validation_and_names_every_file_it_skips(tmp_path):
    """Every file under an image folder is a row or named in ``result.skipped`` with why (and counted in a
    warning); a ``valid`` split folder is VALIDATION, not a label folder whose images were dropped."""
    root = tmp_path / "pets"
    for i, name in enumerate(["train/cat/a.jpg", "train/dog/b.jpg", "valid/cat/c.jpg", "valid/dog/d.jpg",
                              "e.jpg", "cat/sub/f.jpg"]):
        write_image(root / name, seed=i)
    (root / "train" / "cat" / "notes.txt").write_text("x")
    (root / "train" / "dog" / ".DS_Store").write_bytes(b"\0")
    result = _convert(str(root), tmp_path / "out")
    assert {split: s.rows_in for split, s in result.splits.items()} == {"TRAIN": 2, "VALIDATION": 2}
    assert result.skipped == ("cat/sub/f.jpg (at a level not read)", "e.jpg (at a level not read)",
                              "train/cat/notes.txt (not an image)", "train/dog/.DS_Store (hidden)")
    assert any(w.startswith(f"4 files under {str(root)!r} are not rows and were skipped: cat/sub/f.jpg (at a "
                            f"level not read), ") for w in result.warnings)
    assert "warning: 4 files under" in str(result)


def test_a_folder_without_label_folders_says_what_it_holds(tmp_path):
    """A folder of loose images, or of CSV files, is refused saying what it holds and what to give instead; a
    YAML file that does not describe a YOLO dataset is skipped (named), not taken for one."""
    _images(tmp_path / "flat", 2)
    with pytest.raises(TFRecorderError, match=r"has no images laid out as .*: its 2 images \(e\.g\. 'a0\.jpg'\) "
                                              r"are not in label folders; move them into one folder per label"):
        _convert(str(tmp_path / "flat"), tmp_path / "out")
    (tmp_path / "tables").mkdir()
    (tmp_path / "tables" / "part.csv").write_text("image_uri,label\na.jpg,cat\n")
    with pytest.raises(TFRecorderError, match=r"it holds CSV files; give one, or a glob of them "
                                              r"\('.*/tables/\*\.csv'\)"):
        _convert(str(tmp_path / "tables"), tmp_path / "out")
    (tmp_path / "hub" / "data").mkdir(parents=True)  # the Hugging Face Hub's layout: the glob is of data/
    (tmp_path / "hub" / "data" / "train-00000-of-00001.csv").write_text("image_uri,label\na.jpg,cat\n")
    with pytest.raises(TFRecorderError, match=r"give one, or a glob of them \('.*/hub/data/\*\.csv'\)"):
        _convert(str(tmp_path / "hub"), tmp_path / "out")
    _images(tmp_path / "pets" / "train" / "cat", 1)  # in TRAIN: a hashed split could leave TRAIN without 'cat'
    (tmp_path / "pets" / "config.yaml").write_text("lr: 0.1\n")
    assert _convert(str(tmp_path / "pets"), tmp_path / "pets_out").skipped == ("config.yaml (not an image)",)


# --- 4. box rows: blank labels, mixed units ----------------------------------------------------------------------

def _boxes(tmp_path: Path, **columns) -> pd.DataFrame:
    paths = _images(tmp_path / "img")
    table = dict(split=["TRAIN"] * 4, image_uri=paths, label=["a", "b", "b", "a"], xmin=[0.1] * 4, ymin=[0.1] * 4,
                 xmax=[0.5] * 4, ymax=[0.5] * 4)
    return pd.DataFrame({**table, **columns})


def test_a_box_with_a_blank_label_is_refused_naming_its_rows(tmp_path):
    """A box row labelled "" or " " added a class "" (the docs promise a label with every box)."""
    df = _boxes(tmp_path, label=["a", " ", "", "a"])
    with pytest.raises(SchemaError, match=r"column 'label': every box needs a label, and these boxes' labels are "
                                          r"blank; give each its class name, or drop the rows: 2 rows \(rows 1, 2\)"):
        _convert(df, tmp_path / "out")


def test_boxes_in_pixels_among_normalized_ones_are_refused_under_auto_units(tmp_path):
    """One AutoML-style row in pixels among normalized ones turned every box of the table into pixels."""
    df = _boxes(tmp_path, xmax=[0.5, 0.5, 20.0, 0.5], ymax=[0.5, 0.5, 20.0, 0.5])
    with pytest.raises(SchemaError, match=r"columns xmin, ymin, xmax, ymax: 1 boxes have an edge beyond 1, as "
                                          r"pixels \(row 2\), and 3 lie within \[0, 1\], as normalized \(rows 0, 1, "
                                          r"3\): box_units='auto' cannot tell.*box_units='pixels' or 'normalized'"):
        _convert(df, tmp_path / "out")
    assert _convert(df, tmp_path / "pixels", box_units="pixels").rows.written == 4


# --- 5. one photo under two spellings ------------------------------------------------------------------------

def test_one_photo_under_several_spellings_is_one_record_with_every_box(tmp_path, monkeypatch):
    """``a0.jpg``, ``./a0.jpg``, its absolute path and a symlink to it made a record each, each with part of the
    boxes; they are one image (its resolved path), stored under the first spelling."""
    folder = tmp_path / "img"
    _images(folder, 2)
    os.symlink(folder / "a1.jpg", folder / "link.jpg")
    monkeypatch.chdir(folder)
    df = pd.DataFrame({"split": ["TRAIN"] * 5, "image_uri": ["a0.jpg", "./a0.jpg", str(folder / "a0.jpg"),
                                                             "a1.jpg", "link.jpg"],
                       "label": list("ababa"), "xmin": [1, 2, 3, 4, 5], "ymin": [1] * 5,
                       "xmax": [10, 11, 12, 13, 14], "ymax": [9] * 5})
    result = _convert(df, tmp_path / "out")
    assert result.splits["TRAIN"].written == 5
    back = tfrecorder.read_tfr(str(tmp_path / "out"))
    assert sorted(back.groupby("image_uri")["xmin"].apply(sorted).items()) == [("a0.jpg", [1.0, 2.0, 3.0]),
                                                                                ("a1.jpg", [4.0, 5.0])]


# --- 6. arrays of more than one dimension ------------------------------------------------------------------

def test_a_column_of_arrays_of_two_ranks_is_refused_naming_the_rows_of_each(tmp_path):
    """A column of 2-D arrays was flattened into an int64 list, its shape lost. Now it is a tensor column, whose
    rows have one rank; and a column typed as a flat list still refuses 2-D arrays, naming their shape."""
    df = pd.DataFrame({"x": [1, 2, 3], "m": [np.zeros((2, 3)), np.zeros(3), np.ones((2, 3))]})
    with pytest.raises(SchemaError, match=r"^column 'm' holds arrays of 2 ranks \(2-D in rows 0, 2; 1-D in row 1\)"):
        _convert(df, tmp_path / "inferred")
    message = r"column 'm': holds arrays of more than one dimension \(shape \(2, 3\), rows 0, 2\); a feature is a flat"
    with pytest.raises(SchemaError, match=message):
        _convert(df, tmp_path / "given", schema={"x": types.IntegerInput, "m": types.FloatListInput})


# --- 7. column names that are not text ---------------------------------------------------------------------

def test_a_dataframe_with_an_integer_column_name_converts_under_its_text(tmp_path):
    """``KeyError: '5'`` before: the column is stored under its name as text, on both runners."""
    df = pd.DataFrame({"split": ["TRAIN", "TRAIN"], 5: [1, 2], "label": ["a", "b"]})
    for runner in ("local", "DirectRunner"):
        _convert(df, tmp_path / runner, runner=runner)
        assert sorted(tfrecorder.read_tfr(str(tmp_path / runner))["5"]) == [1, 2]
    both = pd.DataFrame({5: [1], "5": [2], "label": ["a"]})
    with pytest.raises(SchemaError, match=r"columns 5, '5' have the same name as text \('5'\)"):
        _convert(both, tmp_path / "both")


# --- 8. labels holding a line break ------------------------------------------------------------------------

def test_a_label_with_a_line_break_is_refused_naming_it(tmp_path):
    """A label holding "\\n" or "\\r" broke the label files TFDS reads (one name a line)."""
    df = pd.DataFrame({"split": ["TRAIN"] * 4, "x": [1, 2, 3, 4], "label": ["a\nb", "c", "d\re", "c"]})
    with pytest.raises(SchemaError, match=r"column 'label': 2 labels hold a line break, e\.g\. 'a\\nb' \(rows 0, "
                                          r"2\); the label files TFDS reads hold one class name a line"):
        _convert(df, tmp_path / "out")
    boxes = _boxes(tmp_path, label=["a", "b\nc", "b", "a"])
    with pytest.raises(SchemaError, match=r"1 labels hold a line break, e\.g\. 'b\\nc' \(row 1\)"):
        _convert(boxes, tmp_path / "boxes")


# --- 9. AutoML CSVs that cannot be read --------------------------------------------------------------------

def test_an_automl_csv_that_cannot_be_read_is_one_line_naming_the_file_and_line(tmp_path):
    """A headerless ``split,image_uri,label`` CSV in latin-1, or with a record wider than the header, is one
    line naming the file and the line, not a ParserError or UnicodeDecodeError."""
    rows = "".join(f"TRAIN,a{i}.jpg,cat\n" for i in range(4000))
    (tmp_path / "latin.csv").write_bytes(rows.encode() + "TRAIN,b.jpg,caté\n".encode("latin-1"))
    with pytest.raises(TFRecorderError, match=r"CSV '.*latin\.csv' is not UTF-8 text: byte 0xe9 at line 4001; "
                                              r"save it as UTF-8"):
        _convert(str(tmp_path / "latin.csv"), tmp_path / "out")
    (tmp_path / "wide.csv").write_text("split,image_uri,label\n" + rows + "TRAIN,b.jpg," + ",".join("c" * 10) + "\n")
    with pytest.raises(TFRecorderError, match=r"CSV '.*wide\.csv' cannot be parsed: line 4002 has 12 fields, the "
                                              r"header has 3"):
        _convert(str(tmp_path / "wide.csv"), tmp_path / "out")
