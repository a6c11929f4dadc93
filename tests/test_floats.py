"""Float columns: float32 (the FloatList every reader expects) unless float32 would change what the column
means - values as written made equal, changes large against the column's range, values made infinite - then
float64 with a warning; the same rule for every source and runner."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf

import tfrecorder
from tfrecorder.write.table.floats import FloatFacts

ROWS = 200


def computed_table() -> pd.DataFrame:
    """The columns a notebook computes: random draws, 7/3, 0.1 - every one float32."""
    rng = np.random.default_rng(0)
    return pd.DataFrame({"split": ["TRAIN"] * ROWS, "x": rng.random(ROWS), "third": np.full(ROWS, 7 / 3),
                         "tenth": np.full(ROWS, 0.1), "z": rng.normal(size=ROWS) / 3, "n": np.arange(ROWS)})


def meaningful_table() -> pd.DataFrame:
    """Columns float32 would change the meaning of: times 1.75 s apart (float32's step there is 128 s), an id
    column with blanks (float because of them) whose ids float32 merges, values beyond float32's range."""
    ids = np.where(np.arange(ROWS) % 10 == 0, np.nan, 16_777_216.0 + np.arange(ROWS))
    return pd.DataFrame({"split": ["TRAIN"] * ROWS, "t": 1_700_000_001.75 + np.arange(ROWS) * 1.75, "id": ids,
                         "huge": [1e39, 3e300] + [1.0] * (ROWS - 2), "x": np.arange(ROWS) / 7})


def dtypes(out) -> dict[str, str]:
    return {f.name: f.dtype for f in tfrecorder.read_manifest(str(out)).features}


def test_computed_columns_are_float32_and_plain_tf_reads_them(tmp_path):
    df = computed_table()
    result = tfrecorder.convert(df, str(tmp_path / "out"), progress=False)
    assert result.warnings == ()
    assert {k: v for k, v in dtypes(tmp_path / "out").items() if k in ("x", "third", "tenth", "z")} == dict.fromkeys(
        ["x", "third", "tenth", "z"], "float32")
    spec = {name: tf.io.FixedLenFeature([], tf.float32) for name in ("x", "third", "tenth", "z")}
    spec["n"] = tf.io.FixedLenFeature([], tf.int64)
    files = [str(tmp_path / "out" / s["file"]) for s in json.loads((tmp_path / "out" / "dataset.json").read_text())
             ["splits"]["TRAIN"]]
    parsed = next(iter(tf.data.TFRecordDataset(files).batch(ROWS).map(lambda r: tf.io.parse_example(r, spec))))
    order = parsed["n"].numpy()  # records are stored by content hash: n gives each its row
    for name in ("x", "third", "tenth", "z"):
        np.testing.assert_array_equal(parsed[name].numpy(), df[name].to_numpy(np.float32)[order])


def test_columns_float32_would_change_are_float64_with_a_warning_and_read_back_exactly(tmp_path):
    df = meaningful_table()
    result = tfrecorder.convert(df, str(tmp_path / "out"), progress=False)
    assert dtypes(tmp_path / "out")["x"] == "float32"
    assert {k: dtypes(tmp_path / "out")[k] for k in ("t", "id", "huge")} == dict.fromkeys(("t", "id", "huge"),
                                                                                          "float64")
    warned = {w.split("'")[1]: w for w in result.warnings if w.startswith("column ")}
    assert sorted(warned) == ["huge", "id", "t"]
    assert "1700000001.75 and 1700000003.5 both become 1700000000.0" in warned["t"]
    assert "16777219.0 and 16777220.0 both become 16777220.0" in warned["id"]
    assert "2 values beyond its range (+-3.4e38) infinite, e.g. 1e+39" in warned["huge"]
    assert all("float_precision='float32' or 'float64' chooses" in w for w in warned.values())
    assert "warning: column &#x27;t&#x27; is stored as float64" in result._repr_html_()  # the notebook table
    back = tfrecorder.read_tfr(str(tmp_path / "out")).sort_values("t", ignore_index=True)
    for name in ("t", "id", "huge"):
        np.testing.assert_array_equal(back[name].to_numpy(), df[name].to_numpy())
    batch = next(iter(tfrecorder.load_dataset(str(tmp_path / "out"), split="TRAIN", batch_size=ROWS)))
    assert batch["t"].dtype == tf.float64 and sorted(batch["t"].numpy()) == df["t"].tolist()
    assert batch["huge"].numpy().max() == 3e300


def test_forced_float32_refuses_values_beyond_its_range(tmp_path):
    with pytest.raises(tfrecorder.SchemaError, match=r"column 'huge': 2 values are beyond float32's range .*"
                                                     r"1e\+39 \(rows 0, 1\).*use 'auto' or 'float64'"):
        tfrecorder.convert(meaningful_table(), str(tmp_path / "out"), float_precision="float32")
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_the_cli_names_the_float64_columns(tmp_path, command):
    meaningful_table().drop(columns="huge").to_csv(tmp_path / "t.csv", index=False)
    proc = command("convert", str(tmp_path / "t.csv"), str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stderr
    assert "warning: column 't' is stored as float64, not float32: float32 would make distinct values" in proc.stdout


@pytest.mark.parametrize("precision", ["auto", "float32", "float64"])
def test_every_source_and_runner_decides_alike(tmp_path, precision):
    df = meaningful_table().drop(columns="huge").assign(x=np.random.default_rng(1).random(ROWS))
    df.to_csv(tmp_path / "t.csv", index=False)
    df.iloc[:90].to_csv(tmp_path / "a.csv", index=False)  # a glob of two files: facts merged across them
    df.iloc[90:].to_csv(tmp_path / "b.csv", index=False)
    df.to_parquet(tmp_path / "t.parquet")
    sources = {"frame": df, "csv": str(tmp_path / "t.csv"), "parquet": str(tmp_path / "t.parquet"),
               "glob": str(tmp_path / "[ab].csv")}
    outputs = {}
    for name, source in sources.items():
        for runner in ("local", "DirectRunner") if name in ("frame", "glob") else ("local",):
            out = tmp_path / f"{name}-{runner}"
            tfrecorder.convert(source, str(out), runner=runner, progress=False, float_precision=precision)
            outputs[(name, runner)] = ({k: v for k, v in dtypes(out).items() if k in ("t", "id", "x")},
                                       (out / "train-00000-of-00001.tfrecord").read_bytes())
    expected = {"auto": ("float64", "float64", "float32")}.get(precision, (precision,) * 3)
    assert {k: tuple(v[0][c] for c in ("t", "id", "x")) for k, v in outputs.items()} == dict.fromkeys(
        outputs, expected)
    assert len({shards for _, shards in outputs.values()}) == 1  # byte-identical


def test_the_tfds_reader_yields_every_column_of_a_mixed_table(tmp_path):
    tfds = pytest.importorskip("tensorflow_datasets")
    df = computed_table().assign(label=["a", "b"] * (ROWS // 2), note=[f"row {i}" for i in range(ROWS)],
                                 tags=[[i, i + 1] for i in range(ROWS)], flag=np.arange(ROWS) % 3 == 0)
    result = tfrecorder.convert(df, str(tmp_path / "out"), progress=False)
    assert result.warnings == ()
    rows = list(tfds.as_numpy(tfds.builder_from_directory(str(tmp_path / "out")).as_dataset(split="train")))
    assert len(rows) == ROWS
    assert set(rows[0]) == {"split", "x", "third", "tenth", "z", "n", "label", "note", "tags", "flag"}
    by_n = {int(r["n"]): r for r in rows}
    assert by_n[5]["x"] == np.float32(df["x"][5]) and by_n[5]["third"] == np.float32(7 / 3)


def test_a_column_tfds_cannot_read_is_named_in_the_warnings(tmp_path):
    df = computed_table().assign(maybe=[1.5, None] * (ROWS // 2))
    result = tfrecorder.convert(df, str(tmp_path / "out"), progress=False)
    assert result.warnings == ("TFDS (tfds.builder_from_directory) will not see feature 'maybe': some records "
                               "lack it (missing values), and TFDS needs every feature in every record",)


def test_the_rule_on_the_whole_column_and_across_parts():
    random = np.random.default_rng(0).random(100_000)  # many random draws share a float32: rounding, kept float32
    assert FloatFacts.of(random).float64_reason() is None
    assert FloatFacts.of(np.full(5, 1_700_000_001.75)).float64_reason() is None  # one value: nothing to tell apart
    small_range = np.array([1000.0001, 1000.0002, 1000.0004]) + np.pi * 1e-8  # computed, moved by 1e-4 of range
    reason = FloatFacts.of(small_range).float64_reason()
    assert "(9.07% of the column's range), e.g. 1000.0004000314159 becomes" in reason
    one, other = FloatFacts.of(np.array([16_777_216.0, 1.0])), FloatFacts.of(np.array([16_777_217.0, 2.0]))
    assert one.float64_reason() is None and other.float64_reason() is None
    assert "16777216.0 and 16777217.0 both become 16777216.0" in one.merge(other).float64_reason()
    assert one.merge(other).settled().float64_reason() == one.merge(other).float64_reason()


def test_a_per_object_float64_column_is_read_back_as_float64(tmp_path):
    """A detection table's extra column that float32 would change is stored as float64 per object, and
    load_dataset gives its objects' values back as float64, not as the int64 bits they are stored as."""
    from tfrecorder.sample_data import make_detection_scenes

    scenes = make_detection_scenes(str(tmp_path / "scenes"), n=4, size=(32, 48))
    times = 1_700_000_001.75 + np.arange(len(scenes)) * 1.75
    table = scenes[["split", "image_uri", "label", "xmin", "ymin", "xmax", "ymax"]].assign(t=times, split="TRAIN")
    tfrecorder.convert(table, str(tmp_path / "out"), progress=False)
    assert dtypes(tmp_path / "out")["objects/t"] == "float64"
    found = [t for example in tfrecorder.load_dataset(str(tmp_path / "out"), "TRAIN")
             for t in example["objects"]["t"].numpy().tolist()]
    assert sorted(found) == times.tolist()
