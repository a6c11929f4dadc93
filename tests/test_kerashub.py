"""Zero glue for Keras detectors (issue 42): ``load_dataset(..., as_supervised=True)`` on a detection dataset gives
what KerasHub's detectors take as they are - boxes padded with -1 to the most objects one image holds (recorded in
dataset.json, the same by every runner) in "yxyx" pixels, KerasHub's default. A RetinaNet built from a config
fitting on it with nothing between is the docs' block test_docs runs."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pandas as pd
import pytest
import tensorflow as tf

import tfrecorder
from tests.conftest import write_image
from tfrecorder.write.table import summary_pass

BOXES_PER_IMAGE = (1, 4, 2)  # the most objects in one image: 4


def boxes_table(tmp_path: Path) -> pd.DataFrame:
    """Three 64x64 images holding 1, 4 and 2 boxes (pixels), their rows interleaved."""
    rows = []
    for i, boxes in enumerate(BOXES_PER_IMAGE):
        uri = str(write_image(tmp_path / "img" / f"{i}.jpg", "JPEG", size=(64, 64), seed=i))
        rows += [{"split": "TRAIN", "image_uri": uri, "label": "ab"[b % 2], "xmin": 4 + 8 * b, "ymin": 8,
                  "xmax": 24 + 8 * b, "ymax": 40} for b in range(boxes)]
    return pd.DataFrame(rows).sample(frac=1.0, random_state=0).reset_index(drop=True)


@pytest.fixture(scope="module")
def out(tmp_path_factory) -> str:
    tmp = tmp_path_factory.mktemp("boxes")
    tfrecorder.convert(boxes_table(tmp), str(tmp / "out"), progress=False)
    return str(tmp / "out")


def test_supervised_targets_are_padded_to_the_most_objects_of_an_image_in_keras_hub_pixels(out):
    assert json.loads(Path(out, "dataset.json").read_text())["objects"]["max_objects"] == 4
    images, targets = next(iter(tfrecorder.load_dataset(out, "TRAIN", batch_size=3, as_supervised=True)))
    assert not isinstance(targets["boxes"], tf.RaggedTensor)
    assert targets["boxes"].shape == (3, 4, 4) and targets["labels"].shape == (3, 4)
    labels, boxes = targets["labels"].numpy(), targets["boxes"].numpy()
    assert sorted((labels >= 0).sum(axis=1)) == sorted(BOXES_PER_IMAGE)
    assert (boxes[labels < 0] == -1).all()
    assert {tuple(b) for b in boxes[labels >= 0].round(3)} >= {(8.0, 4.0, 40.0, 24.0)}  # yxyx, pixels of 64x64
    capped = next(iter(tfrecorder.load_dataset(out, "TRAIN", batch_size=3, as_supervised=True, max_objects=2)))[1]
    assert capped["boxes"].shape == (3, 2, 4)
    plain = next(iter(tfrecorder.load_dataset(out, "TRAIN", batch_size=3)))  # without as_supervised: as before
    assert isinstance(plain["objects"]["bbox"], tf.RaggedTensor)


def test_a_dataset_written_before_the_count_was_recorded_is_counted_with_one_warning(out, tmp_path, caplog):
    old = tmp_path / "old"
    (old).mkdir()
    for f in Path(out).iterdir():
        (old / f.name).write_bytes(f.read_bytes())
    manifest = json.loads((old / "dataset.json").read_text())
    del manifest["objects"]["max_objects"]
    manifest.pop("digests", None)  # as written before either existed
    (old / "dataset.json").write_text(json.dumps(manifest, indent=2))
    with caplog.at_level(logging.WARNING, logger="tfrecorder"):
        ds = tfrecorder.load_dataset(str(old), "TRAIN", batch_size=3, as_supervised=True)
    assert next(iter(ds))[1]["boxes"].shape == (3, 4, 4)
    assert [r.getMessage() for r in caplog.records if "max_objects" in r.getMessage()] == [
        f"{old / 'dataset.json'} does not record the most objects in an image (written before tfrecorder recorded "
        f"it): counted 4 in the records, which as_supervised=True pads boxes to; pass max_objects= to choose, or "
        f"convert again to record it"]


def test_every_runner_records_the_same_count_when_an_images_boxes_are_written_in_parts(tmp_path, monkeypatch, out):
    table = boxes_table(tmp_path)
    for n in range(2):  # Beam reads the rows of one image from two files
        table.iloc[n::2].to_csv(tmp_path / f"boxes-{n}.csv", index=False)
    tfrecorder.convert(str(tmp_path / "boxes-*.csv"), str(tmp_path / "beam"), runner="DirectRunner")
    monkeypatch.setattr(summary_pass, "MEMORY_SPILL_BYTES", 0)  # the local runner in parts of 2 rows
    monkeypatch.setattr(summary_pass, "PART_ROWS", 2)
    tfrecorder.convert(str(tmp_path / "boxes-*.csv"), str(tmp_path / "local"), progress=False)
    beam, local = (json.loads((tmp_path / name / "dataset.json").read_text()) for name in ("beam", "local"))
    assert beam["objects"]["max_objects"] == local["objects"]["max_objects"] == 4
    assert (beam.pop("runner"), local.pop("runner")) == ("DirectRunner", "local")
    assert beam == local


# A RetinaNet built from a config (no downloaded weights) fitting one step on load_dataset's output with no glue is
# the code block of docs/detection-and-segmentation.md ("Training a KerasHub detector"), which test_docs runs with
# its assert that the loss is above 0 (the boxes reached the detector's anchors).


def test_supervised_boxes_without_decoding_say_the_default_counts_pixels_and_what_to_pass(out):
    """The default "yxyx" counts pixels of the decoded image: undecoded, one line says so and names rel_yxyx."""
    with pytest.raises(tfrecorder.errors.TFRecorderError,
                       match=r"bounding_box_format='yxyx' \(the default, as KerasHub's\) counts pixels of the decoded "
                             r"image: read with decode_images=True, or pass bounding_box_format='rel_yxyx'"):
        tfrecorder.load_dataset(out, "TRAIN", as_supervised=True, decode_images=False)
    ds = tfrecorder.load_dataset(out, "TRAIN", as_supervised=True, decode_images=False, bounding_box_format="rel_yxyx")
    assert ds.element_spec[1]["boxes"].shape[-1] == 4
