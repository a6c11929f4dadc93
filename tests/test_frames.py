"""read_tfr: a converted table read back into pandas equals the original, column by column."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import tfrecorder
from tests.conftest import in_stored_order
from tfrecorder.errors import TFRecorderError


def test_tabular_round_trip_keeps_names_dtypes_and_missing_values(tabular_table, tmp_path):
    tfrecorder.convert(tabular_table, str(tmp_path / "out"), progress=False)
    back = tfrecorder.read_tfr(str(tmp_path / "out"), split="TRAIN")
    stored = in_stored_order(tabular_table)  # rows are stored by the hash of their content
    original = stored[stored.split == "TRAIN"].reset_index(drop=True)
    assert list(back.columns) == list(original.columns)
    assert back["label"].tolist() == original["label"].tolist() and back["label"].dtype == np.int64
    np.testing.assert_array_equal(back["x"].to_numpy(), original["x"].to_numpy(np.float32))
    assert back["n"].dtype == "Int64" and back["n"].isna().tolist() == original["n"].isna().tolist()
    assert back["n"].dropna().tolist() == original["n"].dropna().tolist()
    assert back["flag"].dtype == bool and back["flag"].tolist() == original["flag"].tolist()
    assert back["text"].isna().tolist() == original["text"].isna().tolist()
    assert back["text"].dropna().tolist() == original["text"].dropna().tolist()
    assert [list(v) for v in back["scores"]] == [list(v) for v in original["scores"]]


def test_image_table_labels_names_and_ids(image_table, tmp_path):
    tfrecorder.convert(image_table, str(tmp_path / "out"), progress=False, num_shards=2)
    back = tfrecorder.read_tfr(str(tmp_path / "out"))
    stored = in_stored_order(image_table)
    order = pd.concat([stored[stored.split.str.strip().str.upper() == s] for s in ("TRAIN", "VALIDATION", "TEST")])
    assert back["image_uri"].tolist() == order["image_uri"].tolist()
    assert back["label"].tolist() == order["label"].tolist()
    assert back["label_id"].tolist() == [["cat", "dog", "goat"].index(v) for v in order["label"]]
    assert back["image"].iloc[0] == open(order["image_uri"].iloc[0], "rb").read()
    assert back["note"].tolist() == order["note"].tolist()
    assert tfrecorder.read_tfr(str(tmp_path / "out"), split="test", columns=["note"]).columns.tolist() == ["note"]
    with pytest.raises(TFRecorderError, match=r"columns \['nope'\] are not in the dataset"):
        tfrecorder.read_tfr(str(tmp_path / "out"), columns=["nope"])


@pytest.mark.slow  # a subprocess
def test_read_tfr_does_not_import_tensorflow(tabular_table, tmp_path):
    tfrecorder.convert(tabular_table, str(tmp_path / "out"), progress=False, compression="gzip")
    code = (f"import sys, tfrecorder; df = tfrecorder.read_tfr({str(tmp_path / 'out')!r});"
            "assert len(df) == 8 and 'tensorflow' not in sys.modules")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
