"""The entrance (issue #41), what was still lost without a word: the Beam runners' result says how the source was
read as the local runner's does (a CSV's separator, an image folder's skipped files); hidden folders are not label
folders; a schema naming some columns says which others are not written; an AutoML detection CSV with a field too
many is refused, not read as classification; one photo under two spellings is one image at any size."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest

import tfrecorder
from tests.conftest import write_image
from tfrecorder import types
from tfrecorder.errors import TFRecorderError


def _convert(source, out: Path, **options):
    return tfrecorder.convert(source, str(out), progress=False, **options)


def _pets(root: Path) -> Path:
    """An image folder with files that are not rows: a note, a hidden file, Jupyter's checkpoints folder."""
    for i, name in enumerate(["train/cat/a.jpg", "train/dog/b.jpg", "valid/cat/c.jpg", "valid/dog/d.jpg",
                              ".ipynb_checkpoints/e.jpg", "train/.ipynb_checkpoints/f.jpg", "train/cat/._a.jpg"]):
        write_image(root / name, seed=i)
    (root / "train" / "cat" / "notes.txt").write_text("x")
    return root


SKIPPED = (".ipynb_checkpoints/e.jpg (hidden)", "train/.ipynb_checkpoints/f.jpg (hidden)",
           "train/cat/._a.jpg (hidden)", "train/cat/notes.txt (not an image)")


# --- hidden folders and files of an image folder -----------------------------------------------------------------

def test_hidden_folders_and_files_of_an_image_folder_are_skipped_and_named(tmp_path):
    """``.ipynb_checkpoints/`` (at the top or in a split folder) was a label folder - a class named after it, its
    images rows - and macOS's ``._a.jpg`` a row that fails; each is skipped and named in result.skipped."""
    result = _convert(_pets(tmp_path / "pets"), tmp_path / "out")
    assert {split: s.rows_in for split, s in result.splits.items()} == {"TRAIN": 2, "VALIDATION": 2}
    assert tfrecorder.label_names(str(tmp_path / "out")) == ["cat", "dog"]
    assert result.skipped == SKIPPED
    assert result.errors == 0


def test_an_image_beside_a_split_folders_label_folders_is_skipped_not_a_class_named_after_the_split(tmp_path):
    """train/stray.jpg beside train/cat/ and train/dog/ was a row labelled "train": a class of its own, every
    other class id one higher. It is at a level not read, as an image at the top is."""
    root = _pets(tmp_path / "pets")
    write_image(root / "train" / "stray.jpg")
    result = _convert(root, tmp_path / "out")
    assert tfrecorder.label_names(str(tmp_path / "out")) == ["cat", "dog"]
    assert "train/stray.jpg (at a level not read)" in result.skipped and result.errors == 0


def test_links_in_an_image_folder_are_rows_read_where_they_lead(tmp_path):
    """Class folders made of links (to images in it, or elsewhere: a dataset built without copying) lost every
    link without a word, a whole class; a link to a folder was skipped as "not an image". Each link is a row,
    one to nothing a not_found row; a linked label folder is a label folder."""
    root = tmp_path / "pets"
    train = root / "train"  # one split: every class in it
    for i in range(2):
        write_image(train / "cat" / f"{i}.jpg", seed=i)
    outside = write_image(tmp_path / "elsewhere" / "d.jpg", seed=5)
    (train / "dog").mkdir()
    os.symlink(train / "cat" / "0.jpg", train / "dog" / "inside.jpg")
    os.symlink(outside, train / "dog" / "outside.jpg")
    os.symlink(tmp_path / "nothing.jpg", train / "dog" / "gone.jpg")
    os.symlink(tmp_path / "elsewhere", train / "bird")
    result = _convert(root, tmp_path / "out")
    table = tfrecorder.read_tfr(str(tmp_path / "out"))
    assert sorted(zip(table["label"], table["image_name"])) == [
        ("bird", "d.jpg"), ("cat", "0.jpg"), ("cat", "1.jpg"), ("dog", "inside.jpg"), ("dog", "outside.jpg")]
    assert result.error_codes == {"not_found": 1} and result.skipped == ()


# --- the Beam runners say how they read the source -----------------------------------------------------------

def test_the_direct_runner_names_an_image_folders_skipped_files_as_the_local_runner_does(tmp_path):
    root = _pets(tmp_path / "pets")
    local = _convert(root, tmp_path / "local")
    direct = _convert(root, tmp_path / "direct", runner="DirectRunner")
    assert direct.skipped == local.skipped == SKIPPED
    note = (f"4 files under {str(root)!r} are not rows and were skipped: .ipynb_checkpoints/e.jpg (hidden), "
            f"train/.ipynb_checkpoints/f.jpg (hidden), train/cat/._a.jpg (hidden), train/cat/notes.txt (not an "
            f"image) (result.skipped lists them; rows are <dir>/<SPLIT>/<label>/<image> or <dir>/<label>/<image>)")
    assert note in direct.warnings and note in local.warnings
    assert f"warning: {note}" in str(direct)
    assert {split: s.rows_in for split, s in direct.splits.items()} == {"TRAIN": 2, "VALIDATION": 2}


def test_the_direct_runner_says_a_csv_was_read_with_another_separator(tmp_path):
    paths = [str(write_image(tmp_path / "img" / f"a{i}.jpg", seed=i)) for i in range(4)]
    for name in ("t1.csv", "t2.csv"):
        (tmp_path / "parts" / name).parent.mkdir(exist_ok=True)
        (tmp_path / "parts" / name).write_text("split\timage_uri\tlabel\n" + "".join(
            f"TRAIN\t{p}\t{c}\n" for p, c in zip(paths, "abab")))
    glob = str(tmp_path / "parts" / "*.csv")
    direct = _convert(glob, tmp_path / "direct", runner="DirectRunner")
    local = _convert(glob, tmp_path / "local")
    for name in ("t1.csv", "t2.csv"):
        note = (f"CSV {str(tmp_path / 'parts' / name)!r} was read as tab-separated: its first line holds tabs and "
                f"no comma")
        assert note in direct.warnings and note in local.warnings
    assert direct.splits["TRAIN"].written == 8


def test_a_dataflow_dry_run_names_skipped_files_and_the_separator(tmp_path, gcs_dir):
    """A Dataflow job (a dry run: built, not submitted) returns before any row is read; what the submitting process
    found listing and sniffing the source is in its result."""
    options = dict(runner="DataflowRunner", project="my-project", region="europe-west4",
                   dataflow_options={"dry_run": True, "no_auth": True, "sdk_location": "container"})
    result = _convert(_pets(tmp_path / "pets"), f"{gcs_dir}/folder", **options)
    assert result.splits == {} and result.skipped == SKIPPED
    assert any(w.startswith("4 files under") for w in result.warnings)
    (tmp_path / "t.csv").write_text("split|image_uri|label\nTRAIN|gs://b/a.jpg|cat\n")
    result = _convert(str(tmp_path / "t.csv"), f"{gcs_dir}/csv", **options)
    assert any("was read as pipe-separated" in w for w in result.warnings)


# --- a schema that names some of the columns ---------------------------------------------------------------------

@pytest.mark.parametrize("runner", ["local", "DirectRunner"])
@pytest.mark.parametrize("kind", ["DataFrame", "CSV", "Parquet"])
def test_a_schema_naming_some_columns_says_which_others_are_not_written(tmp_path, runner, kind):
    """TFRecorder 2.0 wrote the columns its schema named, and only those (as it still does); the others were
    dropped without a word: the result now names them and how to keep them."""
    df = pd.DataFrame({"split": ["TRAIN"] * 2, "label": ["a", "b"], "x": [1, 2], "note": ["p", "q"]})
    source: object = df
    if kind != "DataFrame":
        source = str(tmp_path / f"t.{kind.lower()}")
        df.to_csv(source, index=False) if kind == "CSV" else df.to_parquet(source)
    result = _convert(source, tmp_path / "out", runner=runner,
                      schema={"split": types.SplitKey, "label": types.StringLabel})
    assert ("schema= names 2 of the table's columns; the 2 others are not written: 'x', 'note'. Name them in "
            "schema= to keep them (or give no schema: every column is inferred)") in result.warnings
    assert set(tfrecorder.read_tfr(str(tmp_path / "out")).columns) == {"label", "label_id", "split"}
    whole = _convert(source, tmp_path / "whole", runner=runner, schema={
        "split": types.SplitKey, "label": types.StringLabel, "x": types.IntegerInput, "note": types.StringInput})
    assert not [w for w in whole.warnings if "not written" in w]


# --- one photo under two spellings, in parts read apart ------------------------------------------------------------

def _two_spellings(tmp_path: Path) -> pd.DataFrame:
    """Box rows of two photos, each named relative (to the working directory) and absolute, through a symlink too,
    the spellings of one photo rows apart."""
    (tmp_path / "img").mkdir()
    for name in ("a", "b"):
        write_image(tmp_path / "img" / f"{name}.jpg", size=(40, 40), seed=ord(name))
    os.symlink(tmp_path / "img", tmp_path / "link")
    names = ["img/a.jpg", "img/b.jpg", str(tmp_path / "img" / "b.jpg"), "img/a.jpg", str(tmp_path / "link" / "a.jpg"),
             str(tmp_path / "img" / "b.jpg")]
    return pd.DataFrame({"split": "TRAIN", "image_uri": names, "label": list("xyxyxy"), "xmin": 0.1, "ymin": 0.1,
                         "xmax": [0.2 + i / 10 for i in range(6)], "ymax": 0.9})


def _records(out: Path) -> list[tuple[str, int]]:
    """Each record's image URI and number of boxes."""
    import tensorflow as tf

    found = []
    for shard in sorted(out.glob("*.tfrecord")):
        for data in tf.data.TFRecordDataset(str(shard)).as_numpy_iterator():
            features = tf.train.Example.FromString(data).features.feature
            found.append((features["image_uri"].bytes_list.value[0].decode(),
                          len(features["objects/label"].int64_list.value)))
    return sorted(found)


def test_one_photo_named_two_ways_in_different_parts_is_one_image(tmp_path, monkeypatch):
    """Within a part (PART_ROWS rows) the spellings of one file were one image; in parts read apart each spelling
    was a record with part of the boxes. Read in parts of 2 rows, the table gives the records (byte for byte) it
    gives in one part: one per photo, under its first name, with all its boxes."""
    from tfrecorder.write.table import summary_pass

    monkeypatch.chdir(tmp_path)
    df = _two_spellings(tmp_path)
    whole = _convert(df, tmp_path / "whole", num_shards=1)
    monkeypatch.setattr(summary_pass, "PART_ROWS", 2)
    parts = _convert(df, tmp_path / "parts", num_shards=1)
    assert _records(tmp_path / "parts") == [("img/a.jpg", 3), ("img/b.jpg", 3)]
    assert parts.splits.keys() == whole.splits.keys()
    for split in whole.splits:
        assert Path(parts.splits[split].shards[0]).read_bytes() == Path(whole.splits[split].shards[0]).read_bytes()


def test_a_glob_of_two_csvs_naming_one_photo_two_ways_makes_one_image(tmp_path):
    """Each file of a glob is a part of its own: a photo named relative to its CSV in one and absolute in the other
    is one record with every box (local runner); the Beam runners, which read each file on its own worker, refuse
    the table naming both spellings and their rows."""
    df = _two_spellings(tmp_path)
    (tmp_path / "csv").mkdir()
    df = df.assign(image_uri=["../img/a.jpg", "../img/b.jpg", "../img/a.jpg", str(tmp_path / "img" / "a.jpg"),
                              str(tmp_path / "link" / "a.jpg"), str(tmp_path / "img" / "b.jpg")])
    df.iloc[:3].to_csv(tmp_path / "csv" / "1.csv", index=False)
    df.iloc[3:].to_csv(tmp_path / "csv" / "2.csv", index=False)
    glob = str(tmp_path / "csv" / "*.csv")
    _convert(glob, tmp_path / "out")
    assert _records(tmp_path / "out") == [("../img/a.jpg", 4), ("../img/b.jpg", 2)]
    with pytest.raises(TFRecorderError, match=r"column 'image_uri': '\.\./img/a\.jpg' \(row 0\) and '.*/img/a\.jpg' "
                                              r"\(row 3\) are one image file; 2 files in all, named in parts of the "
                                              r"table that were read apart .* or convert with runner='local'"):
        _convert(glob, tmp_path / "direct", runner="DirectRunner")


# --- an AutoML detection CSV with a field too many ---------------------------------------------------------------

@pytest.mark.parametrize("first", ["TRAIN,{a},car,0.1,0.2,,,0.3,0.4,,,", "TRAIN,{a},car,0.1,0.2,,,0.3,0.4,,,extra"])
def test_an_automl_detection_csv_whose_first_line_has_12_fields_is_refused_not_read_as_classification(tmp_path,
                                                                                                      first):
    """Its first line of 12 fields made convert read it as a classification table (labels 'car', boxes lost as
    columns label_1...); it is read as AutoML's detection CSV, which names the line. A headerless classification
    CSV of many labels is still one."""
    a = str(write_image(tmp_path / "a.jpg"))
    (tmp_path / "automl.csv").write_text(first.format(a=a) + f"\nTRAIN,{a},car,0.1,0.2,,,0.3,0.4,,\n")
    with pytest.raises(TFRecorderError, match=r"automl\.csv' line 1 has 12 fields: a row has at most 11 \(set, image "
                                              r"URI, label, then x,y of 4 vertices\); remove the others"):
        _convert(str(tmp_path / "automl.csv"), tmp_path / "out")
    labels = ",".join(f"l{i}" for i in range(10))
    (tmp_path / "labels.csv").write_text(f"TRAIN,{a},{labels}\n")
    assert _convert(str(tmp_path / "labels.csv"), tmp_path / "labels").rows.written == 1


def test_a_beam_submission_sniffs_a_sample_of_a_globs_csv_files_not_every_one(tmp_path, monkeypatch):
    """Before a job starts, the submitting process reads the first line of at most SNIFFED_FILES CSVs of a glob
    (one round trip each on a store), however many parts the glob matches."""
    from tfrecorder.write.sources import read_notes
    from tfrecorder.write.sources.files import match_table_files

    for i in range(5):
        (tmp_path / f"part-{i}.csv").write_text("split\tx\tlabel\nTRAIN\t1\ta\n")
    opened = []
    real = read_notes.open_url
    monkeypatch.setattr(read_notes, "open_url", lambda url: opened.append(url) or real(url))
    monkeypatch.setattr(read_notes, "SNIFFED_FILES", 2)
    found = read_notes.beam_notes(match_table_files(str(tmp_path / "part-*.csv")))
    assert len(opened) == 2 and len(found.warnings) == 2 and "tab-separated" in found.warnings[0]
