"""Data leakage: the same image in TRAIN and VALIDATION/TEST is a warning in the result and dataset.json."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest

import tfrecorder
from tests.conftest import write_image


@pytest.mark.parametrize("runner", ["local", "DirectRunner"])
def test_same_uri_and_same_bytes_across_splits_are_reported(tmp_path, runner):
    """Locally from the whole table; in a Beam pipeline by GroupByKey on ranges of the URIs' hashes and of the
    written images' content keys (no worker holds them all): the same report."""
    a = write_image(tmp_path / "a.jpg", seed=1)
    b = write_image(tmp_path / "b.jpg", seed=2)
    copy = shutil.copy(b, tmp_path / "b-copy.jpg")
    c = write_image(tmp_path / "c.jpg", seed=3)
    df = pd.DataFrame({
        "split": ["TRAIN", "TEST", "TRAIN", "VALIDATION", "TRAIN", "TRAIN"],
        "image_uri": [str(a), str(a), str(b), str(copy), str(c), str(c)],  # c twice, but only in TRAIN
        "label": ["x", "x", "y", "y", "x", "x"],
    })
    result = tfrecorder.convert(df, str(tmp_path / "out"), progress=False, runner=runner)
    manifest = json.loads((tmp_path / "out" / "dataset.json").read_text())
    assert manifest["leakage"] == {"count": 2, "groups": [
        {"kind": "same_uri", "splits": ["TRAIN", "TEST"], "rows": [0, 1], "image_uri": str(a)},  # splits' order
        {"kind": "same_bytes", "splits": ["TRAIN", "VALIDATION"], "rows": [2, 3]},
    ]}
    (warning,) = result.warnings
    assert warning.startswith("2 images appear in TRAIN and in VALIDATION/TEST")
    assert "e.g. rows 0 (TRAIN), 1 (TEST) (same_uri)" in warning
    assert "warning: 2 images appear" in str(result)


def test_no_leak_no_warning(image_table, tmp_path):
    result = tfrecorder.convert(image_table, str(tmp_path / "out"), progress=False)
    assert result.warnings == () and tfrecorder.read_manifest(str(tmp_path / "out")).leakage["count"] == 0
