"""ConvertResult as users see it, and what validate_images="header" and "full" catch."""

from __future__ import annotations

import csv
from pathlib import Path

import pandas as pd
import pytest

import tfrecorder
from tests.conftest import write_image


def test_result_counts_html_and_tfrecorder2_keys(image_table, tmp_path):
    result = image_table.tensorflow.to_tfr(str(tmp_path / "out"), progress=False)
    assert result["tfrecord_dir"] == str(tmp_path / "out")
    assert result["job_id"] is None
    assert result["metrics"]["rows"] == 12 and result["metrics"]["written"] == 12
    assert result.bytes == sum((tmp_path / "out" / Path(s).name).stat().st_size
                               for split in result.splits.values() for s in split.shards)
    html = result._repr_html_()
    assert "<table>" in html and "<td>TRAIN</td><td>6</td><td>6</td>" in html
    assert "TRAIN" in str(result) and "wrote" in str(result)


def test_header_mode_trusts_headers_full_mode_decodes(image_table, tmp_path):
    good = write_image(tmp_path / "big.jpg", "JPEG", "RGB", (240, 320)).read_bytes()
    (tmp_path / "truncated.jpg").write_bytes(good[: len(good) * 2 // 3])  # header intact, scan cut short
    df = pd.concat([image_table, pd.DataFrame({
        "split": ["TRAIN"], "image_uri": [str(tmp_path / "truncated.jpg")], "label": ["cat"], "weight": 0.0,
        "count": 0, "note": "t", "tags": [[]]})], ignore_index=True)
    header = tfrecorder.convert(df, str(tmp_path / "header"), validate_images="header", progress=False)
    full = tfrecorder.convert(df, str(tmp_path / "full"), validate_images="full", progress=False)
    assert header.splits["TRAIN"].written == 7 and header.errors == 0
    assert full.splits["TRAIN"].written == 6 and full.errors == 1
    with open(tmp_path / "full" / "errors.csv", newline="") as f:
        (row,) = list(csv.DictReader(f))
    assert row["row"] == "12" and row["error"] == "decode_error" and "truncated" in row["message"]


@pytest.mark.parametrize("writers", ["in process", "forked"])
def test_progress_bar_counts_every_row(image_table, tmp_path, capsys, writers, request):
    if writers == "forked":  # the bar shows the rows that writer processes count in shared memory
        request.getfixturevalue("forked")
    table = pd.concat([image_table, image_table.iloc[[0]].assign(image_uri=str(tmp_path / "missing.jpg"))])
    tfrecorder.convert(table, str(tmp_path / "out"), num_shards=2, progress=True)
    bar = capsys.readouterr().err.replace("\r", "\n").strip().splitlines()[-1]
    assert bar.startswith("to_tfr: 100%") and "13/13 [" in bar  # the row that failed counted too
