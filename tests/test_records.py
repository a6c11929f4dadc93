"""TFRecord framing: byte-identical to TensorFlow's writer, and damage is caught."""

from __future__ import annotations

import io

import pytest
import tensorflow as tf

from tfrecorder.dataset.records import RecordWriter, masked_crc, read_records
from tfrecorder.errors import TFRecorderError

RECORDS = [b"", b"a", b"hello world" * 100, bytes(range(256))]


def test_framing_is_byte_identical_to_tf_record_writer(tmp_path):
    path = str(tmp_path / "tf.tfrecord")
    with tf.io.TFRecordWriter(path) as w:
        for r in RECORDS:
            w.write(r)
    ours = io.BytesIO()
    writer = RecordWriter(ours)
    for r in RECORDS:
        writer.write(r)
    writer.close()
    assert ours.getvalue() == open(path, "rb").read()
    assert writer.records == len(RECORDS)


def test_masked_crc_known_value():
    # From TensorFlow's crc32c tests: crc32c("123456789") = 0xE3069283, masked as TFRecord does.
    crc = 0xE3069283
    assert masked_crc(b"123456789") == ((((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF)


@pytest.mark.parametrize("compression", ["gzip", "zlib"])
def test_compressed_streams_are_read_by_tf(tmp_path, compression):
    path = tmp_path / "x"
    with open(path, "wb") as f:
        writer = RecordWriter(f, compression)
        for r in RECORDS:
            writer.write(r)
        writer.close()
    got = [x.numpy() for x in tf.data.TFRecordDataset(str(path), compression_type=compression.upper())]
    assert got == RECORDS
    with open(path, "rb") as f:
        assert list(read_records(f, compression)) == RECORDS


@pytest.mark.parametrize("offset,message", [
    (3, r"record 0: length CRC mismatch"),
    (12 + 2, r"record 0: data CRC mismatch"),
])
def test_flipped_byte_is_reported_with_record_number(offset, message):
    buffer = io.BytesIO()
    writer = RecordWriter(buffer)
    writer.write(b"payload")
    writer.close()
    data = bytearray(buffer.getvalue())
    data[offset] ^= 0xFF
    with pytest.raises(TFRecorderError, match=message):
        list(read_records(io.BytesIO(bytes(data))))


def test_truncated_stream_is_reported():
    buffer = io.BytesIO()
    writer = RecordWriter(buffer)
    writer.write(b"one")
    writer.write(b"two")
    writer.close()
    with pytest.raises(TFRecorderError, match=r"record 1: truncated data"):
        list(read_records(io.BytesIO(buffer.getvalue()[:-2])))


def test_examples_serialize_exactly_as_tensorflows():
    from tfrecorder.dataset.example_proto import Example

    def fill(example):
        fmap = example.features.feature
        fmap["i"].int64_list.value.extend([1, -2, 2**62])
        fmap["f"].float_list.value.extend([0.5, float("inf")])
        fmap["b"].bytes_list.value.append("ü".encode())
        fmap["empty"].float_list.SetInParent()
        return example.SerializeToString(deterministic=True)

    ours = fill(Example())
    assert ours == fill(tf.train.Example())
    parsed = tf.io.parse_single_example(ours, {"i": tf.io.VarLenFeature(tf.int64),
                                               "b": tf.io.FixedLenFeature([], tf.string)})
    assert parsed["b"].numpy().decode() == "ü" and parsed["i"].values.numpy().tolist() == [1, -2, 2**62]
