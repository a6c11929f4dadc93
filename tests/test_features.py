"""The feature table (dataset/features.py) is the one list of derived features: validation, encoder,
dataset.json and readers all follow it, so a user column can never collide with one of them."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import tfrecorder
from tests.conftest import write_image
from tfrecorder import types
from tfrecorder.dataset import features
from tfrecorder.dataset.example_proto import Example
from tfrecorder.dataset.records import read_records
from tfrecorder.errors import SchemaError


def _table(tmp_path, extra: str) -> pd.DataFrame:
    image = write_image(tmp_path / "a.jpg")
    return pd.DataFrame({"s": ["TRAIN", "TEST"], "uri": [str(image)] * 2, "y": ["cat", "cat"], extra: [6, 6]})


@pytest.mark.parametrize("name", sorted(features.DERIVED_NAMES))
def test_a_column_named_like_a_derived_feature_is_refused_before_any_file(tmp_path, name):
    df = _table(tmp_path, name)
    schema = {"s": types.SplitKey, "uri": types.ImageUri, "y": types.StringLabel, name: types.IntegerInput}
    out = tmp_path / "out"
    with pytest.raises(SchemaError, match=rf"column '{name}': the name is reserved for a feature tfrecorder writes"):
        tfrecorder.convert(df, str(out), schema=schema, progress=False)
    assert not out.exists() or not any(out.iterdir())


def test_image_orientation_column_is_refused_when_the_schema_is_inferred(tmp_path):
    # The bug that two lists caused: this column passed, dataset.json listed the feature twice,
    # records stored [6, 0], verify called the new dataset damaged and load_dataset failed mid-epoch.
    df = _table(tmp_path, "image_orientation").rename(columns={"s": "split", "uri": "image_uri", "y": "label"})
    with pytest.raises(SchemaError, match="column 'image_orientation': the name is reserved"):
        tfrecorder.convert(df, str(tmp_path / "out"), progress=False)


def test_every_record_and_dataset_json_carry_each_derived_feature_once(tmp_path):
    df = _table(tmp_path, "weight").rename(columns={"s": "split", "uri": "image_uri", "y": "label"})
    out = tmp_path / "out"
    tfrecorder.convert(df, str(out), progress=False)
    listed = [f["name"] for f in json.loads((out / "dataset.json").read_text())["features"]]
    assert len(listed) == len(set(listed))
    assert set(listed) == {f.name for f in features.DERIVED} | {"weight"}
    with open(out / "train-00000-of-00001.tfrecord", "rb") as f:
        (record,) = list(read_records(f))
    stored = Example.FromString(record).features.feature
    for feature in features.DERIVED:
        values = getattr(stored[feature.name], feature.field).value
        assert len(values) == 1, feature.name
    assert stored["image_orientation"].int64_list.value[0] == 1
    assert stored["image_name"].bytes_list.value[0] == b"a.jpg"
    assert tfrecorder.verify(str(out)).ok
    assert len(list(tfrecorder.load_dataset(str(out), split="TRAIN"))) == 1


def test_each_feature_is_stored_and_read_back_as_its_connector_says(image_table, tmp_path):
    """Every feature dataset.json lists has one connector (dataset/connectors.py): the record holds the list its
    connector names, and the connector's own parse spec and decode, with plain tf.io, give read_tfr's values."""
    import numpy as np
    import tensorflow as tf

    from tfrecorder.dataset import connectors

    df = image_table.assign(stamp=[1.6e9 + i / 1000 for i in range(len(image_table))],  # float64
                            raw=[bytes([i]) for i in range(len(image_table))], flag=[i % 2 == 0 for i in range(12)])
    result = tfrecorder.convert(df, str(tmp_path / "out"), progress=False)
    manifest = tfrecorder.read_manifest(result.tfrecord_dir)
    frame = tfrecorder.read_tfr(result.tfrecord_dir, split="TRAIN")
    with open(result.splits["TRAIN"].shards[0], "rb") as f:
        records = list(read_records(f))
    kinds = set()
    for info in manifest.features:
        connector = connectors.of(info)  # as dataset.json names it
        kinds.add(type(connector).__name__)
        stored = {Example.FromString(r).features.feature[info.name].WhichOneof("kind") for r in records}
        assert stored == {connector.field}, info.name
        parsed = tf.io.parse_example(tf.constant(records), {info.name: connector.parse_spec(info)})[info.name]
        values = connector.decode(parsed)
        column = frame[info.column or info.name] if info.name != features.IMAGE.name else frame[info.name]
        if info.shape == [None]:
            assert [v.tolist() for v in values.numpy()] == [list(v) for v in column], info.name
        elif values.dtype == tf.string:
            got = [v.decode() if connector.text(info) else v for v in values.numpy().tolist()]
            assert got == list(column), info.name
        elif info.role == "label":
            assert values.numpy().tolist() == [manifest.label["vocabulary"].index(v) for v in column]
        else:
            assert np.array_equal(values.numpy(), np.asarray(column, values.numpy().dtype)), info.name
    assert kinds == {"Image", "Int64", "Text", "ClassLabel", "Float32", "Float64", "Bytes", "ListOf"}
