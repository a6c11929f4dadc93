"""Re-running a conversion is safe: the same input and options into a folder holding their finished conversion
return its result at once (``reused``), with one line saying so; other input or options still need
``overwrite=True``, and the error says what differs."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pandas as pd
import pytest

import tfrecorder
from tests.conftest import write_image
from tfrecorder.errors import TFRecorderError
from tfrecorder.sample_data import make_detection_scenes, write_voc

REUSED = "already holds this conversion (same input and options): nothing written; overwrite=True writes it again"
NOT_EMPTY = r"output_dir .* is not empty \(.*dataset.json.*\): it holds a finished conversion"


def stamps(folder: Path) -> dict[str, int]:
    """Every file under ``folder`` and the time it was last written."""
    return {p.relative_to(folder).as_posix(): p.stat().st_mtime_ns for p in folder.rglob("*") if p.is_file()}


def same_result(again, first) -> None:
    """What a reused result must give back of the first run's (its timings are not kept)."""
    assert again.reused and not first.reused
    assert (again.tfrecord_dir, again.splits, again.errors_file) == (first.tfrecord_dir, first.splits,
                                                                      first.errors_file)
    assert (again.errors, again.warnings, again.skipped, again.metrics) == (first.errors, first.warnings,
                                                                            first.skipped, first.metrics)
    assert again.seconds == 0


@pytest.fixture
def warned(image_table) -> pd.DataFrame:
    """``image_table`` with one image in TRAIN and TEST (a warning the reused result must give again)."""
    df = image_table.copy()
    df.loc[2, "image_uri"] = df.loc[0, "image_uri"]
    return df


def test_the_same_dataframe_again_returns_the_finished_result_and_writes_nothing(warned, tmp_path, caplog):
    out = tmp_path / "out"
    first = warned.tensorflow.to_tfr(str(out), progress=False)
    assert first.errors == 0 and first.warnings
    written = stamps(out)
    with caplog.at_level("INFO", logger="tfrecorder"):
        again = warned.tensorflow.to_tfr(str(out), progress=False)
    same_result(again, first)
    assert stamps(out) == written  # nothing written, not even the record
    assert f"{out} {REUSED}" in caplog.messages
    assert len(tfrecorder.read_tfr(str(out), split="TRAIN")) == first.splits["TRAIN"].written


@pytest.mark.parametrize("change, says", [
    (dict(num_shards=2), "made with other settings (num_shards=None there, 2 here)"),
    (dict(compression="gzip"), "made with other settings (compression=None there, 'gzip' here)"),
    (dict(image_size=(8, 8)), "image_size=None there, (8, 8) here"),
    (dict(runner="DirectRunner"), "runner='local' there, 'DirectRunner' here"),
    (dict(row=True), "of another input (its rows, files or images differ)"),
])
def test_other_options_or_rows_are_refused_naming_what_differs(image_table, tmp_path, change, says):
    out = tmp_path / "out"
    tfrecorder.convert(image_table, str(out), progress=False)
    written = stamps(out)
    df = image_table.copy()
    if change.pop("row", False):
        df.loc[5, "note"] = "changed"
    with pytest.raises(TFRecorderError, match=NOT_EMPTY) as refused:
        tfrecorder.convert(df, str(out), progress=False, **change)
    assert says in str(refused.value) and str(refused.value).endswith("choose an empty folder or pass overwrite=True")
    assert stamps(out) == written


def test_overwrite_writes_the_same_conversion_again(image_table, tmp_path):
    out = tmp_path / "out"
    first = tfrecorder.convert(image_table, str(out), progress=False)
    written = stamps(out)
    again = tfrecorder.convert(image_table, str(out), progress=False, overwrite=True)
    assert not again.reused and again.splits == first.splits
    assert all(stamps(out)[name] != when for name, when in written.items())  # every file written anew
    assert tfrecorder.convert(image_table, str(out), progress=False).reused


def test_a_csv_path_again_from_the_command_line_says_so_in_one_line(tmp_path, command, monkeypatch):
    rows = ["split,image_uri,label"]
    for i, split in enumerate(["TRAIN", "TRAIN", "TEST"]):
        rows.append(f"{split},{write_image(tmp_path / f'{i}.jpg', seed=i)},{'ab'[i % 2]}")
    (tmp_path / "data.csv").write_text("\n".join(rows) + "\n")
    monkeypatch.chdir(tmp_path)

    def convert(*more: str) -> subprocess.CompletedProcess:
        return command("convert", "data.csv", "out/", "--no-progress", *more)

    first = convert()
    assert first.returncode == 0, first.stderr
    assert REUSED not in first.stdout
    again = convert()
    assert again.returncode == 0, again.stderr
    said = REUSED.replace("overwrite=True", "--overwrite")  # the command names its flag
    assert again.stdout.startswith(f"out/ {said}\n") and again.stdout.count(said) == 1
    other = convert("--num-shards", "2")
    assert other.returncode != 0 and "--num-shards None there, 2 here" in other.stderr


def test_an_image_folder_again_is_reused_and_an_added_image_is_another_input(tmp_path):
    pets = tmp_path / "pets"
    for i in range(6):  # in a TRAIN folder: a hash of the tmp path never leaves a label out of TRAIN
        write_image(pets / "train" / "ab"[i % 2] / f"{i}.jpg", seed=i)
    (pets / "notes.txt").write_text("not a row")
    out = tmp_path / "out"
    first = tfrecorder.convert(str(pets), str(out), progress=False)
    assert first.skipped
    same_result(tfrecorder.convert(str(pets), str(out), progress=False), first)
    write_image(pets / "train" / "a" / "new.jpg", seed=9)
    with pytest.raises(TFRecorderError, match=NOT_EMPTY + " of another input"):
        tfrecorder.convert(str(pets), str(out), progress=False)


def test_a_voc_folder_and_a_detection_table_again_are_reused(tmp_path):
    scenes = make_detection_scenes(str(tmp_path / "scenes"), n=6)
    voc = write_voc(scenes, tmp_path / "voc")
    first = tfrecorder.convert(voc, str(tmp_path / "voc_out"), progress=False)
    same_result(tfrecorder.convert(voc, str(tmp_path / "voc_out"), progress=False), first)

    table = scenes[["split", "image_uri", "label", "xmin", "ymin", "xmax", "ymax"]]
    first = tfrecorder.convert(table, str(tmp_path / "out"), progress=False)
    same_result(tfrecorder.convert(table.copy(), str(tmp_path / "out"), progress=False), first)
    moved = table.copy()
    moved.loc[0, "xmax"] -= 1  # one box
    with pytest.raises(TFRecorderError, match=NOT_EMPTY + " of another input"):
        tfrecorder.convert(moved, str(tmp_path / "out"), progress=False)


def test_a_record_that_no_longer_matches_its_dataset_json_is_not_trusted(tabular_table, tmp_path):
    out = tmp_path / "out"
    tfrecorder.convert(tabular_table, str(out), progress=False)
    manifest = json.loads((out / "dataset.json").read_text())
    (out / "dataset.json").write_text(json.dumps(manifest, indent=1))  # edited by hand since
    with pytest.raises(TFRecorderError, match=NOT_EMPTY + "; choose an empty folder"):
        tfrecorder.convert(tabular_table, str(out), progress=False)


def test_a_finished_dataset_keeps_its_record_where_no_reader_or_glob_trips_on_it(tabular_table, tmp_path):
    out = tmp_path / "out"
    tfrecorder.convert(tabular_table, str(out), progress=False, compression="gzip")
    assert ".conversion.json" in os.listdir(out) and ".tfrecorder" not in os.listdir(out)
    assert len(tfrecorder.read_tfr(str(out / "*.tfrecord*"))) == 8  # the glob the docs give for other tools
    assert len(tfrecorder.read_tfr(str(out))) == 8


def test_direct_runner_again_is_reused_for_a_csv_and_an_image_folder(image_table, tmp_path):
    image_table.to_csv(tmp_path / "table.csv", index=False)
    first = tfrecorder.convert(str(tmp_path / "table.csv"), str(tmp_path / "out"), runner="DirectRunner")
    again = tfrecorder.convert(str(tmp_path / "table.csv"), str(tmp_path / "out"), runner="DirectRunner")
    same_result(again, first)

    pets = tmp_path / "pets"
    for i in range(4):  # in a TRAIN folder: a hash of the tmp path never leaves a label out of TRAIN
        write_image(pets / "train" / "ab"[i % 2] / f"{i}.jpg", seed=i)
    first = tfrecorder.convert(str(pets), str(tmp_path / "pets_out"), runner="DirectRunner")
    same_result(tfrecorder.convert(str(pets), str(tmp_path / "pets_out"), runner="DirectRunner"), first)
    write_image(pets / "train" / "b" / "new.jpg", seed=7)  # the pipeline lists the folder: the key holds the listing
    with pytest.raises(TFRecorderError, match=NOT_EMPTY + " of another input"):
        tfrecorder.convert(str(pets), str(tmp_path / "pets_out"), runner="DirectRunner")


def test_a_conversion_with_failed_rows_is_converted_again_so_fixed_images_are_written(image_table, tmp_path,
                                                                                        caplog):
    """A re-run is how a user retries the rows in errors.csv: the same call converts again (said in one line),
    and an image put in place since is written."""
    df = image_table.copy()
    missing = tmp_path / "later.jpg"
    df.loc[3, "image_uri"] = str(missing)
    out = tmp_path / "out"
    first = tfrecorder.convert(df, str(out), progress=False)
    assert first.errors == 1
    write_image(missing, seed=3)
    with caplog.at_level("WARNING", logger="tfrecorder"):
        again = tfrecorder.convert(df, str(out), progress=False)
    assert not again.reused and again.errors == 0 and again.rows.written == first.rows.written + 1
    assert any("1 of its rows failed (listed in errors.csv): converting it again" in m for m in caplog.messages)


def test_a_missing_shard_is_written_again_not_reused(image_table, tmp_path):
    out = tmp_path / "out"
    first = tfrecorder.convert(image_table, str(out), progress=False)
    shard = out / first.splits["TEST"].shards[0].rsplit("/", 1)[-1]
    shard.unlink()
    again = tfrecorder.convert(image_table, str(out), progress=False)
    assert not again.reused and shard.exists()
    assert len(tfrecorder.read_tfr(str(out), split="TEST")) == first.splits["TEST"].written


def test_a_dataframe_of_relative_paths_from_another_working_directory_is_another_input(tmp_path, monkeypatch):
    """The same relative names from another folder are other files: refused, not returned as the first ones."""
    for folder in ("a", "b"):
        for i in range(4):
            write_image(tmp_path / folder / "img" / f"{i}.jpg", seed=i + (10 if folder == "b" else 0))
    df = pd.DataFrame({"split": ["TRAIN"] * 4, "image_uri": [f"img/{i}.jpg" for i in range(4)],
                       "label": ["x", "y"] * 2})
    monkeypatch.chdir(tmp_path / "a")
    tfrecorder.convert(df, str(tmp_path / "out"), progress=False)
    assert tfrecorder.convert(df, str(tmp_path / "out"), progress=False).reused  # the same folder: reused
    monkeypatch.chdir(tmp_path / "b")
    with pytest.raises(TFRecorderError, match=NOT_EMPTY + " of another input"):
        tfrecorder.convert(df, str(tmp_path / "out"), progress=False)
