"""Other readers of our folders, each the real client: TensorFlow Datasets, random-access readers' index files,
plain tf.data with only dataset.json (the snippet in docs/other-readers.md), Apache Beam, and PyTorch's
`tfrecord` package (optional: runs where torch and tfrecord are installed)."""

from __future__ import annotations

import gzip
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf

import tfrecorder
from tfrecorder.dataset.records import masked_crc

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def pets(image_table, tmp_path) -> Path:
    """The image table converted into TFDS's <data_dir>/<name>/<version> layout."""
    out = tmp_path / "data" / "pets" / "1.0.0"
    tfrecorder.convert(image_table, str(out), progress=False, num_shards=2)
    return out


def test_tfds_builder_from_directory_reads_splits_labels_and_images(pets, image_table):
    tfds = pytest.importorskip("tensorflow_datasets")
    builder = tfds.builder_from_directory(str(pets))
    assert (builder.info.name, str(builder.info.version)) == ("pets", "1.0.0")
    assert {k: v.num_examples for k, v in builder.info.splits.items()} == {"train": 6, "validation": 3, "test": 3}
    assert builder.info.features["label"].names == tfrecorder.label_names(str(pets)) == ["cat", "dog", "goat"]
    theirs = list(tfds.as_numpy(builder.as_dataset(split="train")))
    ours = list(tfrecorder.load_dataset(str(pets), split="TRAIN").as_numpy_iterator())
    assert len(theirs) == len(ours) == 6
    for a, b in zip(theirs, ours):
        assert a["image_uri"] == b["image_uri"] and a["label"] == b["label"] and list(a["tags"]) == list(b["tags"])
        assert a["weight"] == b["weight"] and a["note"] == b["note"]
        if b["image_format"] == b"png":
            np.testing.assert_array_equal(a["image"], b["image"])
        else:  # TFDS decodes JPEGs with TensorFlow's default (fast) IDCT; ours with the accurate one
            assert a["image"].shape == b["image"].shape
            assert np.abs(a["image"].astype(int) - b["image"]).max() <= 8
    image, label = next(iter(tfds.as_numpy(builder.as_dataset(split="test", as_supervised=True))))
    assert image.ndim == 3 and image.dtype == np.uint8 and 0 <= label < 3


def test_tfds_load_finds_the_dataset_by_name_under_data_dir(pets):
    tfds = pytest.importorskip("tensorflow_datasets")
    validation = tfds.load("pets", data_dir=str(pets.parents[1]), split="validation")
    assert len(list(validation)) == 3


def test_verify_accepts_tfds_convert_format_beside_our_shards(pets):
    """TFDS's own convert_format, run in place (its --out_dir form cannot copy our folder: it expects the shards
    there already), writes ArrayRecord shards beside ours and names the format in dataset_info.json: verify names
    it instead of calling the folder damaged, and tfds.data_source reads it."""
    tfds = pytest.importorskip("tensorflow_datasets")
    pytest.importorskip("array_record")
    from tensorflow_datasets.scripts.cli import convert_format_utils

    convert_format_utils.convert_dataset(out_dir=None, out_file_format="array_record", dataset_version_dir=str(pets),
                                         num_workers=1)
    assert "alternativeFileFormats" in json.loads((pets / "dataset_info.json").read_text())
    report = tfrecorder.verify(str(pets))
    assert report.ok, str(report)
    assert "TFDS's alternative file formats (array_record, added by its convert_format)" in str(report)
    source = tfds.data_source("pets", data_dir=str(pets.parents[1]), split="train")
    assert len(source) == 6 and source[0]["label"] in (0, 1, 2)
    (pets / "test-00000-of-00002.array_record").unlink()
    assert [str(p) for p in tfrecorder.verify(str(pets)).problems] == [
        "dataset_info.json: lists alternative file format 'array_record' (TFDS's convert_format), but "
        "test-00000-of-00002.array_record is missing"]


def test_tfds_reads_a_tabular_table_and_leaves_out_columns_with_missing_values(tabular_table, tmp_path):
    tfds = pytest.importorskip("tensorflow_datasets")
    out = tmp_path / "table"
    tfrecorder.convert(tabular_table, str(out), progress=False)
    info = json.loads((out / "dataset.json").read_text())["tfds"]
    assert info["written"] and sorted(info["left_out"]) == ["n", "text", "x"]  # the nullable columns
    assert "missing values" in info["left_out"]["x"]
    rows = list(tfds.as_numpy(tfds.builder_from_directory(str(out)).as_dataset(split="train")))
    expected = tfrecorder.read_tfr(str(out), split="TRAIN")
    assert [int(r["label"]) for r in rows] == expected["label"].tolist()
    assert [bool(r["flag"]) for r in rows] == expected["flag"].tolist()
    assert [r["scores"].tolist() for r in rows] == [list(v) for v in expected["scores"]]
    assert not {"x", "n", "text"} & set(rows[0])


def test_compressed_output_gets_no_tfds_metadata_and_dataset_json_says_why(image_table, tmp_path):
    out = tmp_path / "gz"
    tfrecorder.convert(image_table, str(out), progress=False, compression="gzip")
    assert not (out / "dataset_info.json").exists() and not (out / "features.json").exists()
    manifest = json.loads((out / "dataset.json").read_text())
    assert manifest["tfds"] == {"written": False, "why": "TFDS reads uncompressed TFRecord files only (these are gzip)"}
    assert manifest["tf_compression_type"] == "GZIP"


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_index_lines_frame_every_record_and_cover_the_stream(image_table, tmp_path, compression):
    out = tmp_path / "out"
    tfrecorder.convert(image_table, str(out), progress=False, num_shards=2, compression=compression)
    manifest = json.loads((out / "dataset.json").read_text())
    shards = [s for split in manifest["splits"].values() for s in split]
    assert len(shards) == 6 and all(s["index"] == re.sub(r"\.tfrecord(\.gz)?$", ".tfindex", s["file"])
                                    for s in shards)
    for shard in shards:
        data = (out / shard["file"]).read_bytes()
        stream = gzip.decompress(data) if compression else data  # offsets count in the decompressed stream
        lines = [tuple(map(int, line.split())) for line in (out / shard["index"]).read_text().splitlines()]
        assert len(lines) == shard["records"]
        at = 0
        for offset, length in lines:
            assert offset == at  # one after another, nothing skipped
            frame = stream[offset:offset + length]
            header, payload, footer = frame[:12], frame[12:-4], frame[-4:]
            assert int.from_bytes(header[8:12], "little") == masked_crc(header[:8])
            assert int.from_bytes(header[:8], "little") == len(payload)
            assert int.from_bytes(footer, "little") == masked_crc(payload)
            at += length
        assert at == len(stream)  # the lines cover the file exactly


def test_verify_checks_index_files_and_load_dataset_ignores_them(image_table, tmp_path):
    out = tmp_path / "out"
    tfrecorder.convert(image_table, str(out), progress=False, num_shards=2)
    assert tfrecorder.verify(str(out)).ok
    index = out / "train-00001-of-00002.tfindex"
    lines = index.read_text().splitlines()
    offset, length = lines[1].split()
    index.write_text("\n".join([lines[0], f"{offset} {int(length) + 1}", *lines[2:]]) + "\n")
    report = tfrecorder.verify(str(out))
    assert not report.ok
    assert [str(p) for p in report.problems] == [
        f"train-00001-of-00002.tfindex: record 1: says '{offset} {int(length) + 1}'; the record is at offset "
        f"{offset}, {length} bytes"]
    (out / "test-00000-of-00002.tfindex").unlink()
    assert "test-00000-of-00002.tfindex: the index file is missing" in str(tfrecorder.verify(str(out)))
    assert len(list(tfrecorder.load_dataset(str(out), split="TRAIN"))) == 6  # the reader never opens them


def test_the_docs_plain_tf_snippet_reads_a_dataset(tabular_table, tmp_path, monkeypatch):
    readme = (ROOT / "docs" / "other-readers.md").read_text()
    snippet = readme.split("<!-- test: tests/test_interop.py runs this block -->", 1)[1]
    code = snippet.split("```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(tmp_path)
    table = tabular_table.assign(t=[1700000001.75 + i for i in range(7)] + [None])  # a float64 column
    tfrecorder.convert(table, "out", progress=False, compression="gzip", num_shards=2)
    namespace: dict = {}
    exec(compile(code, "other-readers.md", "exec"), namespace)  # noqa: S102 - our own docs' code
    batch = next(iter(namespace["train"]))
    expected = tfrecorder.read_tfr("out", split="TRAIN")
    assert batch["label"].numpy().tolist() == expected["label"].tolist()
    x = batch["x"].numpy()
    np.testing.assert_array_equal(x, expected["x"].to_numpy(np.float32))
    assert np.isnan(x).sum() == 1  # a missing float reads as NaN
    assert batch["scores"].to_list() == [list(v) for v in expected["scores"]]
    assert batch["t"].dtype == tf.float64 and batch["t"].numpy().tolist() == expected["t"].tolist()
    assert 1700000001.75 in expected["t"].tolist()  # float64 kept exactly
    assert namespace["spec"].keys() == tfrecorder.feature_spec("out").keys()


def test_feature_spec_parses_the_shards_with_plain_tf_data(image_table, tmp_path):
    out = tmp_path / "out"
    tfrecorder.convert(image_table, str(out), progress=False)
    spec = tfrecorder.feature_spec(str(out))
    assert isinstance(spec["tags"], tf.io.RaggedFeature) and spec["image"].dtype == tf.string
    records = tf.data.TFRecordDataset([str(out / "train-00000-of-00001.tfrecord")]).batch(6)
    batch = next(iter(records.map(lambda r: tf.io.parse_example(r, spec))))
    assert batch["label"].shape == [6] and set(batch) == {f["name"] for f in
                                                          json.loads((out / "dataset.json").read_text())["features"]}
    assert set(tfrecorder.feature_spec(str(out), features=["label", "weight"])) == {"label", "weight"}


def test_beam_read_from_tfrecord_reads_every_record(image_table, tmp_path):
    import apache_beam as beam
    from apache_beam.testing.util import assert_that, equal_to

    out = tmp_path / "out"
    tfrecorder.convert(image_table, str(out), progress=False, num_shards=2, compression="gzip")
    with beam.Pipeline(runner="DirectRunner") as pipeline:
        counted = (pipeline | beam.io.ReadFromTFRecord(str(out / "train-*.tfrecord.gz"))
                   | beam.combiners.Count.Globally())
        assert_that(counted, equal_to([6]))


PYTORCH_READER = """
import json, sys, torch
from tfrecord.torch.dataset import TFRecordDataset
shard, index = sys.argv[1:3]
dataset = TFRecordDataset(shard, index, {"label": "int"}, compression_type="gzip")
loader = torch.utils.data.DataLoader(dataset, batch_size=1, num_workers=2)
print(json.dumps(sorted(int(batch["label"]) for batch in loader)))
"""


def test_pytorch_tfrecord_package_reads_each_record_once_with_the_index(image_table, tmp_path):
    """Optional (torch is too heavy for make test): `pip install torch tfrecord`, then run this test. The reader
    runs in a process of its own: the package registers tf.train.Example's messages, as TensorFlow does."""
    if not all(importlib.util.find_spec(name) for name in ("torch", "tfrecord")):  # found, not imported here
        pytest.skip("the optional PyTorch reader check needs torch and tfrecord installed")
    out = tmp_path / "out"
    tfrecorder.convert(image_table, str(out), progress=False, compression="gzip")
    proc = subprocess.run([sys.executable, "-c", PYTORCH_READER, str(out / "train-00000-of-00001.tfrecord.gz"),
                           str(out / "train-00000-of-00001.tfindex")], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    expected = sorted(tfrecorder.read_tfr(str(out), split="TRAIN")["label_id"].tolist())
    assert json.loads(proc.stdout) == expected  # 6 records, each once, with two workers


def test_convert_result_is_tfrecorder_2s_read_only_dict(tabular_table, tmp_path):
    result = tfrecorder.convert(tabular_table, str(tmp_path / "out"), progress=False)
    assert "metrics" in result and "job_id" in result and "seconds" not in result
    assert result.get("job_id") is None and result.get("nope", 7) == 7
    assert sorted(result.keys()) == ["job_id", "metrics", "tfrecord_dir"]
    assert dict(result) == {"tfrecord_dir": result.tfrecord_dir, "job_id": None, "metrics": result.metrics}
    assert result.seconds > 0 and result.splits["TRAIN"].written == 6  # the attributes stay
    with pytest.raises(TypeError):
        result["tfrecord_dir"] = "elsewhere"


def test_tfrecorder_2_schema_names():
    from tfrecorder import input_schema, types

    schema = input_schema.IMAGE_CSV_SCHEMA
    assert (schema.split_key, schema.image_uri_key, schema.label_key) == ("split", "image_uri", "label")
    assert schema.input_schema_map == input_schema.image_csv_schema_map == {
        "split": types.SplitKey, "image_uri": types.ImageUri, "label": types.StringLabel}
    assert list(schema.get_input_keys()) == ["split", "image_uri", "label"]
    assert set(types.SplitKey.allowed_values) >= {"TRAIN", "VALIDATION", "TEST", "DISCARD"}
    assert types.IntegerInput.allowed_values == ()
    custom = input_schema.Schema({"s": types.SplitKey, "path": types.ImageUri, "y": types.IntegerLabel})
    assert (custom.split_key, custom.image_uri_key, custom.label_key) == ("s", "path", "y")


def test_a_csv_and_the_same_dataframe_give_the_same_schema(tmp_path):
    df = pd.DataFrame({"split": ["TRAIN", "TRAIN", "TEST"], "label": [1, 0, 1],
                       "id": pd.array([123456789, None, 7], dtype="Int64")})
    df.to_csv(tmp_path / "t.csv", index=False)
    tfrecorder.convert(df, str(tmp_path / "a"), progress=False)
    tfrecorder.convert(str(tmp_path / "t.csv"), str(tmp_path / "b"), progress=False)
    a, b = (json.loads((tmp_path / n / "dataset.json").read_text())["features"] for n in "ab")
    assert a == b
    ids = tfrecorder.read_tfr(str(tmp_path / "b"))["id"]
    assert str(ids.dtype) == "Int64" and sorted(ids.dropna().tolist()) == [7, 123456789] and ids.isna().sum() == 1
