"""info() and show(): what a person checks by eye."""

from __future__ import annotations

from collections import Counter

import pandas as pd
import pytest
from PIL import Image

import tfrecorder
from tfrecorder.read.info import ImageGrid


def test_info_counts_labels_per_split(image_table, tmp_path):
    tfrecorder.convert(image_table, str(tmp_path / "out"), progress=False)
    info = tfrecorder.info(str(tmp_path / "out"))
    train = image_table[image_table.split == "TRAIN"]["label"]
    assert info.label_counts["TRAIN"] == dict(sorted(Counter(train).items())) == {"cat": 2, "dog": 2, "goat": 2}
    assert info.summary()["splits"]["TEST"]["records"] == 3
    assert "TRAIN" in str(info) and "cat 2" in str(info)
    html = info._repr_html_()
    assert "<table>" in html and "TRAIN labels" in html


def test_show_saves_a_contact_sheet_outside_notebooks(image_table, tmp_path):
    tfrecorder.convert(image_table, str(tmp_path / "out"), progress=False)
    path = tfrecorder.show(str(tmp_path / "out"), split="TRAIN", n=5, path=str(tmp_path / "sheet.png"))
    assert path == str(tmp_path / "sheet.png")
    sheet = Image.open(path)
    assert sheet.size == (4 * 136, 2 * 158)


def test_show_of_a_dataset_without_images_is_one_line(tmp_path):
    pd.DataFrame({"split": ["TRAIN"] * 2, "x": [1.0, 2.0], "label": ["a", "b"]}).tensorflow.to_tfr(
        str(tmp_path / "out"), progress=False)
    with pytest.raises(tfrecorder.TFRecorderError, match=r"holds no images \(a table of values\): show draws "
                                                        r"pictures"):  # it was KeyError: 'image'
        tfrecorder.show(str(tmp_path / "out"), split="TRAIN")


def test_image_grid_renders_inline_html():
    grid = ImageGrid((b"\x89PNG fake",), ("cat\nimg 1.jpg",))
    html = grid._repr_html_()
    assert "data:image/png;base64," in html and "cat" in html


def test_info_without_labels(tmp_path):
    tfrecorder.convert(pd.DataFrame({"x": [1, 2, 3]}), str(tmp_path / "out"), progress=False)
    assert tfrecorder.info(str(tmp_path / "out")).label_counts == {}
