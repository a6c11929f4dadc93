"""Others' Object Detection TFRecords (issue 44): an export of Datumaro's tf_detection_api exporter
(tests/data/datumaro_tf_detection_api, made as its README says) and our own record_format="tf_object_detection"
shards without their dataset.json are read by load_dataset, read_tfr, info and show as a detection dataset -
boxes on their objects, label names from the label map or the class text - and convert re-validates them into
our layout."""

from __future__ import annotations

import glob
import os
import shutil

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf
from PIL import Image

import tfrecorder
from tests.test_detection import EDGES, assert_on_objects
from tfrecorder.dataset.foreign import parse_label_map
from tfrecorder.sample_data import make_detection_scenes

DATUMARO = os.path.join(os.path.dirname(__file__), "data", "datumaro_tf_detection_api")
COLORS = {"red": (220, 40, 40), "green": (40, 200, 60), "blue": (40, 70, 220)}  # make_datumaro_fixture.py's
# make_datumaro_fixture.py's SCENES: each record's boxes (label, x, y, w, h in pixels of the 16x16 picture)
SCENES = {"a.png": [("red", 1, 2, 6, 5), ("blue", 9, 8, 6, 7)], "b.png": [("green", 4, 4, 8, 8)],
          "c.png": [("blue", 0, 0, 7, 16), ("red", 9, 1, 6, 6), ("green", 9, 9, 7, 6)], "d.png": [],
          "e.png": [("green", 2, 9, 12, 6)], "f.png": [("red", 5, 1, 6, 6), ("blue", 1, 9, 5, 6)]}


def on_colours(image: np.ndarray, boxes: np.ndarray, names: list[str], where: str) -> None:
    """The middle of every normalized [ymin, xmin, ymax, xmax] box holds its object's colour."""
    height, width = image.shape[:2]
    for (y0, x0, y1, x1), name in zip(boxes, names):
        middle = image[int((y0 + y1) / 2 * height), int((x0 + x1) / 2 * width), :3]
        assert np.abs(middle.astype(int) - COLORS[name]).max() < 30, f"{where}: {name} box holds {middle}"


@pytest.mark.parametrize("mode", [None, "stretch", "pad", "crop"])
def test_load_dataset_reads_a_datumaro_export_with_boxes_on_objects(mode):
    names = tfrecorder.label_names(DATUMARO)
    assert names == ["red", "green", "blue"]  # label_map.pbtxt's, in its ids' order
    size = {"image_size": (24, 40), "resize_mode": mode} if mode else {}
    seen = {}
    for split in ("TRAIN", "VALIDATION"):
        for example in tfrecorder.load_dataset(DATUMARO, split, **size):
            objects = {k: v.numpy() for k, v in example["objects"].items()}
            labels = [names[i] for i in objects["label"]]
            filename = example["image/filename"].numpy().decode()
            on_colours(example["image"].numpy(), objects["bbox"], labels, f"{filename}, {mode}")
            seen[filename] = labels
    if mode != "crop":  # a crop may cut boxes off
        assert seen == {name: [b[0] for b in boxes] for name, boxes in SCENES.items()}


def test_as_supervised_gives_a_detector_its_targets():
    images, targets = next(iter(tfrecorder.load_dataset(DATUMARO, "TRAIN", batch_size=4, image_size=(32, 32),
                                                        as_supervised=True)))
    assert images.shape == (4, 32, 32, 3) and targets["boxes"].shape == (4, 3, 4)  # padded to the most objects
    names = tfrecorder.label_names(DATUMARO)
    for image, boxes, labels in zip(images.numpy(), targets["boxes"].numpy(), targets["labels"].numpy()):
        kept = labels >= 0
        on_colours(image, boxes[kept] / 32, [names[i] for i in labels[kept]], "as_supervised")  # pixels: yxyx
    assert (targets["labels"].numpy() == -1).sum() == 12 - 6  # 6 boxes in 4 images, one without any


def test_read_tfr_and_info_give_the_boxes_and_their_counts(tmp_path):
    rows = tfrecorder.read_tfr(DATUMARO)
    assert len(rows) == 10 and rows["label"].isna().sum() == 1  # 9 boxes, and the image without any
    want = [(name, label, x / 16, y / 16, (x + w) / 16, (y + h) / 16)
            for name, boxes in SCENES.items() for label, x, y, w, h in boxes]
    got = rows.dropna(subset=["label"])
    np.testing.assert_allclose(got[EDGES].to_numpy(float), [w[2:] for w in want], atol=1e-6)
    assert got["label"].tolist() == [w[1] for w in want]
    assert got["image/filename"].tolist() == [w[0] for w in want]
    info = tfrecorder.info(DATUMARO)
    assert info.label_counts == {"TRAIN": {"red": 2, "green": 2, "blue": 2}, "VALIDATION": {"red": 1, "green": 1,
                                                                                             "blue": 1}}
    assert tfrecorder.show(DATUMARO, n=4, path=str(tmp_path / "sheet.png")) == str(tmp_path / "sheet.png")


def test_a_roboflow_layout_takes_splits_from_folders_and_names_from_the_class_text(tmp_path):
    """Roboflow: train/ and valid/ each with <name>.tfrecord and <name>_label_map.pbtxt; without a label map the
    records' image/object/class/text names the classes."""
    for folder, file in (("train", "train.tfrecord"), ("valid", "val.tfrecord")):
        os.makedirs(tmp_path / "export" / folder)
        shutil.copy(os.path.join(DATUMARO, file), tmp_path / "export" / folder / "cells.tfrecord")
    (tmp_path / "export" / "train" / "cells_label_map.pbtxt").write_text(
        'item {\n  name: "red_cell"\n  id: 1\n  display_name: "Red cell"\n}\nitem { id: 3 name: "blue" }\n')
    source = str(tmp_path / "export" / "*" / "*.tfrecord")
    counts = tfrecorder.info(source).label_counts
    assert counts == {"TRAIN": {"Red cell": 2, "green": 2, "blue": 2}, "VALIDATION": {"Red cell": 1, "green": 1,
                                                                                      "blue": 1}}
    os.remove(tmp_path / "export" / "train" / "cells_label_map.pbtxt")
    assert tfrecorder.label_names(source) == ["red", "green", "blue"]  # image/object/class/text


def test_label_maps_are_read_as_the_object_detection_api_reads_them():
    text = ("item {\n\tid: 1\n\tname: 'cat'\n}\n\nitem { id: 2 name: \"a \\\"b\\\"\" }\n"
            "item {\n  name: 'n01'\n  id: 5\n  display_name: 'Dog'\n}\n")
    assert parse_label_map(text) == {1: "cat", 2: 'a "b"', 5: "Dog"}
    # as protobuf's text format means them: a comment, a nested message's own id, escapes, a brace in a name,
    # fields of newer label maps
    assert parse_label_map("item { id: 1 name: 'cat' }\n# item { id: 1 name: 'old' }\n") == {1: "cat"}
    assert parse_label_map("item { name: 'person' keypoints { id: 0 label: 'nose' } id: 1 }") == {1: "person"}
    assert parse_label_map("item { id: 1 name: '\\303\\251t\\303\\251' } item { id: 2 name: \"caf\\u00e9\" }"
                           " item { id: 3 name: 'a}b' frequency: FREQUENT ancestor_ids: 1 }") == {
        1: "\u00e9t\u00e9", 2: "caf\u00e9", 3: "a}b"}
    # two ids of one name stay two classes (convert merged them into one; the readers named the second "cat (2)")
    assert parse_label_map("item { id: 1 name: 'cat' } item { id: 2 name: 'cat' }") == {1: "cat", 2: "cat (2)"}


def test_a_label_map_protobuf_cannot_read_is_one_line_naming_it(tmp_path):
    export = tmp_path / "export"
    shutil.copytree(DATUMARO, export)
    (export / "label_map.pbtxt").write_text("item { id: 1 name: 'cat' \n")  # never closed
    with pytest.raises(tfrecorder.TFRecorderError, match=r"label_map.pbtxt is not a label map protobuf's text "
                                                         r"format reads \(.+\): mend it"):
        tfrecorder.convert(str(export), str(tmp_path / "out"), progress=False)


# --- our own Object Detection API layout, read without its dataset.json -------------------------------------

@pytest.fixture(scope="module")
def od_shards(tmp_path_factory) -> tuple[pd.DataFrame, str]:
    """Scenes (some stored turned: EXIF 3, 6, 8) written with record_format="tf_object_detection", then only the
    shards and label_map.pbtxt kept: another tool's files."""
    root = tmp_path_factory.mktemp("od")
    scenes = make_detection_scenes(str(root / "scenes"), n=8)[["split", "image_uri", "label", *EDGES]]
    scenes = scenes.assign(split="TRAIN")
    tfrecorder.convert(scenes, str(root / "out"), record_format="tf_object_detection", progress=False)
    os.makedirs(root / "export")
    for name in glob.glob(str(root / "out" / "*.tfrecord")) + [str(root / "out" / "label_map.pbtxt")]:
        shutil.copy(name, root / "export")
    return scenes, str(root / "export")


@pytest.mark.parametrize("mode", ["stretch", "pad", "crop"])
def test_our_object_detection_shards_read_as_others_keep_boxes_on_objects(od_shards, mode):
    scenes, export = od_shards
    names = tfrecorder.label_names(export)
    assert names == sorted(scenes["label"].unique())
    seen = 0
    for example in tfrecorder.load_dataset(export, "TRAIN", image_size=(48, 64), resize_mode=mode):
        objects = example["objects"]  # the stored pixels, unturned, as the boxes are
        assert_on_objects(example["image"].numpy(), objects["bbox"].numpy(),
                          [names[i] for i in objects["label"].numpy()], f"{mode}, od as others'")
        seen += 1
    assert seen == scenes["image_uri"].nunique()


def test_convert_revalidates_others_records_into_our_layout(od_shards, tmp_path):
    scenes, export = od_shards
    result = tfrecorder.convert(os.path.join(export, "*.tfrecord"), str(tmp_path / "out"), progress=False)
    assert result.splits["TRAIN"].boxes == len(scenes) and result.errors == 0
    back = tfrecorder.read_tfr(str(tmp_path / "out"))
    key = ["label", *EDGES]
    got = back[key].sort_values(key).reset_index(drop=True)
    want = scenes[key].sort_values(key).reset_index(drop=True)
    assert got["label"].tolist() == want["label"].tolist()
    np.testing.assert_allclose(got[EDGES].to_numpy(float), want[EDGES].to_numpy(float), atol=0.05)  # displayed px
    for example in tfrecorder.load_dataset(str(tmp_path / "out"), "TRAIN", image_size=(48, 64)):
        objects = example["objects"]  # ours: the picture turned upright, its boxes with it
        assert_on_objects(example["image"].numpy(), objects["bbox"].numpy(), objects["label"].numpy(), "re-converted")


def test_per_object_features_convert_does_not_keep_are_named_in_a_warning(od_shards, tmp_path):
    """An export's masks, is_crowd and area were dropped without a word: only boxes and labels are converted, and
    the result's warnings say which of the records' per-object features are not."""
    from tfrecorder.sample_data import make_instance_scenes

    _, export = od_shards
    assert not any("not converted" in w for w in tfrecorder.convert(export, str(tmp_path / "boxes"),
                                                                     progress=False).warnings)
    coco = make_instance_scenes(str(tmp_path / "shapes"), n=3)
    tfrecorder.convert(coco, str(tmp_path / "od"), record_format="tf_object_detection", progress=False)
    os.makedirs(tmp_path / "masks")
    for name in glob.glob(str(tmp_path / "od" / "*.tfrecord")) + [str(tmp_path / "od" / "label_map.pbtxt")]:
        shutil.copy(name, tmp_path / "masks")
    result = tfrecorder.convert(str(tmp_path / "masks"), str(tmp_path / "out"), progress=False)
    assert [w for w in result.warnings if "not converted" in w] == [
        "per-object features of the Object Detection TFRecords are not converted, only each object's box and "
        "label: image/object/area (3 records), image/object/is_crowd (3 records), image/object/mask (3 records)"]


def test_convert_names_a_bad_image_of_a_datumaro_export_in_errors_csv(tmp_path):
    export = tmp_path / "export"
    shutil.copytree(DATUMARO, export)
    records = [r.numpy() for r in tf.data.TFRecordDataset(str(export / "train.tfrecord"))]
    broken = tf.train.Example.FromString(records[1])
    broken.features.feature["image/encoded"].bytes_list.value[0] = b"\x89PNG not an image"
    with tf.io.TFRecordWriter(str(export / "train.tfrecord")) as writer:
        for record in [records[0], broken.SerializeToString(), *records[2:]]:
            writer.write(record)
    result = tfrecorder.convert(str(export), str(tmp_path / "out"), progress=False)
    assert result.splits["TRAIN"].images == 4 - 1 and result.errors == 1  # its one box row
    errors = pd.read_csv(tmp_path / "out" / "errors.csv")
    assert errors["image_uri"].str.endswith("train.tfrecord/000001-b.png").all()
    assert errors["error"].tolist() == ["unsupported_format"]
    back = tfrecorder.read_tfr(str(tmp_path / "out"))
    boxes = back.dropna(subset=["label"])
    assert sorted(boxes["label"]) == sorted(b[0] for n, bs in SCENES.items() if n != "b.png" for b in bs)
    pixels = [(x, y, x + w, y + h) for n, bs in SCENES.items() if n != "b.png" for _, x, y, w, h in bs]
    assert sorted(map(tuple, boxes[EDGES].to_numpy(float).round(3))) == sorted(pixels)  # pixels of 16x16


@pytest.mark.parametrize("damage", ["one label for two boxes", "a short ymax list", "a box of no area"])
def test_a_record_whose_objects_do_not_add_up_is_an_errors_csv_row(tmp_path, damage):
    """Box lists of different lengths (which box is whose is unknown) or a box of no area refuse that record's
    image as a bad_annotation row naming the file and record; before, its boxes were dropped without a word,
    or the whole conversion failed."""
    export = tmp_path / "export"
    shutil.copytree(DATUMARO, export)
    records = [r.numpy() for r in tf.data.TFRecordDataset(str(export / "train.tfrecord"))]
    damaged = tf.train.Example.FromString(records[0])  # a.png: two boxes
    objects = damaged.features.feature
    if damage == "one label for two boxes":
        del objects["image/object/class/label"].int64_list.value[1:]
    elif damage == "a short ymax list":
        del objects["image/object/bbox/ymax"].float_list.value[1:]
    else:
        objects["image/object/bbox/xmax"].float_list.value[0] = objects["image/object/bbox/xmin"].float_list.value[0]
    with tf.io.TFRecordWriter(str(export / "train.tfrecord")) as writer:
        for record in [damaged.SerializeToString(), *records[1:]]:
            writer.write(record)
    result = tfrecorder.convert(str(export), str(tmp_path / "out"), progress=False)
    errors = pd.read_csv(tmp_path / "out" / "errors.csv")
    assert errors["error"].tolist() == ["bad_annotation"] and result.errors == 1
    assert errors["message"].iloc[0].startswith(f"file://{export}/train.tfrecord record 0: ")
    boxes = tfrecorder.read_tfr(str(tmp_path / "out")).dropna(subset=["label"])
    assert sorted(boxes["label"]) == sorted(b[0] for n, bs in SCENES.items() if n != "a.png" for b in bs)


def test_one_record_file_is_a_source_as_its_folder_is(tmp_path):
    """A single export file given by its path converts as its folder would (it was read as a CSV, which is not
    UTF-8 text); its label map is the one beside it."""
    export = tmp_path / "export"
    shutil.copytree(DATUMARO, export)
    result = tfrecorder.convert(str(export / "train.tfrecord"), str(tmp_path / "out"), progress=False)
    assert result.errors == 0 and set(result.splits) == {"TRAIN"}
    labels = set(tfrecorder.read_tfr(str(tmp_path / "out"))["label"].dropna())
    assert labels and labels <= set(COLORS)


def _rewritten(source: str, target, change) -> None:
    """``source``'s records, each changed by ``change`` (an Example; returns False to leave the record out), written
    to ``target``."""
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with tf.io.TFRecordWriter(str(target)) as writer:
        for record in tf.data.TFRecordDataset(source):
            example = tf.train.Example.FromString(record.numpy())
            if change(example) is not False:
                writer.write(example.SerializeToString())


def _first_object_only(example) -> bool:
    """Each per-object list cut to its first value; a record without objects left out."""
    stored = example.features.feature
    if not stored["image/object/class/label"].int64_list.value:
        return False
    for key in [k for k in stored if k.startswith("image/object/")]:
        values = getattr(stored[key], stored[key].WhichOneof("kind")).value
        del values[1:]
    return True


def test_an_export_of_one_object_a_record_reads_as_detection(tmp_path):
    """Every record one box (pet faces, one animal a photo): each per-object list holds one value everywhere, and
    the readers took them for scalars - read_tfr and show raised, load_dataset gave no objects."""
    export = tmp_path / "export"
    for name in ("train", "val"):
        _rewritten(os.path.join(DATUMARO, f"{name}.tfrecord"), export / f"{name}.tfrecord", _first_object_only)
    shutil.copy(os.path.join(DATUMARO, "label_map.pbtxt"), export)
    firsts = {n: b[0][0] for n, b in SCENES.items() if b}
    back = tfrecorder.read_tfr(str(export))
    assert dict(zip(back["image/filename"], back["label"])) == firsts
    for split in ("TRAIN", "VALIDATION"):
        images, targets = next(iter(tfrecorder.load_dataset(str(export), split, batch_size=1, image_size=(16, 16),
                                                            as_supervised=True)))
        assert targets["boxes"].shape == (1, 1, 4) and targets["labels"].shape == (1, 1)
    assert tfrecorder.show(str(export), n=2, path=str(tmp_path / "sheet.png")) == str(tmp_path / "sheet.png")


def test_a_read_export_whose_object_lists_differ_is_one_line_naming_the_record(tmp_path):
    """One record with two boxes and one label: which box is whose is unknown. Reading said nothing of it and
    read every record's boxes as plain features (read_tfr raised an IndexError); now one line names the file and
    record, and convert (which lists that record in errors.csv) is the way to the rest."""
    export = tmp_path / "export"

    def one_label_for_two_boxes(example):
        if example.features.feature["image/filename"].bytes_list.value[0] == b"a.png":
            del example.features.feature["image/object/class/label"].int64_list.value[1:]

    _rewritten(os.path.join(DATUMARO, "train.tfrecord"), export / "train.tfrecord", one_label_for_two_boxes)
    for read in (tfrecorder.read_tfr, tfrecorder.info, lambda e: tfrecorder.load_dataset(e, "TRAIN")):
        with pytest.raises(tfrecorder.TFRecorderError, match=r"train.tfrecord record 0: image/object/bbox/xmin "
                                                             r"holds 2 values for 1 objects: its object lists differ"):
            read(str(export))


@pytest.mark.parametrize("layout", ["two tools' train.tfrecord", "Roboflow's train/ and valid/"])
def test_files_of_one_name_in_two_folders_keep_their_own_images(tmp_path, layout):
    """Two exports' train.tfrecord (task1/, task2/), or Roboflow's train/cells.tfrecord and valid/cells.tfrecord:
    each record's image was unpacked under the file's name alone, so the second file's images overwrote the
    first's (boxes of both on the second's pixels, the first's images lost; Roboflow's: a false "in TRAIN and
    VALIDATION" error)."""
    folders = ("task1", "task2") if layout.startswith("two") else ("train", "valid")
    for folder in folders:
        _rewritten(os.path.join(DATUMARO, "train.tfrecord"), tmp_path / "export" / folder / "cells.tfrecord",
                   lambda example: None)
    result = tfrecorder.convert(str(tmp_path / "export" / "*" / "cells.tfrecord"), str(tmp_path / "out"),
                                progress=False)
    per_file = len([n for n in SCENES if n in ("a.png", "b.png", "c.png", "d.png")])  # train.tfrecord's images
    assert sum(s.images for s in result.splits.values()) == 2 * per_file and result.errors == 0
    for example in tfrecorder.load_dataset(str(tmp_path / "out"), "TRAIN" if layout.startswith("two") else
                                           "VALIDATION"):
        objects = example["objects"]
        names = tfrecorder.label_names(str(tmp_path / "out"))
        on_colours(example["image"].numpy(), objects["bbox"].numpy(), [names[i] for i in objects["label"].numpy()],
                   example["image_name"].numpy().decode())


def test_the_object_detection_apis_own_file_names_give_their_splits(tmp_path):
    """The Object Detection API's scripts write pet_faces_val.record-00000-of-00001: a split word inside the name,
    not first in it. Every file was TRAIN: validation images trained on without a word."""
    export = tmp_path / "export"
    for name, target in (("train", "pet_faces_train.record-00000-of-00001"),
                         ("val", "pet_faces_val.record-00000-of-00001")):
        _rewritten(os.path.join(DATUMARO, f"{name}.tfrecord"), export / target, lambda example: None)
    shutil.copy(os.path.join(DATUMARO, "label_map.pbtxt"), export / "pet_label_map.pbtxt")
    assert set(tfrecorder.info(str(export)).label_counts) == {"TRAIN", "VALIDATION"}
    result = tfrecorder.convert(str(export), str(tmp_path / "out"), progress=False)
    assert set(result.splits) == {"TRAIN", "VALIDATION"}


def test_a_roboflow_export_folder_is_read_and_converted_by_its_name(tmp_path):
    """Roboflow's TFRecord export is a folder of train/, valid/ and test/, each a file and its label map: given
    by its name it was "no TFRecord files" to the readers, and an image folder without images to convert."""
    export = tmp_path / "rf"
    for folder, source in (("train", "train"), ("valid", "val"), ("test", "val")):
        _rewritten(os.path.join(DATUMARO, f"{source}.tfrecord"), export / folder / "cells.tfrecord",
                   lambda example: None)
        shutil.copy(os.path.join(DATUMARO, "label_map.pbtxt"), export / folder / "cells_label_map.pbtxt")
    assert set(tfrecorder.info(str(export)).label_counts) == {"TRAIN", "VALIDATION", "TEST"}
    assert tfrecorder.label_names(str(export)) == ["red", "green", "blue"]
    result = tfrecorder.convert(str(export), str(tmp_path / "out"), progress=False)
    assert set(result.splits) == {"TRAIN", "VALIDATION", "TEST"} and result.errors == 0


def test_tfrecords_of_another_layout_are_one_line_and_a_stray_record_a_row(tmp_path):
    """A glob whose files are TFRecords but no detection export was "CSV ... is not UTF-8 text"; one named first
    among export files made the whole glob so. A record of another kind inside an export was an "empty_file"
    row; it is a bad_annotation row saying it holds no image."""
    other = tmp_path / "plain"
    other.mkdir()
    with tf.io.TFRecordWriter(str(other / "a_other.tfrecord")) as writer:
        writer.write(tf.train.Example(features=tf.train.Features(feature={
            "x": tf.train.Feature(int64_list=tf.train.Int64List(value=[1]))})).SerializeToString())
    with pytest.raises(tfrecorder.TFRecorderError, match=r"a_other.tfrecord holds TFRecords that are not in the "
                                                         r"Object Detection API's layout .* read them with"):
        tfrecorder.convert(str(other / "*.tfrecord"), str(tmp_path / "no"), progress=False)
    shutil.copy(os.path.join(DATUMARO, "train.tfrecord"), other / "b_train.tfrecord")
    result = tfrecorder.convert(str(other / "*.tfrecord"), str(tmp_path / "out"), progress=False)
    errors = pd.read_csv(tmp_path / "out" / "errors.csv")
    assert errors["error"].tolist() == ["bad_annotation"] and result.splits["TRAIN"].images == 4
    assert errors["message"].iloc[0].endswith("a_other.tfrecord record 0: has no image/encoded: it is no record of "
                                              "an image")


def test_split_words_of_file_names(caplog):
    """A file's split from its name's words: the first (train-*, val2017), else the one its words name (COCO's
    coco_test-dev.record is TEST: its two words made it TRAIN), else its folder; several named are TRAIN, said."""
    from tfrecorder.dataset.foreign import split_of

    cases = {"x/train-00000-of-00002.tfrecord": "TRAIN", "x/val2017.tfrecord": "VALIDATION",
             "x/coco_test-dev.record": "TEST", "x/coco_minival.record": "VALIDATION", "x/devices.record": "TRAIN",
             "x/testing.tfrecord": "TEST", "valid/cells.tfrecord": "VALIDATION", "x/pascal_trainval.record": "TRAIN",
             "x/testset.tfrecord": "TEST", "x/valset.tfrecord": "VALIDATION", "x/ValidationData.tfrecord": "VALIDATION",
             "x/test-dev/a.tfrecord": "TEST"}
    assert {name: split_of(name) for name in cases} == cases
    with caplog.at_level("WARNING", logger="tfrecorder"):
        assert split_of("x/pets_val_test.record") == "TRAIN"
    assert caplog.messages == ["x/pets_val_test.record: its name says TEST and VALIDATION; read as TRAIN: rename it "
                               "to name one split"]


def test_a_roboflow_folder_with_more_files_reads_them_all_or_says_which_it_cannot(tmp_path):
    """A file beside the split folders made them unread (their images lost without a word); files in a split
    folder's subfolder were never read: now every file is read, or named (the readers' one line, convert's
    skipped)."""
    export = tmp_path / "rf"
    for folder, source in (("train", "train"), ("valid", "val")):
        _rewritten(os.path.join(DATUMARO, f"{source}.tfrecord"), export / folder / "cells.tfrecord", lambda e: None)
    _rewritten(os.path.join(DATUMARO, "train.tfrecord"), export / "extra.tfrecord", lambda e: None)
    result = tfrecorder.convert(str(export), str(tmp_path / "out"), progress=False)
    assert (result.splits["TRAIN"].images, result.splits["VALIDATION"].images) == (8, 2)
    _rewritten(os.path.join(DATUMARO, "val.tfrecord"), export / "valid" / "more" / "cells.tfrecord", lambda e: None)
    with pytest.raises(tfrecorder.TFRecorderError, match=r"rf/valid/more holds TFRecord files in a split folder's "
                                                         r"subfolder, which are not read"):
        tfrecorder.info(str(export))
    again = tfrecorder.convert(str(export), str(tmp_path / "again"), progress=False)
    assert again.skipped == ("valid/more/cells.tfrecord (a TFRecord file deeper than a split folder: give a glob to "
                             "read it)",)


def test_convert_names_each_class_id_as_the_readers_do(tmp_path):
    """Without a label map, an object whose record gives no class text for it was named by its id ('3') and one
    id given two texts became two classes, while the readers name an id by the first text any record gives it:
    convert now names them the same way (the same names, the same boxes)."""
    export = tmp_path / "export"

    def texts(example):
        stored = example.features.feature
        name = stored["image/filename"].bytes_list.value[0]
        if name == b"a.png":  # red, blue: blue's text missing
            del stored["image/object/class/text"].bytes_list.value[1:]
        if name == b"c.png":  # blue, red, green: red called 'crimson'
            stored["image/object/class/text"].bytes_list.value[1] = b"crimson"

    _rewritten(os.path.join(DATUMARO, "train.tfrecord"), export / "train.tfrecord", texts)
    read = tfrecorder.read_tfr(str(export)).sort_values("image/filename")
    result = tfrecorder.convert(str(export), str(tmp_path / "out"), progress=False)
    assert result.errors == 0
    back = tfrecorder.read_tfr(result.tfrecord_dir).dropna(subset=["label"])
    assert sorted(back["label"]) == sorted(read.explode("label")["label"].dropna())
    assert set(back["label"]) == {"red", "green", "blue"}


def test_an_image_folder_with_a_stray_tfrecord_stays_an_image_folder(tmp_path):
    """A TFRecord file of another layout beside an image folder's split folders is a file that is no row, named
    as skipped: a folder is refused as others' TFRecords only when they are a detection export."""
    from tests.conftest import write_image

    for split, label in (("train", "cat"), ("train", "dog"), ("test", "cat")):
        write_image(tmp_path / "pets" / split / label / "a.jpg", seed=len(split + label))
    with tf.io.TFRecordWriter(str(tmp_path / "pets" / "stray.tfrecord")) as writer:
        writer.write(tf.train.Example().SerializeToString())
    result = tfrecorder.convert(str(tmp_path / "pets"), str(tmp_path / "out"), progress=False)
    assert result.rows.written == 3 and result.skipped == ("stray.tfrecord (not an image)",)


def test_two_ids_of_one_text_stay_two_classes_in_convert_as_in_the_readers(tmp_path):
    """No label map, ids 1 and 2 both given the text 'cat': the readers name them 'cat' and 'cat (2)', convert
    merged them into one class; and a name made to tell two apart that is taken already is told apart again."""
    from tfrecorder.dataset.foreign import distinct_names

    def both_cat(example):
        stored = example.features.feature
        if stored["image/filename"].bytes_list.value[0] == b"c.png":  # blue (3), red (1), green (2)
            for i in range(3):
                stored["image/object/class/text"].bytes_list.value[i] = b"cat"

    export = tmp_path / "export"
    _rewritten(os.path.join(DATUMARO, "train.tfrecord"), export / "train.tfrecord", both_cat)
    result = tfrecorder.convert(str(export), str(tmp_path / "out"), progress=False)
    assert tfrecorder.label_names(result.tfrecord_dir) == sorted(tfrecorder.label_names(str(export)))
    assert distinct_names({0: "cat", 1: "cat (2)", 2: "cat"}) == {0: "cat", 1: "cat (2)", 2: "cat (2) (2)"}


def test_an_image_folder_with_an_exports_file_names_its_images_as_skipped(tmp_path):
    """A detection export's file at an image folder's top is read as the export, and the images beside it were
    left without a word: they are named in result.skipped and a warning."""
    from tests.conftest import write_image

    write_image(tmp_path / "pets" / "cat" / "a.jpg", seed=1)
    shutil.copy(os.path.join(DATUMARO, "train.tfrecord"), tmp_path / "pets" / "export.tfrecord")
    result = tfrecorder.convert(str(tmp_path / "pets"), str(tmp_path / "out"), progress=False)
    assert result.skipped == ("cat/a.jpg (an image beside others' TFRecords: not read)",)
    assert any(w.startswith("1 files beside the Object Detection TFRecords are not rows") for w in result.warnings)


def test_a_read_export_record_of_boxes_without_class_ids_is_one_line(tmp_path):
    """Boxes and class texts but no class ids in one record: read_tfr raised an IndexError; it is the one line
    of a record whose object lists differ."""
    def no_ids(example):
        if example.features.feature["image/filename"].bytes_list.value[0] == b"a.png":
            del example.features.feature["image/object/class/label"]

    _rewritten(os.path.join(DATUMARO, "train.tfrecord"), tmp_path / "export" / "train.tfrecord", no_ids)
    with pytest.raises(tfrecorder.TFRecorderError, match=r"train.tfrecord record 0: image/object/bbox/xmin holds 2 "
                                                         r"values for 0 objects: its object lists differ"):
        tfrecorder.read_tfr(str(tmp_path / "export"))


def test_inspect_writes_the_pictures_and_data_csv_of_object_detection_records(od_shards, tmp_path, capsys):
    """inspect (the API and the CLI) of every folder in the Object Detection API's layout, ours and others', was a
    24-line KeyError ('image_format': the layout keeps image/format, and others' records say "JPEG", "jpg" or
    nothing): each record's image, its picture with the boxes drawn, and data.csv."""
    from PIL import ImageOps

    from tfrecorder.cli import main

    folder = tfrecorder.inspect(DATUMARO, "TRAIN", num_records=4, output_dir=str(tmp_path / "datumaro"))
    rows = pd.read_csv(os.path.join(folder, "data.csv"), keep_default_na=False)
    assert rows["label_name"].tolist() == ["|".join(b[0] for b in SCENES[n]) for n in rows["image/filename"]]
    assert rows["image_file"].str.endswith(".png").all() and rows["boxes_file"].str.endswith("-boxes.png").all()
    scenes, export = od_shards
    assert main(["inspect", export, "--num-records", "8", "--output-dir", str(tmp_path / "export")]) == 0
    ours = os.path.join(os.path.dirname(export), "out")  # the same records with their dataset.json
    for looked in (str(tmp_path / "export"), tfrecorder.inspect(ours, num_records=8, output_dir=str(tmp_path / "o"))):
        rows = pd.read_csv(os.path.join(looked, "data.csv"))
        assert len(rows) == scenes["image_uri"].nunique()
        for image, boxes in zip(rows["image_file"], rows["boxes_file"]):
            shown = ImageOps.exif_transpose(Image.open(os.path.join(looked, image)))  # EXIF-turned ones too
            assert Image.open(os.path.join(looked, boxes)).size == shown.size
    capsys.readouterr()


def _changed_objects(export, changes: dict[tuple[str, int], dict[str, object]]) -> str:
    """The Datumaro export's train.tfrecord with the label map, some objects changed: ``changes`` maps (image
    name, object number) to {key under image/object/: its new value}."""
    def change(example):
        stored = example.features.feature
        name = stored["image/filename"].bytes_list.value[0].decode()
        for (image, number), values in changes.items():
            for key, value in values.items():
                feature = stored[f"image/object/{key}"]
                if image == name:
                    getattr(feature, feature.WhichOneof("kind")).value[number] = value

    _rewritten(os.path.join(DATUMARO, "train.tfrecord"), export / "train.tfrecord", change)
    shutil.copy(os.path.join(DATUMARO, "label_map.pbtxt"), export)
    return str(export)


def test_a_class_id_of_0_in_one_record_leaves_every_box_read(tmp_path, caplog):
    """One object of class id 0 (the Object Detection API's background; ids count from 1) made every reader read
    every record as plain features, every box lost to them: now id 0 is a class of its own (labels count from 0),
    named as convert names it, and said once as the files are opened."""
    export = _changed_objects(tmp_path / "export", {("a.png", 0): {"class/label": 0}})
    with caplog.at_level("WARNING", logger="tfrecorder"):
        names = tfrecorder.label_names(export)
    assert names == ["red (0)", "red", "green", "blue"]  # the label map's red keeps its name
    assert caplog.messages == [f"class ids under 1, the Object Detection API's first (0 is its background): 0 "
                               f"'red (0)' (1 object, first file://{export}/train.tfrecord record 0); each is a "
                               f"class here, labels counting from 0 (label_names() names them)"]
    want = {name: [b[0] for b in boxes] for name, boxes in SCENES.items() if name in ("a.png", "b.png", "c.png")}
    want["a.png"][0] = "red (0)"
    seen = {}
    for example in tfrecorder.load_dataset(export, "TRAIN"):
        objects = {k: v.numpy() for k, v in example["objects"].items()}
        seen[example["image/filename"].numpy().decode()] = [names[i] for i in objects["label"]]
        on_colours(example["image"].numpy(), objects["bbox"], [n.split(" ")[0] for n in seen[
            example["image/filename"].numpy().decode()]], "class 0")
    assert {k: v for k, v in seen.items() if v} == want
    rows = tfrecorder.read_tfr(export).dropna(subset=["label"])
    assert rows.groupby("image/filename", sort=False)["label"].agg(list).to_dict() == want
    assert tfrecorder.info(export).label_counts["TRAIN"] == {"red (0)": 1, "red": 1, "green": 2, "blue": 2}
    converted = tfrecorder.convert(export, str(tmp_path / "out"), progress=False)
    assert sorted(tfrecorder.label_names(converted.tfrecord_dir)) == sorted(names)


def test_class_ids_the_label_map_does_not_name_are_said_and_named_as_convert_names_them(tmp_path, caplog):
    export = _changed_objects(tmp_path / "export", {("a.png", 0): {"class/label": 7, "class/text": b"seven"},
                                                    ("c.png", 1): {"class/label": 9}})  # its text: red
    with caplog.at_level("WARNING", logger="tfrecorder"):
        names = tfrecorder.label_names(export)
    assert names == ["red", "green", "blue", "4", "5", "6", "seven", "8", "red (9)"]  # label: class id - 1
    assert caplog.messages == [
        f"file://{export}/label_map.pbtxt does not name the class ids 7 'seven' (1 object, first file://{export}/"
        f"train.tfrecord record 0), 9 'red (9)' (1 object, first file://{export}/train.tfrecord record 2): each is "
        f"named by the first class text a record gives it, else by its number, as convert names it (ids between "
        f"them that no record holds by their number); add them to the label map to name them"]
    read = tfrecorder.read_tfr(export)["label"].dropna()
    converted = tfrecorder.convert(export, str(tmp_path / "out"), progress=False)
    assert sorted(tfrecorder.read_tfr(converted.tfrecord_dir)["label"].dropna()) == sorted(read)


def test_boxes_convert_would_refuse_are_counted_in_one_warning_an_open(tmp_path, caplog):
    """NaN boxes, boxes of no area and boxes outside the picture reached load_dataset and read_tfr without a
    word (convert refuses their records): they are counted, the first of each kind named, once a dataset opened."""
    nan = float("nan")
    export = _changed_objects(tmp_path / "export", {("c.png", 0): {"bbox/xmin": nan}, ("c.png", 2): {"bbox/xmax": 1.5},
                                                    ("a.png", 1): {"bbox/ymax": 0.25}})
    with caplog.at_level("WARNING", logger="tfrecorder"):
        boxes = [b for e in tfrecorder.load_dataset(export, "TRAIN") for b in e["objects"]["bbox"].numpy()]
    assert len(boxes) == 6  # read as they are
    where = f"file://{export}/train.tfrecord"
    assert caplog.messages == [
        f"3 boxes convert would refuse are read as they are: 1 NaN (first {where} record 2 object 0 (xmin nan, "
        f"ymin 0, xmax 0.4375, ymax 1)), 1 of no area (xmin >= xmax or ymin >= ymax) (first {where} record 0 object "
        f"1 (xmin 0.5625, ymin 0.5, xmax 0.9375, ymax 0.25)), 1 outside the picture (an edge outside [0, 1]) (first "
        f"{where} record 2 object 2 (xmin 0.5625, ymin 0.5625, xmax 1.5, ymax 0.9375)); tfrecorder.convert the files "
        f"to list their records in errors.csv and keep the rest"]
    result = tfrecorder.convert(export, str(tmp_path / "out"), progress=False)
    assert result.errors == 2  # a.png and c.png: convert refuses the records of those boxes


def test_an_image_no_decoder_takes_is_one_line_naming_its_file_and_record(tmp_path, caplog):
    """A record whose image/encoded is no image: load_dataset and show stopped with TensorFlow's multi-line
    InvalidArgumentError naming no file or record (convert lists it in errors.csv); found as the files are opened,
    it is one line naming them. What does not decode the image still reads it (the bytes); inspect writes them."""
    def not_an_image(example):
        stored = example.features.feature
        if stored["image/filename"].bytes_list.value[0] == b"b.png":
            stored["image/encoded"].bytes_list.value[0] = b"\x89PNG not an image"

    export = tmp_path / "export"
    _rewritten(os.path.join(DATUMARO, "train.tfrecord"), export / "train.tfrecord", not_an_image)
    message = (rf"^file://{export}/train.tfrecord record 1: image/encoded is no image TensorFlow decodes \(JPEG, PNG, "
               rf"GIF, BMP, WebP or JPEG XL; it starts b'\\x89PNG not an imag'\): decoding TRAIN's images would stop "
               rf"there; read with decode_images=False")
    for read in (lambda: tfrecorder.load_dataset(str(export), "TRAIN", batch_size=2, image_size=(8, 8)),
                 lambda: tfrecorder.show(str(export), path=str(tmp_path / "sheet.png"))):
        with pytest.raises(tfrecorder.TFRecorderError, match=message):
            read()
    assert len(list(tfrecorder.load_dataset(str(export), "TRAIN", decode_images=False))) == 4
    assert len(tfrecorder.read_tfr(str(export))) == 7
    with caplog.at_level("WARNING", logger="tfrecorder"):
        folder = tfrecorder.inspect(str(export), num_records=4, output_dir=str(tmp_path / "look"))
    rows = pd.read_csv(os.path.join(folder, "data.csv"), keep_default_na=False)
    assert rows["boxes_file"].tolist() == ["00000-boxes.png", "", "00002-boxes.png", "00003-boxes.png"]
    assert caplog.messages[-1].startswith("inspect: record 1 of TRAIN: its image cannot be decoded (")
    assert caplog.messages[0].startswith(f"file://{export}/train.tfrecord record 1: image/encoded is no image")


def test_a_background_item_is_no_class_and_ids_no_label_set_has_read_as_plain_records(tmp_path, caplog):
    """A label map's `item { id: 0 name: 'background' }` (no record's class) made every reader drop every box;
    a class id of a million made a vocabulary of a million names (of 2**40: more than any memory holds)."""
    export = tmp_path / "background"
    shutil.copytree(DATUMARO, export)
    with open(export / "label_map.pbtxt", "a") as f:
        f.write("item { id: 0 name: 'background' }\n")
    assert tfrecorder.label_names(str(export)) == ["red", "green", "blue"]
    damaged = _changed_objects(tmp_path / "damaged", {("a.png", 0): {"class/label": 1_000_000}})
    with caplog.at_level("WARNING", logger="tfrecorder"):
        assert tfrecorder.label_names(damaged) is None
    assert caplog.messages == [f"file://{damaged}/train.tfrecord holds the Object Detection API's keys, but class "
                               f"ids from 1 to 1000000 (its records' and label map's), more than any label set's: "
                               f"read as plain records"]


def test_an_export_whose_every_record_is_refused_fails_naming_them_and_keeps_errors_csv(tmp_path):
    """Every record's image refused: the table check said "column 'label': every value is missing" (the refused
    rows had no label), with no errors.csv and no record named."""
    def not_an_image(example) -> None:
        example.features.feature["image/encoded"].bytes_list.value[:] = [b"not an image"]

    _rewritten(os.path.join(DATUMARO, "train.tfrecord"), tmp_path / "export" / "train.tfrecord", not_an_image)
    out = tmp_path / "out"
    with pytest.raises(tfrecorder.TFRecorderError, match=r"no row was written: the 4 rows .* unsupported_format"):
        tfrecorder.convert(str(tmp_path / "export" / "*.tfrecord"), str(out), progress=False)
    errors = pd.read_csv(out / "errors.csv")
    assert len(errors) == 4 and errors["image_uri"].str.contains("train.tfrecord/").all(), errors["image_uri"]
