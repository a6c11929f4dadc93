"""Datasets that grow: ``convert(..., mode="append")`` adds a version of new shards, readers read the latest or
the one ``version=`` names, the new table is held to the dataset's features and vocabulary, and its images to
the content keys kept beside the shards."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import tensorflow as tf

import tfrecorder
from tfrecorder.errors import SchemaError, TFRecorderError
from tfrecorder.sample_data import make_sample_images


@pytest.fixture(scope="module")
def table(tmp_path_factory) -> pd.DataFrame:
    """12 small images, every split, three labels."""
    return make_sample_images(str(tmp_path_factory.mktemp("images")), n=12, size=(16, 16))


def _convert(df: pd.DataFrame, out: Path, **kwargs) -> tfrecorder.ConvertResult:
    return tfrecorder.convert(df, str(out), progress=False, **kwargs)


def _rows(out: Path, **kwargs) -> list[tuple]:
    df = tfrecorder.read_tfr(str(out), columns=["image_uri", "label"], **kwargs)
    return sorted(zip(df["image_uri"], df["label"]))


def test_two_appends_make_versions_each_read_back_exactly(table, tmp_path):
    out = tmp_path / "out"
    first, second, third = table[:6], table[6:9], table[9:]
    _convert(first, out)
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.suffix in (".tfrecord", ".tfindex")}
    added = _convert(second, out, mode="append")
    assert added.rows.written == 3 and all("-v2-" in Path(f).name for s in added.splits.values() for f in s.shards)
    _convert(third, out, mode="append")

    assert {p.name: p.read_bytes() for p in out.iterdir() if p.name in before} == before  # never rewritten
    assert [v.version for v in tfrecorder.versions(str(out))] == [1, 2, 3]
    assert [v.rows_added for v in tfrecorder.versions(str(out))] == [6, 3, 3]
    for version, rows in ((1, first), (2, table[:9]), (3, table), (None, table)):
        assert _rows(out, version=version) == sorted(zip(rows["image_uri"], rows["label"]))
    assert tfrecorder.info(str(out), version=2).manifest.rows["TRAIN"].written == sum(table[:9]["split"] == "TRAIN")
    assert "version 3: 3 rows added" in str(tfrecorder.info(str(out)))
    assert int(tfrecorder.load_dataset(str(out), "TRAIN", version=1).cardinality()) == sum(first["split"] == "TRAIN")
    assert len(tfrecorder.data_source(str(out), "TRAIN", version=2)) == sum(table[:9]["split"] == "TRAIN")
    with pytest.raises(TFRecorderError, match=r"version=4: .*dataset.json has versions 1 to 3"):
        tfrecorder.read_tfr(str(out), version=4)
    assert tfrecorder.verify(str(out)).ok


def test_the_same_append_again_gives_its_result_and_writes_nothing(table, tmp_path):
    out = tmp_path / "out"
    _convert(table[:6], out)
    _convert(table[6:], out, mode="append")
    again = _convert(table[6:], out, mode="append")
    assert again.reused and again.rows.written == 6
    assert [v.version for v in tfrecorder.versions(str(out))] == [1, 2]


def test_appending_to_a_folder_without_a_dataset_is_one_line(table, tmp_path):
    with pytest.raises(TFRecorderError, match=r"mode='append': .* holds no finished dataset \(no dataset.json\)"):
        _convert(table, tmp_path / "empty", mode="append")


def test_a_column_the_dataset_lacks_or_lacks_of_it_is_named(table, tmp_path):
    out = tmp_path / "out"
    _convert(table[:6], out)
    with pytest.raises(SchemaError, match=r"mode='append': column 'weight' is not one of the dataset's"):
        _convert(table[6:].assign(weight=1.0), out, mode="append")
    with pytest.raises(SchemaError, match=r"missing column 'camera'"):
        _convert(table[6:].drop(columns=["camera"]), out, mode="append")
    assert [v.version for v in tfrecorder.versions(str(out))] == [1]


def test_a_new_label_is_refused_unless_extended_and_no_id_changes(table, tmp_path):
    out = tmp_path / "out"
    _convert(table[:6], out)
    vocabulary = tfrecorder.read_manifest(str(out)).vocabulary
    ids = tfrecorder.read_tfr(str(out), columns=["label", "label_id"])
    renamed = table[6:].assign(label=["zebra"] * 6)
    with pytest.raises(SchemaError, match=r"column 'label': label 'zebra' .*is not in the dataset's vocabulary.*"
                                          r"new_labels='extend'"):
        _convert(renamed, out, mode="append")
    _convert(renamed, out, mode="append", new_labels="extend")
    assert tfrecorder.read_manifest(str(out)).vocabulary == [*vocabulary, "zebra"]
    assert tfrecorder.versions(str(out))[-1].labels_added == ("zebra",)
    now = tfrecorder.read_tfr(str(out), columns=["label", "label_id"], version=1)
    assert now.equals(ids)
    latest = tfrecorder.read_tfr(str(out), columns=["label", "label_id"])
    assert set(latest[latest["label"] == "zebra"]["label_id"]) == {len(vocabulary)}


def test_an_image_already_in_its_split_is_a_duplicate_and_in_another_a_leak(table, tmp_path):
    out = tmp_path / "out"
    train = table[table["split"] == "TRAIN"]
    _convert(train[:4], out)
    again = train[:2].copy()  # row 0: the same image in TRAIN; row 1: in TEST
    again["split"] = ["TRAIN", "TEST"]
    result = _convert(again, out, mode="append")
    assert result.error_codes == {"duplicate": 1} and result.rows.written == 1
    errors = pd.read_csv(result.errors_file)
    assert Path(result.errors_file).name == "errors-v2.csv"
    assert errors["message"][0].startswith("its image is already in the dataset's TRAIN: "
                                           "train-00000-of-00001.tfrecord (version 1)")
    leakage = json.loads((out / "dataset.json").read_text())["leakage"]
    assert leakage["count"] == 1
    assert leakage["groups"][0]["splits"] == ["TRAIN", "TEST"] and leakage["groups"][0]["versions"] == [1, 2]


def test_a_reader_opened_before_an_append_keeps_what_it_opened(table, tmp_path):
    out = tmp_path / "out"
    _convert(table[:6], out)
    source = tfrecorder.data_source(str(out), "TRAIN", decode=False)
    count = len(source)
    _convert(table[6:], out, mode="append")
    assert len(source) == count and len([source[i] for i in range(count)]) == count
    assert len(tfrecorder.data_source(str(out), "TRAIN", decode=False)) == sum(table["split"] == "TRAIN")


def test_a_load_dataset_pipeline_built_before_an_append_reads_what_it_opened_and_an_overwrite_stops_it(table,
                                                                                                        tmp_path):
    """The pipeline checks, as each shard opens, that dataset.json still lists it as opened: an append leaves the
    old shards listed (the pipeline reads its version to the end); an overwrite lists others (it stops)."""
    out = tmp_path / "out"
    _convert(table[:6], out, num_shards=2)
    before = tfrecorder.load_dataset(str(out), "TRAIN", decode_images=False)
    count = int(before.cardinality())
    _convert(table[6:], out, mode="append")
    assert sum(1 for _ in before) == count
    reopened = tfrecorder.load_dataset(str(out), "TRAIN", decode_images=False)
    assert int(reopened.cardinality()) == sum(table["split"] == "TRAIN")
    _convert(table[2:], out, overwrite=True, num_shards=2)
    with pytest.raises(tf.errors.InvalidArgumentError, match="changed since this reader opened"):
        sum(1 for _ in reopened)


def test_an_appended_dataset_writes_no_stale_tfds_metadata(table, tmp_path):
    out = tmp_path / "out"
    _convert(table[:6], out)
    assert (out / "dataset_info.json").exists()
    _convert(table[6:], out, mode="append")
    tfds = json.loads((out / "dataset.json").read_text())["tfds"]
    assert tfds["written"] is False and "several versions" in tfds["why"]
    assert not (out / "dataset_info.json").exists()


def test_the_convert_command_appends(table, tmp_path):
    from tfrecorder.cli import main

    out = tmp_path / "out"
    table[:6].to_csv(tmp_path / "a.csv", index=False)
    table[6:].to_csv(tmp_path / "b.csv", index=False)
    assert main(["convert", str(tmp_path / "a.csv"), str(out), "--no-progress"]) == 0
    assert main(["convert", str(tmp_path / "b.csv"), str(out), "--append", "--no-progress"]) == 0
    assert [v.version for v in tfrecorder.versions(str(out))] == [1, 2]


def test_a_beam_runner_refuses_to_append_in_one_line(table, tmp_path):
    out = tmp_path / "out"
    _convert(table[:6], out)
    with pytest.raises(TFRecorderError, match=r"mode='append' with runner='DirectRunner': appending runs on the "
                                              r"local runner only"):
        _convert(table[6:], out, mode="append", runner="DirectRunner")
