"""read_annotations: Pascal VOC folders, COCO instances JSON and AutoML Vision detection CSVs into one long form,
a row per box, with each format's coordinates turned into box edges."""

from __future__ import annotations

import io
import json

import numpy as np
import pandas as pd
import pytest
from PIL import Image

import tfrecorder
from tests.conftest import write_image
from tfrecorder.errors import TFRecorderError

LONG_FORM = ["split", "image_uri", "label", "xmin", "ymin", "xmax", "ymax"]


def voc_xml(name: str, objects: list[tuple[str, int, int, int, int, int]], size=(64, 48)) -> str:
    """A labelImg-style annotation: (label, xmin, ymin, xmax, ymax, difficult) in VOC's 1-based pixels."""
    body = "".join(f"<object><name>{label}</name><truncated>{int(d == 0)}</truncated><difficult>{d}</difficult>"
                   f"<bndbox><xmin>{x0}</xmin><ymin>{y0}</ymin><xmax>{x1}</xmax><ymax>{y1}</ymax></bndbox></object>"
                   for label, x0, y0, x1, y1, d in objects)
    return (f"<annotation><folder>JPEGImages</folder><filename>{name}</filename><size><width>{size[0]}</width>"
            f"<height>{size[1]}</height><depth>3</depth></size>{body}</annotation>")


def test_a_voc_folder_gives_a_row_per_box_in_edges_from_zero_with_its_splits(tmp_path):
    voc = tmp_path / "VOC2012"
    for i in range(3):
        write_image(voc / "JPEGImages" / f"{i:04d}.jpg", size=(48, 64), seed=i)
    (voc / "Annotations").mkdir()
    (voc / "Annotations" / "0000.xml").write_text(voc_xml("0000.jpg", [("cat", 1, 1, 10, 20, 0),
                                                                       ("dog", 5, 6, 64, 48, 1)]))
    (voc / "Annotations" / "0001.xml").write_text(voc_xml("0001.jpg", [("cat", 2, 3, 4, 5, 0)]))
    (voc / "Annotations" / "0002.xml").write_text(voc_xml("0002.jpg", []))  # no objects: still an image
    (voc / "ImageSets" / "Main").mkdir(parents=True)
    (voc / "ImageSets" / "Main" / "train.txt").write_text("0000\n0002\n")
    (voc / "ImageSets" / "Main" / "val.txt").write_text("0001\n")

    boxes = tfrecorder.read_annotations(str(voc))
    assert list(boxes.columns) == [*LONG_FORM, "difficult", "truncated", "width", "height"]
    assert boxes[LONG_FORM].astype(object).where(boxes[LONG_FORM].notna(), None).values.tolist() == [
        ["TRAIN", str(voc / "JPEGImages" / "0000.jpg"), "cat", 0.0, 0.0, 10.0, 20.0],
        ["TRAIN", str(voc / "JPEGImages" / "0000.jpg"), "dog", 4.0, 5.0, 64.0, 48.0],  # the whole 64x48 image
        ["VALIDATION", str(voc / "JPEGImages" / "0001.jpg"), "cat", 1.0, 2.0, 4.0, 5.0],
        ["TRAIN", str(voc / "JPEGImages" / "0002.jpg"), None, None, None, None, None],
    ]
    assert boxes["difficult"].tolist()[:3] == [0, 1, 0] and boxes["truncated"].tolist()[:3] == [1, 0, 1]
    assert boxes["width"].tolist() == [64] * 4 and boxes["height"].tolist() == [48] * 4


def test_labelimg_xml_beside_the_images_and_trainval_split_by_a_stable_hash(tmp_path):
    folder = tmp_path / "shots"
    for i in range(40):
        write_image(folder / f"p{i}.jpg", size=(8, 8), seed=i)
        (folder / f"p{i}.xml").write_text(voc_xml(f"p{i}.jpg", [("cup", 1, 1, 4, 4, 0)], size=(8, 8)))
    boxes = tfrecorder.read_annotations(str(folder))
    assert set(boxes["split"]) == {"UNASSIGNED"} and boxes["image_uri"][0] == str(folder / "p0.jpg")

    (folder / "ImageSets" / "Main").mkdir(parents=True)
    (folder / "ImageSets" / "Main" / "trainval.txt").write_text("".join(f"p{i}\n" for i in range(40)))
    first = tfrecorder.read_annotations(str(folder))["split"].tolist()
    assert set(first) == {"TRAIN", "VALIDATION"} and first.count("TRAIN") > first.count("VALIDATION")
    assert tfrecorder.read_annotations(str(folder))["split"].tolist() == first  # the same on every run


def test_coco_boxes_categories_crowds_and_images_without_annotations(tmp_path):
    (tmp_path / "images").mkdir()
    coco = {
        "images": [{"id": 7, "file_name": "a.jpg", "width": 640, "height": 480},
                   {"id": 8, "file_name": "b.jpg", "width": 320, "height": 240}],
        "annotations": [
            {"id": 1, "image_id": 7, "bbox": [10.5, 20, 100, 50], "category_id": 18, "iscrowd": 0, "area": 5000.0},
            {"id": 2, "image_id": 7, "bbox": [0, 0, 640, 480], "category_id": 1, "iscrowd": 1, "area": 1e5}],
        "categories": [{"id": 1, "name": "person"}, {"id": 18, "name": "dog"}],
    }
    path = tmp_path / "instances_val2017.json"
    path.write_text(json.dumps(coco))
    boxes = tfrecorder.read_annotations(str(path))
    assert list(boxes.columns) == [*LONG_FORM, "is_crowd", "area", "width", "height"]
    assert boxes["split"].tolist() == ["VALIDATION"] * 3
    assert boxes["image_uri"].tolist() == [str(tmp_path / "images" / n) for n in ("a.jpg", "a.jpg", "b.jpg")]
    assert boxes["label"].tolist()[:2] == ["dog", "person"] and pd.isna(boxes["label"][2])
    assert boxes[["xmin", "ymin", "xmax", "ymax"]].values[:2].tolist() == [[10.5, 20, 110.5, 70], [0, 0, 640, 480]]
    assert boxes["is_crowd"].tolist()[:2] == [0, 1] and boxes["width"].tolist() == [640, 640, 320]

    elsewhere = tfrecorder.read_annotations(str(path), images_dir="gs://bucket/val2017")
    assert elsewhere["image_uri"][0] == "gs://bucket/val2017/a.jpg"

    coco["annotations"][0]["category_id"] = 99
    path.write_text(json.dumps(coco))
    with pytest.raises(TFRecorderError, match=r"annotation 1 of image 'a.jpg': category_id 99 is not in"):
        tfrecorder.read_annotations(str(path))


def test_an_automl_vision_csv_in_both_vertex_forms_and_rows_without_boxes(tmp_path):
    path = tmp_path / "automl.csv"
    path.write_text("TRAIN,gs://b/img1.jpg,car,0.1,0.2,,,0.3,0.4,,\n"
                    "VALIDATION,gs://b/img2.jpg,bike,0.5,0.1,0.9,0.1,0.9,0.6,0.5,0.6\n"
                    "TEST,gs://b/img3.jpg,,,,,,,,,\n"
                    "UNASSIGNED,gs://b/img4.jpg\n")
    boxes = tfrecorder.read_annotations(str(path))
    assert list(boxes.columns) == LONG_FORM
    assert boxes["split"].tolist() == ["TRAIN", "VALIDATION", "TEST", "UNASSIGNED"]
    assert boxes[["xmin", "ymin", "xmax", "ymax"]].values[:2].tolist() == [[0.1, 0.2, 0.3, 0.4], [0.5, 0.1, 0.9, 0.6]]
    assert boxes["label"].tolist()[:2] == ["car", "bike"] and boxes["label"][2:].isna().all()
    assert boxes["xmin"][2:].isna().all()

    path.write_text("TRAIN,gs://b/img1.jpg,car,0.1,,,,,,,\n")
    with pytest.raises(TFRecorderError, match=r"line 1: a box needs a label and two opposite vertices"):
        tfrecorder.read_annotations(str(path))
    path.write_text("split,image_uri,label\nTRAIN,a.jpg,cat\n")
    with pytest.raises(TFRecorderError, match=r"line 1: not an AutoML Vision object-detection row"):
        tfrecorder.read_annotations(str(path))


def test_annotations_that_cannot_be_read_name_the_file(tmp_path):
    with pytest.raises(TFRecorderError, match="do not exist"):
        tfrecorder.read_annotations(str(tmp_path / "missing.json"))
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(TFRecorderError, match=r"bad.json' are not JSON"):
        tfrecorder.read_annotations(str(tmp_path / "bad.json"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(TFRecorderError, match="is not a Pascal VOC folder"):
        tfrecorder.read_annotations(str(tmp_path / "empty"))
    (tmp_path / "voc").mkdir()
    (tmp_path / "voc" / "a.xml").write_text("<annotation><object><name>x</name><bndbox><xmin>a</xmin>"
                                            "</bndbox></object></annotation>")
    with pytest.raises(TFRecorderError, match=r"a.xml: object 'x': xmin 'a' is not a number"):
        tfrecorder.read_annotations(str(tmp_path / "voc"))
    (tmp_path / "voc" / "a.xml").write_text(voc_xml("a.jpg", [("cat", 31, 50, 8, 93, 0)]))  # it named a row of ours
    with pytest.raises(TFRecorderError, match=r"a.xml': object 'cat': its box \(xmin 31, ymin 50, xmax 8, ymax "
                                              r"93\) needs xmin <= xmax and ymin <= ymax$"):
        tfrecorder.read_annotations(str(tmp_path / "voc"))


def test_coco_boxes_of_no_area_are_skipped_and_named_as_the_object_detection_api_does(tmp_path):
    """A bbox of no width or height has no box to store: skipped with a warning naming its annotation (as
    create_coco_tf_record.py skips it), where one failed the whole conversion naming an internal row."""
    for name in ("a.jpg", "b.jpg"):
        write_image(tmp_path / "images" / name, size=(48, 64))
    coco = {"images": [{"id": 7, "file_name": "a.jpg", "width": 64, "height": 48},
                       {"id": 8, "file_name": "b.jpg", "width": 64, "height": 48}],
            "annotations": [{"id": 1, "image_id": 7, "bbox": [8, 4, 20, 20], "category_id": 1},
                            {"id": 2, "image_id": 7, "bbox": [8, 4, 0, 20], "category_id": 1},
                            {"id": 3, "image_id": 8, "bbox": [8, 4, -5, 20], "category_id": 1}],
            "categories": [{"id": 1, "name": "dog"}]}
    (tmp_path / "instances_train.json").write_text(json.dumps(coco))
    result = tfrecorder.convert(str(tmp_path / "instances_train.json"), str(tmp_path / "out"), progress=False)
    assert result.errors == 0 and result.splits["TRAIN"].images == 2
    assert any("2 annotations have a bbox of no width or height" in w and "ids 2, 3" in w for w in result.warnings)
    back = tfrecorder.read_tfr(str(tmp_path / "out"))
    assert sorted(back["label"].dropna()) == ["dog"]


def test_a_coco_segmentation_that_is_neither_polygons_nor_rle_is_an_errors_csv_row(tmp_path):
    """A segmentation object without RLE's size and counts was read as no segmentation: its image written without
    the mask. It is the instance_mask_decode row of errors.csv; the other image is written with its mask."""
    for name in ("a.jpg", "b.jpg"):
        write_image(tmp_path / "images" / name, size=(48, 64))
    coco = {"images": [{"id": 1, "file_name": "a.jpg", "width": 64, "height": 48},
                       {"id": 2, "file_name": "b.jpg", "width": 64, "height": 48}],
            "annotations": [{"id": 1, "image_id": 1, "bbox": [8, 4, 20, 20], "category_id": 1,
                             "segmentation": [[8, 4, 28, 4, 28, 24]]},
                            {"id": 2, "image_id": 2, "bbox": [8, 4, 20, 20], "category_id": 1,
                             "segmentation": {"foo": 1}}],
            "categories": [{"id": 1, "name": "dog"}]}
    (tmp_path / "instances_train.json").write_text(json.dumps(coco))
    result = tfrecorder.convert(str(tmp_path / "instances_train.json"), str(tmp_path / "out"), progress=False)
    assert (result.rows.written, result.error_codes) == (1, {"instance_mask_decode": 1})
    errors = pd.read_csv(tmp_path / "out" / "errors.csv")
    assert errors["image_uri"].str.endswith("b.jpg").all()


def test_a_coco_object_without_a_segmentation_among_masks_is_a_warning_naming_it(tmp_path):
    """"segmentation": [] (CVAT's rectangles) or none, beside objects with masks, was stored as an all-0 mask
    without a word. It is kept as a box with an empty mask (as pycocotools draws []), and a warning names it."""
    write_image(tmp_path / "images" / "a.jpg", size=(48, 64))
    write_image(tmp_path / "images" / "b.jpg", size=(48, 64))
    box = {"bbox": [8, 4, 20, 20], "category_id": 1}
    coco = {"images": [{"id": 1, "file_name": "a.jpg", "width": 64, "height": 48},
                       {"id": 2, "file_name": "b.jpg", "width": 64, "height": 48}],
            "annotations": [{"id": 11, "image_id": 1, "segmentation": [[8, 4, 28, 4, 28, 24]], **box},
                            {"id": 12, "image_id": 1, "segmentation": [], **box},
                            {"id": 13, "image_id": 2, **box}],
            "categories": [{"id": 1, "name": "dog"}]}
    (tmp_path / "instances_train.json").write_text(json.dumps(coco))
    result = tfrecorder.convert(str(tmp_path / "instances_train.json"), str(tmp_path / "out"), progress=False)
    assert (result.errors, result.splits["TRAIN"].images) == (0, 2)
    assert any("2 annotations have no segmentation (none, or []) where the others have one: kept as boxes whose "
               "instance mask is empty (all 0)" in w and w.endswith("ids 12 (a.jpg), 13 (b.jpg)")
               for w in result.warnings), result.warnings
    back = tfrecorder.read_tfr(str(tmp_path / "out"))
    pixels = {(name, int((np.asarray(Image.open(io.BytesIO(mask))) > 0).sum()) > 0)
              for name, mask in zip(back["image_name"], back["mask"])}
    assert pixels == {("a.jpg", True), ("a.jpg", False), ("b.jpg", False)} and len(back) == 3


def test_an_image_two_voc_xmls_name_is_refused_naming_both(tmp_path):
    """b.xml copied from a.xml (its <filename> still a.jpg): a.jpg's record held both files' boxes, b's off their
    objects, without a word. a.jpg's rows are bad_annotation rows naming both XMLs; c.jpg is written."""
    for stem in "abc":
        write_image(tmp_path / "JPEGImages" / f"{stem}.jpg", size=(48, 64))
    (tmp_path / "Annotations").mkdir()
    for stem, named in (("a", "a.jpg"), ("b", "a.jpg"), ("c", "c.jpg")):
        (tmp_path / "Annotations" / f"{stem}.xml").write_text(voc_xml(named, [("cat", 1, 1, 10, 20, 0)]))
    # all TRAIN: three images hashed into the splits by their paths leave none in TRAIN now and then (a SchemaError)
    result = tfrecorder.convert(str(tmp_path), str(tmp_path / "out"), progress=False, split_fractions=(1, 0, 0))
    assert (result.rows.written, result.error_codes) == (1, {"bad_annotation": 2})
    message = pd.read_csv(tmp_path / "out" / "errors.csv")["message"][0]
    assert message.endswith(f"a.jpg is named by two annotation XMLs, {tmp_path / 'Annotations' / 'a.xml'} and "
                            f"{tmp_path / 'Annotations' / 'b.xml'} (<filename> 'a.jpg'): one was copied or renamed; "
                            f"give each XML its own image's <filename>")


def test_voc_images_in_no_split_list_are_discarded_and_images_without_xml_named(tmp_path):
    """Where ImageSets/Main lists exist they say which images are used: an annotated image in none is discarded
    (counted, with a warning), not hashed into the three splits; an image without an XML is named as skipped."""
    for stem in ("a", "b", "c"):
        write_image(tmp_path / "JPEGImages" / f"{stem}.jpg", size=(48, 64))
        if stem != "c":
            (tmp_path / "Annotations").mkdir(exist_ok=True)
            (tmp_path / "Annotations" / f"{stem}.xml").write_text(voc_xml(f"{stem}.jpg", [("cat", 2, 2, 20, 20, 0)]))
    write_image(tmp_path / "JPEGImages" / "d.jpg", size=(48, 64))
    (tmp_path / "Annotations" / "d.xml").write_text(voc_xml("d.jpg", [("cat", 2, 2, 20, 20, 0)]))
    (tmp_path / "ImageSets" / "Main").mkdir(parents=True)
    (tmp_path / "ImageSets" / "Main" / "train.txt").write_text("a\nb\n")
    (tmp_path / "ImageSets" / "Main" / "val.txt").write_text("b\n")  # b in two lists: it went to val, unsaid
    result = tfrecorder.convert(str(tmp_path), str(tmp_path / "out"), progress=False)
    assert (result.rows.written, result.rows.discarded) == (2, 1)
    assert any("1 annotated images" in w and "in no ImageSets/Main list" in w and "(d)" in w for w in result.warnings)
    assert any("1 image ids of" in w and "are in two of ImageSets/Main's lists (train, val, test), each in the "
               "last's split: b (train, val)" in w for w in result.warnings)
    assert result.skipped == ("JPEGImages/c.jpg (an image without an annotation XML)",)


def test_labelimg_xml_in_subfolders_are_read(tmp_path):
    """labelImg writes an XML beside each image: a folder of batches in subfolders loses none of them."""
    for folder, stem in (("", "a"), ("batch2/", "b"), ("batch2/", "c")):
        write_image(tmp_path / f"{folder}{stem}.jpg", size=(48, 64))
        (tmp_path / f"{folder}{stem}.xml").write_text(voc_xml(f"{stem}.jpg", [("cat", 2, 2, 20, 20, 0)]))
    boxes = tfrecorder.read_annotations(str(tmp_path))
    assert sorted(boxes["image_uri"]) == [str(tmp_path / n) for n in ("a.jpg", "batch2/b.jpg", "batch2/c.jpg")]
