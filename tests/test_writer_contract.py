"""The writer contract: every runner must pass these (round trip, independent read, determinism, accounting)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf
from PIL import Image

import tfrecorder
from tests.conftest import in_stored_order
from tfrecorder.errors import RowError

_TF_DTYPES = {"int64": tf.int64, "float32": tf.float32, "string": tf.string}


def plain_spec(manifest: dict) -> dict:
    """A parse_example spec built from dataset.json by hand, as a user without tfrecorder would."""
    spec = {}
    for f in manifest["features"]:
        dtype = _TF_DTYPES[f["dtype"]]
        if f["shape"] == [None]:
            spec[f["name"]] = tf.io.VarLenFeature(dtype)
        elif f["nullable"]:
            default = float(f["default"]) if f["dtype"] == "float32" else f["default"]
            spec[f["name"]] = tf.io.FixedLenFeature([], dtype, default_value=default)
        else:
            spec[f["name"]] = tf.io.FixedLenFeature([], dtype)
    return spec


def expected_pixels(path: str) -> np.ndarray:
    """What independent decoders see: Pillow's decode, which for JPEG is also TensorFlow's
    ``decode_jpeg(dct_method="INTEGER_ACCURATE")`` of the source bytes (checked here too)."""
    pillow = np.asarray(Image.open(path).convert("RGB"))
    if not path.endswith(".png"):
        tf_accurate = tf.io.decode_jpeg(Path(path).read_bytes(), channels=3, dct_method="INTEGER_ACCURATE")
        np.testing.assert_array_equal(tf_accurate.numpy(), pillow)
    return pillow


def rows_of(df: pd.DataFrame, split: str) -> pd.DataFrame:
    """The rows of ``split``, in the order they are stored."""
    df = in_stored_order(df)
    return df[df["split"].str.strip().str.upper() == split]


class WriterContract:
    """Tests every runner passes. Subclasses set ``runner`` (and any runner options)."""

    runner = "local"
    options: dict = {}

    def convert(self, source, out, **kwargs):
        return tfrecorder.convert(source, str(out), runner=self.runner, progress=False, **self.options, **kwargs)

    def test_round_trip_images_labels_and_extras(self, image_table, tmp_path):
        out = tmp_path / "out"
        result = self.convert(image_table, out)
        vocabulary = tfrecorder.label_names(str(out))
        assert vocabulary == ["cat", "dog", "goat"]
        datasets = tfrecorder.load_dataset(str(out))
        assert set(datasets) == {"TRAIN", "VALIDATION", "TEST"}
        for split, ds in datasets.items():
            rows = rows_of(image_table, split)
            examples = list(ds.as_numpy_iterator())
            assert len(examples) == len(rows) == result.splits[split].written
            for example, row in zip(examples, rows.itertuples()):
                np.testing.assert_array_equal(example["image"], expected_pixels(row.image_uri))
                assert example["image_uri"].decode() == row.image_uri
                assert example["image_name"].decode() == Path(row.image_uri).name
                assert vocabulary[example["label"]] == row.label
                assert example["weight"] == np.float32(row.weight)
                assert example["count"] == row.count
                assert example["note"].decode() == row.note
                assert example["tags"].tolist() == row.tags
                assert example["split"].decode() == split

    def test_shards_read_by_plain_tf_data_with_manifest_spec(self, image_table, tmp_path):
        out = tmp_path / "out"
        self.convert(image_table, out)
        manifest = json.loads((out / "dataset.json").read_text())
        spec = plain_spec(manifest)
        for split, shards in manifest["splits"].items():
            files = [str(out / s["file"]) for s in shards]
            ds = tf.data.TFRecordDataset(files).batch(64).map(lambda r: tf.io.parse_example(r, spec))
            parsed = next(iter(ds))
            rows = rows_of(image_table, split)
            labels = [manifest["label"]["vocabulary"][i] for i in parsed["label"].numpy()]
            assert labels == rows["label"].tolist()
            assert parsed["image_height"].numpy().tolist() == [
                Image.open(p).height for p in rows["image_uri"]]
            assert sum(s["records"] for s in shards) == len(rows)

    def test_same_input_gives_byte_identical_shards(self, image_table, tmp_path):
        first = self.convert(image_table, tmp_path / "a", num_shards=2)
        second = self.convert(image_table, tmp_path / "b", num_shards=2)
        files_a = sorted(p.name for p in (tmp_path / "a").iterdir())
        assert files_a == sorted(p.name for p in (tmp_path / "b").iterdir())
        assert "train-00001-of-00002.tfrecord" in files_a
        for name in files_a:
            assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
        assert first.bytes == second.bytes

    def test_every_row_accounted_for_with_bad_images(self, image_table, tmp_path):
        bad_dir = tmp_path / "bad"
        bad_dir.mkdir()
        (bad_dir / "empty.jpg").write_bytes(b"")
        good = Path(image_table.loc[1, "image_uri"]).read_bytes()
        (bad_dir / "truncated.jpg").write_bytes(good[: len(good) // 2])
        (bad_dir / "text.png").write_text("not an image")
        bad_rows = pd.DataFrame({
            "split": ["TRAIN", "TEST", "TRAIN", "VALIDATION", "DISCARD"],
            "image_uri": [str(bad_dir / "missing.jpg"), str(bad_dir / "empty.jpg"),
                          str(bad_dir / "truncated.jpg"), str(bad_dir / "text.png"), str(bad_dir / "gone.jpg")],
            "label": ["cat", "dog", "cat", "dog", "cat"], "weight": 1.0, "count": 0, "note": "bad", "tags": [[]] * 5,
        })
        df = pd.concat([image_table, bad_rows], ignore_index=True)
        out = tmp_path / "out"
        result = self.convert(df, out)

        with open(out / "errors.csv", newline="") as f:
            errors = list(csv.DictReader(f))
        assert [(int(e["row"]), e["error"]) for e in errors] == [
            (12, "not_found"), (13, "empty_file"), (14, "decode_error"), (15, "unsupported_format")]
        assert errors[2]["image_uri"] == str(bad_dir / "truncated.jpg")
        manifest = json.loads((out / "dataset.json").read_text())
        for split, counts in manifest["rows"].items():
            assert counts["rows_in"] == counts["written"] + counts["errors"] + counts["discarded"], split
            got = result.splits[split]
            assert (got.rows_in, got.written, got.errors, got.discarded) == tuple(counts.values()), split
        assert manifest["rows"]["TRAIN"] == {"rows_in": 8, "written": 6, "errors": 2, "discarded": 0}
        assert manifest["rows"]["DISCARD"] == {"rows_in": 1, "written": 0, "errors": 0, "discarded": 1}
        assert result.splits["TEST"].errors == 1 and result.splits["VALIDATION"].errors == 1
        assert result.rows.rows_in == len(df)
        train = tfrecorder.load_dataset(str(out), split="TRAIN")
        assert len(list(train)) == int(train.cardinality()) == 6

    def test_on_error_raise_names_row_uri_and_cause(self, image_table, tmp_path):
        df = image_table.copy()
        df.loc[5, "image_uri"] = str(tmp_path / "nope.jpg")
        with pytest.raises(RowError, match=r"row 5 .*'image_uri' = '.*nope\.jpg'.*not_found"):
            self.convert(df, tmp_path / "out", on_error="raise")
        assert not (tmp_path / "out" / "dataset.json").exists()

    @pytest.mark.parametrize("compression,suffix", [("gzip", ".tfrecord.gz"), ("zlib", ".tfrecord.zlib")])
    def test_compressed_shards(self, image_table, tmp_path, compression, suffix):
        out = tmp_path / "out"
        self.convert(image_table, out, compression=compression)
        manifest = json.loads((out / "dataset.json").read_text())
        files = [out / s["file"] for s in manifest["splits"]["TRAIN"]]
        assert all(f.name.endswith(suffix) for f in files)
        plain = tf.data.TFRecordDataset([str(f) for f in files], compression_type=compression.upper())
        assert len(list(plain)) == 6
        loaded = list(tfrecorder.load_dataset(str(out), split="TRAIN").as_numpy_iterator())
        assert [x["image_uri"].decode() for x in loaded] == rows_of(image_table, "TRAIN")["image_uri"].tolist()

    def test_tabular_round_trip_with_missing_values(self, tabular_table, tmp_path):
        out = tmp_path / "out"
        self.convert(tabular_table, out)
        manifest = tfrecorder.read_manifest(str(out))
        assert {f.name for f in manifest.features if f.nullable} == {"x", "n", "text"}
        assert manifest.image is None
        train = list(tfrecorder.load_dataset(str(out), split="TRAIN").as_numpy_iterator())
        rows = rows_of(tabular_table, "TRAIN")
        for example, row in zip(train, rows.itertuples()):
            assert example["label"] == row.label
            if pd.isna(row.x):
                assert np.isnan(example["x"])
            else:
                assert example["x"] == np.float32(row.x)
            assert example["n"] == (0 if pd.isna(row.n) else row.n)
            assert example["flag"] == int(row.flag)
            assert example["text"].decode() == ("" if pd.isna(row.text) else row.text)
            assert example["scores"].tolist() == pytest.approx(row.scores)

    def test_shared_photos_round_trip(self, shared_images, tmp_path):
        out = tmp_path / "out"
        result = self.convert(str(shared_images), out)
        assert {k: v.written for k, v in result.splits.items()} == {"TRAIN": 2, "VALIDATION": 2, "TEST": 2}
        for example in tfrecorder.load_dataset(str(out), split="VALIDATION").as_numpy_iterator():
            source = Path(example["image_uri"].decode())
            np.testing.assert_array_equal(example["image"], expected_pixels(str(source)))
            assert tfrecorder.label_names(str(out))[example["label"]] == source.parent.name


class TestLocal(WriterContract):
    runner = "local"


@pytest.mark.usefixtures("forked")
class TestLocalForked(WriterContract):
    """The local runner with its shards written by forked processes, as for tables of 1,000 images or more."""

    runner = "local"


class TestDirectRunner(WriterContract):
    runner = "DirectRunner"


@pytest.mark.slow
def test_direct_runner_multi_processing_writes_the_same_bytes_as_local(image_table, tmp_path):
    """Beam's worker processes carry out the same plan with the same code: the contract above holds for them
    if their output equals the local runner's, byte for byte (a missing image included)."""
    table = pd.concat([image_table, image_table.iloc[[0]].assign(image_uri=str(tmp_path / "missing.jpg"))],
                      ignore_index=True)
    options = {"direct_running_mode": "multi_processing", "direct_num_workers": 2}
    tfrecorder.convert(table, str(tmp_path / "local"), num_shards=2, progress=False)
    tfrecorder.convert(table, str(tmp_path / "multi"), num_shards=2, runner="DirectRunner", dataflow_options=options)
    names = sorted(p.name for p in (tmp_path / "local").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "multi").iterdir()) and "errors.csv" in names
    for name in names:
        a, b = (tmp_path / "local" / name).read_bytes(), (tmp_path / "multi" / name).read_bytes()
        if name == "dataset.json":  # identical but for the runner that wrote it
            a, b = ({k: v for k, v in json.loads(x).items() if k != "runner"} for x in (a, b))
        if name == ".conversion.json":  # what each conversion was made of: its runner among them
            continue
        assert a == b, name
