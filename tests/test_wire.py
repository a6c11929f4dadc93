"""read_tfr's column-at-a-time decoder gives what protobuf gives, record for record, or hands the batch back.

``wire.decode`` walks the wire format of many records at once; protobuf's parser is the definition of what
they hold. Every batch it accepts must decode to protobuf's values, and a batch in a layout it does not
handle (unpacked numbers, a key twice, another kind of list than dataset.json says) must be refused, so
that read_tfr decodes it with protobuf.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tfrecorder
from tfrecorder.dataset.connectors import stored_connector
from tfrecorder.dataset.example_proto import Example
from tfrecorder.dataset.manifest import FeatureInfo
from tfrecorder.read import wire
from tfrecorder.read.pandas import _decoded
from tfrecorder.types import Kind

KINDS = {Kind.INT64: "int64_list", Kind.FLOAT32: "float_list", Kind.BYTES: "bytes_list"}
VALUES = {Kind.INT64: st.integers(-(2**63), 2**63 - 1),
          Kind.FLOAT32: st.floats(allow_nan=False, width=32),
          Kind.BYTES: st.binary(max_size=300)}  # past 127 bytes, lengths take two varint bytes
NAMES = ["a", "ab", "i0", "f0", "s0", "image_height", "image_width", "a_long_feature_name", "a_long_feature_nose"]


def as_python(column) -> list:
    if isinstance(column, wire.Numbers):
        return [None if m else v for v, m in zip(column.values.tolist(), column.missing.tolist())]
    if isinstance(column, wire.Binary):
        return column.values.to_pylist()
    return column.values


@st.composite
def batches(draw):
    """Records of random features (each missing, empty or holding values), and the features to read."""
    features = []
    for name in draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=6, unique=True)):
        kind, shape = draw(st.sampled_from(list(KINDS))), draw(st.sampled_from([[], [None]]))
        connector = stored_connector(kind, is_list=shape == [None]).name  # as dataset.json names it
        features.append(FeatureInfo(name, "feature", kind.value, shape, connector=connector, nullable=True))
    records = []
    for _ in range(draw(st.integers(0, 12))):
        example = Example()
        for f in features:
            state = draw(st.sampled_from(["values", "values", "missing", "empty feature", "empty list"]))
            if state == "missing":
                continue
            entry = example.features.feature[f.name]
            if state == "empty feature":
                continue  # the key, with a Feature holding no list
            values = getattr(entry, KINDS[Kind(f.dtype)]).value
            if state == "values":
                count = draw(st.integers(1, 4)) if f.shape == [None] else 1
                values.extend(draw(st.lists(VALUES[Kind(f.dtype)], min_size=count, max_size=count)))
            else:
                getattr(entry, KINDS[Kind(f.dtype)]).SetInParent()
        records.append(example.SerializeToString())
    return records, features


@settings(max_examples=300, deadline=None)
@given(batches())
def test_plain_records_decode_to_what_protobuf_reads(batch):
    records, features = batch
    fast = wire.decode(records, features)
    assert fast is not None  # every writer's plain layout is handled here, not handed back
    examples = [Example.FromString(r) for r in records]
    for feature, column in zip(features, fast):
        assert as_python(column) == as_python(_decoded(examples, feature)), feature.name


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def delimited(tag: int, payload: bytes) -> bytes:
    return bytes([tag]) + varint(len(payload)) + payload


def entry(key: str, feature: bytes) -> bytes:
    return delimited(0x0A, delimited(0x0A, key.encode()) + delimited(0x12, feature))


def example(*entries: bytes) -> bytes:
    return delimited(0x0A, b"".join(entries))


INT = FeatureInfo("n", "feature", "int64", [], connector="Int64", nullable=True)
UNPACKED = example(entry("n", delimited(0x1A, b"\x08" + varint(300))))  # Int64List{value: 300} not packed
TWICE = example(entry("n", delimited(0x1A, delimited(0x0A, varint(1)))),
                entry("n", delimited(0x1A, delimited(0x0A, varint(2)))))  # protobuf keeps the last: 2
FLOATS = example(entry("n", delimited(0x12, delimited(0x0A, b"\0\0\x80\x3f"))))  # a FloatList where int64 is said
TWO_VALUES = example(entry("n", delimited(0x1A, delimited(0x0A, varint(5) + varint(6)))))  # a scalar holding 2


@pytest.mark.parametrize("record, protobuf_reads", [(UNPACKED, 300), (TWICE, 2), (FLOATS, None), (TWO_VALUES, 5)],
                         ids=["unpacked", "key twice", "another kind", "two values"])
def test_other_layouts_are_handed_back_to_protobuf(record, protobuf_reads):
    plain = example(entry("n", delimited(0x1A, delimited(0x0A, varint(7)))))
    assert as_python(wire.decode([plain], [INT])[0]) == [7]
    assert wire.decode([plain, record], [INT]) is None
    assert as_python(_decoded([Example.FromString(plain), Example.FromString(record)], INT)) == [7, protobuf_reads]


def test_read_tfr_reads_a_shard_of_unpacked_records_through_protobuf(tmp_path):
    """Another tool's records in a layout the fast decoder hands back still come out of read_tfr whole."""
    from tfrecorder.dataset.records import frame

    (tmp_path / "data.tfrecord").write_bytes(b"".join(frame(r) for r in [UNPACKED, UNPACKED]))
    assert tfrecorder.read_tfr(str(tmp_path / "data.tfrecord"))["n"].tolist() == [300, 300]


def test_read_tfr_gives_the_same_frame_through_either_decoder(image_table, tmp_path, monkeypatch):
    """Every dtype read_tfr returns (ints, nullable ints, floats, text, bytes, lists, labels), both ways."""
    table = image_table.assign(
        n=pd.array([1, None] * (len(image_table) // 2), dtype="Int64"),
        x=np.linspace(0, 1, len(image_table)),
        flag=[True, False] * (len(image_table) // 2),
        tags=[["a", "b"], []] * (len(image_table) // 2),
        raw=[b"\x00\xff", b""] * (len(image_table) // 2))
    tfrecorder.convert(table, str(tmp_path / "out"), progress=False, num_shards=2)
    fast = tfrecorder.read_tfr(str(tmp_path / "out"))
    monkeypatch.setattr(wire, "decode", lambda records, features: None)
    pd.testing.assert_frame_equal(fast, tfrecorder.read_tfr(str(tmp_path / "out")))
