"""Whole-table errors raise before any file is written, naming column, values and rows."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import tfrecorder
from tfrecorder import types
from tfrecorder.errors import SchemaError, TFRecorderError


def convert(df, out, **kwargs):
    return tfrecorder.convert(df, str(out), progress=False, **kwargs)


@pytest.mark.parametrize("df,schema,message", [
    (pd.DataFrame({"split": [], "label": []}), None, r"the table is empty"),
    (pd.DataFrame({"split": ["TRAIN"], "image_url": ["a.jpg"]}), tfrecorder.IMAGE_CSV_SCHEMA,
     r"missing columns 'image_uri', 'label'.*has columns \['split', 'image_url'\]"),
    (pd.DataFrame({"split": ["TRAIN", "TRIAN", "TEST", "valid"], "x": [1, 2, 3, 4]}), None,
     r"column 'split': 2 rows have values outside TRAIN/VALIDATION/TEST/DISCARD/UNASSIGNED: "
     r"'TRIAN', 'valid' \(rows 1, 3\)"),
    (pd.DataFrame({"split": ["TRAIN", "TEST"], "age": [3, "three"]}), {"split": types.SplitKey,
                                                                       "age": types.IntegerInput},
     r"column 'age': 1 values do not fit IntegerInput \(int64\), e.g. 'three' \(row 1\)"),
    (pd.DataFrame({"split": ["TRAIN", "TEST"], "mixed": [3, "three"]}), None,
     r"column 'mixed': values mix types \(integers in row 0; strings in row 1\)"),
    (pd.DataFrame({"split": ["TRAIN", "TEST"], "big": [2**63, 1]}), {"big": types.IntegerInput},
     r"column 'big': 1 values do not fit IntegerInput.*9223372036854775808 \(row 0\)"),
    (pd.DataFrame({"split": ["TRAIN", "TEST", "TEST"], "label": ["cat", "dog", "cow"]}), None,
     r"column 'label': labels 'cow', 'dog' appear in VALIDATION/TEST but not in TRAIN \(rows 1, 2\)"),
    (pd.DataFrame({"split": ["TRAIN", "TEST"], "label": ["cat", None]}), None,
     r"column 'label': 1 rows have no label \(row 1\)"),
    (pd.DataFrame({"z": [1 + 2j]}), None, r"column 'z': dtype complex128 is not supported"),
    (pd.DataFrame({"split": ["TRAIN"], "empty": [None]}), None, r"column 'empty': every value is missing"),
    (pd.DataFrame({"split": ["TRAIN"], "image": ["x"]}), None, r"column 'image': the name is reserved"),
    (pd.DataFrame({"split": ["TRAIN"], "image_uri": [3]}), None, r"column 'image_uri': image URIs must be strings"),
    (pd.DataFrame({"split": ["TRAIN", "TEST"], "v": [[1], 2]}), None, r"column 'v': mixes lists \(row 0\)"),
])
def test_whole_table_errors_raise_before_writing(tmp_path, df, schema, message):
    with pytest.raises(SchemaError, match=message):
        convert(df, tmp_path / "out", schema=schema)
    assert not (tmp_path / "out").exists()


def test_one_error_lists_every_bad_column(tmp_path):
    df = pd.DataFrame({"split": ["TRAIN", "BAD"], "a": [1, "x"], "b": [object(), 1]})
    with pytest.raises(SchemaError) as info:
        convert(df, tmp_path / "out", schema={"split": types.SplitKey, "a": types.IntegerInput,
                                              "b": types.FloatInput})
    text = str(info.value)
    assert "column 'split'" in text and "column 'a'" in text and "column 'b'" in text


def test_non_empty_output_dir_needs_overwrite(tmp_path, tabular_table):
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    with pytest.raises(TFRecorderError, match=r"output_dir .* is not empty \(notes.txt\).*overwrite=True"):
        convert(tabular_table, out)
    convert(tabular_table, out, overwrite=True, num_shards=3)
    convert(tabular_table, out, overwrite=True, num_shards=1)
    names = sorted(p.name for p in out.iterdir())
    assert "notes.txt" in names  # a user's own file is left alone
    train = ["train-00000-of-00001.tfindex", "train-00000-of-00001.tfrecord"]
    assert [n for n in names if n.startswith("train")] == train


@pytest.mark.parametrize("kwargs,message", [
    ({"runner": "Spark"}, r"runner='Spark': use 'local', one of 'DirectRunner', 'DataflowRunner', 'DaskRunner'"),
    ({"compression": "lz4"}, r"compression='lz4': use None, 'gzip' or 'zlib'"),
    ({"image_format": "tiff"}, r"image_format='tiff'"),
    ({"validate_images": "none"}, r"validate_images='none'"),
    ({"on_error": "ignore"}, r"on_error='ignore'"),
    ({"image_size": (0, 5)}, r"image_size=\(0, 5\): height and width are positive whole numbers"),
    ({"image_size": "224x224"}, r"image_size='224x224': give \(height, width\) in pixels, or one number"),
    # each a one-line error before anything is read, never a raw ValueError or TypeError (or, for overwrite,
    # a truthy "no" that deletes the earlier conversion)
    ({"max_image_pixels": "abc"}, r"max_image_pixels='abc': give a positive whole number"),
    ({"num_shards": "2"}, r"num_shards='2': give a positive whole number, or None"),
    ({"num_shards": 0}, r"num_shards=0: give a positive whole number, or None"),
    ({"num_workers": "4"}, r"num_workers='4': give a positive whole number, or None"),  # a TypeError deep in
    ({"num_workers": -3}, r"num_workers=-3: give a positive whole number, or None"),  # taken without a word
    ({"jpeg_quality": 500}, r"jpeg_quality=500: give a whole number from 1 to 100"),
    ({"overwrite": "no"}, r"overwrite='no': give True or False"),
    ({"image_timeout": True}, r"image_timeout=True: give seconds above 0"),
    ({"split_fractions": (0.5, 0.1)}, r"split_fractions=\(0.5, 0.1\): give three"),
])
def test_bad_arguments(tmp_path, tabular_table, kwargs, message):
    with pytest.raises(TFRecorderError, match=message):
        convert(tabular_table, tmp_path / "out", **kwargs)


def test_errors_are_value_errors():
    assert issubclass(SchemaError, ValueError) and issubclass(TFRecorderError, ValueError)


def test_float_label_that_is_not_integral_is_rejected(tmp_path):
    df = pd.DataFrame({"split": ["TRAIN"], "label": [np.float64(0.5)]})
    with pytest.raises(SchemaError, match=r"column 'label': labels must be strings or integers"):
        convert(df, tmp_path / "out")
