"""Schema inference from names and dtypes, explicit schemas, and TFRecorder 2.0 type names."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import tfrecorder
from tfrecorder import input_schema, types
from tfrecorder.errors import SchemaError
from tfrecorder.schema import Schema


def test_inference_by_name_and_dtype():
    df = pd.DataFrame({
        "split": ["TRAIN"], "image_uri": ["a.jpg"], "label": ["cat"], "i": [1], "f": [0.5], "b": [True],
        "s": ["x"], "raw": [b"\x00"], "ni": pd.array([None], dtype="Int64"), "il": [[1, 2]], "fl": [[0.5, 1]],
        "sl": [["a"]], "cat": pd.Categorical(["u"]), "arr": [np.array([1.0, 2.0])],
    })
    assert dict(Schema.infer(df)) == {
        "split": types.SplitKey, "image_uri": types.ImageUri, "label": types.StringLabel,
        "i": types.IntegerInput, "f": types.FloatInput, "b": types.IntegerInput, "s": types.StringInput,
        "raw": types.StringInput, "ni": types.IntegerInput, "il": types.IntegerListInput,
        "fl": types.FloatListInput, "sl": types.StringListInput, "cat": types.StringInput,
        "arr": types.Tensor(shape=(2,), dtype="float64"),  # numpy arrays of one length (encoded as checked)
    }


@pytest.mark.parametrize("labels,expected", [
    ([1, 2], types.IntegerLabel),
    ([1.0, np.nan], types.IntegerLabel),
    (["a", "b"], types.StringLabel),
    ([["a"], ["a", "b"]], types.StringListLabel),
    ([[1], [2, 3]], types.IntegerListLabel),
])
def test_label_types(labels, expected):
    assert Schema.infer(pd.DataFrame({"label": labels}))["label"] is expected


def test_tfrecorder_2_schema_names_work(tmp_path, image_table):
    schema = input_schema.Schema({"split": types.SplitKey, "image_uri": types.ImageUri,
                                  "label": types.StringLabel, "weight": types.FloatInput})
    assert input_schema.IMAGE_CSV_SCHEMA is tfrecorder.IMAGE_CSV_SCHEMA
    result = image_table.tensorflow.to_tfr(output_dir=str(tmp_path / "out"), schema=schema, progress=False)
    manifest = tfrecorder.read_manifest(result["tfrecord_dir"])
    names = {f.name for f in manifest.features}
    assert "weight" in names and "note" not in names  # columns outside an explicit schema are left out


def test_dict_schema_with_other_column_names(tmp_path):
    df = pd.DataFrame({"set": ["TRAIN", "TEST"], "target": ["a", "a"], "zip": [1234, 5678]})
    result = tfrecorder.convert(df, str(tmp_path / "out"), progress=False,
                                schema={"set": types.SplitKey, "target": types.StringLabel,
                                        "zip": types.StringInput})
    manifest = tfrecorder.read_manifest(result.tfrecord_dir)
    assert manifest.feature("label").column == "target"
    assert manifest.feature("split").column == "set"
    zips = [x["zip"] for x in tfrecorder.load_dataset(result.tfrecord_dir, split="TRAIN").as_numpy_iterator()]
    assert zips == [b"1234"]


def test_schema_rejects_non_types_and_two_labels():
    with pytest.raises(SchemaError, match=r"column 'x': 'float' is not a column type"):
        Schema({"x": "float"})
    with pytest.raises(SchemaError, match=r"2 label columns"):
        Schema({"a": types.StringLabel, "b": types.IntegerLabel})
