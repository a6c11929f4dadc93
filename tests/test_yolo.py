"""YOLO datasets (Ultralytics data.yaml, Roboflow's export, Darknet): read into the long form and converted with
boxes on their objects in every resize mode (some scenes EXIF-turned: YOLO's coordinates are of the picture as
Ultralytics loads it, turned upright), into the very bytes the same boxes give as a long form; polygons, pose,
empty and missing label files; each bad line a row error of errors.csv naming its file and line; a name that
leaves the root ``outside_folder``; every file under the root a row or named as skipped."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

import tfrecorder
from tests.test_detection import assert_on_objects
from tests.test_keypoints import assert_on_dots
from tfrecorder.dataset.boxes import turn
from tfrecorder.errors import TFRecorderError
from tfrecorder.sample_data import OBJECT_COLORS, make_detection_scenes, make_keypoint_scenes, write_yolo
from tfrecorder.write.sources.annotated import LABEL_NAMES_ATTR, ROOT_ATTR

EDGES = ["xmin", "ymin", "xmax", "ymax"]
LAYOUTS = ("ultralytics", "roboflow", "darknet")


def _errors(out) -> pd.DataFrame:
    return pd.read_csv(os.path.join(out, "errors.csv"), keep_default_na=False)


@pytest.fixture(scope="module")
def scenes(tmp_path_factory) -> pd.DataFrame:
    """10 scenes of 64x128 as displayed (sizes of powers of 2: every normalized coordinate is exact), every other
    one stored EXIF-turned (6, 8, 3); 8 TRAIN, 1 VALIDATION, 1 TEST."""
    return make_detection_scenes(str(tmp_path_factory.mktemp("scenes")), n=10, size=(64, 128))


@pytest.fixture(scope="module", params=LAYOUTS)
def converted(request, scenes, tmp_path_factory) -> tuple[str, str, tfrecorder.ConvertResult]:
    """(layout, the YOLO folder, its conversion)."""
    root = write_yolo(scenes, tmp_path_factory.mktemp(request.param) / "yolo", request.param)
    result = tfrecorder.convert(root, str(Path(root).parent / "out"), progress=False)
    return request.param, root, result


def the_long_form(scenes: pd.DataFrame, root: str) -> pd.DataFrame:
    """The scenes' boxes as a long form normalized to the displayed pictures, naming the YOLO folder's images."""
    images = {f: os.path.join(folder, f) for folder, _, files in os.walk(root) for f in files if f.endswith(".jpg")}
    turned = scenes["orientation"].isin([5, 6, 7, 8])
    width = np.where(turned, scenes["stored_height"], scenes["stored_width"]).astype(float)
    height = np.where(turned, scenes["stored_width"], scenes["stored_height"]).astype(float)
    boxes = scenes[["split", "image_uri", "label", *EDGES]].copy()
    boxes["image_uri"] = [images[os.path.basename(u)] for u in scenes["image_uri"]]
    boxes[EDGES] = boxes[EDGES].to_numpy() / np.stack([width, height, width, height], 1)
    return boxes


def test_every_image_and_box_is_read_into_its_split(converted, scenes):
    layout, root, result = converted
    assert {s: r.written for s, r in result.splits.items()} == scenes["split"].value_counts().to_dict()
    assert result.errors == 0
    read = tfrecorder.read_annotations(root)
    expected = the_long_form(scenes, root)
    key = ["image_uri", "label", *EDGES]
    assert (read[["split", *key]].sort_values(key).values.tolist()
            == expected[["split", *key]].sort_values(key).values.tolist())


@pytest.mark.parametrize("mode", [None, "stretch", "pad", "crop"])
def test_boxes_sit_on_their_objects_in_every_resize_mode(converted, mode):
    """Ultralytics' and Roboflow's layouts (a Darknet folder's records are the long form's bytes as theirs are)."""
    layout, root, result = converted
    if layout == "darknet":
        pytest.skip("the same records as the long form's, checked byte for byte")
    size = {"image_size": (48, 80), "resize_mode": mode} if mode else {}
    seen = turned = 0
    names = tfrecorder.label_names(result.tfrecord_dir)
    for example in tfrecorder.load_dataset(result.tfrecord_dir, "TRAIN", **size):
        objects = example["objects"]
        assert_on_objects(example["image"].numpy(), objects["bbox"].numpy(),
                          [names[i] for i in objects["label"].numpy()],
                          f"{layout}, {mode}, {example['image_uri'].numpy().decode()}")
        seen += 1
        turned += int(example["image_orientation"]) != 1
    assert seen == 8 and turned


def test_the_shards_are_the_same_boxes_given_as_a_long_form_byte_for_byte(converted, scenes):
    layout, root, result = converted
    out = str(Path(root).parent / "long")
    long_form = the_long_form(scenes, root)
    long_form.attrs[LABEL_NAMES_ATTR] = list(OBJECT_COLORS)  # the names, in data.yaml's order
    tfrecorder.convert(long_form, out, box_units="normalized", progress=False)
    shards = sorted(f for f in os.listdir(out) if f.endswith(".tfrecord"))
    assert shards == sorted(f for f in os.listdir(result.tfrecord_dir) if f.endswith(".tfrecord"))
    for shard in shards:
        assert Path(out, shard).read_bytes() == Path(result.tfrecord_dir, shard).read_bytes(), shard


def test_roboflows_export_is_read_as_downloaded(converted):
    """Its data.yaml names ../train/images, ../valid/images: taken from the yaml's folder, as Ultralytics does;
    its README is named as skipped; the yaml itself may be given."""
    layout, root, result = converted
    if layout != "roboflow":
        pytest.skip("Roboflow's layout")
    assert "../valid/images" in Path(root, "data.yaml").read_text()
    assert result.splits["VALIDATION"].written == 3
    assert result.skipped == ("README.roboflow.txt (not an image nor a label file)",)
    again = tfrecorder.read_annotations(os.path.join(root, "data.yaml"))
    assert sorted(again["split"].unique()) == ["TEST", "TRAIN", "VALIDATION"]


def test_polygons_are_boxes_and_instance_masks_on_their_objects(scenes, tmp_path):
    root = write_yolo(scenes, tmp_path / "yolo", "ultralytics", shapes="polygons")
    result = tfrecorder.convert(root, str(tmp_path / "out"), progress=False)
    assert not any("polygons" in w for w in result.warnings)
    read = tfrecorder.read_annotations(root)
    expected = the_long_form(scenes, root)
    assert sorted(read[EDGES].values.tolist()) == sorted(expected[EDGES].values.tolist())
    masks, names = 0, tfrecorder.label_names(result.tfrecord_dir)
    for example in tfrecorder.load_dataset(result.tfrecord_dir, "TRAIN", image_size=(48, 80)):
        objects, image = example["objects"], example["image"].numpy()
        labels = [names[i] for i in objects["label"].numpy()]
        assert_on_objects(image, objects["bbox"].numpy(), labels, "polygon")
        for mask, label in zip(objects["mask"].numpy(), labels):
            color = np.array(OBJECT_COLORS[label], float)
            on = np.abs(image[mask > 0].astype(float) - color).max(axis=1) < 60
            assert mask.any() and on.mean() > 0.9, f"{label}: {on.mean():.2f} of its mask on its colour"
            masks += 1
    assert masks


def people(tmp_path) -> pd.DataFrame:
    """make_keypoint_scenes' people as write_yolo takes them: boxes and keypoints in pixels of the picture as
    displayed (its COCO file gives the stored pixels'), with each image's orientation and stored size."""
    coco = tfrecorder.read_annotations(make_keypoint_scenes(str(tmp_path / "people"), n=6))
    rows = []
    for row in coco.itertuples():
        orientation = Image.open(row.image_uri).getexif().get(0x0112, 1)
        stored = np.array([row.width, row.height] * 2, float)
        shown = stored[[1, 0, 3, 2]] if orientation in (5, 6, 7, 8) else stored
        box = turn(np.array([[row.xmin, row.ymin, row.xmax, row.ymax]]) / stored, orientation)[0] * shown
        points = []
        for x, y, v in np.reshape(row.keypoints, (-1, 3)):
            point = turn(np.array([[x, y, x, y]]) / stored, orientation)[0][:2] * shown[:2]
            points += [*point, v] if v else [0, 0, 0]
        rows.append(("TRAIN", row.image_uri, "person", *box, orientation, row.width, row.height, points))
    return pd.DataFrame(rows, columns=["split", "image_uri", "label", *EDGES, "orientation", "stored_width",
                                       "stored_height", "keypoints"])


def test_pose_keypoints_sit_on_their_dots_in_every_resize_mode(tmp_path):
    root = write_yolo(people(tmp_path), tmp_path / "pose", "ultralytics", shapes="pose")
    assert "kpt_shape: [3, 3]" in Path(root, "data.yaml").read_text()
    out = tfrecorder.convert(root, str(tmp_path / "out"), progress=False).tfrecord_dir
    for mode in (None, "stretch", "pad", "crop"):
        size = {"image_size": (64, 64), "resize_mode": mode} if mode else {}
        seen = turned = 0
        for example in tfrecorder.load_dataset(out, "TRAIN", **size):
            objects = example["objects"]
            seen += assert_on_dots(example["image"].numpy(), objects["keypoints"].numpy(),
                                   objects["keypoint_visibility"].numpy(), f"yolo pose, {mode}")
            turned += int(example["image_orientation"]) != 1
        assert seen > 6 and turned


def tiny_png(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (32, 32), (90, 90, 90)).save(path)


@pytest.fixture(scope="module")
def mixed(tmp_path_factory) -> tuple[Path, tfrecorder.ConvertResult]:
    """An Ultralytics folder of 32x32 images: boxes, an empty and a missing label file, a box a hair over the
    edge, each bad-line rule, an image named from outside the root, a label file without an image and a file
    that is neither; converted once."""
    top = tmp_path_factory.mktemp("mixed")
    root = top / "yolo"
    labels = {
        "good": "0 0.5 0.5 0.5 0.5\n1 0.25 0.25 0.25 0.25\n",
        "empty": "",
        "missing": None,
        "hair": "1 0.5 0.5 1.004 0.5\n",  # 0.2% beyond the edges: kept and clipped, as normalized
        "class": "0 0.5 0.5 0.2 0.2\n7 0.5 0.5 0.2 0.2\n",
        "coordinate": "0 1.2 0.5 0.2 0.2\n",
        "past": "0 0.9 0.5 0.4 0.2\n",  # each value in [0, 1], its right edge at 1.1
        "odd": "\n1 0.1 0.1 0.9 0.1 0.9 0.9 0.1\n",
        "word": "0 0.5 abc 0.2 0.2\n0 0.5 0.5 0.2 0.2 0.1\n",
    }
    for name, text in labels.items():
        tiny_png(root / "images" / "train" / f"{name}.png")
        if text is not None:
            (root / "labels" / "train").mkdir(parents=True, exist_ok=True)
            (root / "labels" / "train" / f"{name}.txt").write_text(text)
    tiny_png(top / "outside" / "images" / "secret.png")
    (top / "outside" / "labels").mkdir()
    (top / "outside" / "labels" / "secret.txt").write_text("0 0.5 0.5 0.2 0.2\n")
    tiny_png(root / "images" / "val" / "v.png")
    (root / "val.txt").write_text("./images/val/v.png\n../outside/images/secret.png\n")
    (root / "labels" / "train" / "ghost.txt").write_text("0 0.5 0.5 0.2 0.2\n")
    (root / "notes.md").write_text("how it was made\n")
    (root / "data.yaml").write_text("train: images/train\nval: val.txt\nnames: {0: cat, 1: dog}\n")
    return root, tfrecorder.convert(str(root), str(top / "out"), progress=False)


def test_empty_and_missing_label_files_are_images_without_objects(mixed):
    root, result = mixed
    read = tfrecorder.read_annotations(str(root))
    by_image = read.groupby(read["image_uri"].map(os.path.basename))["label"].apply(list).to_dict()
    assert pd.isna(by_image["empty.png"]).all() and pd.isna(by_image["missing.png"]).all()
    assert len(by_image["empty.png"]) == len(by_image["missing.png"]) == 1
    assert by_image["good.png"] == ["cat", "dog"]
    records = {e["image_name"].numpy().decode(): len(e["objects"]["label"])
               for e in tfrecorder.load_dataset(result.tfrecord_dir, "TRAIN")}
    assert records == {"good.png": 2, "empty.png": 0, "missing.png": 0, "hair.png": 1}
    assert {e["image_name"].numpy().decode() for e in tfrecorder.load_dataset(result.tfrecord_dir, "VALIDATION")} \
        == {"v.png"}


@pytest.mark.parametrize("image, message", [
    ("class.png", r"labels/train/class.txt line 2: class 7 is not in names \(0-1\)$"),
    ("coordinate.png", r"labels/train/coordinate.txt line 1: coordinate 1.2 is outside \[0, 1\]"),
    ("odd.png", r"labels/train/odd.txt line 2: an odd number of polygon values \(7\)"),
    ("past.png", r"labels/train/past.txt line 1: the box's right edge \(cx \+ w/2\) 1.1 is outside \[0, 1\]: past "
                 r"the image's edge$"),
    ("word.png", r"labels/train/word.txt line 1: 'abc' is not a number \(and 1 more bad lines\)$"),
])
def test_each_bad_line_is_a_row_error_naming_its_file_and_line(mixed, image, message):
    root, result = mixed
    errors = _errors(result.tfrecord_dir)
    rows = errors[errors["image_uri"].map(os.path.basename) == image]
    assert len(rows) and set(rows["error"]) == {"bad_annotation"}
    assert rows["message"].str.contains(str(root)).all()
    assert rows["message"].str.contains(message).all(), rows["message"].tolist()


def test_bad_lines_refuse_only_their_images_and_every_row_is_counted(mixed):
    root, result = mixed
    assert result.error_codes == {"bad_annotation": 5, "outside_folder": 1}  # class.png keeps its good line
    assert result.rows.written + result.errors == result.rows.rows_in


def test_an_image_named_from_outside_the_root_is_outside_folder(mixed):
    root, result = mixed
    errors = _errors(result.tfrecord_dir)
    outside = errors[errors["error"] == "outside_folder"]
    assert outside["image_uri"].tolist() == [str(root.parent / "outside" / "images" / "secret.png")]  # spelled once
    assert "outside the dataset's root" in outside["message"].iloc[0]
    assert f"is named by {root / 'val.txt'}, outside" in outside["message"].iloc[0]  # the list, not the dataset


def test_files_that_are_no_row_are_named_and_label_files_without_an_image_noted(mixed):
    root, result = mixed
    assert result.skipped == ("labels/train/ghost.txt (a label file without an image)",
                              "notes.md (not an image nor a label file)")
    assert any(w.startswith("1 label files under") and "ghost.txt" in w for w in result.warnings), result.warnings


def test_pose_with_two_values_a_point_and_a_wrong_count(tmp_path):
    """kpt_shape [K, 2]: a point is visible (2) unless it is (0, 0), YOLO's mark of no point; a line with the
    wrong count of values is a row error."""
    root = tmp_path / "pose"
    for name, text in (("a", "0 0.5 0.5 0.4 0.4 0.3 0.35 0 0\n"), ("b", "0 0.5 0.5 0.4 0.4 0.3 0.35\n")):
        tiny_png(root / "images" / f"{name}.png")
        (root / "labels").mkdir(exist_ok=True)
        (root / "labels" / f"{name}.txt").write_text(text)
    (root / "data.yaml").write_text("train: images\nkpt_shape: [2, 2]\nnames: [person]\n")
    read = tfrecorder.read_annotations(str(root))
    assert read["keypoints"].iloc[0] == [0.3, 0.35, 2.0, 0.0, 0.0, 0.0]
    result = tfrecorder.convert(str(root), str(tmp_path / "out"), progress=False)
    errors = _errors(result.tfrecord_dir)
    assert errors["message"].tolist() == [
        f"{root}/labels/b.txt line 1: 7 values, where kpt_shape [2, 2] makes a line class, cx cy w h and 2 points "
        f"of 2: 9"]


def test_a_darknet_folder_is_read_with_cvats_paths(converted, scenes):
    layout, root, result = converted
    if layout != "darknet":
        pytest.skip("Darknet's layout")
    assert Path(root, "train.txt").read_text().startswith("data/obj_train_data/")
    assert sorted(os.listdir(root))[:2] == ["obj.data", "obj.names"]
    assert result.rows.written == len(scenes)


def test_what_is_not_a_yolo_dataset_is_refused_in_one_line(tmp_path):
    (tmp_path / "config.yaml").write_text("learning_rate: 0.1\n")
    with pytest.raises(TFRecorderError, match=r"config.yaml' is not an Ultralytics data.yaml: it needs 'names'"):
        tfrecorder.convert(str(tmp_path / "config.yaml"), str(tmp_path / "out"), progress=False)
    tiny_png(tmp_path / "bare" / "images" / "a.png")
    (tmp_path / "bare" / "labels").mkdir()
    (tmp_path / "bare" / "labels" / "a.txt").write_text("0 0.5 0.5 0.2 0.2\n")
    with pytest.raises(TFRecorderError, match=r"bare' looks like a YOLO dataset \(images/ beside labels/ of \.txt "
                                              r"files\) but has no data.yaml naming its classes"):
        tfrecorder.convert(str(tmp_path / "bare"), str(tmp_path / "out"), progress=False)


def test_box_units_other_than_normalized_are_refused(converted, tmp_path):
    layout, root, result = converted
    with pytest.raises(TFRecorderError, match=r"box_units='pixels': .* gives its boxes normalized"):
        tfrecorder.convert(root, str(tmp_path / "px"), box_units="pixels", progress=False)


def test_split_folders_spelled_another_way_or_linked_keep_their_images(tmp_path):
    """A data.yaml that names a split folder as ``./images/train``, ``images//val`` or through a link inside the
    root gets every image of it, as one spelled plainly does (the root's walk does not follow links)."""
    root = tmp_path / "yolo"
    for split in ("train", "val", "real_test"):
        for i in range(2):
            tiny_png(root / "images" / split / f"{split}{i}.png")
            (root / "labels" / split).mkdir(parents=True, exist_ok=True)
            (root / "labels" / split / f"{split}{i}.txt").write_text("0 0.5 0.5 0.5 0.5\n")
    (root / "images" / "test").symlink_to(root / "images" / "real_test", target_is_directory=True)
    (root / "labels" / "test").symlink_to(root / "labels" / "real_test", target_is_directory=True)
    (root / "data.yaml").write_text("train: ./images/train\nval: images//val\ntest: images/test\nnames: [cat]\n")
    table = tfrecorder.read_annotations(str(root))
    assert table.groupby("split")["image_uri"].nunique().to_dict() == {"TRAIN": 2, "VALIDATION": 2, "TEST": 2}
    assert table["label"].eq("cat").all()
    result = tfrecorder.convert(str(root), str(tmp_path / "out"), progress=False)
    assert result.rows.written == 6 and result.skipped == ()  # each file a row, or read to make one


def _one_image_yolo(root: Path) -> Path:
    (root / "images").mkdir(parents=True)
    (root / "labels").mkdir()
    Image.new("RGB", (64, 48), "gray").save(root / "images" / "a.jpg")
    (root / "labels" / "a.txt").write_text("0 0.5 0.5 0.2 0.2\n")
    return root


@pytest.mark.parametrize("yaml", ["train: [images, {secret}]", "train: [images, ../outside/secret.txt]",
                                  "path: ../outside\ntrain: [secret.txt]", "train: [images, linked.txt]",
                                  "path: ../outside\ntrain: ."])
def test_lists_folders_and_paths_outside_the_root_are_never_read(tmp_path, yaml):
    """A data.yaml entry or ``path`` that leaves the dataset's folder (absolute, ``../``, a link out) is not
    read, not even listed: a warning names it. Before, each line of any file it named became a row, and
    errors.csv quoted them."""
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "secret.txt"
    secret.write_text("root:x:0:0:the secret line\n")
    root = _one_image_yolo(tmp_path / "yolo")
    (root / "linked.txt").symlink_to(secret)
    (root / "data.yaml").write_text(yaml.format(secret=secret) + "\nnames: [cat]\n")
    try:
        result = tfrecorder.convert(str(root), str(tmp_path / "out"), progress=False)
    except TFRecorderError as e:  # no split left: one line
        assert "names no image" in str(e) and "secret line" not in str(e)
        return
    assert result.rows.written == 1 and result.errors == 0
    assert any("outside the dataset's folder" in w for w in result.warnings), result.warnings
    shown = (tmp_path / "out" / "errors.csv").read_text() + " ".join(result.warnings)
    assert "secret line" not in shown
    assert "secret line" not in " ".join(tfrecorder.read_annotations(str(root))["image_uri"].astype(str))


@pytest.mark.parametrize("names", ["{secret}", "../outside/secret.txt"])
def test_a_darknet_names_file_outside_the_root_is_refused_unread(tmp_path, names):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("the secret line\n")
    root = tmp_path / "darknet"
    (root / "obj_train_data").mkdir(parents=True)
    Image.new("RGB", (64, 48)).save(root / "obj_train_data" / "a.jpg")
    (root / "obj_train_data" / "a.txt").write_text("0 0.5 0.5 0.2 0.2\n")
    (root / "train.txt").write_text("obj_train_data/a.jpg\n")
    (root / "obj.data").write_text(f"classes = 1\nnames = {names.format(secret=outside / 'secret.txt')}\n"
                                   f"train = train.txt\n")
    with pytest.raises(TFRecorderError, match=r"its class names file .* is outside the dataset's folder .*: not "
                                              r"read") as e:
        tfrecorder.read_annotations(str(root))
    assert "secret line" not in str(e.value)


def test_a_darknet_folder_made_on_windows_names_its_files_with_backslashes(tmp_path):
    """CVAT on Windows writes ``data\\obj_train_data\\a.jpg`` in train.txt and obj.data: its folders, read as
    folders (each image was "in no split" and the dataset named none)."""
    root = tmp_path / "darknet"
    (root / "obj_train_data").mkdir(parents=True)
    Image.new("RGB", (64, 48)).save(root / "obj_train_data" / "a.jpg")
    (root / "obj_train_data" / "a.txt").write_text("0 0.5 0.5 0.2 0.2\n")
    (root / "obj.names").write_text("cat\n")
    (root / "train.txt").write_text("data\\obj_train_data\\a.jpg\r\n")
    (root / "obj.data").write_text("classes = 1\r\nnames = data\\obj.names\r\ntrain = data\\train.txt\r\n")
    boxes = tfrecorder.read_annotations(str(root))
    assert boxes[["image_uri", "label"]].values.tolist() == [[str(root / "obj_train_data" / "a.jpg"), "cat"]]


@pytest.mark.parametrize("kind", ["folder", "link to nothing", "fifo"])
def test_a_label_file_that_is_no_file_refuses_its_image_and_waits_on_nothing(tmp_path, kind):
    """A label path that is a folder, a link to nothing (an unfetched git-annex or DVC file) or a FIFO (a read
    would wait forever): that image is a bad_annotation row naming it, the others are written."""
    root = _one_image_yolo(tmp_path / "yolo")
    Image.new("RGB", (64, 48), "gray").save(root / "images" / "b.jpg")
    label = root / "labels" / "b.txt"
    {"folder": lambda: label.mkdir(), "link to nothing": lambda: label.symlink_to(root / "labels" / "gone.txt"),
     "fifo": lambda: os.mkfifo(label)}[kind]()
    (root / "data.yaml").write_text("train: images\nnames: [cat]\n")
    result = tfrecorder.convert(str(root), str(tmp_path / "out"), progress=False)
    assert (result.rows.written, result.error_codes) == (1, {"bad_annotation": 1})
    message = _errors(result.tfrecord_dir)["message"].iloc[0]
    assert message.startswith(f"{label} cannot be read ("), message


def test_a_dataset_inside_a_folder_called_images_finds_its_labels_beside_its_images(tmp_path):
    """The images -> labels rule applies inside the dataset's folder: one above it (~/images/my-dataset/) is not
    the dataset's, and a label beside its image (Darknet's, CVAT's) is read."""
    root = tmp_path / "images" / "ds"
    (root / "train").mkdir(parents=True)
    Image.new("RGB", (64, 48), "gray").save(root / "train" / "a.jpg")
    (root / "train" / "a.txt").write_text("0 0.5 0.5 0.2 0.2\n")
    (root / "data.yaml").write_text("train: train\nnames: [cat]\n")
    result = tfrecorder.convert(str(root), str(tmp_path / "out"), progress=False)
    assert result.errors == 0 and result.skipped == ()
    assert tfrecorder.read_tfr(str(tmp_path / "out"))["label"].tolist() == ["cat"]


def test_boxes_and_polygons_of_no_area_are_skipped_and_named(tmp_path):
    """A YOLO line of no area (a width or height of 0, a polygon on one line) has no box to store: skipped with
    a warning naming its file and line (Ultralytics drops such boxes as it trains), the image's other boxes kept;
    before, one failed the whole conversion naming an internal row."""
    root = _one_image_yolo(tmp_path / "yolo")
    (root / "labels" / "a.txt").write_text("0 0.5 0.5 0.2 0.2\n0 0.5 0.5 0 0.1\n0 0.1 0.5 0.5 0.5 0.9 0.5\n")
    (root / "data.yaml").write_text("train: images\nnames: [cat]\n")
    result = tfrecorder.convert(str(root), str(tmp_path / "out"), progress=False)
    assert result.errors == 0
    warning = next(w for w in result.warnings if "boxes of no area" in w)
    assert warning.startswith("2 label lines") and "a.txt line 2" in warning and "a.txt line 3" in warning
    assert tfrecorder.read_tfr(str(tmp_path / "out"))["label"].tolist() == ["cat"]


def test_a_byte_order_mark_is_no_part_of_a_list_or_a_label_line(tmp_path):
    """Windows editors start a text file with a byte order mark: an image list and a label file saved so read as
    any other (the first line's class was "\\ufeff0", a bad line, and the first image was not found)."""
    root = _one_image_yolo(tmp_path / "yolo")
    (root / "labels" / "a.txt").write_text("\ufeff0 0.5 0.5 0.2 0.2\n", encoding="utf-8")
    (root / "train.txt").write_text("\ufeffimages/a.jpg\n", encoding="utf-8")
    (root / "data.yaml").write_text("\ufefftrain: train.txt\nnames: [cat]\n", encoding="utf-8")
    result = tfrecorder.convert(str(root), str(tmp_path / "out"), progress=False)
    assert result.errors == 0 and result.rows.written == 1
    assert tfrecorder.read_tfr(str(tmp_path / "out"))["label"].tolist() == ["cat"]


def test_a_yaml_alias_bomb_in_names_is_one_short_line(tmp_path):
    """A few hundred bytes of YAML aliases name millions of items (9 ** 8 here; gigabytes at a level more):
    the message quotes a few of them, never the repr of them all."""
    import tracemalloc

    root = _one_image_yolo(tmp_path / "yolo")
    levels = ["a: &a [x, x, x, x, x, x, x, x, x]"] + [
        f"{chr(98 + i)}: &{chr(98 + i)} [" + ", ".join([f"*{chr(97 + i)}"] * 9) + "]" for i in range(7)]
    (root / "data.yaml").write_text("\n".join(levels) + "\ntrain: images\nnames: *h\n")
    tracemalloc.start()
    try:
        with pytest.raises(tfrecorder.SchemaError) as e:
            tfrecorder.read_annotations(str(root))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(str(e.value)) < 400 and "has the name" in str(e.value)
    assert peak < 16 * 2**20  # reading the YAML takes 5 MB; the repr of class 0's name alone took 38 MB


def test_a_label_file_linked_out_of_the_root_is_refused_once(tmp_path):
    """A label file that is a link to a file outside the root: its image is a bad_annotation row, the file is not
    read, and it is not also named as a label file without an image."""
    (tmp_path / "outside.txt").write_text("0 0.5 0.5 0.2 0.2\n")
    root = _one_image_yolo(tmp_path / "yolo")
    Image.new("RGB", (64, 48), "gray").save(root / "images" / "b.jpg")
    (root / "labels" / "b.txt").symlink_to(tmp_path / "outside.txt")
    (root / "data.yaml").write_text("train: images\nnames: [cat]\n")
    result = tfrecorder.convert(str(root), str(tmp_path / "out"), progress=False)
    assert (result.rows.written, result.error_codes) == (1, {"bad_annotation": 1})
    assert result.skipped == () and not [w for w in result.warnings if "without an image" in w]
    assert "outside the dataset's root: not read" in _errors(result.tfrecord_dir)["message"].iloc[0]


def test_the_usual_lines_quick_reading_is_the_full_rules_reading():
    """Plain box lines are read by a quick path (a dataset's lines are nearly all boxes of known classes): every
    kind of line, good and bad and at each bound, gives the objects, problems and boxes of no area that the full
    rules give, to the bit."""
    from tfrecorder.write.sources.yolo_labels import YoloDataset, parse

    lines = ["0 0.5 0.5 0.2 0.2", "1 0.5 0.5 1.004 0.5", "1 0.5 0.5 1.006 0.5", "0 0.9 0.5 0.4 0.2",
             "0 0.5 0.5 0 0.1", "0 nan 0.5 0.2 0.2", "0 inf 0.5 0.2 0.2", "0 0.5 0.5 -0.1 0.2", "0 1e-1 .5 2E-1 0.2",
             "01 0.5 0.5 0.2 0.2", "1.0 0.5 0.5 0.2 0.2", "2 0.5 0.5 0.2 0.2", "-0 0.5 0.5 0.2 0.2", "0 -0.005 0 0 0",
             "0 0.0025 0.5 0.005 0.2", "0 0.5 abc 0.2 0.2", "  0\t0.5 0.5 0.2 0.2  ", "", "0 0.997 0.5 0.016 0.2"]
    text = "\n".join(lines)
    quick = YoloDataset(None, "data.yaml", "", {0: "cat", 1: "dog"})
    full = YoloDataset(None, "data.yaml", "", {0: "cat", 1: "dog"})
    full.ids = {}  # no line is the usual one: each read by the full rules
    assert parse(text, quick) == parse(text, full)
    objects, problems, _, empty = parse(text, quick)
    assert len(objects) == 9 and [p.split(":")[0] for p in problems] == [f"line {n}" for n in (3, 4, 6, 7, 8, 12, 16)]
    assert empty == [5, 14]


LABEL_FILES = {  # every kind of label file: plain boxes, and each thing that is read a line at a time
    "plain": "0 0.5 0.5 0.2 0.2\n1 0.25 0.25 0.1 0.1\n", "unended": "1 0.5 0.5 0.2 0.2", "empty": "",
    "missing": None, "hair": "1 0.5 0.5 1.004 0.5\n", "exponent": "0 5e-1 .5 2E-1 +0.2\n",
    "no_area_only": "0 .5 .5 0 .1",
    "bad_only": "7 0.5 0.5 0.2 0.2\n", "word_only": "0 0.5 abc 0.2 0.2\n", "past_only": "0 0.9 0.5 0.4 0.2\n",
    "blank": "\n0 0.5 0.5 0.2 0.2\n\n", "windows": "0 0.5 0.5 0.2 0.2\r\n1 0.5 0.5 0.2 0.2\r\n",
    "bom": "\ufeff0 0.5 0.5 0.2 0.2\n", "float_class": "1.0 0.5 0.5 0.2 0.2\n", "short": "0 0.5 0.5 0.2\n",
    "bad_and_good": "7 0.5 0.5 0.2 0.2\n0 0.5 0.5 0.2 0.2\n", "no_area": "0 0.5 0.5 0 0.1\n0 0.5 0.5 0.2 0.2\n",
    "polygon": "0 0.1 0.1 0.9 0.1 0.9 0.9\n",
}


@pytest.mark.parametrize("kinds, at_once_files, objects, refused", [
    ([k for k in LABEL_FILES if k in ("plain", "unended", "empty", "missing", "hair", "exponent") or "only" in k],
     4, 5, 3),
    ([k for k in LABEL_FILES if k != "polygon"], 5, 12, 5),  # float_class too
    (list(LABEL_FILES), 0, 13, 5),  # a line of more than five values: every file read a line at a time
], ids=["plain boxes and files without objects", "every kind of box file", "a polygon too"])
def test_label_files_read_at_once_give_what_each_line_read_gives(tmp_path, monkeypatch, kinds, at_once_files, objects,
                                                                  refused):
    """Label files of plain box lines are parsed at once (pandas' parser, the checks an array at a time): the
    long form, the refused images' messages and the notes are those of every line read by the rules, to the bit,
    whatever else the dataset holds."""
    from tfrecorder.write.sources import yolo_labels

    root = tmp_path / "yolo"
    (root / "labels").mkdir(parents=True)
    for i, kind in enumerate(kinds):
        tiny_png(root / "images" / f"{i:02d}_{kind}.png")
        if LABEL_FILES[kind] is not None:
            (root / "labels" / f"{i:02d}_{kind}.txt").write_bytes(LABEL_FILES[kind].encode())
    (root / "data.yaml").write_text("train: images\nnames: [cat, dog]\n")
    quick, read_at_once = yolo_labels.quick_boxes, []
    monkeypatch.setattr(yolo_labels, "quick_boxes", lambda *a: read_at_once.append(quick(*a)) or read_at_once[-1])
    at_once = tfrecorder.read_annotations(str(root))
    monkeypatch.setattr(yolo_labels, "quick_boxes", lambda datas, dataset: (None, set()))
    by_line = tfrecorder.read_annotations(str(root))
    pd.testing.assert_frame_equal(at_once, by_line, check_exact=True)
    assert at_once.attrs == by_line.attrs
    assert len(read_at_once[0][1]) == at_once_files
    assert (at_once["label"].notna().sum(), len(at_once.attrs[ROOT_ATTR]["refused"])) == (objects, refused)


def _one_label(root: Path, names: str, line: str) -> pd.DataFrame:
    tiny_png(root / "images" / "a.png")
    (root / "labels").mkdir(parents=True, exist_ok=True)
    (root / "labels" / "a.txt").write_text(line)
    (root / "data.yaml").write_text(f"train: images\nnames: {names}\n")
    return tfrecorder.read_annotations(str(root))


@pytest.mark.parametrize("names, line, labels, problem", [
    ("[cat, dog]", "0 1e400 .5 1e400 .2\n", None, "line 1: inf is not a finite number"),  # no numpy warning
    ("[cat, dog]", "0 1.7e308 .5 1.7e308 .2\n", None, "outside [0, 1]"),
    ("[cat, dog]", "0" * 4300 + "1 .5 .5 .2 .2\n", ["dog"], None),  # 4,301 digits: int() refuses them
    ("[cat, dog]", "0" * 4300 + "1 .5 .5 .2 .2\n0 .1 .1 .9 .1 .9 .9\n", ["dog", "cat"], None),  # a line at a time
    ("{9007199254740993: a}", "9007199254740992 .5 .5 .2 .2\n", None, "class 9007199254740992 is not in names"),
    ("{0: z, 18446744073709551615: a}", "18446744073709551616 .5 .5 .2 .2\n", None, "is not in names (0, 1844"),
    ("{0: a, 1000000000000: b}", "3 .5 .5 .2 .2\n", None, "class 3 is not in names (0, 1000000000000)"),
], ids=["infinity", "overflow", "long class", "long class, by line", "2**53", "2**64", "far ids"])
def test_numbers_past_floats_and_ids_are_read_as_the_rules_say(tmp_path, names, line, labels, problem):
    """Label lines at the edges of numbers: an infinite or overflowing coordinate is a bad line (and no numpy
    warning, which a warnings-as-errors run made a traceback); a class id of thousands of digits is its value (a
    traceback read a line at a time); ids past 2**53 are compared exactly (the at-once reading took 2**53 for the
    next id, and 2**64 was a traceback); a bad class among far-apart ids is named at once (every id between was
    listed, gigabytes for ids 10**9 apart)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        boxes = _one_label(tmp_path / "yolo", names, line)
    refused = list(boxes.attrs[ROOT_ATTR]["refused"].values())
    if problem is None:
        assert boxes["label"].tolist() == labels and not refused
    else:
        assert len(refused) == 1 and problem in refused[0] and boxes["label"].isna().all()


@pytest.mark.parametrize("layout", ["names: []", "names: {}", "darknet"])
def test_a_dataset_that_names_no_class_is_one_line(tmp_path, layout):
    root = tmp_path / "yolo"
    if layout == "darknet":
        (root / "obj_train_data").mkdir(parents=True)
        tiny_png(root / "obj_train_data" / "a.png")
        (root / "obj_train_data" / "a.txt").write_text("0 .5 .5 .2 .2\n")
        (root / "obj.names").write_text("\n")
        (root / "train.txt").write_text("obj_train_data/a.png\n")
        with pytest.raises(TFRecorderError, match=r"obj.names' names no class: name the classes, one a line"):
            tfrecorder.read_annotations(str(root))
        return
    with pytest.raises(TFRecorderError, match=r"names is empty: name the classes"):
        _one_label(root, layout.split(": ")[1], "0 .5 .5 .2 .2\n")


def test_the_yamls_names_are_the_label_names_in_their_order(tmp_path):
    """data.yaml's names are the vocabulary as YOLO numbers them: class 0 is id 0, a class no line uses keeps its
    id, and a class only VALIDATION has converts. They were sorted (class 0 red stored as 2), unused ones
    dropped, and a class seen only in val stopped the conversion naming an internal row."""
    root = tmp_path / "yolo"
    for split, name, line in (("train", "a", "3 .5 .5 .2 .2\n1 .3 .3 .2 .2\n"), ("val", "b", "0 .5 .5 .2 .2\n")):
        tiny_png(root / "images" / split / f"{name}.png")
        (root / "labels" / split).mkdir(parents=True, exist_ok=True)
        (root / "labels" / split / f"{name}.txt").write_text(line)
    (root / "data.yaml").write_text("train: images/train\nval: images/val\nnames: [red, green, blue, yellow, pink]\n")
    result = tfrecorder.convert(str(root), str(tmp_path / "out"), progress=False)
    assert result.errors == 0
    assert tfrecorder.label_names(result.tfrecord_dir) == ["red", "green", "blue", "yellow", "pink"]
    ids = {split: sorted(i for e in tfrecorder.load_dataset(result.tfrecord_dir, split)
                         for i in e["objects"]["label"].numpy().tolist()) for split in ("TRAIN", "VALIDATION")}
    assert ids == {"TRAIN": [1, 3], "VALIDATION": [0]}  # each line's own class id
    direct = tfrecorder.convert(str(root), str(tmp_path / "direct"), runner="DirectRunner")  # a pipeline's too
    assert tfrecorder.label_names(direct.tfrecord_dir) == tfrecorder.label_names(result.tfrecord_dir)
    for shard in Path(result.tfrecord_dir).glob("*.tfrecord"):
        assert (Path(direct.tfrecord_dir) / shard.name).read_bytes() == shard.read_bytes()


def test_label_studios_yolo_export_is_read_by_its_folder(tmp_path):
    """Label Studio exports YOLO as classes.txt and notes.json beside images/ and labels/, without data.yaml or
    splits: its classes are classes.txt's lines, every image UNASSIGNED (split by the fractions), notes.json
    named as skipped. It was refused for having no data.yaml."""
    root = tmp_path / "project-1-at-2026"
    (root / "labels").mkdir(parents=True)
    for i in range(6):
        tiny_png(root / "images" / f"{i}.png")
        (root / "labels" / f"{i}.txt").write_text(f"{i % 2} 0.5 0.5 0.2 0.2\n")
    (root / "classes.txt").write_text("cat\ndog\n")
    (root / "notes.json").write_text('{"categories": [{"id": 0, "name": "cat"}, {"id": 1, "name": "dog"}]}')
    boxes = tfrecorder.read_annotations(str(root))
    assert set(boxes["split"]) == {"UNASSIGNED"} and boxes["label"].tolist() == ["cat", "dog"] * 3
    result = tfrecorder.convert(str(root), str(tmp_path / "out"), progress=False)
    assert result.rows.written == 6 and result.errors == 0 and result.skipped == ("notes.json (not an image nor a "
                                                                                   "label file)",)
    assert tfrecorder.label_names(result.tfrecord_dir) == ["cat", "dog"]


@pytest.mark.parametrize("layout", ["data.yaml", "darknet"])
def test_two_classes_of_one_name_stay_two_classes(tmp_path, layout):
    """names: [cat, cat]: class 1's boxes became class 0's without a word; the second is 'cat (1)', as a label
    map's second 'cat' is named by the readers and convert."""
    root = tmp_path / "yolo"
    tiny_png(root / "images" / "a.png")
    (root / "labels").mkdir(parents=True)
    (root / "labels" / "a.txt").write_text("0 .3 .3 .2 .2\n1 .7 .7 .2 .2\n")
    if layout == "darknet":
        (root / "obj.names").write_text("cat\ncat\n")
        (root / "train.txt").write_text("images/a.png\n")
    else:
        (root / "data.yaml").write_text("train: images\nnames: [cat, cat]\n")
    assert tfrecorder.read_annotations(str(root))["label"].tolist() == ["cat", "cat (1)"]


@pytest.mark.parametrize("runner", ["local", "DirectRunner"])
def test_a_dataset_whose_every_class_is_outside_names_names_its_lines_and_keeps_errors_csv(tmp_path, runner):
    """names too short for the label files (every line's class past it): each image is a bad_annotation row
    naming its label file and line, errors.csv lists them, and the run fails saying so. Before, the table of no
    label at all stopped at the schema check: "column 'label': every value is missing", no file named."""
    if runner != "local":
        pytest.importorskip("apache_beam")
    root = tmp_path / "yolo"
    for split in ("train", "val"):
        tiny_png(root / "images" / split / f"{split}.png")
        (root / "labels" / split).mkdir(parents=True)
        (root / "labels" / split / f"{split}.txt").write_text("3 0.5 0.5 0.2 0.2\n5 0.4 0.4 0.1 0.1 0.3 0.3\n")
    (root / "data.yaml").write_text("train: images/train\nval: images/val\nnames: [cat]\n")
    with pytest.raises(TFRecorderError, match=r"^no row was written: the 2 rows not discarded all failed, listed "
                                              r"in .*errors.csv\. Causes: bad_annotation: 2 rows, e.g. .*labels/"
                                              r"(train|val)/\w+\.txt line 1: class 3 is not in names \(0-0\)"):
        tfrecorder.convert(str(root), str(tmp_path / "out"), runner=runner, progress=False)
    errors = _errors(tmp_path / "out")
    assert errors["error"].tolist() == ["bad_annotation"] * 2
    assert sorted(errors["message"]) == [f"{root}/labels/{split}/{split}.txt line 1: class 3 is not in names (0-0) "
                                         f"(and 1 more bad lines)" for split in ("train", "val")]


def test_links_out_of_the_root_in_a_split_folder_are_named(tmp_path):
    """A split folder holding a link to a folder outside the root: the link is named in result.skipped (its
    files never listed); a link to an image outside is an outside_folder row. Before, the folder's images were
    neither rows nor named anywhere."""
    outside = tmp_path / "outside"
    tiny_png(outside / "secret.png")
    root = _one_image_yolo(tmp_path / "yolo")
    (root / "images" / "more").symlink_to(outside, target_is_directory=True)
    (root / "images" / "b.png").symlink_to(outside / "secret.png")
    (root / "data.yaml").write_text("train: images\nnames: [cat]\n")
    result = tfrecorder.convert(str(root), str(tmp_path / "out"), progress=False)
    assert (result.rows.written, result.error_codes) == (1, {"outside_folder": 1})
    assert result.skipped == ("images/more (a link to a folder outside the dataset's root: not read)",)
    assert any("images/more (a link to a folder outside" in w for w in result.warnings), result.warnings
    assert "secret" not in " ".join(result.warnings)
