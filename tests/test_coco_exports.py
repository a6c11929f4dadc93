"""COCO exports as exporters lay them out (issue 44): without images_dir, the images are looked for in the
dataset's root - beside the JSON (Roboflow), images/<subset>/ (Datumaro), images/, <subset>/, <subset>2017/ (COCO
2017) - and the result says which folder was used, or where it looked when none holds them."""

from __future__ import annotations

import json
import logging
import os

import pytest
from PIL import Image

import tfrecorder

COCO = {"images": [{"id": 1, "file_name": "a.png", "width": 16, "height": 16},
                   {"id": 2, "file_name": "b.png", "width": 16, "height": 16}],
        "annotations": [{"id": 1, "image_id": 1, "bbox": [2, 2, 8, 8], "category_id": 1, "iscrowd": 0, "area": 64},
                        {"id": 2, "image_id": 2, "bbox": [4, 4, 6, 6], "category_id": 1, "iscrowd": 0, "area": 36}],
        "categories": [{"id": 1, "name": "cat"}]}


def export(root, json_at: str, images_at: str) -> str:
    """A COCO export: the JSON at ``json_at``, its two images in ``images_at`` (both under ``root``), and an
    empty images/ folder beside, as exports often hold."""
    (root / "images").mkdir(exist_ok=True)
    os.makedirs(root / images_at, exist_ok=True)
    for name in ("a.png", "b.png"):
        Image.new("RGB", (16, 16), (200, 30, 30)).save(root / images_at / name)
    path = root / json_at
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(COCO))
    return str(path)


LAYOUTS = {  # exporter: (where the JSON is, where its images are)
    "datumaro": ("annotations/instances_train.json", "images/train"),
    "roboflow": ("train/_annotations.coco.json", "train"),
    "coco 2017": ("annotations/instances_train2017.json", "train2017"),
    "subset folder": ("annotations/instances_train.json", "train"),
    "images": ("annotations/instances_train.json", "images"),
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_convert_finds_the_images_where_each_exporter_puts_them_and_says_where(layout, tmp_path):
    json_at, images_at = LAYOUTS[layout]
    path = export(tmp_path, json_at, images_at)
    boxes = tfrecorder.read_annotations(path)
    assert boxes["image_uri"].tolist() == [str(tmp_path / images_at / n) for n in ("a.png", "b.png")]
    result = tfrecorder.convert(path, str(tmp_path / "out"), progress=False, split_fractions=(1.0, 0.0, 0.0))
    assert result.errors == 0 and result.rows.written == 2
    assert f"COCO annotations {path!r}: images read from {tmp_path / images_at}" in result.warnings


def test_no_folder_holding_the_images_is_one_line_naming_where_it_looked(tmp_path, caplog):
    path = export(tmp_path, "annotations/instances_train.json", "elsewhere")
    with caplog.at_level(logging.WARNING, logger="tfrecorder"):
        boxes = tfrecorder.read_annotations(path)
    assert boxes["image_uri"].tolist() == [str(tmp_path / "images" / n) for n in ("a.png", "b.png")]
    looked = ", ".join(f"{tmp_path / p}/" for p in ("annotations", "images/train", "images", "train", "train2017",
                                                    "annotations/images", ""))
    said = (f"COCO annotations {path!r}: none of its first images ('a.png', 'b.png') is in {looked}; their names "
            f"are read from {tmp_path / 'images'}: give images_dir= the folder that holds them")
    assert [r.getMessage() for r in caplog.records] == [said]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tfrecorder"), \
            pytest.raises(tfrecorder.TFRecorderError, match="no row was written"):
        tfrecorder.convert(path, str(tmp_path / "out"), progress=False)
    assert [r.getMessage() for r in caplog.records].count(said) == 1  # said once, not by the reader and again
    moved = tfrecorder.convert(path, str(tmp_path / "out"), images_dir=str(tmp_path / "elsewhere"), progress=False,
                               split_fractions=(1.0, 0.0, 0.0), overwrite=True)
    assert moved.rows.written == 2 and not any("COCO" in w for w in moved.warnings)


def test_names_given_from_the_root_above_annotations_are_read_from_it(tmp_path):
    """A COCO file in annotations/ whose file names start from the dataset's root (``images/a.png``, as some
    exporters write them): read from the root itself, said in the result; they were looked for under images/ and
    annotations/ only, and every row was not_found."""
    coco = json.loads(json.dumps(COCO))
    for image in coco["images"]:
        image["file_name"] = f"images/{image['file_name']}"
    path = export(tmp_path, "annotations/instances_train.json", "images")
    (tmp_path / "annotations" / "instances_train.json").write_text(json.dumps(coco))
    result = tfrecorder.convert(path, str(tmp_path / "out"), progress=False, split_fractions=(1.0, 0.0, 0.0))
    assert result.errors == 0 and result.rows.written == 2
    assert f"COCO annotations {path!r}: images read from {tmp_path}" in result.warnings


def test_a_coco_file_made_on_windows_names_its_folders_with_backslashes(tmp_path):
    """``file_name: "train\\a.png"`` from a tool on Windows names a file in a folder: read so (it was one file
    of that whole name, not found)."""
    coco = json.loads(json.dumps(COCO))
    for image in coco["images"]:
        image["file_name"] = f"train\\{image['file_name']}"
    path = export(tmp_path, "instances_all.json", "images/train")
    (tmp_path / "instances_all.json").write_text(json.dumps(coco))
    boxes = tfrecorder.read_annotations(path)
    assert boxes["image_uri"].tolist() == [str(tmp_path / "images" / "train" / n) for n in ("a.png", "b.png")]


def test_a_folder_of_roboflow_coco_exports_is_refused_not_read_as_an_image_folder(tmp_path):
    """Roboflow's COCO export (train/ and valid/, each an _annotations.coco.json beside its images) given as a
    folder: read as an image folder its labels would be 'train' and 'valid' and every box lost. It is refused
    naming the JSON; the JSON itself converts, the split of its folder's name (valid: VALIDATION)."""
    for split, count in (("train", 2), ("valid", 1)):
        (tmp_path / split).mkdir()
        images = [{"id": i, "file_name": f"{split}{i}.jpg", "width": 32, "height": 24} for i in range(count)]
        for image in images:
            Image.new("RGB", (32, 24), "red").save(tmp_path / split / image["file_name"])
        (tmp_path / split / "_annotations.coco.json").write_text(json.dumps({
            "images": images, "categories": [{"id": 1, "name": "cat"}],
            "annotations": [{"id": i, "image_id": i, "category_id": 1, "bbox": [4, 4, 10, 10]} for i in range(count)]}))
    with pytest.raises(tfrecorder.TFRecorderError, match=r"holds annotation files \(train/_annotations.coco.json: "
                                                         r"COCO\): as an image folder its labels would be"):
        tfrecorder.convert(str(tmp_path), str(tmp_path / "out"), progress=False)
    boxes = tfrecorder.read_annotations(str(tmp_path / "valid" / "_annotations.coco.json"))
    assert boxes["split"].tolist() == ["VALIDATION"]


def test_images_beside_the_files_images_that_it_does_not_name_are_skipped_and_said(tmp_path):
    """Roboflow's train/ holds _annotations.coco.json and its images: one more image there that the JSON does not
    name was passed over without a word (a VOC or YOLO folder names such files); it is in result.skipped."""
    path = export(tmp_path, "train/_annotations.coco.json", "train")
    Image.new("RGB", (16, 16)).save(tmp_path / "train" / "extra.png")
    result = tfrecorder.convert(path, str(tmp_path / "out"), progress=False, split_fractions=(1.0, 0.0, 0.0))
    assert result.rows.written == 2
    assert result.skipped == ("extra.png (an image the annotations do not name)",)
    assert any(w.startswith("1 images beside the images of") for w in result.warnings)


def test_the_images_a_file_does_not_name_are_found_however_it_spells_names(tmp_path):
    """Names spelled ./a.png or s//b.png are the images they name, not skipped ones (they were listed as both
    rows and skipped, one twice), in the images' folder and its subfolders; a folder given as images_dir= is read
    only where the file names (as VOC's: it may be a bucket's folder of many datasets' images)."""
    coco = json.loads(json.dumps(COCO))
    coco["images"][0]["file_name"], coco["images"][1]["file_name"] = "./a.png", "s//b.png"
    (tmp_path / "pics" / "s").mkdir(parents=True)
    Image.new("RGB", (16, 16), (200, 30, 30)).save(tmp_path / "pics" / "a.png")
    Image.new("RGB", (16, 16), (200, 30, 30)).save(tmp_path / "pics" / "s" / "b.png")
    Image.new("RGB", (16, 16)).save(tmp_path / "pics" / "zz.png")
    Image.new("RGB", (16, 16)).save(tmp_path / "pics" / "s" / "yy.png")
    (tmp_path / "instances_train.json").write_text(json.dumps(coco))
    for images_dir in (None, str(tmp_path / "pics")):
        path = str(tmp_path / "instances_train.json")
        if images_dir is None:  # found: the images beside the JSON
            path = str(tmp_path / "pics" / "instances_train.json")
            (tmp_path / "pics" / "instances_train.json").write_text(json.dumps(coco))
        result = tfrecorder.convert(path, str(tmp_path / f"out-{images_dir is None}"), images_dir=images_dir,
                                    progress=False, split_fractions=(1.0, 0.0, 0.0))
        assert result.rows.written == 2
        assert result.skipped == (() if images_dir else ("s/yy.png (an image the annotations do not name)",
                                                         "zz.png (an image the annotations do not name)"))
