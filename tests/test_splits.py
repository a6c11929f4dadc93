"""Split normalisation and the stable hash assignment of UNASSIGNED rows."""

from __future__ import annotations

from collections import Counter

import pandas as pd
import pytest

import tfrecorder
from tfrecorder.write import splits


def test_values_are_trimmed_and_case_insensitive():
    assert splits.normalize_splits("split", [" train", "Validation ", "TEST", "discard", "unassigned"]) == [
        "TRAIN", "VALIDATION", "TEST", "DISCARD", "UNASSIGNED"]


def test_hash_assignment_is_stable_and_near_80_10_10():
    # Golden values: the same key must land in the same split on every machine, run and version.
    # sha256("gs://bucket/a.jpg")[:8] as a fraction of 2**64, computed once and pinned here.
    assert splits.hash_fraction("gs://bucket/a.jpg") == pytest.approx(0.09203503662227211, abs=1e-15)
    assert splits.assign_split("gs://bucket/a.jpg") == "TRAIN"
    assert splits.assign_split("gs://bucket/a.jpg", (0.05, 0.02, 0.93)) == "TEST"
    counts = Counter(splits.assign_split(f"/data/{i}.png") for i in range(20_000))
    assert counts["TRAIN"] / 20_000 == pytest.approx(0.8, abs=0.01)
    assert counts["VALIDATION"] / 20_000 == pytest.approx(0.1, abs=0.01)


def test_unassigned_and_missing_split_column_are_assigned(tmp_path, tabular_table):
    df = tabular_table.drop(columns=["split"])
    df = pd.concat([df] * 30, ignore_index=True)
    df["x"] = range(len(df))  # distinct rows, distinct hashes
    first = tfrecorder.convert(df, str(tmp_path / "a"), progress=False, split_fractions=(0.5, 0.25, 0.25))
    second = tfrecorder.convert(df, str(tmp_path / "b"), progress=False, split_fractions=(0.5, 0.25, 0.25))
    assert {k: v.written for k, v in first.splits.items()} == {k: v.written for k, v in second.splits.items()}
    assert set(first.splits) == {"TRAIN", "VALIDATION", "TEST"}
    assert 80 <= first.splits["TRAIN"].written <= 160


def test_discard_rows_are_counted_not_written(tmp_path, tabular_table):
    df = tabular_table.copy()
    df.loc[[0, 1], "split"] = "discard"
    result = tfrecorder.convert(df, str(tmp_path / "out"), progress=False)
    assert result.splits["DISCARD"].discarded == 2
    assert result.splits["TRAIN"].written == 4
