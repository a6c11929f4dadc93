"""The entrance through annotation files (issue 41): VOC, COCO and AutoML files are untrusted input. Each bad
entry is one line naming the file, the entry and what is wrong; nothing is dropped without a word; VOC XML with
a DTD or entity is refused; a COCO file is read within 3x its size; the dataset's root travels with the boxes
(for the fetch's outside_folder check); a label over 64 KiB is a row error."""

from __future__ import annotations

import copy
import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import tfrecorder
from tests.conftest import write_image
from tests.servers import http_server
from tests.test_annotations import voc_xml
from tfrecorder.errors import SchemaError, TFRecorderError
from tfrecorder.write.sources.annotated import ROOT_ATTR

ROOT = Path(__file__).resolve().parents[1]
COCO = {
    "images": [{"id": 7, "file_name": "a.jpg", "width": 640, "height": 480},
               {"id": 8, "file_name": "b.jpg", "width": 320, "height": 240}],
    "annotations": [{"id": 1, "image_id": 7, "bbox": [10, 20, 100, 50], "category_id": 18, "iscrowd": 0},
                    {"id": 2, "image_id": 8, "bbox": [0, 0, 32, 24], "category_id": 1, "iscrowd": 1}],
    "categories": [{"id": 1, "name": "person"}, {"id": 18, "name": "dog"}],
}


def coco_file(path: Path, data: dict) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return str(path)


def root_of(boxes) -> dict:
    return boxes.attrs[ROOT_ATTR]


# --- the dataset's root -------------------------------------------------------------------------------------

def test_the_dataset_root_is_images_dir_else_the_annotation_folder_or_its_parent(tmp_path, monkeypatch):
    beside = coco_file(tmp_path / "flat" / "instances_train.json", COCO)
    assert root_of(tfrecorder.read_annotations(beside)) == {"root": str(tmp_path / "flat"), "annotations": beside}

    nested = coco_file(tmp_path / "coco" / "Annotations" / "instances_val2017.json", COCO)
    assert root_of(tfrecorder.read_annotations(nested))["root"] == str(tmp_path / "coco")  # COCO's annotations/

    voc = tmp_path / "VOC2012"
    (voc / "Annotations").mkdir(parents=True)
    (voc / "Annotations" / "0.xml").write_text(voc_xml("0.jpg", [("cat", 1, 1, 4, 4, 0)]))
    assert root_of(tfrecorder.read_annotations(str(voc))) == {"root": str(voc), "annotations": str(voc)}

    monkeypatch.chdir(tmp_path)  # images_dir as given, relative: the root is where it resolves now
    given = tfrecorder.read_annotations(beside, images_dir="photos")
    assert root_of(given)["root"] == str(tmp_path / "photos") and given["image_uri"][0] == "photos/a.jpg"
    assert root_of(tfrecorder.read_annotations(str(voc), images_dir="gs://b/jpegs/"))["root"] == "gs://b/jpegs"


@pytest.mark.parametrize("layout,images", [
    ("annotations/instances_train2017.json", "train2017"),  # COCO 2017 as downloaded
    ("annotations/instances_train.json", "images/train"),  # Datumaro's COCO export
    ("annotations/instances_train.json", "images"),
    ("instances_train.json", "images"),
])
def test_convert_finds_the_images_of_the_usual_coco_layouts(tmp_path, layout, images):
    """convert(json) with nothing else said reads the images where COCO and Datumaro put them, beside
    annotations/, and writes them."""
    data = copy.deepcopy(COCO)
    for image in data["images"]:
        write_image(tmp_path / images / image["file_name"], "JPEG", size=(image["height"], image["width"]))
    result = tfrecorder.convert(coco_file(tmp_path / layout, data), str(tmp_path / "out"), progress=False)
    assert result.errors == 0 and sum(s.images for s in result.splits.values()) == 2


def test_names_keep_their_spelling_and_a_remote_file_never_names_a_local_one(tmp_path):
    www = tmp_path / "www"
    coco = copy.deepcopy(COCO)
    coco["images"] += [{"id": 9, "file_name": "/home/me/private.jpg"}, {"id": 10, "file_name": "../../etc/x.jpg"},
                       {"id": 11, "file_name": "gs://other/y.jpg"}]
    coco_file(www / "annotations" / "instances_val.json", coco)
    with http_server(www) as (base, _):
        boxes = tfrecorder.read_annotations(f"{base}/annotations/instances_val.json")
    assert root_of(boxes) == {"root": base, "annotations": f"{base}/annotations/instances_val.json"}
    assert boxes["image_uri"].tolist()[2:] == [f"{base}/home/me/private.jpg",  # on the server, not this machine
                                               f"{base}/annotations/../../etc/x.jpg", "gs://other/y.jpg"]

    local = tfrecorder.read_annotations(coco_file(tmp_path / "local" / "instances_val.json", coco))
    assert local["image_uri"].tolist()[2:] == ["/home/me/private.jpg", str(tmp_path / "local" / "../../etc/x.jpg"),
                                               "gs://other/y.jpg"]  # as given: the fetch refuses them


# --- untrusted XML ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("declaration", [
    '<!DOCTYPE a [<!ENTITY l0 "ha"><!ENTITY l1 "&l0;&l0;&l0;&l0;&l0;&l0;&l0;&l0;&l0;&l0;">]>',  # billion laughs
    '<!DOCTYPE a [<!ENTITY secret SYSTEM "file:///etc/hostname">]>',  # an external entity
    '<!DOCTYPE annotation SYSTEM "http://127.0.0.1:9/voc.dtd">',
])
def test_voc_xml_with_a_dtd_or_an_entity_is_refused(tmp_path, declaration):
    (tmp_path / "voc").mkdir()
    xml = tmp_path / "voc" / "a.xml"
    xml.write_text(f"<?xml version='1.0'?>{declaration}<annotation><filename>a.jpg</filename><object><name>&l1;"
                   f"</name></object></annotation>".replace("&l1;", "&l1;" if "l1" in declaration else "cat"))
    with pytest.raises(TFRecorderError, match=rf"^Pascal VOC annotation '{xml}' has a DTD/entity declaration: "
                                              r"refused \(untrusted XML\)"):
        tfrecorder.read_annotations(str(tmp_path / "voc"))


# --- one line for every bad input ---------------------------------------------------------------------------

def _set(path: str, value):
    """A change to COCO: ``path`` like "images.0.id" set to ``value`` (``DELETE`` removes the key)."""
    def change(data):
        *parents, last = path.split(".")
        node = data
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        if value is DELETE:
            del node[last]
        elif isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value
        return data
    return change


DELETE = object()
BAD_COCO = [
    (_set("annotations.0.iscrowd", "yes"), TFRecorderError,
     r"annotation 1 of image 'a.jpg': iscrowd 'yes' is not 0 or 1"),
    (_set("annotations.0.iscrowd", 2), TFRecorderError, r"iscrowd 2 is not 0 or 1"),  # it was stored as 2
    (_set("images.0.id", DELETE), TFRecorderError, r"images\[0\] \(file_name 'a.jpg'\) has no 'id'"),
    (_set("images.0.id", [7]), TFRecorderError, r"images\[0\] \(file_name 'a.jpg'\): id \[7\] is not an id"),
    (_set("images.1.file_name", 5), TFRecorderError, r"images\[1\] \(id 8\): file_name 5 is not a file name"),
    (_set("images.1.file_name", DELETE), TFRecorderError, r"images\[1\] \(id 8\): has no 'file_name'"),
    (_set("images", {"7": {"file_name": "a.jpg"}}), TFRecorderError, r"its 'images' is an object, not a list"),
    (_set("annotations", {"1": {}}), TFRecorderError, r"its 'annotations' is an object, not a list of entries"),
    (_set("categories", {"1": "person"}), TFRecorderError, r"its 'categories' is an object, not a list"),
    (_set("categories.0.id", DELETE), TFRecorderError, r"categories\[0\] has no 'id'"),
    (_set("categories.0.name", ["person"]), TFRecorderError,
     r"categories\[0\] \(id 1\): name \['person'\] is not text"),
    (_set("images.0.width", "wide"), TFRecorderError, r"images\[0\] \('a.jpg'\): width 'wide' is not a whole number"),
    (_set("images.0.height", 1e400), TFRecorderError, r"images\[0\] \('a.jpg'\): height inf is not a whole number"),
    (_set("annotations.1", 17), TFRecorderError, r"annotations\[1\] is a number \(17\), not an object"),
    (_set("annotations.1.image_id", DELETE), TFRecorderError, r"annotations\[1\] \(id 2\) has no 'image_id'"),
    (_set("annotations.0.bbox", ["x", 1, 2, 3]), TFRecorderError,
     r"annotation 1 of image 'a.jpg': bbox 'x' is not a number"),
    (_set("annotations.0.bbox", [1, float("nan"), 2, 3]), TFRecorderError, r"bbox nan is not a finite number"),
    (_set("annotations.0.bbox", [1, 2, float("inf"), 3]), TFRecorderError, r"bbox inf is not a finite number"),
    (_set("annotations.0.bbox", [1, 2, 3]), TFRecorderError, r"bbox \[1, 2, 3\] is not \[x, y, width, height\]"),
    (_set("annotations.0.category_id", [18]), TFRecorderError, r"category_id \[18\] is not in 'categories'"),
    (_set("annotations", []), TFRecorderError, r"hold 2 images but no annotation \(a test split's image_info "
                                               r"file\?\)"),  # it said the label column's type was unknown
    # JSON's true is no id nor number (Python's bool is the int 1: category 1, x 1, silently)
    (_set("annotations.0.category_id", True), TFRecorderError, r"category_id True is not in 'categories'"),
    (_set("annotations.0.bbox", [True, 1, 2, 3]), TFRecorderError, r"bbox True is not a number"),
    (_set("images.0.id", True), TFRecorderError, r"images\[0\] \(file_name 'a.jpg'\): id True is not an id"),
    (_set("annotations.0.area", "big"), TFRecorderError, r"annotation 1 of image 'a.jpg': area 'big' is not a number"),
    # nothing lost without a word
    (_set("images.1.id", 7), SchemaError, r"images 'a.jpg' and 'b.jpg' share the id 7: each image needs its own id"),
    (_set("annotations.1.image_id", 99), SchemaError,
     r"1 annotations name an image_id that no entry of 'images' has: 2 \(image_id 99\); add their images"),
    (_set("categories.1.name", "  "), SchemaError, r"category 18 has a blank name: every box needs its label"),
    (_set("categories.0.name", DELETE), SchemaError, r"category 1 has no name: every box needs its label"),
    (_set("categories.1.id", 1), SchemaError, r"categories 'person' and 'dog' share the id 1"),
]


@pytest.mark.parametrize("change,error,message", BAD_COCO, ids=[str(i) for i in range(len(BAD_COCO))])
def test_each_bad_coco_entry_is_one_line_naming_the_file_and_the_entry(tmp_path, change, error, message):
    path = coco_file(tmp_path / "instances_train.json", change(copy.deepcopy(COCO)))
    with pytest.raises(error, match=message) as raised:
        tfrecorder.read_annotations(path)
    assert path in str(raised.value) and "\n" not in str(raised.value)


def test_dangling_annotations_are_counted_and_the_first_named(tmp_path):
    coco = copy.deepcopy(COCO)
    coco["annotations"] += [{"id": 100 + i, "image_id": 50 + i, "bbox": [0, 0, 1, 1], "category_id": 1}
                            for i in range(7)]
    with pytest.raises(SchemaError, match=r": 7 annotations name an image_id .*: 100 \(image_id 50\), 101 "
                                          r"\(image_id 51\), 102 \(image_id 52\), 103 \(image_id 53\), 104 "
                                          r"\(image_id 54\), \.\.\.;"):
        tfrecorder.read_annotations(coco_file(tmp_path / "instances_train.json", coco))


def test_coco_nested_too_deep_or_not_utf8_is_one_line(tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text('{"images": ' + "[" * 200_000 + "]" * 200_000 + "}")
    with pytest.raises(TFRecorderError, match=r"deep.json' nest arrays or objects too deep to parse"):
        tfrecorder.read_annotations(str(deep))
    latin = tmp_path / "latin.json"
    latin.write_bytes(b'{"images": [\n{"id": 1, "file_name": "caf\xe9.jpg"}]}')
    with pytest.raises(TFRecorderError, match=r"latin.json' is not UTF-8 text: byte 0xe9 at line 2; save it as UTF-8"):
        tfrecorder.read_annotations(str(latin))


@pytest.mark.parametrize("size,object_name,message", [
    ("<width>1e400</width>", "cat", r"a.xml: <width> '1e400' is not a whole number"),
    ("<width>wide</width>", "cat", r"a.xml: <width> 'wide' is not a whole number"),
    ("<height>nan</height>", "cat", r"a.xml: <height> 'nan' is not a whole number"),
    ("<width>4</width>", "  ", r"a.xml': object 1 has a blank <name>: every box needs its label"),
    ("<width>4</width>", None, r"a.xml': object 1 has no <name>: every box needs its label"),
])
def test_each_bad_voc_entry_is_one_line_naming_the_file(tmp_path, size, object_name, message):
    (tmp_path / "voc").mkdir()
    name = "" if object_name is None else f"<name>{object_name}</name>"
    (tmp_path / "voc" / "a.xml").write_text(f"<annotation><filename>a.jpg</filename><size>{size}</size><object>"
                                            f"{name}<bndbox><xmin>1</xmin><ymin>1</ymin><xmax>2</xmax><ymax>2</ymax>"
                                            f"</bndbox></object></annotation>")
    with pytest.raises(SchemaError if "name>" in message else TFRecorderError, match=message):
        tfrecorder.read_annotations(str(tmp_path / "voc"))


def test_a_voc_split_list_in_latin1_is_one_line(tmp_path):
    voc = tmp_path / "voc"
    (voc / "Annotations").mkdir(parents=True)
    (voc / "Annotations" / "a.xml").write_text(voc_xml("a.jpg", [("cat", 1, 1, 4, 4, 0)]))
    (voc / "ImageSets" / "Main").mkdir(parents=True)
    (voc / "ImageSets" / "Main" / "train.txt").write_bytes(b"a\ncaf\xe9\n")
    with pytest.raises(TFRecorderError, match=r"^Pascal VOC split list '.*train.txt' is not UTF-8 text: byte 0xe9 at "
                                              r"line 2; save it as UTF-8$"):
        tfrecorder.read_annotations(str(voc))


@pytest.mark.parametrize("text,error,message", [
    (b"TRAIN,a.jpg,car,0.1,0.2,,,0.3,0.4,,\nTRAIN,b.jpg,car,0.1,0.2,,,0.3,0.4,,,extra\n", TFRecorderError,
     r"line 2 has 12 fields: a row has at most 11"),
    (b"TRAIN,a.jpg,car,0.1,0.2,,,0.3,0.4,,,extra\n", TFRecorderError, r"line 1 has 12 fields"),
    (b"TRAIN,a.jpg,car,0.1,0.2,,,0.3,0.4,,\nTRAIN,caf\xe9.jpg,car,0.1,0.2,,,0.3,0.4,,\n", TFRecorderError,
     r"is not UTF-8 text: byte 0xe9 at line 2; save it as UTF-8"),
    (b"TRAIN,a.jpg,car,0.1,0.2,,,0.3,0.4,,\nTRAIN,b.jpg,car,nan,0.2,,,0.3,0.4,,\n", TFRecorderError,
     r"line 2: vertex 'nan' is not a finite number"),
    (b"TRAIN,a.jpg,car,0.1,0.2,,,0.3,0.4,,\nTRAIN,b.jpg,car,10,20,,,30,40,,\nTEST,c.jpg,cat,0,0,,,1,1,,\n",
     SchemaError, r"mixes units: 1 rows have vertices over 1, in pixels \(line 2\), 2 are normalized to \[0, 1\]"),
])
def test_each_bad_automl_row_is_one_line_naming_the_line(tmp_path, text, error, message):
    path = tmp_path / "automl.csv"
    path.write_bytes(text)
    with pytest.raises(error, match=message) as raised:
        tfrecorder.read_annotations(str(path))
    assert str(path) in str(raised.value)


# --- bounded memory -----------------------------------------------------------------------------------------

PEAK = """
import sys
import tfrecorder.write.sources.annotations as annotations

def peak():
    return next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:")) * 1024

annotations.read_annotations(sys.argv[2])  # what a first read imports is not the read's
before = peak()
boxes = annotations.read_annotations(sys.argv[1])
print(len(boxes), peak() - before)
"""


@pytest.mark.slow  # a subprocess
@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads the peak RSS from /proc")
def test_a_coco_file_is_read_within_three_and_a_half_times_its_size(tmp_path):
    # json.loads of a whole COCO file kept every segmentation polygon as Python floats (~4x their text) and
    # then a dict per box: a 148 MB file peaked at 1.73 GB. Polygons are turned into their compact JSON bytes as
    # each annotation is parsed (the instance mask column; ~0.7x of a file that is mostly polygons: 2.7x -> 3.4x).
    from benchmarks.bench_entrance_memory import coco_json

    path = tmp_path / "instances_train2017.json"
    size = coco_json(str(path), 15)
    coco_json(str(tmp_path / "tiny.json"), 0.01)
    proc = subprocess.run([sys.executable, "-c", PEAK, str(path), str(tmp_path / "tiny.json")], capture_output=True,
                          text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows, grown = map(int, proc.stdout.split())
    assert rows > 25_000 and grown < 3.5 * size, f"the read grew {grown / size:.2f}x the file's size"


@pytest.mark.slow  # a subprocess
@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads the peak RSS from /proc")
def test_a_box_only_coco_file_is_read_within_three_and_a_half_times_its_size(tmp_path):
    # Roboflow's and CVAT's exports of boxes ("segmentation": []): json.loads made a dict per annotation, a list
    # of them per image and then the columns: 7.6x a 40 MiB file. The annotations are columns as each is parsed
    # (benchmarks/bench_entrance_memory.py --shape boxes --mib 38: 2.6x; a small file adds the reader's own).
    from benchmarks.bench_entrance_memory import coco_json

    path = tmp_path / "instances_train2017.json"
    size = coco_json(str(path), 15, shape="boxes")
    coco_json(str(tmp_path / "tiny.json"), 0.01, shape="boxes")
    proc = subprocess.run([sys.executable, "-c", PEAK, str(path), str(tmp_path / "tiny.json")], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows, grown = map(int, proc.stdout.split())
    assert rows > 100_000 and grown < 3.5 * size, f"the read grew {grown / size:.2f}x the file's size"


# --- labels over 64 KiB ---------------------------------------------------------------------------------------

def test_a_label_over_64_kib_from_a_coco_file_is_a_row_error(tmp_path):
    coco = copy.deepcopy(COCO)
    coco["categories"][0]["name"] = "person-" * 10_000  # 70,000 bytes
    for image in coco["images"]:
        write_image(tmp_path / "images" / image["file_name"], size=(image["height"], image["width"]))
    result = tfrecorder.convert(coco_file(tmp_path / "instances_train.json", coco), str(tmp_path / "out"),
                                progress=False)
    assert result.rows.written == 1 and result.errors == 1
    with open(tmp_path / "out" / "errors.csv", newline="") as f:
        (row,) = list(csv.DictReader(f))
    assert (row["row"], row["error"], row["image_uri"]) == ("1", "label_too_long", str(tmp_path / "images" / "b.jpg"))
    assert row["message"] == (f"row 1: the label {'person-' * 5 + 'perso'!r}... of image {tmp_path}/images/b.jpg "
                              f"is 70,000 bytes, over the 64 KiB a label may have: name the class in fewer words")


def test_convert_and_the_command_take_images_dir_as_read_annotations_does(tmp_path, command):
    """The outside_folder message says "give images_dir=": convert and `tfrecorder convert --images-dir` take it
    (a COCO file whose images are elsewhere); for a table, whose image_uri names its images, it is one line."""
    data = copy.deepcopy(COCO)
    for image in data["images"]:
        write_image(tmp_path / "photos" / image["file_name"], "JPEG", size=(image["height"], image["width"]))
    coco = coco_file(tmp_path / "labels" / "instances_train.json", data)
    result = tfrecorder.convert(coco, str(tmp_path / "out"), images_dir=str(tmp_path / "photos"), progress=False)
    assert result.errors == 0 and sum(s.images for s in result.splits.values()) == 2
    proc = command("convert", coco, str(tmp_path / "cli"), "--images-dir", str(tmp_path / "photos"), "--no-progress")
    assert proc.returncode == 0, proc.stderr
    table = tmp_path / "table.csv"
    table.write_text(f"split,image_uri,label\nTRAIN,{tmp_path / 'photos' / 'a.jpg'},dog\n")
    with pytest.raises(TFRecorderError, match=r"images_dir='photos': it says where the images of an annotation "
                                              r"file .* this source is a table"):
        tfrecorder.convert(str(table), str(tmp_path / "table"), images_dir="photos")
