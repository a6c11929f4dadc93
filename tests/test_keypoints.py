"""Keypoints (COCO person keypoints): read from the annotation file, stored normalized in the stored pixels' frame,
and every point found on its coloured dot - by load_dataset in every resize mode (some scenes EXIF-turned; a crop
makes the points it cuts off invisible), by TFDS and by a plain parse in both record layouts - and given back by
read_tfr as the file gave them. Bad keypoints are one line each."""

from __future__ import annotations

import json
import os
import re

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf
from PIL import Image, ImageOps

import tfrecorder
from tfrecorder.errors import SchemaError
from tfrecorder.sample_data import KEYPOINT_COLORS, KEYPOINT_SKELETON, make_keypoint_scenes

COLORS = np.array(list(KEYPOINT_COLORS.values()), np.float64)
OD = dict(record_format="tf_object_detection")


@pytest.fixture(scope="module")
def coco(tmp_path_factory) -> str:
    """8 scenes of 1-2 people, 3 keypoints each, every other scene stored EXIF-turned (6, 8, 3)."""
    return make_keypoint_scenes(str(tmp_path_factory.mktemp("people")), n=8)


@pytest.fixture(scope="module")
def converted(coco) -> str:
    out = os.path.join(os.path.dirname(os.path.dirname(coco)), "out")
    tfrecorder.convert(coco, out, progress=False)
    return out


def assert_on_dots(image: np.ndarray, points: np.ndarray, visibility: np.ndarray, where: str) -> int:
    """Each visible point (normalized (y, x)) lies on a dot of its keypoint's colour; returns how many."""
    height, width = image.shape[:2]
    seen = 0
    for person, (spots, shown) in enumerate(zip(points, visibility)):
        for k, ((y, x), v) in enumerate(zip(spots, shown)):
            if v == 0:
                continue
            row, col = min(int(y * height), height - 1), min(int(x * width), width - 1)
            pixel = image[row, col, :3].astype(np.float64)
            nearest = int(np.abs(COLORS - pixel).sum(axis=1).argmin())
            assert nearest == k and np.abs(COLORS[k] - pixel).max() < 60, (
                f"{where}: person {person}'s {list(KEYPOINT_COLORS)[k]} at ({y:.3f}, {x:.3f}) is on {pixel}")
            seen += 1
    return seen


@pytest.mark.parametrize("mode", [None, "stretch", "pad", "crop"])
def test_keypoints_sit_on_their_dots_in_every_resize_mode(converted, mode):
    size = {"image_size": (64, 64), "resize_mode": mode} if mode else {}
    seen = turned = 0
    for example in tfrecorder.load_dataset(converted, "TRAIN", **size):
        objects = example["objects"]
        assert objects["keypoints"].shape[1:] == (3, 2) and objects["keypoint_visibility"].shape[1:] == (3,)
        seen += assert_on_dots(example["image"].numpy(), objects["keypoints"].numpy(),
                               objects["keypoint_visibility"].numpy(), f"{mode}, {example['image_uri'].numpy()}")
        turned += int(example["image_orientation"]) != 1
    assert seen > 10 and turned


def test_a_crop_makes_the_points_it_cuts_off_invisible(converted):
    """The left person's left hand sits near the picture's left edge: a 64x64 centre crop of a 96x128 picture
    cuts it off, so its visibility is 0 while the person stays."""
    whole = {e["image_uri"].numpy(): e["objects"]["keypoint_visibility"].numpy()
             for e in tfrecorder.load_dataset(converted, "TRAIN")}
    cropped = {e["image_uri"].numpy(): e["objects"]["keypoint_visibility"].numpy()
               for e in tfrecorder.load_dataset(converted, "TRAIN", image_size=(64, 64), resize_mode="crop")}
    cut = [uri for uri in whole if (whole[uri] > 0).sum() > (cropped[uri] > 0).sum()]
    assert cut and all(cropped[uri].shape == whole[uri].shape for uri in whole)


def test_keypoints_sit_on_their_dots_in_the_stored_frame_for_tfds(converted):
    """TFDS applies no EXIF orientation: its image is the stored pixels, which the stored points are in."""
    tfds = pytest.importorskip("tensorflow_datasets")
    builder = tfds.builder_from_directory(converted)
    assert builder.info.features["objects"]["keypoints"].shape == (3, 2)
    seen = 0
    for example in builder.as_dataset(split="train"):
        objects = example["objects"]
        seen += assert_on_dots(example["image"].numpy(), objects["keypoints"].numpy(),
                               objects["keypoint_visibility"].numpy(), "tfds")
    assert seen > 10


def test_the_object_detection_layout_keeps_y_x_and_visibility_apart(coco, tmp_path):
    out = str(tmp_path / "od")
    tfrecorder.convert(coco, out, progress=False, **OD)
    spec = {"image/encoded": tf.io.FixedLenFeature([], tf.string),
            **{f"image/object/keypoint/{k}": tf.io.VarLenFeature(tf.int64 if k == "visibility" else tf.float32)
               for k in ("y", "x", "visibility")}}
    seen = 0
    for file in sorted(f for f in os.listdir(out) if f.endswith(".tfrecord")):
        for record in tf.data.TFRecordDataset(os.path.join(out, file)):
            example = tf.io.parse_single_example(record, spec)
            y, x, v = (tf.sparse.to_dense(example[f"image/object/keypoint/{k}"]).numpy().reshape(-1, 3)
                       for k in ("y", "x", "visibility"))
            seen += assert_on_dots(tf.io.decode_jpeg(example["image/encoded"]).numpy(), np.stack([y, x], -1), v,
                                   f"od, {file}")
    assert seen > 10
    assert_given_back(coco, out)
    read = 0
    for mode in ("stretch", "pad", "crop"):  # load_dataset makes [N, K, 2] of them, moved with the picture
        for example in tfrecorder.load_dataset(out, "TRAIN", image_size=(64, 64), resize_mode=mode):
            objects = example["objects"]
            assert objects["keypoints"].shape[1:] == (3, 2)
            read += assert_on_dots(example["image"].numpy(), objects["keypoints"].numpy(),
                                   objects["keypoint_visibility"].numpy(), f"od, load_dataset, {mode}")
    assert read > 30


def assert_given_back(coco: str, out: str) -> None:
    """read_tfr gives each person's keypoints back as [x, y, v] * 3, pixels of the picture as displayed: on their
    dots in the upright picture (where the records name it), with the visibility the COCO file gave."""
    given = sorted(tuple(a["keypoints"][2::3]) for a in json.load(open(coco))["annotations"])
    back = tfrecorder.read_tfr(out)
    assert sorted(tuple(k[2::3]) for k in back["keypoints"]) == given
    if "image_uri" not in back:  # the Object Detection API's layout keeps only the file's name
        back["image_uri"] = [os.path.join(os.path.dirname(os.path.dirname(coco)), "train", name)
                             for name in back["image/filename"]]
    seen = 0
    for uri, rows in back.groupby("image_uri"):
        with Image.open(uri) as image:
            shown = np.asarray(ImageOps.exif_transpose(image))
        height, width = shown.shape[:2]
        points = np.array(rows["keypoints"].tolist()).reshape(-1, 3, 3)
        seen += assert_on_dots(shown, points[..., 1::-1] / [height, width], points[..., 2], f"read_tfr, {uri}")
    assert seen > 10


def test_read_tfr_and_dataset_json_give_back_what_the_coco_file_said(coco, converted):
    assert_given_back(coco, converted)
    objects = json.load(open(os.path.join(converted, "dataset.json")))["objects"]
    assert objects["keypoints"] == {
        "column": "keypoints", "features": ["objects/keypoints", "objects/keypoint_visibility"], "count": 3,
        "names": list(KEYPOINT_COLORS), "skeleton": [[a - 1, b - 1] for a, b in KEYPOINT_SKELETON]}
    assert "keypoints" not in objects["features"]


def test_a_detector_still_gets_boxes_and_labels_beside_keypoints(converted):
    images, targets = next(iter(tfrecorder.load_dataset(converted, "TRAIN", batch_size=4, image_size=(32, 32),
                                                        as_supervised=True)))
    assert images.shape == (4, 32, 32, 3) and targets["boxes"].shape == (4, 2, 4)


def _table(coco: str) -> pd.DataFrame:
    return tfrecorder.read_annotations(coco)


def test_keypoints_that_are_not_x_y_v_triples_are_one_line(coco, tmp_path):
    table = _table(coco)
    table.at[3, "keypoints"] = [1.0, 2.0]
    table.at[5, "keypoints"] = [10.0, 20.0, 7.0] * 3
    with pytest.raises(SchemaError, match=r"column 'keypoints': keypoints are \[x, y, v\] for each point, v 0, 1 "
                                          r"or 2: 2 rows \(rows 3, 5\), e.g. row 3: 2 numbers"):
        tfrecorder.convert(table, str(tmp_path / "out"), progress=False)


def test_objects_with_different_numbers_of_keypoints_are_refused(coco, tmp_path):
    table = _table(coco)
    table.at[2, "keypoints"] = [10.0, 20.0, 2.0] * 2
    with pytest.raises(SchemaError, match=r"objects give different numbers of keypoints: 2 \(row 2\), 3 \(.*\); "
                                          r"every object of a dataset has the same K"):
        tfrecorder.convert(table, str(tmp_path / "out"), progress=False)


def test_names_that_do_not_match_the_keypoints_are_refused(coco, tmp_path):
    table = _table(coco)
    table.attrs["tfrecorder.keypoints"] = {"names": ["head", "tail"], "skeleton": []}
    with pytest.raises(SchemaError, match=r"objects give 3 keypoints each, and their names are 2 \(head, tail\)"):
        tfrecorder.convert(table, str(tmp_path / "out"), progress=False)


def test_a_point_outside_its_image_is_a_row_error(coco, tmp_path):
    table = _table(coco)
    table.at[0, "keypoints"] = [500.0, 20.0, 2.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    tfrecorder.convert(table, str(tmp_path / "out"), progress=False)
    errors = pd.read_csv(tmp_path / "out" / "errors.csv")
    image = table["image_uri"][0]
    assert set(errors["row"]) == set(table.index[table["image_uri"] == image])  # every row of that image
    assert set(errors["error"]) == {"keypoint_outside_image"}
    assert "row 0: keypoint (500, 20) lies outside the 128x96 image" in errors["message"].iloc[0]


def test_a_keypoints_column_needs_boxes(tmp_path):
    table = pd.DataFrame({"split": ["TRAIN"], "label": ["a"], "keypoints": [[1.0, 2.0, 2.0]]})
    with pytest.raises(SchemaError, match=r"column 'keypoints' holds keypoints, an object's: the table needs box "
                                          r"columns too"):
        tfrecorder.convert(table, str(tmp_path / "out"), progress=False,
                           schema={"split": tfrecorder.types.SplitKey, "label": tfrecorder.types.StringLabel,
                                   "keypoints": tfrecorder.types.Keypoints})


def test_coco_keypoints_of_the_wrong_length_name_the_annotation(coco, tmp_path):
    data = json.load(open(coco))
    data["annotations"][1]["keypoints"] = [1, 2, 2]
    bad = tmp_path / "annotations" / "person_keypoints_train.json"
    bad.parent.mkdir()
    bad.write_text(json.dumps(data))
    with pytest.raises(tfrecorder.TFRecorderError, match=r"annotation 2 of image 'scene-0001.jpg'.*: keypoints "
                                                         r"\[1, 2, 2\] are not \[x, y, v\] for each of its "
                                                         r"category's 3 keypoints"):
        tfrecorder.read_annotations(str(bad))


@pytest.mark.parametrize("visibility", [3, -1, 1.5])
def test_a_coco_keypoint_visibility_not_0_1_or_2_names_the_annotation_image_and_file(coco, tmp_path, visibility):
    data = json.load(open(coco))
    data["annotations"][1]["keypoints"][5] = visibility
    bad = tmp_path / "annotations" / "person_keypoints_train.json"
    bad.parent.mkdir()
    bad.write_text(json.dumps(data))
    with pytest.raises(SchemaError, match=rf"^{re.escape(str(bad))}: annotation 2 of image 'scene-0001.jpg': "
                                          rf"keypoint 2's visibility {visibility} is not 0 \(not labelled\), 1 "
                                          rf"\(labelled, hidden\) or 2 \(visible\)$"):
        tfrecorder.convert(str(bad), str(tmp_path / "out"), progress=False)
