"""read_tfr gives back each column's pandas dtype as written: widths, float16, bool, category with its categories
and order, datetimes with their time zone and timedeltas (stored as int64 counts of their unit)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf

import tfrecorder

N = 6


def every_dtype() -> pd.DataFrame:
    times = pd.Series(pd.date_range("2024-01-01", periods=N, freq="D"))
    return pd.DataFrame({
        "split": ["TRAIN"] * N,
        **{name: np.arange(N, dtype=name) for name in ("int8", "int16", "int32", "uint8", "uint16", "uint32",
                                                        "uint64")},
        "float16": np.arange(N, dtype=np.float16) / 4, "float32": np.arange(N, dtype=np.float32) / 3,
        "float64": np.arange(N) / 7,  # stored as float32: comes back float64, holding the stored values
        "flag": np.arange(N) % 2 == 0, "maybe": pd.array([1, None, 3, 4, 5, 6], dtype="Int8"),
        "size": pd.Categorical(["lo", "hi", "mid", "lo", "hi", "mid"], categories=["lo", "mid", "hi"], ordered=True),
        "when": pd.date_range("2024-01-01", periods=N, freq="h"),
        "local": pd.date_range("2024-03-31", periods=N, freq="h", tz="Europe/Paris"),  # across a DST change
        "took": pd.to_timedelta(np.arange(N), unit="s"),
        "seen": times.where(times.index != 2),  # NaT
    })


@pytest.mark.parametrize("runner", ["local", "DirectRunner"])
def test_read_tfr_gives_back_each_dtype_as_written(tmp_path, runner):
    df = every_dtype()
    tfrecorder.convert(df, str(tmp_path / "out"), runner=runner, progress=False)
    back = tfrecorder.read_tfr(str(tmp_path / "out")).sort_values("int8", ignore_index=True)
    assert {c: str(back[c].dtype) for c in df} == {c: str(df[c].dtype) for c in df}
    for column in df.columns.drop("float64"):
        pd.testing.assert_series_equal(back[column], df[column], check_names=False)
    assert back["float64"].tolist() == df["float64"].astype(np.float32).astype(np.float64).tolist()
    assert back["size"].cat.categories.tolist() == ["lo", "mid", "hi"] and back["size"].cat.ordered


def test_datetimes_are_int64_for_tensorflow_and_tfds(tmp_path):
    tfds = pytest.importorskip("tensorflow_datasets")
    df = every_dtype()[["split", "int8", "when", "local", "took"]]
    tfrecorder.convert(df, str(tmp_path / "out"), progress=False)
    spec = tfrecorder.feature_spec(str(tmp_path / "out"))
    assert {name: spec[name].dtype for name in ("when", "local", "took")} == dict.fromkeys(
        ("when", "local", "took"), tf.int64)
    batch = next(iter(tfrecorder.load_dataset(str(tmp_path / "out"), split="TRAIN", batch_size=N)))
    order = np.argsort(batch["int8"].numpy())
    assert batch["when"].numpy()[order].tolist() == df["when"].to_numpy().view(np.int64).tolist()  # us since 1970
    assert batch["local"].numpy()[order].tolist() == df["local"].array.asi8.tolist()  # UTC instants
    row = next(iter(tfds.as_numpy(tfds.builder_from_directory(str(tmp_path / "out")).as_dataset(split="train"))))
    assert {type(row[name]) for name in ("when", "local", "took")} == {np.int64}
