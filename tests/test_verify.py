"""tfrecorder verify: single flipped bytes, truncation and deleted shards are found and located; readers fail loudly."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest

import tfrecorder
from tfrecorder.read.open import read_manifest


@pytest.fixture
def dataset(tmp_path: Path, image_table) -> Path:
    out = tmp_path / "out"
    tfrecorder.convert(image_table, str(out), num_shards=2, progress=False)
    return out


def record_offsets(shard: Path) -> list[tuple[int, int]]:
    """(offset, length) of each record in an uncompressed shard."""
    data, offsets, at = shard.read_bytes(), [], 0
    while at < len(data):
        (length,) = struct.unpack("<Q", data[at:at + 8])
        offsets.append((at, length))
        at += 12 + length + 4
    return offsets


def flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x20
    path.write_bytes(bytes(data))


def cli_verify(folder: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tfrecorder", "verify", str(folder)], capture_output=True, text=True)


def test_an_intact_dataset_verifies(dataset):
    report = tfrecorder.verify(str(dataset))
    assert report.ok and report.shards == 6 and report.records == 12, str(report)
    done = cli_verify(dataset)
    assert done.returncode == 0 and "OK (6 shards, 12 records" in done.stdout


@pytest.mark.parametrize("where, cause", [
    ("length", "length CRC mismatch"),
    ("length crc", "length CRC mismatch"),
    ("payload", "data CRC mismatch"),
    ("data crc", "data CRC mismatch"),
])
def test_a_single_flipped_byte_is_reported_with_shard_and_record(dataset, where, cause):
    shard = dataset / "train-00001-of-00002.tfrecord"
    offset, length = record_offsets(shard)[1]
    at = {"length": 2, "length crc": 9, "payload": 12 + length // 2, "data crc": 12 + length + 1}[where]
    flip(shard, offset + at)

    report = tfrecorder.verify(str(dataset))
    assert not report.ok
    messages = [str(p) for p in report.problems]
    assert any(m.startswith(f"train-00001-of-00002.tfrecord: record 1: {cause}") for m in messages), messages
    assert any("CRC-32C of the file is" in m for m in messages)
    done = cli_verify(dataset)
    assert done.returncode == 1 and f"record 1: {cause}" in done.stdout


def test_truncated_and_deleted_shards_are_reported(dataset):
    shard = dataset / "train-00000-of-00002.tfrecord"
    offset, length = record_offsets(shard)[2]
    shard.write_bytes(shard.read_bytes()[: offset + 12 + length // 2])
    (dataset / "test-00001-of-00002.tfrecord").unlink()

    messages = [str(p) for p in tfrecorder.verify(str(dataset)).problems]
    assert any(m.startswith("train-00000-of-00002.tfrecord: record 2: truncated data") for m in messages), messages
    assert any(m.startswith("train-00000-of-00002.tfrecord: ") and "bytes, dataset.json says" in m for m in messages)
    assert "test-00001-of-00002.tfrecord: the shard is missing" in messages


def test_a_record_that_does_not_fit_the_spec_is_reported(dataset):
    manifest = json.loads((dataset / "dataset.json").read_text())
    for feature in manifest["features"]:
        if feature["name"] == "weight":
            feature["dtype"] = "int64"
    (dataset / "dataset.json").write_text(json.dumps(manifest))
    messages = [str(p) for p in tfrecorder.verify(str(dataset)).problems]
    assert "record 0: feature 'weight' is a float_list, dataset.json says int64" in messages[0]


def test_damaged_gzip_shard_is_reported(tmp_path, tabular_table):
    out = tmp_path / "gz"
    tfrecorder.convert(tabular_table, str(out), compression="gzip", progress=False)
    shard = out / "train-00000-of-00001.tfrecord.gz"
    flip(shard, shard.stat().st_size // 2)
    messages = [str(p) for p in tfrecorder.verify(str(out)).problems]
    assert any(m.startswith("train-00000-of-00001.tfrecord.gz: record ") for m in messages), messages


def test_readers_fail_loudly_on_a_corrupt_record(dataset):
    import tensorflow as tf

    shard = dataset / "train-00001-of-00002.tfrecord"
    offset, length = record_offsets(shard)[1]
    flip(shard, offset + 12 + length // 2)
    with pytest.raises(tf.errors.DataLossError, match="corrupted record"):
        list(tfrecorder.load_dataset(str(dataset), split="TRAIN"))
    with pytest.raises(tfrecorder.TFRecorderError, match="record 1: data CRC mismatch"):
        tfrecorder.read_tfr(str(dataset), split="TRAIN")


def test_reader_refuses_a_missing_or_truncated_shard_before_reading(dataset):
    (dataset / "validation-00000-of-00002.tfrecord").unlink()
    with pytest.raises(tfrecorder.TFRecorderError, match=r"validation-00000-of-00002.tfrecord is missing.*verify"):
        tfrecorder.load_dataset(str(dataset), split="VALIDATION")
    shard = dataset / "train-00000-of-00002.tfrecord"
    shard.write_bytes(shard.read_bytes()[:-3])
    size = read_manifest(str(dataset)).splits["TRAIN"][0].bytes
    with pytest.raises(tfrecorder.TFRecorderError, match=rf"has {size - 3} bytes, dataset.json says {size}"):
        tfrecorder.load_dataset(str(dataset), split="TRAIN")


def _drop_feature(out: Path) -> None:
    features = json.loads((out / "features.json").read_text())
    del features["featuresDict"]["features"]["weight"]
    (out / "features.json").write_text(json.dumps(features, indent=2) + "\n")


def _edit_shard_lengths(out: Path) -> None:
    info = json.loads((out / "dataset_info.json").read_text())
    info["splits"][0]["shardLengths"] = ["1", "1"]
    (out / "dataset_info.json").write_text(json.dumps(info, indent=2) + "\n")


@pytest.mark.parametrize("damage,file,message", [
    (_drop_feature, "features.json", "feature 'weight' missing"),
    (_edit_shard_lengths, "dataset_info.json", "split 'train': shardLengths"),
    (lambda out: (out / "label.labels.txt").unlink(), "label.labels.txt", "is missing; dataset.json lists it"),
    (lambda out: (out / "label.labels.txt").write_text("cat\ngoat\ndog\n"), "label.labels.txt", "other lines"),
])
def test_verify_checks_the_tfds_files_against_dataset_json(dataset, damage, file, message):
    assert tfrecorder.verify(str(dataset)).ok
    damage(dataset)
    report = tfrecorder.verify(str(dataset))
    assert [p.file for p in report.problems] == [file]
    assert message in str(report.problems[0]) and "TFDS" in str(report.problems[0])
    assert cli_verify(dataset).returncode == 1
