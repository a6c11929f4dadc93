"""Readers name what is wrong (issue 41): read_tfr reads the Object Detection API's layout and detection splits
that wrote no record; a hand-edited dataset.json (record counts, the label vocabulary, its features) is one line
naming dataset.json and what differs in every reader, never TensorFlow's or numpy's error or a wrong label."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import tfrecorder
from tests.conftest import edited_dataset
from tfrecorder.sample_data import make_detection_scenes, make_segmentation_scenes

EDGES = ["xmin", "ymin", "xmax", "ymax"]


# --- detection datasets read back ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def scenes(tmp_path_factory) -> pd.DataFrame:
    """6 scenes, some stored turned (EXIF 3, 6, 8), boxes in displayed pixels."""
    scenes = make_detection_scenes(str(tmp_path_factory.mktemp("scenes")), n=6)
    return scenes[["split", "image_uri", "label", *EDGES]].assign(split="TRAIN")


def test_read_tfr_reads_the_object_detection_layout_as_the_long_form(scenes, tmp_path):
    tfrecorder.convert(scenes.assign(area=2.5), str(tmp_path / "od"), record_format="tf_object_detection",
                       progress=False)
    back = tfrecorder.read_tfr(str(tmp_path / "od"))
    assert list(back.columns) == ["image/encoded", "image/format", "image/filename", "image/source_id",
                                  "image/height", "image/width", *EDGES, "label", "area", "label_id"]
    key = ["label", *EDGES]
    got = back[key].sort_values(key).reset_index(drop=True)
    want = scenes[key].sort_values(key).reset_index(drop=True)
    assert got["label"].tolist() == want["label"].tolist()  # names, from the ids counted from 1
    np.testing.assert_allclose(got[EDGES].to_numpy(float), want[EDGES].to_numpy(float), atol=1e-3)  # as displayed
    assert (back["area"] == 2.5).all()
    assert back["label_id"].tolist() == [sorted(scenes["label"].unique()).index(n) for n in back["label"]]


def test_read_tfr_reads_a_segmentation_table_in_the_object_detection_layout(tmp_path):
    scenes = make_segmentation_scenes(str(tmp_path / "scenes"), n=2)
    tfrecorder.convert(scenes[["split", "image_uri", "mask_uri"]], str(tmp_path / "od"),
                       record_format="tf_object_detection", progress=False)
    back = tfrecorder.read_tfr(str(tmp_path / "od"))
    assert len(back) == 2 and all(image[:2] == b"\xff\xd8" for image in back["image/encoded"])  # JPEG bytes
    assert all(mask[:4] == b"\x89PNG" for mask in back["image/segmentation/class/encoded"])


def test_read_tfr_gives_a_detection_split_that_wrote_no_record_its_columns(scenes, tmp_path):
    missing = scenes.iloc[:2].assign(split="TEST", image_uri=str(tmp_path / "no-such.jpg"))
    result = tfrecorder.convert(pd.concat([scenes, missing]), str(tmp_path / "out"), progress=False)
    assert result.splits["TEST"].written == 0 and result.splits["TEST"].errors == 2
    test = tfrecorder.read_tfr(str(tmp_path / "out"), split="TEST")
    assert test.empty
    assert list(test.columns) == list(tfrecorder.read_tfr(str(tmp_path / "out"), split="TRAIN").columns)


# --- a hand-edited dataset.json -----------------------------------------------------------------------------

def table(rows: int = 12) -> pd.DataFrame:
    """Rows of 2 KB (a note each), so an index file is small beside its shard, as for images."""
    return pd.DataFrame({"split": ["TRAIN" if i < 8 else "TEST" for i in range(rows)],
                         "label": ["abc"[i % 3] for i in range(rows)], "w": [float(i) for i in range(rows)],
                         "note": [f"{i:04d}" * 500 for i in range(rows)]})


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("written") / "out"
    tfrecorder.convert(table(), str(out), progress=False)
    return out


def edited(written: Path, tmp_path: Path, edit: Callable[[dict[str, Any]], None]) -> str:
    """A copy of ``written`` whose dataset.json ``edit`` changed."""
    return edited_dataset(written, tmp_path, edit)


def feature(manifest: dict[str, Any], name: str) -> dict[str, Any]:
    return next(f for f in manifest["features"] if f["name"] == name)


def every_reader(out: str, message: str) -> None:
    """read_tfr, load_dataset, info and verify each refuse ``out`` with one TFRecorderError matching ``message``."""
    with pytest.raises(tfrecorder.TFRecorderError, match=message):
        tfrecorder.read_tfr(out)
    with pytest.raises(tfrecorder.TFRecorderError, match=message):
        tfrecorder.load_dataset(out, "TRAIN")
    with pytest.raises(tfrecorder.TFRecorderError, match=message):
        tfrecorder.info(out)
    with pytest.raises(tfrecorder.TFRecorderError, match=message):
        tfrecorder.verify(out)


def test_a_records_count_edited_alone_is_named_by_every_reader(written, tmp_path):
    def more(manifest):
        manifest["splits"]["TRAIN"][0]["records"] = 10

    every_reader(edited(written, tmp_path, more),
                 r"dataset.json: dataset.json says 10 records in TRAIN, its rows say 8 written: dataset.json is "
                 r"damaged or was edited")


def test_a_records_count_edited_with_its_rows_is_named_against_the_shard(written, tmp_path):
    def more(manifest):
        manifest["splits"]["TRAIN"][0]["records"] = manifest["rows"]["TRAIN"]["written"] = 10
        manifest["rows"]["TRAIN"]["rows_in"] = 10

    out = edited(written, tmp_path, more)
    message = r"dataset.json says 10 records in TRAIN \(train-00000-of-00001.tfrecord\), the shard holds 8"
    with pytest.raises(tfrecorder.TFRecorderError, match=message):
        tfrecorder.read_tfr(out)
    with pytest.raises(tfrecorder.TFRecorderError, match=message):  # from the index, before TensorFlow counts
        tfrecorder.load_dataset(out, "TRAIN")
    assert "train-00000-of-00001.tfrecord: 8 records, dataset.json says 10" in str(tfrecorder.verify(out))


def test_a_repeated_label_name_is_refused_not_read_as_one_class(written, tmp_path):
    def repeat(manifest):
        manifest["label"]["vocabulary"] = ["a", "a", "c"]

    every_reader(edited(written, tmp_path, repeat), r"dataset.json: the label vocabulary names 'a' twice "
                                                    r"\(ids 0 and 1\)")


def test_a_shortened_vocabulary_is_named_never_an_index_error(written, tmp_path):
    def shorten(manifest):  # of a dataset.json written before its digests were (test_manifest_edits: after)
        manifest["label"]["vocabulary"] = ["a", "b"]
        del manifest["digests"]

    out = edited(written, tmp_path, shorten)
    message = r"dataset.json: the records hold label id 2, beyond the label vocabulary of 2 names"
    with pytest.raises(tfrecorder.TFRecorderError, match=message):
        tfrecorder.read_tfr(out)
    with pytest.raises(tfrecorder.TFRecorderError, match="beyond the label vocabulary of 2 names"):
        tfrecorder.info(out)
    with pytest.raises(Exception, match="dataset.json: the records hold a label id beyond the label vocabulary of 2 "
                                        "names"):
        list(tfrecorder.load_dataset(out, "TRAIN"))  # a check in the pipeline: ids a model has no class for
    assert "label id 2 is beyond the label vocabulary of 2 names in dataset.json" in str(tfrecorder.verify(out))


@pytest.mark.parametrize("edit, message", [
    (lambda m: m["features"].remove(feature(m, "w")), "the records hold feature 'w', which dataset.json does not list"),
    (lambda m: feature(m, "w").update(dtype="int64"), "feature 'w' is a float_list, dataset.json says int64"),
    (lambda m: feature(m, "label").update(dtype="float32"), "feature 'label' is a int64_list, dataset.json says "
                                                            "float32"),
], ids=["removed", "dtype", "label dtype"])
def test_a_feature_removed_or_retyped_is_named(written, tmp_path, edit, message):
    out = edited(written, tmp_path, edit)
    for read in (tfrecorder.read_tfr, lambda o: tfrecorder.load_dataset(o, "TRAIN"), tfrecorder.info):
        with pytest.raises(tfrecorder.TFRecorderError, match=f"dataset.json: {message}: dataset.json was edited"):
            read(out)
    assert f"record 0: {message}" in str(tfrecorder.verify(out))


def test_a_detection_vocabulary_without_a_counted_class_is_refused(scenes, tmp_path):
    tfrecorder.convert(scenes, str(tmp_path / "out"), progress=False)
    manifest = json.loads((tmp_path / "out" / "dataset.json").read_text())
    dropped = manifest["label"]["vocabulary"].pop()
    (tmp_path / "out" / "dataset.json").write_text(json.dumps(manifest))
    every_reader(str(tmp_path / "out"), f"objects.counts.TRAIN counts class '{dropped}', which the label "
                                        f"vocabulary of {len(manifest['label']['vocabulary'])} names does not hold")
    assert os.path.exists(tmp_path / "out" / "dataset.json")
