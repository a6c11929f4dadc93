"""dataset.json names each feature's connector (its kind of value: dataset/connectors.py), so no reader guesses one
from dtype, role and name: every feature of every kind of table, in both record layouts, names one. A dataset.json
written without the names (by 0.3, or by 0.4 before they were) reads exactly as before - its connectors are guessed
once, as it is opened - and a name this tfrecorder does not know is one line."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import tfrecorder
from tfrecorder import sample_data, types
from tfrecorder.dataset import connectors
from tfrecorder.dataset.manifest import section_digests

OD = dict(record_format="tf_object_detection")


def _tables(data: Path) -> dict[str, tuple[Any, dict[str, Any]]]:
    """Small tables of each kind: images with labels, numbers of every dtype, detection and segmentation scenes."""
    images = sample_data.make_sample_images(str(data / "images"), n=9, size=(16, 16))
    tabular = pd.DataFrame({
        "split": ["TRAIN"] * 6 + ["VALIDATION", "TEST"], "label": [0, 1, 2, 1, 0, 2, 1, 0],
        "x": [0.5, 1.5, np.nan, 3.0, 4.25, -1.0, 2.0, 7.5],
        "n": pd.array([1, None, 3, 4, 5, 6, 7, 2**40], dtype="Int64"),
        "flag": [True, False, True, True, False, False, True, False], "text": ["a", "b", None, "d", "é", "", "g", "h"],
        "scores": [[1.0, 2.0], [], [3.5], [0.0, 1.0, 2.0], [], [1.0], [2.0], [3.0]],
        "tags": [["a"], [], ["b", "c"], ["d"], [], ["e"], ["f"], ["g"]],
        "when": pd.date_range("2020-01-01", periods=8, freq="h"), "raw": [bytes([i]) for i in range(8)],
        "stamp": [1.6e9 + i * 0.001 for i in range(8)]})
    multilabel = pd.DataFrame({"split": ["TRAIN"] * 3 + ["TEST"], "label": [["a"], ["a", "b"], ["b"], ["a"]],
                               "ids": [[1, 2], [3], [], [4]]})
    scenes = sample_data.make_detection_scenes(str(data / "scenes"), n=6, size=(48, 64))
    detection = scenes[["split", "image_uri", "label", "xmin", "ymin", "xmax", "ymax"]].assign(
        score=np.linspace(0.05, 0.95, len(scenes)),
        difficult=pd.array([None if i % 3 == 1 else i % 2 for i in range(len(scenes))], dtype="Int64"))
    segmentation = sample_data.make_segmentation_scenes(str(data / "seg"), n=4, size=(48, 64))
    masks = dict(mask_classes=list(sample_data.SEGMENT_CLASSES))
    return {
        "classification": (images, {}), "tabular": (tabular, {}),
        "multilabel": (multilabel, dict(schema={"split": types.SplitKey, "label": types.StringListLabel,
                                                "ids": types.IntegerListInput})),
        "detection": (detection, {}), "detection_od": (detection, OD),
        "segmentation": (segmentation[["split", "image_uri", "mask_uri"]], masks),
        "segmentation_od": (segmentation[["split", "image_uri", "mask_uri"]], {**masks, **OD}),
    }


@pytest.fixture(scope="module")
def converted(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("connector_names")
    out = {}
    for name, (table, options) in _tables(root / "data").items():
        out[name] = root / name
        tfrecorder.convert(table, str(out[name]), progress=False, **options)
    return out


# What the writer names, where the guess of old would have had to look at dtype, role, name and source.
NAMED = {
    "classification": {"image": "Image", "image_height": "Int64", "image_uri": "Text", "split": "Text",
                       "label": "ClassLabel"},
    "tabular": {"label": "Int64", "x": "Float32", "n": "Int64", "flag": "Int64", "text": "Text",
                "scores": "ListOf(Float32)", "tags": "ListOf(Text)", "when": "Int64", "raw": "Bytes",
                "stamp": "Float64"},
    "multilabel": {"label": "ListOf(ClassLabel)", "ids": "ListOf(Int64)"},
    "detection": {"image": "Image", "objects/bbox": "Objects(BoundingBoxes)", "objects/label": "Objects(ClassLabel)",
                  "objects/score": "Objects(Float32)", "objects/difficult": "Objects(Int64)"},
    "detection_od": {"image/encoded": "Image", "image/height": "Int64", "image/object/bbox/ymin": "Objects(Float32)",
                     "image/object/class/text": "Objects(Text)", "image/object/class/label": "Objects(Int64)",
                     "image/object/score": "Objects(Float32)"},
    "segmentation": {"image": "Image", "segmentation_mask": "Mask"},
    "segmentation_od": {"image/encoded": "Image", "image/segmentation/class/encoded": "Mask",
                        "image/segmentation/class/format": "Text"},
}


def _features(out: Path) -> list[dict[str, Any]]:
    return json.loads((out / "dataset.json").read_text())["features"]


@pytest.mark.parametrize("name", list(NAMED))
def test_every_feature_of_every_kind_of_table_names_its_connector(converted, name):
    listed = _features(converted[name])
    assert all("connector" in f for f in listed), [f["name"] for f in listed if "connector" not in f]
    for f in listed:
        connector = connectors.named(f["connector"])
        assert connector.name == f["connector"] and connector.kind.value == f["dtype"], f
    assert {f["name"]: f["connector"] for f in listed if f["name"] in NAMED[name]} == NAMED[name]


def _unnamed(converted: Path, tmp_path: Path, edit: Callable[[dict[str, Any]], None]) -> str:
    """A copy of ``converted`` whose dataset.json has no connector names, as an older tfrecorder wrote it."""
    out = tmp_path / converted.name
    shutil.copytree(converted, out)
    manifest = json.loads((out / "dataset.json").read_text())
    for feature in manifest["features"]:
        del feature["connector"]
    edit(manifest)
    (out / "dataset.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    return str(out)


def _before_names(manifest: dict[str, Any]) -> None:
    """0.4 before names: format version 5, its digests of the sections as they were (the features without names)."""
    manifest["digests"] = section_digests(manifest)


def _tfrecorder_03(manifest: dict[str, Any]) -> None:
    """0.3: format version 4, no digests."""
    manifest["format_version"] = 4
    del manifest["digests"]


def _read(out: str) -> dict[str, Any]:
    """What each reader makes of a dataset: load_dataset's element_spec (or its one-line refusal), read_tfr's
    frames, info's summary and label counts, and whether verify finds it (and its TFDS files) whole."""
    seen: dict[str, Any] = {}
    manifest = tfrecorder.read_manifest(out)
    for split in manifest.splits:
        try:
            seen[f"spec {split}"] = tfrecorder.load_dataset(out, split).element_spec
        except tfrecorder.TFRecorderError as e:
            seen[f"spec {split}"] = str(e)
        seen[f"frame {split}"] = tfrecorder.read_tfr(out, split=split)
    about = tfrecorder.info(out)
    seen["info"] = (about.summary(), about.label_counts)
    report = tfrecorder.verify(out)
    seen["verify"] = (report.ok, [p.message for p in report.problems])
    return seen


@pytest.mark.parametrize("older", [_before_names, _tfrecorder_03], ids=["0.4 before names", "0.3"])
@pytest.mark.parametrize("name", list(NAMED))
def test_a_dataset_json_without_connector_names_reads_as_before(converted, tmp_path, name, older):
    out = _unnamed(converted[name], tmp_path, older)
    before, now = _read(out), _read(str(converted[name]))
    assert before.keys() == now.keys()
    assert before["verify"] == (True, [])  # its digests verify: the features' as written, without names
    for key, value in before.items():
        if key.startswith("frame"):
            pd.testing.assert_frame_equal(value, now[key])
        else:
            assert value == now[key], key
    guessed = tfrecorder.read_manifest(out).features  # named as it was opened, as readers guessed before
    assert [f.name for f in guessed] == [f.name for f in tfrecorder.read_manifest(str(converted[name])).features]
    assert all(f.connector is not None for f in guessed)


@pytest.mark.parametrize("unknown", ["Polygons", "Objects(Polygons)", "ListOf(ListOf(Text))", 7])
def test_a_connector_this_tfrecorder_does_not_know_is_one_line(converted, tmp_path, unknown):
    def newer(manifest: dict[str, Any]) -> None:  # a newer tfrecorder's: its digests cover the name it wrote
        next(f for f in manifest["features"] if f["name"] == "x")["connector"] = unknown
        manifest["digests"] = section_digests(manifest)

    out = _unnamed(converted["tabular"], tmp_path, newer)
    message = (rf"/dataset.json: feature 'x' has connector {re.escape(repr(unknown))}, which this tfrecorder does not "
               rf"know: import the module that defines it \(a connector of your own\), or upgrade tfrecorder \(a "
               rf"newer one wrote it\)$")
    for read in (tfrecorder.read_tfr, lambda o: tfrecorder.load_dataset(o, "TRAIN"), tfrecorder.info):
        with pytest.raises(tfrecorder.TFRecorderError, match=message) as refused:
            read(out)
        assert "\n" not in str(refused.value)
