"""load_dataset checks its keywords as convert checks its own (issue 42): one number is a square image_size; a
string, a wrong length, a fraction, a bool or a size below 1 is one TFRecorderError naming the keyword and the
value, before anything is read - never TensorFlow's TypeError or images of a silently wrong shape."""

from __future__ import annotations

import numpy as np
import pytest

import tfrecorder
from tests.conftest import image_table_at
from tfrecorder.errors import TFRecorderError

SIZE_USAGE = r"give \(height, width\) in pixels, or one number for a square \(224 is \(224, 224\)\)"


@pytest.fixture(scope="module")
def out(tmp_path_factory) -> str:
    tmp = tmp_path_factory.mktemp("args")
    tfrecorder.convert(image_table_at(tmp), str(tmp / "out"), progress=False)
    return str(tmp / "out")


def test_one_number_is_a_square_image_size(out):
    batch = next(iter(tfrecorder.load_dataset(out, "TRAIN", batch_size=2, image_size=24)))
    assert batch["image"].shape == (2, 24, 24, 3)
    numpy_size = next(iter(tfrecorder.load_dataset(out, "TRAIN", image_size=np.array([16, 8]))))
    assert numpy_size["image"].shape == (16, 8, 3)


@pytest.mark.parametrize("size, message", [
    ("224x224", r"image_size='224x224': " + SIZE_USAGE),
    ((224,), r"image_size=\(224,\): " + SIZE_USAGE),
    ((224, 224, 3), r"image_size=\(224, 224, 3\): " + SIZE_USAGE),
    ((0, 5), r"image_size=\(0, 5\): height and width are positive whole numbers"),
    (-3, r"image_size=-3: height and width are positive whole numbers"),
    ((2.5, 4), r"image_size=\(2.5, 4\): height and width are positive whole numbers"),
    ((True, 5), r"image_size=\(True, 5\): height and width are positive whole numbers"),
    (True, r"image_size=True: " + SIZE_USAGE),
])
def test_a_bad_image_size_is_one_line_naming_it(out, size, message):
    with pytest.raises(tfrecorder.TFRecorderError, match=f"^{message}"):
        tfrecorder.load_dataset(out, "TRAIN", image_size=size)


@pytest.mark.parametrize("keyword, value, message", [
    ("batch_size", 0, r"batch_size=0: give a positive whole number, or None for single examples$"),
    ("batch_size", "8", r"batch_size='8': give a positive whole number"),
    ("batch_size", 2.0, r"batch_size=2.0: give a positive whole number"),
    ("batch_size", True, r"batch_size=True: give a positive whole number"),
    ("resize_mode", "squash", r"resize_mode='squash': use one of 'stretch', 'pad', 'crop'$"),
    ("resize_mode", None, r"resize_mode=None: use one of 'stretch', 'pad', 'crop'$"),
    ("bounding_box_format", "XYXY", r"bounding_box_format='XYXY': use one of 'rel_yxyx', 'yxyx',"),
    ("max_objects", 0, r"max_objects=0: give a positive whole number, or None for the dataset's largest number"),
    ("max_objects", True, r"max_objects=True: give a positive whole number"),
    ("shuffle_buffer", 0, r"shuffle_buffer=0: give a positive whole number$"),
    ("num_shards", 0, r"num_shards=0: give a positive whole number$"),
    ("split", "TRIAN", r"split='TRIAN': the dataset has TRAIN, VALIDATION, TEST$"),
])
def test_a_bad_keyword_is_one_line_naming_it(out, keyword, value, message):
    with pytest.raises(tfrecorder.TFRecorderError, match=f"^{message}"):
        tfrecorder.load_dataset(out, **{"split": "TRAIN", keyword: value})


def test_max_objects_below_the_most_an_image_holds_says_what_is_cut(tmp_path, caplog):
    """Padding to fewer objects than an image holds cuts some off: a warning says how many an image holds."""
    import tfrecorder
    from tfrecorder.sample_data import make_detection_scenes

    scenes = make_detection_scenes(str(tmp_path / "scenes"), n=8)
    most = int(scenes.groupby("image_uri").size().max())
    tfrecorder.convert(scenes, str(tmp_path / "out"), progress=False)
    with caplog.at_level("WARNING", logger="tfrecorder"):
        tfrecorder.load_dataset(str(tmp_path / "out"), "TRAIN", max_objects=1, batch_size=2)
    assert any(f"max_objects=1: images of {tmp_path / 'out'} hold up to {most} objects" in m for m in caplog.messages)
    caplog.clear()
    tfrecorder.load_dataset(str(tmp_path / "out"), "TRAIN", max_objects=most, batch_size=2)
    assert not caplog.messages


def test_keywords_that_would_do_nothing_are_one_line(tmp_path):
    """resize_mode= without image_size=, and the box keywords on a dataset without boxes, are said at once
    instead of being ignored."""
    import pandas as pd

    import tfrecorder

    out = str(tmp_path / "out")
    tfrecorder.convert(pd.DataFrame({"split": ["TRAIN"] * 2, "x": [1, 2], "label": ["a", "b"]}), out, progress=False)
    with pytest.raises(TFRecorderError, match=r"resize_mode='pad' says how image_size= resizes: give image_size="):
        tfrecorder.load_dataset(out, "TRAIN", resize_mode="pad")
    for keyword in (dict(max_objects=5), dict(bounding_box_format="xyxy")):
        with pytest.raises(TFRecorderError, match=rf"{next(iter(keyword))}= is for a dataset of boxes; .* holds no "
                                                  r"objects"):
            tfrecorder.load_dataset(out, "TRAIN", **keyword)
