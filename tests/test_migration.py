"""TFRecorder 2.0's README examples run unchanged (local paths instead of buckets; its Dataflow example is
run with Beam's dry run in test_gcs.py, against the GCS emulator)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

import tfrecorder
from tests.conftest import write_image


def test_tfrecorder_2_readme_examples(tmp_path):
    for split, label, i in [("TRAIN", "cat", 0), ("TRAIN", "goat", 1), ("VALIDATION", "cat", 2), ("TEST", "goat", 3)]:
        write_image(tmp_path / "images" / split / label / f"{i}.jpg", seed=i)
    rows = [(p.parts[-3], str(p), p.parts[-2]) for p in sorted((tmp_path / "images").rglob("*.jpg"))]
    pd.DataFrame(rows, columns=["split", "image_uri", "label"]).to_csv(tmp_path / "data.csv", index=False)

    # Converting with the pandas accessor
    df = pd.read_csv(tmp_path / "data.csv")
    result = df.tensorflow.to_tfr(output_dir=str(tmp_path / "out1"))
    assert Path(result["tfrecord_dir"]).is_dir() and result["metrics"]["written"] == 4

    # Converting with the library function, from a CSV and from an image directory
    from_csv = tfrecorder.convert(source=str(tmp_path / "data.csv"), output_dir=str(tmp_path / "out2"))
    from_folder = tfrecorder.convert(source=str(tmp_path / "images"), output_dir=str(tmp_path / "out3"))
    for converted in (from_csv, from_folder):
        assert {k: v.written for k, v in converted.splits.items()} == {"TRAIN": 2, "VALIDATION": 1, "TEST": 1}
    assert tfrecorder.label_names(str(tmp_path / "out3")) == ["cat", "goat"]

    # Flexible schema
    from tfrecorder import input_schema, types

    df["weight"] = [0.5, 1.0, 1.5, 2.0]
    schema = input_schema.Schema({"split": types.SplitKey, "image_uri": types.ImageUri,
                                  "label": types.StringLabel, "weight": types.FloatInput})
    df.tensorflow.to_tfr(output_dir=str(tmp_path / "out4"), schema=schema)
    weights = tfrecorder.read_tfr(str(tmp_path / "out4"), columns=["weight"])["weight"]
    assert sorted(weights.tolist()) == [0.5, 1.0, 1.5, 2.0]

    # Loading and inspecting
    dataset_dict = tfrecorder.load(str(tmp_path / "out1"))
    assert sorted(dataset_dict) == ["TEST", "TRAIN", "VALIDATION"]
    tfrecorder.inspect(str(tmp_path / "out1"), split="TRAIN", num_records=2, output_dir=str(tmp_path / "look"))
    assert (tmp_path / "look" / "data.csv").exists()

    # DirectRunner and gzip as before
    result = df.tensorflow.to_tfr(output_dir=str(tmp_path / "out5"), runner="DirectRunner", compression="gzip")
    assert all(s.endswith(".tfrecord.gz") for split in result.splits.values() for s in split.shards)
