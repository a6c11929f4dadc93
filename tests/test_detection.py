"""Detection tables: every input kind converted into one record per image whose boxes sit on their objects -
for our reader in every resize mode, for a reader that ignores EXIF (the stored frame, as Model Garden reads
it) and for TFDS - and every box rule."""

from __future__ import annotations

import json
import os
import re

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf
from PIL import Image

import tfrecorder
from tests.model_garden import model_garden
from tfrecorder.errors import SchemaError
from tfrecorder.sample_data import OBJECT_COLORS, make_detection_scenes, stored_pixels, write_voc

EDGES = ["xmin", "ymin", "xmax", "ymax"]
NAMES = sorted(OBJECT_COLORS)  # the TRAIN vocabulary: every colour appears in TRAIN


@pytest.fixture(scope="module")
def scenes(tmp_path_factory) -> pd.DataFrame:
    """24 scenes, a third of them stored turned (EXIF 6, 8, 3), boxes in displayed pixels."""
    return make_detection_scenes(str(tmp_path_factory.mktemp("scenes")), n=24)


def write_coco(scenes: pd.DataFrame, root) -> str:
    """A COCO instances JSON (boxes [x, y, w, h] of the stored pixels, width/height as stored), images beside."""
    boxes = stored_pixels(scenes)
    images, annotations = [], []
    categories = [{"id": i + 1, "name": name} for i, name in enumerate(NAMES)]
    for image_id, (uri, rows) in enumerate(boxes.groupby("image_uri", sort=False), 1):
        os.link(uri, root / os.path.basename(uri))
        first = rows.iloc[0]
        images.append({"id": image_id, "file_name": os.path.basename(uri), "width": int(first.stored_width),
                       "height": int(first.stored_height)})
        for row in rows.itertuples():
            annotations.append({"id": len(annotations) + 1, "image_id": image_id, "iscrowd": 0,
                                "category_id": NAMES.index(row.label) + 1,
                                "bbox": [row.xmin, row.ymin, row.xmax - row.xmin, row.ymax - row.ymin],
                                "area": float((row.xmax - row.xmin) * (row.ymax - row.ymin))})
    path = root / "instances_train.json"
    path.write_text(json.dumps({"images": images, "annotations": annotations, "categories": categories}))
    return str(path)


def write_automl(scenes: pd.DataFrame, root) -> str:
    """An AutoML Vision detection CSV: normalized boxes of the displayed picture, the 2-vertex form."""
    lines = []
    for row in scenes.itertuples():
        turned = row.orientation in (5, 6, 7, 8)
        w, h = (row.stored_height, row.stored_width) if turned else (row.stored_width, row.stored_height)
        lines.append(f"{row.split},{row.image_uri},{row.label},{row.xmin / w:.6f},{row.ymin / h:.6f},,,"
                     f"{row.xmax / w:.6f},{row.ymax / h:.6f},,")
    path = root / "boxes.csv"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def long_form(scenes: pd.DataFrame, root) -> pd.DataFrame:
    return scenes[["split", "image_uri", "label", *EDGES]]


@pytest.fixture(scope="module")
def long_form_out(scenes, tmp_path_factory) -> str:
    """The scenes' long form converted with the defaults, once for the tests that only read it."""
    out = str(tmp_path_factory.mktemp("long-form") / "out")
    tfrecorder.convert(scenes[["split", "image_uri", "label", *EDGES]], out, progress=False)
    return out


KINDS = {"long form": long_form, "voc": write_voc, "coco": write_coco, "automl": write_automl}


@pytest.fixture(scope="module", params=list(KINDS))
def converted(request, scenes, tmp_path_factory) -> tuple[str, str]:
    root = tmp_path_factory.mktemp(request.param.replace(" ", "_"))
    source = KINDS[request.param](scenes, root)
    out = str(root / "out")
    tfrecorder.convert(source, out, progress=False)
    return request.param, out


def assert_on_objects(image: np.ndarray, boxes: np.ndarray, labels, where: str) -> None:
    """The middle of every box (normalized [ymin, xmin, ymax, xmax]) holds its object's colour."""
    height, width = image.shape[:2]
    assert len(boxes), f"{where}: no boxes"
    for (y0, x0, y1, x1), label in zip(boxes, labels):
        name = label if isinstance(label, str) else NAMES[int(label)]
        dy, dx = (y1 - y0) * 0.25, (x1 - x0) * 0.25  # the middle half: clear of JPEG ringing at the edges
        top, bottom = int(round((y0 + dy) * height)), int(round((y1 - dy) * height))
        left, right = int(round((x0 + dx) * width)), int(round((x1 - dx) * width))
        inside = image[top:max(bottom, top + 1), left:max(right, left + 1), :3].reshape(-1, 3).mean(0)
        assert np.abs(inside - OBJECT_COLORS[name]).max() < 40, (
            f"{where}: the {name} box {[y0, x0, y1, x1]} holds {inside.round()}")


def test_reading_gives_one_record_per_image_with_every_box(converted, scenes):
    kind, out = converted
    manifest = json.load(open(os.path.join(out, "dataset.json")))
    records = sum(s["records"] for shards in manifest["splits"].values() for s in shards)
    assert records == scenes["image_uri"].nunique()
    counted = sum(n for split in manifest["objects"]["counts"].values() for n in split.values())
    assert counted == len(scenes)


def boxes_on_objects_in(folder: str, mode: str | None, name: str, kind: str) -> int:
    """Every TRAIN example load_dataset gives (resized to 64x80 by ``mode``; None: not resized) has its boxes on
    their objects (named by its feature ``name`` where one is not); how many there were."""
    size = {"image_size": (64, 80), "resize_mode": mode} if mode else {}
    seen = 0
    for example in tfrecorder.load_dataset(folder, "TRAIN", **size):
        objects = example["objects"]
        assert_on_objects(example["image"].numpy(), objects["bbox"].numpy(), objects["label"].numpy(),
                          f"{kind}, {mode}, {example[name].numpy().decode()}")
        seen += 1
    return seen


@pytest.mark.parametrize("mode", [None, "stretch", "pad", "crop"])
def test_boxes_sit_on_their_objects_in_every_resize_mode(converted, mode):
    kind, out = converted
    assert boxes_on_objects_in(out, mode, "image_uri", kind)


def test_boxes_sit_on_their_objects_in_the_stored_frame(converted):
    """A reader that applies no EXIF orientation (Model Garden's decoder, TFDS) decodes the stored pixels:
    the stored boxes are in their frame."""
    kind, out = converted
    spec = {"image": tf.io.FixedLenFeature([], tf.string), "image_orientation": tf.io.FixedLenFeature([], tf.int64),
            "objects/bbox": tf.io.VarLenFeature(tf.float32), "objects/label": tf.io.VarLenFeature(tf.int64)}
    turned = 0
    for file in sorted(f for f in os.listdir(out) if f.endswith(".tfrecord")):
        for record in tf.data.TFRecordDataset(os.path.join(out, file)):
            example = tf.io.parse_single_example(record, spec)
            image = tf.io.decode_jpeg(example["image"]).numpy()
            boxes = tf.reshape(tf.sparse.to_dense(example["objects/bbox"]), [-1, 4]).numpy()
            assert_on_objects(image, boxes, tf.sparse.to_dense(example["objects/label"]).numpy(), f"{kind}, {file}")
            turned += int(example["image_orientation"]) != 1
    assert turned  # some of them stored turned


def test_tfds_reads_the_boxes_on_their_objects(converted):
    tfds = pytest.importorskip("tensorflow_datasets")
    kind, out = converted
    builder = tfds.builder_from_directory(out)
    names = builder.info.features["objects"]["label"].names
    assert names == NAMES
    for example in builder.as_dataset(split="train"):
        labels = [names[i] for i in example["objects"]["label"].numpy()]
        assert_on_objects(example["image"].numpy(), example["objects"]["bbox"].numpy(), labels, f"{kind}, tfds")


def test_read_tfr_gives_back_the_long_form(scenes, tmp_path):
    table = scenes[["split", "image_uri", "label", *EDGES]]
    tfrecorder.convert(table, str(tmp_path / "out"), progress=False)
    back = tfrecorder.read_tfr(str(tmp_path / "out"))
    key = ["image_uri", "label", *EDGES]
    got = back[["split", *key]].sort_values(key).reset_index(drop=True)
    want = table.sort_values(key).reset_index(drop=True)
    pd.testing.assert_frame_equal(got[["split", "image_uri", "label"]].astype(str),
                                  want[["split", "image_uri", "label"]].astype(str))
    np.testing.assert_allclose(got[EDGES].to_numpy(float), want[EDGES].to_numpy(float), atol=1e-3)


def test_image_order_does_not_change_a_byte_and_each_images_boxes_keep_their_order(scenes, tmp_path):
    """The images' rows in another order make the same shards; an image's objects are stored in its rows' order
    (an annotation file's: the order a semantic mask draws them in)."""
    table = scenes[["split", "image_uri", "label", *EDGES]]
    tfrecorder.convert(table, str(tmp_path / "a"), progress=False)
    images = table["image_uri"].drop_duplicates().sample(frac=1.0, random_state=3)
    shuffled = pd.concat([table[table["image_uri"] == image] for image in images])
    tfrecorder.convert(shuffled, str(tmp_path / "b"), progress=False)
    back = tfrecorder.read_tfr(str(tmp_path / "a"))
    assert back.groupby("image_uri", sort=False)["label"].apply(list).to_dict() == \
        table.groupby("image_uri", sort=False)["label"].apply(list).to_dict()
    shards = sorted(f for f in os.listdir(tmp_path / "a") if f.endswith(".tfrecord"))
    assert shards == sorted(f for f in os.listdir(tmp_path / "b") if f.endswith(".tfrecord"))
    for name in shards:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name


def test_local_and_direct_runner_agree_when_an_images_boxes_are_in_two_files(scenes, tmp_path):
    pytest.importorskip("apache_beam")
    table = scenes[["split", "image_uri", "label", *EDGES]]
    several = table[table["image_uri"].map(table["image_uri"].value_counts()) > 1]["image_uri"].iloc[0]
    rows = table.index[table["image_uri"] == several]
    first = table.drop(rows[1:])  # one box of that image here, the others in the second file
    second = table.loc[rows[1:]]
    (tmp_path / "parts").mkdir()
    first.to_csv(tmp_path / "parts" / "a.csv", index=False)
    second.to_csv(tmp_path / "parts" / "b.csv", index=False)
    glob = str(tmp_path / "parts" / "*.csv")
    local = tfrecorder.convert(glob, str(tmp_path / "local"), progress=False)
    beam = tfrecorder.convert(glob, str(tmp_path / "beam"), runner="DirectRunner")
    assert local.splits["TRAIN"].written == beam.splits["TRAIN"].written == (table["split"] == "TRAIN").sum()
    shards = sorted(f for f in os.listdir(tmp_path / "local") if f.endswith(".tfrecord"))
    for name in shards:
        assert (tmp_path / "local" / name).read_bytes() == (tmp_path / "beam" / name).read_bytes(), name
    record = tfrecorder.read_tfr(str(tmp_path / "local"))
    assert (record["image_uri"] == several).sum() == len(rows)  # every box of it, in one record


# --- the rules ---------------------------------------------------------------------------------------------

@pytest.fixture()
def one_scene(tmp_path) -> pd.DataFrame:
    scenes = make_detection_scenes(str(tmp_path / "s"), n=4, orientations=(1,))
    return scenes[["split", "image_uri", "label", *EDGES]].assign(split="TRAIN")


@pytest.mark.parametrize("change, message", [
    ({"xmax": None}, "a box needs all four edges"),
    ({"xmin": float("inf")}, "box edges must be finite"),
    ({"xmin": 50.0, "xmax": 40.0}, "xmin < xmax and ymin < ymax"),
    ({"label": None}, "rows have no label"),
])
def test_a_bad_box_is_refused_before_any_shard_naming_its_row(one_scene, tmp_path, change, message):
    table = one_scene.copy()
    for column, value in change.items():
        table[column] = table[column].astype(object)
        table.loc[2, column] = value
    with pytest.raises(SchemaError, match=message) as raised:
        tfrecorder.convert(table, str(tmp_path / "out"), progress=False)
    assert "row 2" in str(raised.value) or "rows 2" in str(raised.value)
    assert not (tmp_path / "out").exists() or not any(f.endswith(".tfrecord") for f in os.listdir(tmp_path / "out"))


def test_a_label_without_a_box_is_refused(one_scene, tmp_path):
    table = one_scene.astype({e: object for e in EDGES})
    table.loc[1, EDGES] = None
    with pytest.raises(SchemaError, match="a row with a label needs its box"):
        tfrecorder.convert(table, str(tmp_path / "out"), progress=False)


def test_an_image_without_objects_is_a_record_with_no_boxes(one_scene, tmp_path):
    extra = one_scene.iloc[[0]].assign(image_uri=one_scene["image_uri"].iloc[-1], label=None,
                                       **dict.fromkeys(EDGES, np.nan))
    lone = make_detection_scenes(str(tmp_path / "lone"), n=1, seed=9)["image_uri"].iloc[0]
    empty = extra.assign(image_uri=lone)
    result = tfrecorder.convert(pd.concat([one_scene, empty]), str(tmp_path / "out"), progress=False)
    assert result.splits["TRAIN"].written == len(one_scene) + 1
    found = [e for e in tfrecorder.load_dataset(str(tmp_path / "out"), "TRAIN")
             if e["image_uri"].numpy().decode() == lone]
    assert found and found[0]["objects"]["bbox"].shape == (0, 4)
    back = tfrecorder.read_tfr(str(tmp_path / "out"))
    assert back.loc[back["image_uri"] == lone, "label"].isna().all()


def test_boxes_beyond_the_image_are_row_errors_and_a_pixel_over_is_clipped(one_scene, tmp_path):
    table = one_scene.copy()
    bad_image = table["image_uri"].iloc[0]
    table.loc[0, "xmax"] = 128 + 5  # 5 pixels beyond the 128-pixel-wide image
    table.loc[table.index[-1], "ymax"] = 96.6  # under a pixel beyond: clipped
    result = tfrecorder.convert(table, str(tmp_path / "out"), progress=False)
    errors = pd.read_csv(tmp_path / "out" / "errors.csv")
    assert set(errors["row"]) == set(table.index[table["image_uri"] == bad_image])  # every row of that image
    assert set(errors["error"]) == {"box_outside_image"}
    assert "row 0" in errors["message"].iloc[0] and "128x96" in errors["message"].iloc[0]
    assert result.splits["TRAIN"].errors == len(errors)
    assert any("clipped" in w for w in result.warnings)


def test_an_image_in_two_splits_is_refused_and_unassigned_rows_split_by_image(one_scene, tmp_path):
    table = one_scene.copy()
    several = table["image_uri"].value_counts().index[0]
    two = table.index[table["image_uri"] == several]
    table.loc[two[0], "split"] = "TEST"
    with pytest.raises(SchemaError, match="has boxes in TEST and TRAIN|has boxes in TRAIN and TEST"):
        tfrecorder.convert(table, str(tmp_path / "out"), progress=False)
    scenes = make_detection_scenes(str(tmp_path / "many"), n=40)
    unassigned = scenes[["image_uri", "label", *EDGES]]
    tfrecorder.convert(unassigned, str(tmp_path / "split"), progress=False)
    back = tfrecorder.read_tfr(str(tmp_path / "split"))
    assert back.groupby("image_uri")["split"].nunique().max() == 1
    assert back["split"].nunique() > 1


def test_normalized_boxes_and_box_units(one_scene, tmp_path):
    normalized = one_scene.assign(xmin=one_scene.xmin / 128, xmax=one_scene.xmax / 128,
                                  ymin=one_scene.ymin / 96, ymax=one_scene.ymax / 96)
    tfrecorder.convert(normalized, str(tmp_path / "auto"), progress=False)
    tfrecorder.convert(one_scene, str(tmp_path / "pixels"), progress=False)
    a = tfrecorder.read_tfr(str(tmp_path / "auto")).sort_values(["image_uri", *EDGES])
    p = tfrecorder.read_tfr(str(tmp_path / "pixels")).sort_values(["image_uri", *EDGES])
    assert json.load(open(tmp_path / "auto" / "dataset.json"))["objects"]["box_units"] == "normalized"
    np.testing.assert_allclose(a[EDGES].to_numpy() * [128, 96, 128, 96], p[EDGES].to_numpy(), atol=1e-3)
    with pytest.raises(tfrecorder.TFRecorderError, match="box_units"):
        tfrecorder.convert(one_scene, str(tmp_path / "bad"), box_units="inches", progress=False)


def test_supervised_batches_in_keras_hub_formats(long_form_out, tmp_path):
    out = long_form_out
    ds = tfrecorder.load_dataset(out, "TRAIN", batch_size=4, image_size=(64, 64), max_objects=5,
                                 as_supervised=True, bounding_box_format="xyxy")
    images, targets = next(iter(ds))
    assert images.shape == (4, 64, 64, 3)
    assert targets["boxes"].shape == (4, 5, 4) and targets["labels"].shape == (4, 5)
    labels = targets["labels"].numpy()
    boxes = targets["boxes"].numpy()
    assert (boxes[labels == -1] == -1).all() and (boxes[labels >= 0] >= 0).all()
    assert (boxes[labels >= 0] <= 64).all() and (boxes[labels >= 0] > 1).any()  # pixels of the 64x64 image
    for image, box, label in zip(images.numpy(), boxes, labels):
        kept = label >= 0
        assert_on_objects(image, box[kept][:, [1, 0, 3, 2]] / 64, label[kept], "xyxy")
    ragged = next(iter(tfrecorder.load_dataset(out, "TRAIN", batch_size=4, image_size=(64, 64))))
    assert isinstance(ragged["objects"]["bbox"], tf.RaggedTensor)
    assert ragged["objects"]["bbox"].shape[-1] == 4


# --- the Object Detection API's layout ---------------------------------------------------------------------

def model_garden_decoder():
    """Model Garden's ``TfExampleDecoder`` (tests/model_garden.py loads it)."""
    return model_garden("tf_example_decoder").TfExampleDecoder()


@pytest.fixture(scope="module")
def detection_api(scenes, tmp_path_factory) -> str:
    out = str(tmp_path_factory.mktemp("od") / "out")
    table = scenes[["split", "image_uri", "label", *EDGES]].assign(area=1.0, is_crowd=0)
    tfrecorder.convert(table, out, record_format="tf_object_detection", progress=False)
    return out


def label_map(path: str) -> dict[int, str]:
    text = open(path).read()
    ids = [int(v) for v in re.findall(r"id: (\d+)", text)]
    names = [json.loads(v) for v in re.findall(r"name: (\".*\")", text)]
    return dict(zip(ids, names))


def test_model_garden_decodes_the_object_detection_layout_with_boxes_on_objects(detection_api):
    decoder = model_garden_decoder()
    names = label_map(os.path.join(detection_api, "label_map.pbtxt"))
    assert names == {i + 1: name for i, name in enumerate(NAMES)}  # ids from 1: 0 is the background
    decoded = 0
    for file in sorted(f for f in os.listdir(detection_api) if f.endswith(".tfrecord")):
        for record in tf.data.TFRecordDataset(os.path.join(detection_api, file)):
            found = decoder.decode(record)
            image = found["image"].numpy()
            assert (found["height"].numpy(), found["width"].numpy()) == image.shape[:2]
            labels = [names[int(c)] for c in found["groundtruth_classes"].numpy()]
            assert_on_objects(image, found["groundtruth_boxes"].numpy(), labels, f"model garden, {file}")
            assert (found["groundtruth_area"].numpy() == 1.0).all()
            assert not found["groundtruth_is_crowd"].numpy().any()
            decoded += 1
    assert decoded == 24


@pytest.mark.parametrize("mode", [None, "stretch", "pad", "crop"])
def test_load_dataset_reads_the_object_detection_layout_with_boxes_on_objects(detection_api, mode):
    """Its images decoded as stored (no EXIF turn: its boxes are in the stored pixels' frame), boxes from the four
    edges, labels counted from 0 again; in every resize mode, as_supervised too."""
    seen = boxes_on_objects_in(detection_api, mode, "image/filename", "od")
    assert seen == tfrecorder.read_manifest(detection_api).records("TRAIN") > 10
    images, targets = next(iter(tfrecorder.load_dataset(detection_api, "TRAIN", batch_size=4, as_supervised=True,
                                                        image_size=(64, 64), bounding_box_format="rel_yxyx")))
    for image, boxes, labels in zip(images.numpy(), targets["boxes"].numpy(), targets["labels"].numpy()):
        assert_on_objects(image, boxes[labels >= 0], labels[labels >= 0], "od, as_supervised")


def test_the_object_detection_layout_is_only_for_detection_tables(detection_api, tmp_path):
    manifest = json.load(open(os.path.join(detection_api, "dataset.json")))
    assert not manifest["tfds"]["written"] and "record_format" in manifest["tfds"]["why"]
    plain = pd.DataFrame({"split": ["TRAIN"], "x": [1.0], "label": ["a"]})
    with pytest.raises(tfrecorder.TFRecorderError, match="needs box columns"):
        tfrecorder.convert(plain, str(tmp_path / "out"), record_format="tf_object_detection", progress=False)


def test_info_counts_objects_and_show_and_inspect_draw_the_boxes(scenes, long_form_out, tmp_path):
    out = long_form_out
    counts = tfrecorder.info(out).label_counts
    train = scenes[scenes["split"] == "TRAIN"]["label"].value_counts().to_dict()
    assert counts["TRAIN"] == train
    sheet = tfrecorder.show(out, "TRAIN", n=4, path=str(tmp_path / "sheet.png"))
    picture = np.asarray(Image.open(sheet).convert("RGB")).astype(int)
    outline = (np.abs(picture - [0xFF, 0x3B, 0x30]).max(-1) < 8) | (np.abs(picture - [0x34, 0xC7, 0x59]).max(-1) < 8)
    assert outline.sum() > 100  # box outlines in the class colours
    folder = tfrecorder.inspect(out, "TRAIN", num_records=6, output_dir=str(tmp_path / "look"))
    rows = pd.read_csv(os.path.join(folder, "data.csv"))
    assert rows["boxes_file"].notna().all() and rows["label_name"].str.len().gt(0).all()
    drawn = Image.open(os.path.join(folder, rows["boxes_file"].iloc[1]))
    assert drawn.size == (128, 96)  # as displayed, EXIF-rotated ones too


def test_box_formats_are_keras_own(long_form_out):
    """Every bounding_box_format gives what Keras's own converter makes of the stored boxes: two of them through
    load_dataset's pipeline, every one through the conversion that pipeline applies."""
    from keras.utils import bounding_boxes

    from tfrecorder.dataset.features import BOX_FORMATS
    from tfrecorder.read.tf_objects import box_format_of

    def batch(box_format: str):
        return next(iter(tfrecorder.load_dataset(long_form_out, "TRAIN", batch_size=6, image_size=(48, 80),
                                                 max_objects=3, as_supervised=True,
                                                 bounding_box_format=box_format)))[1]

    reference = batch("rel_yxyx")
    real = reference["labels"].numpy() >= 0
    boxes = reference["boxes"].numpy()[real]
    for box_format in BOX_FORMATS[1:]:
        keras_boxes = np.asarray(bounding_boxes.convert_format(boxes, "rel_yxyx", box_format, height=48, width=80))
        ours = box_format_of(tf.constant(boxes), box_format, tf.constant([48.0, 80.0])).numpy()
        np.testing.assert_allclose(ours, keras_boxes, atol=1e-4, err_msg=box_format)
        if box_format in ("center_yxhw", "rel_xywh"):
            targets = batch(box_format)
            np.testing.assert_allclose(targets["boxes"].numpy()[real], keras_boxes, atol=1e-4, err_msg=box_format)
            assert (targets["boxes"].numpy()[~real] == -1).all()


def test_verify_and_a_plain_parse_with_feature_spec(long_form_out, tmp_path):
    out = long_form_out
    report = tfrecorder.verify(out)
    assert report.ok, report
    spec = tfrecorder.feature_spec(out)
    assert isinstance(spec["objects/bbox"], tf.io.RaggedFeature)
    files = [os.path.join(out, f) for f in sorted(os.listdir(out))
             if f.startswith("train-") and f.endswith(".tfrecord")]
    parsed = tf.io.parse_example(next(iter(tf.data.TFRecordDataset(files).batch(4))), spec)
    boxes = parsed["objects/bbox"]
    assert (boxes.row_lengths() == 4 * parsed["objects/label"].row_lengths()).numpy().all()


@pytest.mark.parametrize("mode", ["stretch", "pad"])
def test_boxes_follow_a_resize_when_writing(scenes, tmp_path, mode):
    out = str(tmp_path / "out")
    tfrecorder.convert(scenes[["split", "image_uri", "label", *EDGES]], out, image_size=(60, 60), resize_mode=mode,
                       progress=False)
    for example in tfrecorder.load_dataset(out, "TRAIN"):
        assert example["image"].shape == (60, 60, 3)
        assert_on_objects(example["image"].numpy(), example["objects"]["bbox"].numpy(),
                          example["objects"]["label"].numpy(), f"written with {mode}")


def test_cropping_when_writing_is_refused_for_boxes(one_scene, tmp_path):
    with pytest.raises(tfrecorder.TFRecorderError, match="crop when reading"):
        tfrecorder.convert(one_scene, str(tmp_path / "out"), image_size=(32, 32), resize_mode="crop", progress=False)


def test_box_orientation_says_which_frame_pixel_boxes_are_in(scenes, tmp_path):
    """Boxes drawn on the stored pixels, given without the annotated size: box_orientation='stored' says so."""
    stored = stored_pixels(scenes)[["split", "image_uri", "label", *EDGES]]
    out = str(tmp_path / "out")
    tfrecorder.convert(stored, out, box_orientation="stored", progress=False)
    for example in tfrecorder.load_dataset(out, "TRAIN"):
        assert_on_objects(example["image"].numpy(), example["objects"]["bbox"].numpy(),
                          example["objects"]["label"].numpy(), "box_orientation='stored'")


def test_an_image_split_over_streamed_parts_gives_the_same_bytes(scenes, tmp_path, monkeypatch):
    """A CSV read a few rows at a time and spilled to files: an image's box rows in different parts still make
    one record, byte for byte the one of the table converted in memory."""
    from tfrecorder.write.table import summary_pass

    table = scenes[["split", "image_uri", "label", *EDGES]].sample(frac=1.0, random_state=5)
    table.to_csv(tmp_path / "boxes.csv", index=False)
    tfrecorder.convert(table, str(tmp_path / "memory"), progress=False)
    monkeypatch.setattr(summary_pass, "PART_ROWS", 7)
    monkeypatch.setattr(summary_pass, "MEMORY_SPILL_BYTES", 0)
    monkeypatch.setattr(summary_pass, "BUCKET_SOURCE_BYTES", 256)  # several buckets
    tfrecorder.convert(str(tmp_path / "boxes.csv"), str(tmp_path / "streamed"), progress=False)
    shards = sorted(f for f in os.listdir(tmp_path / "memory") if f.endswith(".tfrecord"))
    for name in shards:
        assert (tmp_path / "memory" / name).read_bytes() == (tmp_path / "streamed" / name).read_bytes(), name


def test_scenes_of_every_exif_orientation_keep_their_boxes_on_their_objects(tmp_path):
    """sample_data's scenes are stored turned as each of the 8 EXIF orientations says (mirrored ones too), so
    every box of every scene sits on its object once converted; 2, 4, 5 and 7 were saved unturned."""
    scenes = make_detection_scenes(str(tmp_path / "scenes"), n=8, size=(48, 64), orientations=tuple(range(1, 9)))
    scenes["split"] = "TRAIN"
    result = tfrecorder.convert(scenes, str(tmp_path / "out"), progress=False)
    assert result.errors == 0
    assert boxes_on_objects_in(str(tmp_path / "out"), None, "image_uri", "orientations 1-8") == 8
