"""TFRecords written by other tools: spec inferred from the records, compression from the bytes, splits from names."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

import tfrecorder
from tests.conftest import SHARED_DATA, pixels
from tfrecorder.read.infer import infer_manifest


def example(**features) -> bytes:
    def feature(v):
        values = v if isinstance(v, list) else [v]
        if values and isinstance(values[0], bytes):
            return tf.train.Feature(bytes_list=tf.train.BytesList(value=values))
        if values and isinstance(values[0], float):
            return tf.train.Feature(float_list=tf.train.FloatList(value=values))
        return tf.train.Feature(int64_list=tf.train.Int64List(value=values))
    return tf.train.Example(features=tf.train.Features(
        feature={k: feature(v) for k, v in features.items() if v is not None})).SerializeToString()


def jpeg(seed: int) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(pixels(seed, 12, 16, 3)).save(buffer, "JPEG", quality=90)
    return buffer.getvalue()


def write(path: Path, records, compression: str = "") -> Path:
    with tf.io.TFRecordWriter(str(path), tf.io.TFRecordOptions(compression_type=compression)) as writer:
        for record in records:
            writer.write(record)
    return path


def test_tf_record_writer_files_with_every_kind_of_feature(tmp_path):
    rows = [dict(x=i, y=0.5 * i, name=f"n{i}".encode(), tags=list(range(i)), maybe=(i if i % 2 else None),
                 image=jpeg(i), label=i % 2) for i in range(6)]
    write(tmp_path / "train-0.data", [example(**r) for r in rows[:4]], "GZIP")  # gzip, without .gz in the name
    write(tmp_path / "test-0.data", [example(**r) for r in rows[4:]], "GZIP")
    manifest = infer_manifest(str(tmp_path))
    kinds = {f.name: (f.dtype, f.shape, f.nullable, f.role) for f in manifest.features}
    assert kinds == {
        "x": ("int64", [], False, "feature"), "y": ("float32", [], False, "feature"),
        "name": ("string", [], False, "feature"), "tags": ("int64", [None], False, "feature"),
        "maybe": ("int64", [], True, "feature"), "image": ("string", [], False, "image"),
        "label": ("int64", [], False, "feature"),
    }
    assert manifest.compression == "gzip" and {k: manifest.records(k) for k in manifest.splits} == {
        "TRAIN": 4, "TEST": 2}
    ds = tfrecorder.load_dataset(str(tmp_path), split="TRAIN")
    assert int(ds.cardinality()) == 4
    got = list(ds.as_numpy_iterator())
    assert [int(g["x"]) for g in got] == [0, 1, 2, 3] and [g["tags"].tolist() for g in got][2] == [0, 1]
    assert got[1]["image"].shape == (12, 16, 3)
    np.testing.assert_array_equal(got[1]["image"], np.asarray(Image.open(io.BytesIO(jpeg(1)))))
    frame = tfrecorder.read_tfr(str(tmp_path / "*.data"))
    assert frame["x"].tolist() == [0, 1, 2, 3, 4, 5] and frame["maybe"].isna().tolist() == [True, False] * 3


@pytest.mark.parametrize("compression", ["", "ZLIB"])
def test_a_list_of_files_and_uncompressed_or_zlib(tmp_path, compression):
    files = [write(tmp_path / f"part-{i}", [example(v=float(i))], compression) for i in range(3)]
    splits = tfrecorder.load_dataset([str(f) for f in files])
    assert list(splits) == ["TRAIN"]
    assert sorted(float(x["v"]) for x in splits["TRAIN"].as_numpy_iterator()) == [0.0, 1.0, 2.0]


@pytest.mark.parametrize("suffix", [".gz", ""])
def test_files_written_by_beam_write_to_tfrecord(tmp_path, suffix):
    import apache_beam as beam

    with beam.Pipeline(runner="DirectRunner") as pipeline:
        _ = (pipeline | beam.Create([example(k=i) for i in range(5)])
             | beam.io.WriteToTFRecord(str(tmp_path / "validation"), file_name_suffix=suffix))
    ds = tfrecorder.load_dataset(str(tmp_path), split="VALIDATION")
    assert sorted(int(x["k"]) for x in ds.as_numpy_iterator()) == [0, 1, 2, 3, 4]


def test_not_a_tfrecord_file_is_a_clear_error(tmp_path):
    (tmp_path / "train.bin").write_bytes(b"hello, this is not a TFRecord")
    with pytest.raises(tfrecorder.TFRecorderError, match=r"train.bin is not a readable TFRecord file"):
        tfrecorder.load_dataset(str(tmp_path))


def test_tfrecorder_2_output_is_read_with_decoded_images_and_label_names():
    sample = SHARED_DATA / "sample_tfrecords"
    if not sample.is_dir():
        pytest.skip("../shared/data/tfrecorder-2.0 is not present")
    assert tfrecorder.label_names(str(sample)) == ["goat", "cat"]
    splits = tfrecorder.load(str(sample))
    assert sorted(splits) == ["TEST", "TRAIN", "VALIDATION"]
    for ds in splits.values():
        for x in ds.as_numpy_iterator():
            name = x["image_name"].decode()
            source = next((SHARED_DATA / "images").rglob(name))
            expected = np.asarray(Image.open(source).convert("RGB")).astype(int)
            assert x["image"].shape == expected.shape and x["image"].dtype == np.uint8
            diff = np.abs(x["image"].astype(int) - expected)
            assert diff.mean() <= 0.5 and diff.max() <= 30, (name, diff.mean(), diff.max())
            assert ["goat", "cat"][x["label"]] == source.parent.name
