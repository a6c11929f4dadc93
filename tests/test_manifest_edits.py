"""A dataset.json edited by hand after its shards were written is named when the dataset is opened (issue 41): it
records a digest of each section readers rely on, so an edit that still looks plausible - a shortened or reordered
label vocabulary, records and rows counted again together, a scalar feature made a list - is one line naming the
section (and, where the records show it, what they hold), never TensorFlow's error or a wrong label. verify lists
it among its problems. A dataset.json written before digests keeps loading."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import tfrecorder
from tests.conftest import edited_dataset
from tfrecorder.dataset.manifest import Manifest

EDITED = r"dataset.json: edited after the shards were written: the {} changed \(its digests no longer match\); " \
         r"restore dataset.json from a copy, or convert again$"
LABEL = EDITED.format(r"label \(its vocabulary, feature and type\)")


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> Path:
    """Short records (a label and a number each): their index files are never counted as a shard is opened."""
    out = tmp_path_factory.mktemp("written") / "out"
    table = pd.DataFrame({"split": ["TRAIN"] * 8 + ["TEST"] * 2, "label": [*"abcabcab", "a", "c"],
                          "w": [float(i) for i in range(10)]})
    tfrecorder.convert(table, str(out), progress=False)
    return out


def edited(written: Path, tmp_path: Path, edit: Callable[[dict[str, Any]], None]) -> str:
    """A copy of ``written`` whose dataset.json ``edit`` changed, indented by 4 as a person's editor would."""
    return edited_dataset(written, tmp_path, edit, indent=4)


def refused_by_every_reader(out: str, message: str) -> None:
    """read_tfr, load_dataset (before any iteration), info and label_names refuse ``out`` with one TFRecorderError
    matching ``message``; verify reports it as a problem of dataset.json."""
    for read in (tfrecorder.read_tfr, lambda o: tfrecorder.load_dataset(o, "TRAIN"), tfrecorder.info,
                 tfrecorder.label_names):
        with pytest.raises(tfrecorder.TFRecorderError, match=message):
            read(out)
    report = tfrecorder.verify(out)
    named = [p for p in report.problems if p.file == "dataset.json" and re.search(message[len("dataset.json: "):],
                                                                                  p.message)]
    assert len(named) == 1, report


def test_a_shortened_vocabulary_is_named_at_open_not_in_the_pipeline(written, tmp_path):
    refused_by_every_reader(edited(written, tmp_path, lambda m: m["label"].update(vocabulary=["a", "b"])), LABEL)


def test_a_reordered_vocabulary_is_named_never_read_as_other_labels(written, tmp_path):
    refused_by_every_reader(edited(written, tmp_path, lambda m: m["label"].update(vocabulary=["b", "a", "c"])),
                            LABEL)


def test_records_and_rows_edited_together_on_short_records_name_the_shards_count(written, tmp_path):
    def more(manifest):
        manifest["splits"]["TRAIN"][0]["records"] = manifest["rows"]["TRAIN"]["written"] = 10
        manifest["rows"]["TRAIN"]["rows_in"] = 10

    out = edited(written, tmp_path, more)
    message = (r"dataset.json: dataset.json says 10 records in TRAIN \(train-00000-of-00001.tfrecord\), the shard "
               r"holds 8: dataset.json was edited or damaged")
    for read in (tfrecorder.read_tfr, lambda o: tfrecorder.load_dataset(o, "TRAIN"), tfrecorder.info):
        with pytest.raises(tfrecorder.TFRecorderError, match=message):
            read(out)
    assert any("the record and row counts changed" in p.message for p in tfrecorder.verify(out).problems)


@pytest.mark.parametrize("name, shape", [("w", [None]), ("label", [None])], ids=["scalar to list", "label to list"])
def test_a_scalar_feature_made_a_list_is_named(written, tmp_path, name, shape):
    def listed(manifest):
        next(f for f in manifest["features"] if f["name"] == name).update(shape=shape)

    refused_by_every_reader(edited(written, tmp_path, listed), EDITED.format("features"))


def test_a_dataset_json_written_before_digests_keeps_loading(written, tmp_path):
    out = edited(written, tmp_path, lambda m: m.pop("digests"))
    assert len(tfrecorder.read_tfr(out)) == 10
    assert tfrecorder.verify(out).ok


def test_digests_do_not_depend_on_the_files_layout_and_are_written_back_the_same(written, tmp_path):
    text = (written / "dataset.json").read_text()
    assert Manifest.from_json(text).to_json() == text  # deterministic: what a second writer would write
    out = edited(written, tmp_path, lambda m: None)  # another indent, the same content
    assert tfrecorder.label_names(out) == ["a", "b", "c"] and tfrecorder.verify(out).ok
