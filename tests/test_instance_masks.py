"""Instance masks (COCO polygons, COCO RLE compressed and not, YOLO polygons, a PNG per object): drawn when
written, stored as a PNG per object in the stored pixels' frame, and each object's mask found on its coloured
shape - by load_dataset in every resize mode (some scenes EXIF-turned; a crop drops the objects it cuts off), by
TFDS and by Model Garden's decoder in the Object Detection API's layout; every input gives the same masks; the
DirectRunner the same bytes. Each rule a user breaks is one row error (or a warning) naming the image and the
object."""

from __future__ import annotations

import io
import json
import os
import shutil

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf
from PIL import Image

import tfrecorder
from tests.model_garden import model_garden
from tests.test_detection import assert_on_objects
from tfrecorder.sample_data import OBJECT_COLORS, make_instance_scenes
from tfrecorder.types import InstanceMaskUri

# pycocotools' own decode warns under numpy 2 (its array protocol); the writer silences it, the tests' own calls here
pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")
NAMES = sorted(OBJECT_COLORS)  # the vocabulary: label ids index it
OD = dict(record_format="tf_object_detection")


@pytest.fixture(scope="module")
def scenes(tmp_path_factory) -> dict[str, str]:
    """The same 6 scenes (a circle; a triangle and a circle; a circle under a triangle's corner; every other one
    EXIF-turned 6, 8, 3) annotated three ways: COCO polygons, compressed RLE, uncompressed RLE (crowds)."""
    root = tmp_path_factory.mktemp("shapes")
    return {kind: make_instance_scenes(str(root / kind), n=6, segmentation=kind)
            for kind in ("polygons", "rle", "counts")}


@pytest.fixture(scope="module")
def converted(scenes) -> dict[str, str]:
    outs = {}
    for kind, coco in scenes.items():
        outs[kind] = os.path.join(os.path.dirname(os.path.dirname(coco)), "out")
        tfrecorder.convert(coco, outs[kind], progress=False)
    return outs


def assert_on_shapes(image: np.ndarray, masks: np.ndarray, labels: np.ndarray, where: str) -> int:
    """Over 95% of each object's mask pixels hold its colour (its label's name); returns the objects seen."""
    assert masks.shape[1:3] == image.shape[:2], f"{where}: masks {masks.shape}, image {image.shape}"
    for k, (mask, label) in enumerate(zip(masks, labels)):
        on = mask.reshape(image.shape[:2]) > 0
        color = np.array(OBJECT_COLORS[NAMES[label]])
        held = (np.abs(image[on][:, :3].astype(np.int64) - color).max(axis=1) <= 60).mean()
        assert on.any() and held > 0.95, f"{where}: object {k} ({NAMES[label]}): {held:.1%} of its mask"
    return len(labels)


@pytest.mark.parametrize("mode", [None, "stretch", "pad", "crop"])
def test_masks_lie_on_their_shapes_in_every_resize_mode(converted, mode):
    size = {"image_size": (48, 48), "resize_mode": mode} if mode else {}
    seen = turned = 0
    for example in tfrecorder.load_dataset(converted["polygons"], "TRAIN", **size):
        objects = example["objects"]
        assert objects["mask"].dtype == tf.uint8 and objects["mask"].shape[0] == objects["bbox"].shape[0]
        seen += assert_on_shapes(example["image"].numpy(), objects["mask"].numpy(), objects["label"].numpy(),
                                 f"{mode}, {example['image_name'].numpy()}")
        turned += int(example["image_orientation"]) != 1
    assert seen == 10 and turned


def test_a_crop_drops_the_masks_of_the_objects_it_cuts_off(converted):
    """A 64x8 centre crop of a 64x80 scene keeps a strip in the middle: the triangle at the left goes with its
    box, and the masks left still lie on their shapes."""
    whole = cropped = 0
    for example in tfrecorder.load_dataset(converted["polygons"], "TRAIN", image_size=(64, 8), resize_mode="crop"):
        objects = example["objects"]
        assert objects["mask"].shape[0] == objects["label"].shape[0] == objects["bbox"].shape[0]
        cropped += int(objects["label"].shape[0])
        assert_on_shapes(example["image"].numpy(), objects["mask"].numpy(), objects["label"].numpy(), "crop")
    for example in tfrecorder.load_dataset(converted["polygons"], "TRAIN"):
        whole += int(example["objects"]["label"].shape[0])
    assert 0 < cropped < whole


def test_masks_padded_to_max_objects_are_empty(converted):
    batch = next(iter(tfrecorder.load_dataset(converted["polygons"], "TRAIN", batch_size=6, image_size=(32, 32),
                                              max_objects=3)))
    masks, labels = batch["objects"]["mask"].numpy(), batch["objects"]["label"].numpy()
    assert masks.shape == (6, 3, 32, 32)
    assert (masks.max(axis=(2, 3)) == (labels >= 0)).all()  # each object's mask has pixels; padding none


def test_as_supervised_gives_masks_padded_to_the_most_objects_beside_boxes_and_labels(converted):
    """What Keras and KerasHub instance segmentation models take: (image, {"boxes", "labels", "masks"}), the
    masks padded with empty ones to the most objects an image holds, as boxes and labels are."""
    most = tfrecorder.read_manifest(converted["polygons"]).objects["max_objects"]
    ds = tfrecorder.load_dataset(converted["polygons"], "TRAIN", batch_size=6, image_size=(48, 48),
                                 as_supervised=True)
    images, targets = next(iter(ds))
    assert sorted(targets) == ["boxes", "labels", "masks"] and most == 2
    assert images.shape == (6, 48, 48, 3) and targets["boxes"].shape == (6, most, 4)
    masks, labels = targets["masks"].numpy(), targets["labels"].numpy()
    assert masks.shape == (6, most, 48, 48) and masks.dtype == np.uint8
    assert (labels == -1).any() and not masks[labels == -1].any()  # the padding objects' masks are 0
    assert all(mask.any() for mask in masks[labels >= 0])
    for image, mask, label in zip(images.numpy(), masks, labels):
        assert_on_shapes(image, mask[label >= 0], label[label >= 0], "as_supervised")
    image, one = next(iter(tfrecorder.load_dataset(converted["polygons"], "TRAIN", as_supervised=True,
                                                   max_objects=3, bounding_box_format="rel_yxyx")))
    assert one["masks"].shape == (3, *image.shape[:2])


def test_polygons_and_rle_give_the_same_masks(converted):
    masks = {kind: tfrecorder.read_tfr(out).sort_values(["image_name", "xmin"])["mask"].tolist()
             for kind, out in converted.items()}
    assert len(masks["polygons"]) == 10 and all(m[:4] == b"\x89PNG" for m in masks["polygons"])
    assert masks["polygons"] == masks["rle"] == masks["counts"]
    with Image.open(io.BytesIO(masks["polygons"][0])) as first:
        assert first.mode == "L" and set(np.unique(np.asarray(first))) == {0, 1}


def test_dataset_json_counts_the_masks_and_names_their_feature(converted):
    manifest = json.load(open(os.path.join(converted["polygons"], "dataset.json")))
    assert manifest["objects"]["instance_masks"] == {"feature": "objects/mask", "column": "instance_mask",
                                                     "format": "png", "counts": {"TRAIN": 10}, "loose": 0,
                                                     "loose_rows": []}
    feature = next(f for f in manifest["features"] if f["name"] == "objects/mask")
    assert feature["connector"] == "Objects(InstanceMask)"
    assert "objects/instance_mask" not in manifest["objects"]["features"]


def test_tfds_reads_the_masks_in_the_stored_frame(converted):
    """TFDS applies no EXIF orientation: its image is the stored pixels, which the stored masks are in."""
    tfds = pytest.importorskip("tensorflow_datasets")
    builder = tfds.builder_from_directory(converted["polygons"])
    assert builder.info.features["objects"]["mask"].shape == (None, None, 1)
    seen = sum(assert_on_shapes(e["image"].numpy(), e["objects"]["mask"].numpy(), e["objects"]["label"].numpy(),
                                "tfds") for e in builder.as_dataset(split="train"))
    assert seen == 10


def test_model_garden_decodes_the_object_detection_layouts_masks(scenes, tmp_path):
    out = str(tmp_path / "od")
    tfrecorder.convert(scenes["rle"], out, progress=False, **OD)
    decoder = model_garden("tf_example_decoder").TfExampleDecoder(include_mask=True)
    seen = 0
    for file in sorted(f for f in os.listdir(out) if f.endswith(".tfrecord")):
        for record in tf.data.TFRecordDataset(os.path.join(out, file)):
            decoded = decoder.decode(record)
            seen += assert_on_shapes(decoded["image"].numpy(), decoded["groundtruth_instance_masks"].numpy(),
                                     decoded["groundtruth_classes"].numpy() - 1, f"model garden, {file}")
    assert seen == 10
    assert len(tfrecorder.read_tfr(out)["mask"]) == 10


def test_local_and_direct_runner_write_the_same_bytes(scenes, converted, tmp_path):
    pytest.importorskip("apache_beam")
    tfrecorder.convert(scenes["polygons"], str(tmp_path / "beam"), runner="DirectRunner")
    local = converted["polygons"]
    shards = sorted(f for f in os.listdir(local) if f.endswith(".tfrecord"))
    assert shards
    for name in shards:
        assert open(os.path.join(local, name), "rb").read() == (tmp_path / "beam" / name).read_bytes(), name


def test_a_png_per_object_gives_the_masks_of_its_polygons(scenes, converted, tmp_path):
    """An instance_mask_uri column: one-channel PNGs (nonzero on the object) of the pictures as the polygons
    were drawn (stored pixels), one per object row."""
    from pycocotools import mask as coco_mask

    table = tfrecorder.read_annotations(scenes["polygons"])
    folder = os.path.join(os.path.dirname(os.path.dirname(scenes["polygons"])), "masks")  # in the dataset's root
    os.makedirs(folder)
    uris = []
    for i, (polygons, width, height) in enumerate(zip(table["instance_mask"], table["width"], table["height"])):
        drawn = coco_mask.decode(coco_mask.merge(coco_mask.frPyObjects(json.loads(polygons), height, width)))
        uris.append(os.path.join(folder, f"mask-{i}.png"))
        Image.fromarray(drawn * 255).save(uris[-1])
    table = table.drop(columns=["instance_mask"]).assign(instance_mask_uri=uris)
    out = str(tmp_path / "out")
    tfrecorder.convert(table, out, progress=False)
    assert json.load(open(os.path.join(out, "dataset.json")))["objects"]["instance_masks"]["column"] == \
        "instance_mask_uri"
    key = ["image_name", "xmin"]
    assert tfrecorder.read_tfr(out).sort_values(key)["mask"].tolist() == \
        tfrecorder.read_tfr(converted["polygons"]).sort_values(key)["mask"].tolist()


# --- what a user gets wrong -------------------------------------------------------------------------------------

def _errors(table: pd.DataFrame, out: str, **options) -> pd.DataFrame:
    tfrecorder.convert(table, out, progress=False, **options)
    return pd.read_csv(os.path.join(out, "errors.csv"))


def test_an_empty_mask_is_a_row_error_naming_the_image_and_object(scenes, tmp_path):
    table = tfrecorder.read_annotations(scenes["polygons"])
    height, width = int(table["height"][2]), int(table["width"][2])  # an EXIF-turned photo's stored pixels
    table.at[2, "instance_mask"] = json.dumps({"size": [height, width], "counts": [height * width]})
    errors = _errors(table, str(tmp_path / "out"))
    assert set(errors["error"]) == {"instance_mask_empty"}
    assert set(errors["row"]) == set(table.index[table["image_uri"] == table["image_uri"][2]])
    assert "row 2: the instance mask of object " in errors["message"][0]
    assert f"of image {table['image_uri'][2]} is empty" in errors["message"][0]


def test_a_polygon_point_outside_the_image_is_a_row_error(scenes, tmp_path):
    table = tfrecorder.read_annotations(scenes["polygons"])
    table.at[0, "instance_mask"] = json.dumps([[10, 10, 82.5, 10, 40, 40]])  # 2.5 px beyond the 80 px width
    errors = _errors(table, str(tmp_path / "out"))
    assert set(errors["error"]) == {"instance_mask_outside_image"}
    assert errors["message"][0].endswith("its polygon point (82.5, 10) lies outside the 80x64 picture by more "
                                         "than 1 pixel")
    assert f"row 0: the instance mask of object 1 of image {table['image_uri'][0]}" in errors["message"][0]


def test_an_rle_or_png_of_another_size_is_a_row_error(scenes, tmp_path):
    table = tfrecorder.read_annotations(scenes["polygons"])
    table.at[0, "instance_mask"] = json.dumps({"size": [32, 40], "counts": [1280]})
    errors = _errors(table, str(tmp_path / "rle"))
    assert list(errors["error"].unique()) == ["instance_mask_size"]
    assert "its RLE is 40x32 (width x height), its picture 80x64" in errors["message"][0]
    small = os.path.join(os.path.dirname(os.path.dirname(scenes["polygons"])), "small.png")  # in the root
    Image.fromarray(np.ones((10, 10), np.uint8)).save(small)
    table = table.drop(columns=["instance_mask"]).assign(instance_mask_uri=small)
    with pytest.raises(tfrecorder.TFRecorderError, match=r"Causes: instance_mask_size: 10 rows, e.g. row 0: the "
                                                         r"instance mask of object 1 of image .*shapes-0000.jpg "
                                                         r"\(.*small.png\) is 10x10, its image 80x64"):
        tfrecorder.convert(table, str(tmp_path / "png"), progress=False)


def _annotated_at(coco: str, scale: float, root) -> str:
    """``coco``'s annotations as drawn on its pictures at ``scale`` times their size (the images shrunk after
    annotating, the JSON kept): width, height, boxes and polygons scaled; beside the same image files."""
    data = json.load(open(coco))
    for image in data["images"]:
        image["width"], image["height"] = round(image["width"] * scale), round(image["height"] * scale)
    for annotation in data["annotations"]:
        annotation["bbox"] = [v * scale for v in annotation["bbox"]]
        annotation["segmentation"] = [[v * scale for v in polygon] for polygon in annotation["segmentation"]]
    return _beside(coco, data, root)


def _beside(coco: str, data: dict, root) -> str:
    """``data`` as a COCO JSON under ``root`` beside a copy of ``coco``'s images (a root of the same layout)."""
    images = os.path.dirname(tfrecorder.read_annotations(coco)["image_uri"][0])
    os.makedirs(root / "annotations")
    shutil.copytree(os.path.dirname(images), root / "images")  # a link out of the root is not followed
    path = root / "annotations" / os.path.basename(coco)
    path.write_text(json.dumps(data))
    return str(path)


@pytest.mark.parametrize("scale, options", [(2, {}), (0.5, {}), (2, {"image_size": (40, 50), "resize_mode": "pad"})])
def test_annotations_drawn_at_another_scale_are_scaled_onto_the_pictures(scenes, converted, tmp_path, scale,
                                                                         options):
    """COCO annotations of pictures twice or half the files' size (a folder of images resized after annotating):
    boxes and masks scaled onto each picture, as create_coco_tf_record.py normalizes by the annotation's size -
    the records of the annotation at the files' size, kept bytes and re-encoded alike. They were drawn at the
    JSON's size: outside the picture (a row error), or on its top-left quarter without a word."""
    ours = str(tmp_path / "ours")
    result = tfrecorder.convert(_annotated_at(scenes["polygons"], scale, tmp_path / "root"), ours, progress=False,
                                **options)
    assert result.errors == 0
    theirs = converted["polygons"]
    if options:
        theirs = str(tmp_path / "theirs")
        tfrecorder.convert(scenes["polygons"], theirs, progress=False, **options)
    seen = 0
    same_of = {e["image_name"].numpy(): e for e in tfrecorder.load_dataset(theirs, "TRAIN")}
    for mine in tfrecorder.load_dataset(ours, "TRAIN"):
        same = same_of[mine["image_name"].numpy()]  # in other shards: the width and height are in the row's key
        (masks, boxes), (their_masks, their_boxes) = (_by_place(e["objects"]) for e in (mine, same))
        assert np.array_equal(masks, their_masks)  # objects in other orders: their rows' keys differ too
        np.testing.assert_allclose(boxes, their_boxes, atol=1e-6)
        assert_on_objects(mine["image"].numpy(), mine["objects"]["bbox"].numpy(),
                          mine["objects"]["label"].numpy(), f"{mine['image_name'].numpy()}")
        seen += len(mine["objects"]["label"])
    assert seen == 10


def _by_place(objects: dict) -> tuple[np.ndarray, np.ndarray]:
    """A record's masks and boxes, its objects in the order of their boxes' top-left corners."""
    boxes = objects["bbox"].numpy()
    order = np.lexsort((boxes[:, 1].round(4), boxes[:, 0].round(4)))
    return objects["mask"].numpy()[order], boxes[order]


def test_an_annotation_of_another_picture_size_is_a_row_error_naming_both(scenes, tmp_path):
    """An annotation whose width and height are no scale of its image's (another picture): its image is the
    annotation_size row of errors.csv, where its boxes were written where they fell."""
    data = json.load(open(scenes["polygons"]))
    data["images"][0]["width"] = 160  # 64 high, as the file
    out = str(tmp_path / "out")
    result = tfrecorder.convert(_beside(scenes["polygons"], data, tmp_path / "root"), out, progress=False)
    errors = pd.read_csv(os.path.join(out, "errors.csv"))
    assert result.errors == len(errors) and set(errors["error"]) == {"annotation_size"}
    assert errors["message"][0].startswith("row 0: the annotation was drawn on a 160x64 picture (its width and "
                                           "height), but the image is 80x64, not that picture at another scale")


def test_a_box_that_does_not_hold_its_mask_is_a_warning_naming_the_rows(scenes, tmp_path):
    table = tfrecorder.read_annotations(scenes["polygons"])
    table.loc[1, ["xmax", "ymax"]] = table.loc[1, ["xmin", "ymin"]].to_numpy() + 5
    result = tfrecorder.convert(table, str(tmp_path / "out"), progress=False)
    assert result.errors == 0
    assert any(w.startswith("1 objects' boxes do not hold their instance mask within 1 pixel (rows 1)")
               for w in result.warnings), result.warnings


def test_an_instance_mask_column_needs_boxes(tmp_path):
    table = pd.DataFrame({"split": ["TRAIN"], "label": ["a"], "instance_mask_uri": ["m.png"]})
    with pytest.raises(tfrecorder.SchemaError, match=r"column 'instance_mask_uri' holds instance masks, an "
                                                     r"object's: the table needs box columns too"):
        tfrecorder.convert(table, str(tmp_path / "out"), progress=False,
                           schema={"split": tfrecorder.types.SplitKey, "label": tfrecorder.types.StringLabel,
                                   "instance_mask_uri": InstanceMaskUri})


# --- mask_from_instances: the semantic mask drawn from the instance masks ---------------------------------------

SEMANTIC = dict(mask_from_instances=True, progress=False)


@pytest.fixture(scope="module")
def crowded(scenes) -> pd.DataFrame:
    """The polygon scenes' table with one object of scene 1 (two objects apart) a crowd (COCO's iscrowd)."""
    table = tfrecorder.read_annotations(scenes["polygons"])
    crowd = table.index[table["image_uri"].str.endswith("shapes-0001.jpg")][0]
    table.loc[crowd, "is_crowd"] = 1
    return table


@pytest.fixture(scope="module")
def semantic(crowded, tmp_path_factory) -> str:
    out = str(tmp_path_factory.mktemp("semantic") / "out")
    tfrecorder.convert(crowded, out, **SEMANTIC)
    return out


def expected_semantic(objects: dict, ignore_index: int = 255) -> np.ndarray:
    """The rule: each object's pixels its label + 1, or ignore_index for a crowd, later objects over earlier."""
    masks = objects["mask"].numpy()
    out = np.zeros(masks.shape[1:], np.uint8)
    for mask, label, crowd in zip(masks, objects["label"].numpy(), objects["is_crowd"].numpy()):
        out[mask > 0] = ignore_index if crowd else label + 1
    return out


def test_the_semantic_mask_is_the_instance_masks_by_class_later_over_earlier_crowds_ignored(semantic):
    overlapped = crowd_pixels = 0
    for example in tfrecorder.load_dataset(semantic, "TRAIN"):
        objects, mask = example["objects"], example["segmentation_mask"].numpy()
        assert mask.shape == (*example["image"].shape[:2], 1) and mask.dtype == np.uint8
        assert (mask[..., 0] == expected_semantic(objects)).all(), example["image_name"].numpy()
        overlapped += int((objects["mask"].numpy().sum(axis=0) > 1).sum())
        crowd_pixels += int((mask == 255).sum())
    assert overlapped and crowd_pixels  # the overlapping pairs and the crowd were drawn by the rule
    masks = tfrecorder.read_manifest(semantic).masks
    assert masks["feature"] == "segmentation_mask" and masks["column"] == "instance_mask"
    assert masks["classes"] == ["background", *NAMES] and masks["ignore_index"] == 255
    assert masks["from_instances"].startswith("each object's pixels: its label id + 1 (0: background)")
    assert masks["pixel_stride"] == {"TRAIN": 1} and masks["pixels"]["TRAIN"]["255"] == crowd_pixels


def test_the_semantic_mask_of_a_padded_image_is_ignore_index_off_the_picture(crowded, tmp_path):
    """image_size with resize_mode="pad" when writing: as a segmentation table's mask, the pad is ignore_index."""
    out = str(tmp_path / "pad")
    tfrecorder.convert(crowded, out, image_size=(48, 48), resize_mode="pad", ignore_index=200, **SEMANTIC)
    for example in tfrecorder.load_dataset(out, "TRAIN"):
        mask, objects = example["segmentation_mask"].numpy()[..., 0], example["objects"]
        drawn = objects["mask"].numpy().max(axis=0) > 0
        assert (mask[drawn] == expected_semantic(objects, 200)[drawn]).all()
        assert (mask[0] == 200).all() and (mask[-1] == 200).all()  # 64x80 in 48x48: bands above and below
        assert not (mask[24][~drawn[24]]).any()  # across the middle, the picture's background is 0


def test_the_object_detection_layout_holds_the_same_semantic_mask(crowded, semantic, tmp_path):
    out = str(tmp_path / "od")
    tfrecorder.convert(crowded, out, **SEMANTIC, **OD)
    spec = {"image/segmentation/class/encoded": tf.io.FixedLenFeature([], tf.string),
            "image/segmentation/class/format": tf.io.FixedLenFeature([], tf.string),
            "image/filename": tf.io.FixedLenFeature([], tf.string)}
    theirs = {}
    for file in sorted(f for f in os.listdir(out) if f.endswith(".tfrecord")):
        for record in tf.data.TFRecordDataset(os.path.join(out, file)):
            parsed = tf.io.parse_single_example(record, spec)
            assert parsed["image/segmentation/class/format"] == b"png"
            theirs[parsed["image/filename"].numpy()] = parsed["image/segmentation/class/encoded"].numpy()
    ours = {e["image_name"].numpy(): e["segmentation_mask"].numpy()
            for e in tfrecorder.load_dataset(semantic, "TRAIN", decode_images=False)}
    assert len(theirs) == 6 and theirs == ours


def test_the_semantic_mask_local_and_direct_runner_write_the_same_bytes(crowded, semantic, tmp_path):
    pytest.importorskip("apache_beam")
    tfrecorder.convert(crowded, str(tmp_path / "beam"), runner="DirectRunner", mask_from_instances=True)
    shards = sorted(f for f in os.listdir(semantic) if f.endswith(".tfrecord"))
    assert shards
    for name in shards:
        assert open(os.path.join(semantic, name), "rb").read() == (tmp_path / "beam" / name).read_bytes(), name


@pytest.mark.parametrize("given, message", [
    (dict(), r"mask_from_instances=True draws each record's semantic mask from its objects' instance masks, and "
             r"this table has none: give a detection table an instance_mask column"),
    (dict(mask_classes=["background", "thing"]), r"mask_classes=\['background', 'thing'\] with "
                                                 r"mask_from_instances=True: the semantic mask's classes are the "
                                                 r"labels' \(background, then the vocabulary\)"),
    (dict(ignore_index=4), r"ignore_index=4 with mask_from_instances=True: the semantic mask's class ids are 1-4 "
                           r"\(each label's id \+ 1; 0 is background\), so ignore_index must be above 4"),
])
def test_mask_from_instances_refuses_what_it_cannot_draw(scenes, tmp_path, given, message):
    table = tfrecorder.read_annotations(scenes["polygons"])
    if not given:
        table = table.drop(columns=["instance_mask"])
    with pytest.raises(tfrecorder.TFRecorderError, match=message):
        tfrecorder.convert(table, str(tmp_path / "out"), **given, **SEMANTIC)


def test_an_object_without_a_mask_on_a_turned_photo_gets_an_empty_one_of_its_size(scenes, tmp_path):
    """Kept bytes of a quarter-turned photo: an object without a mask is stored empty at the stored pixels' size
    (as its image's other masks are), so load_dataset turns it with them."""
    table = tfrecorder.read_annotations(scenes["polygons"])
    turned = table.index[table["image_uri"].str.endswith("shapes-0001.jpg")]  # EXIF 6, two objects
    table.loc[turned[0], "instance_mask"] = None
    out = str(tmp_path / "out")
    tfrecorder.convert(table, out, progress=False)
    example = next(e for e in tfrecorder.load_dataset(out, "TRAIN") if e["image_name"] == b"shapes-0001.jpg")
    masks = example["objects"]["mask"].numpy()
    assert masks.shape == (2, *example["image"].shape[:2])
    assert sorted(int(m.max()) for m in masks) == [0, 1]


def test_an_integer_label_that_would_be_ignore_index_is_a_row_error(scenes, tmp_path):
    table = tfrecorder.read_annotations(scenes["polygons"])
    table["label"] = [NAMES.index(name) for name in table["label"]]
    table.loc[0, "label"] = 254  # class id 255 in the semantic mask: ignore_index
    errors = _errors(table, str(tmp_path / "out"), mask_from_instances=True)
    assert set(errors["error"]) == {"mask_class"}
    assert set(errors["row"]) == set(table.index[table["image_uri"] == table["image_uri"][0]])
    assert errors["message"][0].startswith("row 0: label 254 of image ")
    assert errors["message"][0].endswith("cannot be drawn in its semantic mask (mask_from_instances=True): a class "
                                         "id there is the label + 1, one of 1-255 other than ignore_index (255)")


def test_yolo_polygons_give_the_masks_of_the_same_coco_polygons(tmp_path):
    """The third input: the scenes' polygons written as a YOLO dataset (normalized, a line an object) make the masks
    the COCO polygons make (upright scenes: YOLO's frame is the picture as displayed, COCO's here the stored one)."""
    coco = make_instance_scenes(str(tmp_path / "coco"), n=4, orientations=(1,))
    data = json.load(open(coco))
    names = sorted(c["name"] for c in data["categories"])
    category = {c["id"]: names.index(c["name"]) for c in data["categories"]}
    root = tmp_path / "yolo"
    for folder in ("images/train", "labels/train"):
        (root / folder).mkdir(parents=True)
    (root / "data.yaml").write_text(json.dumps({"path": ".", "train": "images/train", "names": names}))
    for image in data["images"]:
        name, width, height = image["file_name"], image["width"], image["height"]
        os.link(os.path.join(os.path.dirname(os.path.dirname(coco)), "train", name), root / "images/train" / name)
        lines = []
        for note in (a for a in data["annotations"] if a["image_id"] == image["id"]):
            assert len(note["segmentation"]) == 1  # one polygon an object: a YOLO line
            points = note["segmentation"][0]
            normalized = [v / (width if i % 2 == 0 else height) for i, v in enumerate(points)]
            lines.append(" ".join([str(category[note["category_id"]]), *(repr(v) for v in normalized)]))
        (root / "labels/train" / (os.path.splitext(name)[0] + ".txt")).write_text("\n".join(lines) + "\n")
    masks = {}
    for kind, source in (("coco", coco), ("yolo", str(root / "data.yaml"))):
        out = str(tmp_path / f"out-{kind}")
        tfrecorder.convert(source, out, progress=False)
        frame = tfrecorder.read_tfr(out)
        masks[kind] = sorted(zip(frame["image_name"], frame["label"], frame["mask"]))
    assert len(masks["coco"]) >= 6 and masks["coco"] == masks["yolo"]


STACK = [(4, 4, 40, 40), (16, 16, 52, 52), (28, 28, 60, 60)]  # three squares, each over part of the one before


def _stacked_scenes(root, n: int = 6) -> dict[str, str]:
    """``n`` scenes of 64x64 (a power of 2: a normalized corner is exact) of the three ``STACK`` squares, each
    painted its colour over the ones before and given after them, scene i's colours turned by i, written as COCO
    polygons, COCO RLE (compressed) and YOLO polygons (a line an object, in that order). The inputs' paths."""
    from pycocotools import mask as coco_mask

    (root / "images").mkdir(parents=True)
    images, annotations, lines = [], [], {}
    for i in range(n):
        picture = np.full((64, 64, 3), 110, np.uint8)
        lines[i] = []
        for k, (x0, y0, x1, y1) in enumerate(STACK):
            name = NAMES[(i + k) % len(NAMES)]
            picture[y0:y1, x0:x1] = OBJECT_COLORS[name]
            polygon = [x0, y0, x1, y0, x1, y1, x0, y1]
            rle = coco_mask.merge(coco_mask.frPyObjects([polygon], 64, 64))
            annotations.append({"id": len(annotations) + 1, "image_id": i + 1, "category_id": NAMES.index(name) + 1,
                                "iscrowd": 0, "bbox": [x0, y0, x1 - x0, y1 - y0], "area": float(coco_mask.area(rle)),
                                "polygon": [polygon], "rle": {"size": [64, 64], "counts": rle["counts"].decode()}})
            lines[i].append(" ".join([str(NAMES.index(name)), *(str(v / 64) for v in polygon)]))
        Image.fromarray(picture).save(root / "images" / f"stack-{i}.png")
        images.append({"id": i + 1, "file_name": f"stack-{i}.png", "width": 64, "height": 64})
    categories = [{"id": j + 1, "name": name} for j, name in enumerate(NAMES)]
    inputs = {}
    for kind in ("polygon", "rle"):
        notes = [{**{k: v for k, v in a.items() if k not in ("polygon", "rle")}, "segmentation": a[kind]}
                 for a in annotations]
        path = root / f"coco_{kind}.json"
        path.write_text(json.dumps({"images": images, "annotations": notes, "categories": categories}))
        inputs[f"coco {kind}"] = str(path)
    (root / "labels").mkdir()
    for i, image_lines in lines.items():
        (root / "labels" / f"stack-{i}.txt").write_text("\n".join(image_lines) + "\n")
    (root / "data.yaml").write_text(json.dumps({"train": "images", "names": NAMES}))
    inputs["yolo polygons"] = str(root / "data.yaml")
    return inputs


def test_the_semantic_mask_lays_each_object_over_those_before_it_in_the_annotations_whatever_the_input(tmp_path):
    """Overlapping squares given as COCO polygons, COCO RLE and YOLO polygons make one semantic mask: each object
    over those before it in its file, so each square's visible pixels are its own class. Before, objects were
    stored (and drawn) in the order of their rows' content hash: a top square was half its lower one's class,
    the inputs disagreed, and a YOLO dataset's masks changed with its folder's name."""
    inputs = _stacked_scenes(tmp_path / "stack")
    drawn = {}
    for kind, source in inputs.items():
        out = str(tmp_path / kind.replace(" ", "-"))
        result = tfrecorder.convert(source, out, **SEMANTIC)
        assert result.errors == 0 and tfrecorder.label_names(out) == NAMES
        drawn[kind] = {example["image_name"].numpy().decode(): example["segmentation_mask"].numpy()[..., 0]
                       for split in result.splits for example in tfrecorder.load_dataset(out, split)}
        for name, mask in drawn[kind].items():
            i = int(name.removeprefix("stack-").removesuffix(".png"))
            for k, (x0, y0, x1, y1) in enumerate(STACK):
                visible = np.zeros_like(mask, bool)
                visible[y0 + 1:y1 - 1, x0 + 1:x1 - 1] = True  # inside its edges ...
                for a0, b0, a1, b1 in STACK[k + 1:]:
                    visible[b0 - 1:b1 + 1, a0 - 1:a1 + 1] = False  # ... and off those over it
                assert (mask[visible] == (i + k) % len(NAMES) + 1).all(), (kind, name, k)
    assert len(drawn["coco polygon"]) == 6
    for kind in ("coco rle", "yolo polygons"):
        assert drawn[kind].keys() == drawn["coco polygon"].keys()
        for name, mask in drawn[kind].items():
            np.testing.assert_array_equal(mask, drawn["coco polygon"][name], err_msg=f"{kind} {name}")
