"""show() and inspect() lay each object's instance mask over its picture in the colour its box is drawn in:
pixels inside a mask move towards that colour, pixels outside every mask stay as they were."""

from __future__ import annotations

import csv
import io
import os

import numpy as np
import pytest
from PIL import Image, ImageFilter, ImageOps

import tfrecorder
from tfrecorder.read import info as info_module
from tfrecorder.read.info import THUMBNAIL, draw_boxes, object_colors, overlay_instance_masks
from tfrecorder.sample_data import make_instance_scenes

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")  # pycocotools


@pytest.fixture(scope="module")
def converted(tmp_path_factory) -> str:
    """3 scenes of coloured shapes (a circle; a triangle and a circle; a circle under a triangle's corner), the
    second stored EXIF-turned (6), as COCO polygons."""
    root = tmp_path_factory.mktemp("shapes")
    coco = make_instance_scenes(str(root / "shapes"), n=3, orientations=(1, 6))
    out = str(root / "out")
    tfrecorder.convert(coco, out, progress=False)
    return out


def grown(mask: np.ndarray, pixels: int) -> np.ndarray:
    """``mask`` grown by ``pixels`` on every side (shrunk where ``pixels`` is negative)."""
    found = Image.fromarray((mask > 0).astype(np.uint8) * 255)
    size = 2 * abs(pixels) + 1
    return np.asarray(found.filter(ImageFilter.MaxFilter(size) if pixels > 0 else ImageFilter.MinFilter(size))) > 0


def rgb(color: str) -> np.ndarray:
    return np.array([int(color[i:i + 2], 16) for i in (1, 3, 5)], np.float64)


def assert_laid(before: np.ndarray, after: np.ndarray, masks: np.ndarray, labels: list[str], where: str,
                ignore: np.ndarray | None = None) -> None:
    """Inside each object's mask (its edge left aside) the pixels came closer to its colour; away from every
    mask (and from ``ignore``), they are unchanged."""
    before, after = before.astype(np.float64), after.astype(np.float64)
    ignore = np.zeros(before.shape[:2], bool) if ignore is None else ignore
    for k, (mask, color) in enumerate(zip(masks, object_colors(labels))):
        later = masks[k + 1:].any(axis=0) if k + 1 < len(masks) else np.zeros_like(mask, bool)
        inside = grown(mask, -2) & ~grown(later, 2) & ~ignore
        assert inside.sum() > 10, f"{where}: object {k} has no inside to check"
        closer = (np.abs(after[inside] - rgb(color)).sum(axis=1) < np.abs(before[inside] - rgb(color)).sum(axis=1))
        assert closer.mean() > 0.95, f"{where}: object {k}: {closer.mean():.0%} of its pixels towards {color}"
    outside = ~grown(masks.any(axis=0), 4) & ~ignore
    assert np.array_equal(after[outside], before[outside]), f"{where}: pixels outside the masks changed"


def test_overlay_paints_each_mask_in_its_box_colour_and_nothing_else():
    picture = Image.new("RGB", (40, 30), (100, 100, 100))
    masks = np.zeros((2, 30, 40), np.uint8)
    masks[0, 5:20, 5:20] = 1
    masks[1, 10:25, 22:38] = 1
    laid = np.asarray(overlay_instance_masks(picture, masks, ["dog", "cat"]))
    assert_laid(np.asarray(picture), laid, masks, ["dog", "cat"], "overlay")
    cat, dog = object_colors(["cat", "dog"])  # the colours draw_boxes gives them: by sorted name
    assert object_colors(["dog", "cat"]) == [dog, cat] and cat != dog
    assert np.abs(laid[12, 12] - rgb(dog)).sum() < np.abs(laid[12, 30] - rgb(dog)).sum()  # each its own colour


def test_overlay_leaves_masks_of_another_size_off_the_picture():
    picture = Image.new("RGB", (40, 30), (100, 100, 100))
    laid = overlay_instance_masks(picture, np.ones((1, 10, 10), np.uint8), ["cat"])
    assert np.array_equal(np.asarray(laid), np.asarray(picture))


def test_show_lays_each_mask_over_its_thumbnail(converted, monkeypatch):
    monkeypatch.setattr(info_module, "in_notebook", lambda: True)  # the grid itself, its thumbnails unsaved
    grid = tfrecorder.show(converted, split="TRAIN", n=3)
    names = tfrecorder.label_names(converted)
    examples = list(tfrecorder.load_dataset(converted, split="TRAIN", channels=3).take(3).as_numpy_iterator())
    assert len(grid.thumbnails) == len(examples) == 3
    for i, (png, example) in enumerate(zip(grid.thumbnails, examples)):
        labels = [names[int(v)] for v in example["objects"]["label"]]
        plain = ImageOps.contain(Image.fromarray(example["image"]), (THUMBNAIL, THUMBNAIL))
        draw_boxes(plain, example["objects"]["bbox"], labels)  # what show drew before masks were laid
        shown = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))
        masks = np.stack([np.asarray(Image.fromarray(m).resize(plain.size, Image.NEAREST))
                          for m in example["objects"]["mask"]])
        lines = Image.new("L", plain.size)
        draw_boxes(lines, example["objects"]["bbox"], labels)  # drawn over the masks: left aside
        assert_laid(np.asarray(plain), shown, masks, labels, f"show, record {i}", ignore=grown(np.asarray(lines), 1))


def test_inspect_lays_each_mask_on_the_displayed_picture(converted, tmp_path):
    folder = tfrecorder.inspect(converted, split="TRAIN", num_records=3, output_dir=str(tmp_path / "look"))
    with open(os.path.join(folder, "data.csv"), encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert "objects/mask" not in rows[0]  # PNG bytes are no text: laid on the picture instead
    examples = list(tfrecorder.load_dataset(converted, split="TRAIN", channels=3).take(3).as_numpy_iterator())
    names = tfrecorder.label_names(converted)
    for row, example in zip(rows, examples):
        labels = [names[int(v)] for v in example["objects"]["label"]]
        # as inspect shows it: Pillow's decode, turned upright (load_dataset turns the masks with the picture)
        plain = ImageOps.exif_transpose(Image.open(os.path.join(folder, row["image_file"]))).convert("RGB")
        lines = Image.new("L", plain.size)
        draw_boxes(lines, example["objects"]["bbox"], labels)  # where the boxes are drawn: left aside
        shown = np.asarray(Image.open(os.path.join(folder, row["boxes_file"])).convert("RGB"))
        assert shown.shape == example["image"].shape, row["image_uri"]
        assert_laid(np.asarray(plain), shown, example["objects"]["mask"], labels, f"inspect, {row['image_uri']}",
                    ignore=grown(np.asarray(lines), 1))
