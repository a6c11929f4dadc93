"""tfrecorder verify: single flipped bytes, truncation and deleted shards are found and located; readers fail loudly."""

from __future__ import annotations

import json
import struct
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


@pytest.fixture
def cli_verify(command):
    """``tfrecorder verify FOLDER``, in this process."""
    return lambda folder: command("verify", str(folder))


def test_an_intact_dataset_verifies(dataset, cli_verify):
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
def test_a_single_flipped_byte_is_reported_with_shard_and_record(dataset, where, cause, cli_verify):
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
def test_verify_checks_the_tfds_files_against_dataset_json(dataset, damage, file, message, cli_verify):
    assert tfrecorder.verify(str(dataset)).ok
    damage(dataset)
    report = tfrecorder.verify(str(dataset))
    assert [p.file for p in report.problems] == [file]
    assert message in str(report.problems[0]) and "TFDS" in str(report.problems[0])
    assert cli_verify(dataset).returncode == 1


@pytest.fixture(scope="module")
def instance_masks(tmp_path_factory) -> dict[str, Path]:
    """2 scenes of shapes with COCO polygon masks (one a triangle and a circle), in both record layouts."""
    from tfrecorder.sample_data import make_instance_scenes

    root = tmp_path_factory.mktemp("masks")
    coco = make_instance_scenes(str(root / "shapes"), n=2)
    outs = {"tfrecorder": root / "ours", "tf_object_detection": root / "od"}
    for record_format, out in outs.items():
        tfrecorder.convert(coco, str(out), record_format=record_format, progress=False)
    return outs


def _damage_a_mask(out: Path, record_format: str, damage: str) -> tuple[str, int]:
    """Rewrite the train shard with object 1's mask of a record of two objects damaged (its record CRCs right,
    as a writer that stored a bad mask would leave it); returns the shard's name and the record's number."""
    import io

    import numpy as np
    import tensorflow as tf
    from PIL import Image

    key = "objects/mask" if record_format == "tfrecorder" else "image/object/mask"
    shard = next(out.glob("train-*.tfrecord"))
    records = [r.numpy() for r in tf.data.TFRecordDataset(str(shard))]
    number = next(i for i, r in enumerate(records)
                  if len(tf.train.Example.FromString(r).features.feature[key].bytes_list.value) == 2)
    example = tf.train.Example.FromString(records[number])
    masks = example.features.feature[key].bytes_list.value
    png = masks[1]
    if damage == "broken":  # the same length: the deflated pixels overwritten
        masks[1] = png[:50] + bytes(len(png) - 62) + png[-12:]
    else:
        buffer = io.BytesIO()
        Image.fromarray(np.ones((10, 12), np.uint8)).save(buffer, "PNG" if damage == "size" else "JPEG")
        masks[1] = buffer.getvalue()
    records[number] = example.SerializeToString()
    with tf.io.TFRecordWriter(str(shard)) as writer:
        for record in records:
            writer.write(record)
    return shard.name, number


@pytest.mark.parametrize("record_format", ["tfrecorder", "tf_object_detection"])
@pytest.mark.parametrize("damage, cause", [
    ("broken", r"does not decode \((SyntaxError|OSError|zlib.error|ValueError)"),
    ("size", r"does not decode \(ValueError: 12x10 pixels, its image is \d+x\d+\)"),
    ("jpeg", r"does not decode \(ValueError: a JPEG image, not a PNG"),
])
def test_verify_with_images_decodes_every_instance_mask(instance_masks, tmp_path, record_format, damage, cause):
    import re
    import shutil

    intact = tfrecorder.verify(str(instance_masks[record_format]), images=True)
    assert intact.ok and "instance mask decoding" in intact.checked, str(intact)
    out = tmp_path / "out"
    shutil.copytree(instance_masks[record_format], out)
    shard, number = _damage_a_mask(out, record_format, damage)
    found = [p for p in tfrecorder.verify(str(out), images=True).problems
             if p.file == shard and p.record is not None]  # the file's size, CRC and index aside
    assert len(found) == 1 and (found[0].file, found[0].record) == (shard, number), found
    assert re.match(rf"the instance mask of object 1 of '[^']*shapes-000\d\.jpg' {cause}", found[0].message), found
    assert not [p for p in tfrecorder.verify(str(out)).problems if "mask" in p.message]  # images=False: not decoded
