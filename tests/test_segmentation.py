"""Segmentation tables: an image and its mask of class ids stay aligned - for our reader in every resize mode,
for a reader that ignores EXIF (TFDS, and Model Garden's segmentation decoder on the Object Detection API's
layout) - and every mask rule is a row error naming the image and the mask."""

from __future__ import annotations

import io
import json
import os

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf
from PIL import Image, ImageOps

import tfrecorder
from tests.model_garden import model_garden
from tfrecorder.errors import SchemaError
from tfrecorder.sample_data import OBJECT_COLORS, SEGMENT_CLASSES, make_segmentation_scenes

COLUMNS = ["split", "image_uri", "mask_uri"]


@pytest.fixture(scope="module")
def scenes(tmp_path_factory) -> pd.DataFrame:
    """24 scenes, a third stored turned (EXIF 6, 8, 3) with upright masks, half the masks palette PNGs."""
    return make_segmentation_scenes(str(tmp_path_factory.mktemp("scenes")), n=24)


@pytest.fixture(scope="module")
def converted(scenes, tmp_path_factory) -> str:
    out = str(tmp_path_factory.mktemp("seg") / "out")
    tfrecorder.convert(scenes[COLUMNS], out, mask_classes=list(SEGMENT_CLASSES), progress=False)
    return out


def assert_aligned(image: np.ndarray, mask: np.ndarray, where: str) -> None:
    """More than 95% of the pixels of each coloured region carry its class id in the mask. A region is the
    pixels the mask gives a class, away from its edge (where a resize blends the picture's colours)."""
    mask = mask.reshape(mask.shape[:2])
    found = 0
    for class_id, name in enumerate(SEGMENT_CLASSES[1:], 1):
        region = mask == class_id
        inner = region.copy()  # the region without its edge: its 4 neighbours in it too
        inner[1:] &= region[:-1]
        inner[:-1] &= region[1:]
        inner[:, 1:] &= region[:, :-1]
        inner[:, :-1] &= region[:, 1:]
        if inner.sum() < 12:
            continue
        colour = np.abs(image[inner][:, :3].astype(int) - OBJECT_COLORS[name]).max(-1) < 45
        assert colour.mean() > 0.95, f"{where}: {name} region: {colour.mean():.2f} of its pixels have its colour"
        found += 1
    assert found, f"{where}: no region"


@pytest.mark.parametrize("mode", [None, "stretch", "pad", "crop"])
def test_mask_stays_on_its_image_in_every_resize_mode(converted, mode):
    size = {"image_size": (64, 80), "resize_mode": mode} if mode else {}
    seen = 0
    for example in tfrecorder.load_dataset(converted, "TRAIN", **size):
        mask = example["segmentation_mask"].numpy()
        assert mask.dtype == np.uint8 and mask.shape[-1] == 1
        assert mask.shape[:2] == example["image"].shape[:2]
        assert_aligned(example["image"].numpy(), mask, f"{mode}, {example['image_uri'].numpy().decode()}")
        if mode == "pad":  # the pad is ignore_index, not a class
            assert set(np.unique(mask)) <= {0, 1, 2, 3, 4, 255}
        seen += 1
    assert seen == 20


@pytest.mark.parametrize("mode", ["stretch", "pad", "crop"])
def test_masks_of_upright_photos_of_one_size_resize_as_tensorflow_does(tmp_path, mode):
    """Photos of one size, none turned: the reader knows every shape before the first record, and resizes the
    masks with indices worked out once. Every mask is TensorFlow's own nearest-neighbour resize of the stored
    one (a pad is ignore_index), and stays on its picture."""
    scenes = make_segmentation_scenes(str(tmp_path / "scenes"), n=10, orientations=(1,))
    out = str(tmp_path / "out")
    tfrecorder.convert(scenes[COLUMNS], out, mask_classes=list(SEGMENT_CLASSES), progress=False)
    size = (64, 80)
    ds = tfrecorder.load_dataset(out, "TRAIN", image_size=size, resize_mode=mode, batch_size=4)
    assert ds.element_spec["segmentation_mask"].shape.as_list() == [None, 64, 80, 1]
    stored = {}
    for record in tf.data.TFRecordDataset(tf.io.gfile.glob(os.path.join(out, "train-*.tfrecord"))):
        example = tf.train.Example.FromString(record.numpy()).features.feature
        stored[example["image_uri"].bytes_list.value[0]] = tf.io.decode_png(
            example["segmentation_mask"].bytes_list.value[0])
    seen = 0
    for batch in ds.as_numpy_iterator():
        for image, mask, uri in zip(batch["image"], batch["segmentation_mask"], batch["image_uri"]):
            assert_aligned(image, mask, f"{mode}, {uri.decode()}")
            if mode == "stretch":
                expected = tf.image.resize(stored[uri], size, method="nearest").numpy()
                np.testing.assert_array_equal(mask, expected)
            seen += 1
    assert seen == 8


def test_masks_are_stored_in_the_stored_images_frame(converted):
    """A reader that applies no EXIF orientation (TFDS, Model Garden) decodes image and mask as stored:
    they line up."""
    turned = 0
    for file in sorted(f for f in os.listdir(converted) if f.endswith(".tfrecord")):
        for record in tf.data.TFRecordDataset(os.path.join(converted, file)):
            example = tf.train.Example.FromString(record.numpy()).features.feature
            image = tf.io.decode_jpeg(example["image"].bytes_list.value[0]).numpy()
            mask = tf.io.decode_png(example["segmentation_mask"].bytes_list.value[0]).numpy()
            assert_aligned(image, mask, file)
            turned += example["image_orientation"].int64_list.value[0] != 1
    assert turned


def test_tfds_reads_image_and_mask_aligned(converted):
    tfds = pytest.importorskip("tensorflow_datasets")
    builder = tfds.builder_from_directory(converted)
    assert builder.info.features["segmentation_mask"].shape == (None, None, 1)
    for example in builder.as_dataset(split="train"):
        assert_aligned(example["image"].numpy(), example["segmentation_mask"].numpy(), "tfds")


def test_as_supervised_gives_image_and_mask_for_a_keras_fit(converted):
    ds = tfrecorder.load_dataset(converted, "TRAIN", batch_size=4, image_size=(32, 32), as_supervised=True)
    images, masks = next(iter(ds))
    assert images.shape == (4, 32, 32, 3) and masks.shape == (4, 32, 32, 1) and masks.dtype == tf.uint8
    model = tf.keras.Sequential([tf.keras.Input((32, 32, 3)), tf.keras.layers.Rescaling(1 / 255),
                                 tf.keras.layers.Conv2D(len(SEGMENT_CLASSES), 3, padding="same")])
    model.compile("adam", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=255))
    history = model.fit(ds, epochs=1, steps_per_epoch=2, verbose=0)
    assert np.isfinite(history.history["loss"][-1])


def test_dataset_json_and_info_count_pixels_per_class(converted, scenes):
    manifest = json.load(open(os.path.join(converted, "dataset.json")))
    masks = manifest["masks"]
    assert masks["classes"] == list(SEGMENT_CLASSES) and masks["ignore_index"] == 255
    train = masks["pixels"]["TRAIN"]
    expected = np.zeros(256, int)
    for uri in scenes.loc[scenes["split"] == "TRAIN", "mask_uri"]:
        expected += np.bincount(np.asarray(Image.open(uri)).ravel(), minlength=256)
    assert {int(k): v for k, v in train.items()} == {i: int(n) for i, n in enumerate(expected) if n}
    assert tfrecorder.verify(converted, images=True).ok


def test_a_large_split_counts_the_pixels_of_a_sample_of_its_masks(scenes, tmp_path, monkeypatch):
    """Over ``MASK_PIXELS_SAMPLE`` masks a split counts the pixels of one mask in ``pixel_stride``, by rank in
    stored order: the same masks however the split is cut into shards, and said in dataset.json and by info."""
    from tfrecorder.write.record import masks

    monkeypatch.setattr(masks, "MASK_PIXELS_SAMPLE", 4)  # 20 TRAIN masks: one in 5 counted
    counted = {}
    for shards in (None, 3):
        out = str(tmp_path / f"out-{shards}")
        tfrecorder.convert(scenes[COLUMNS], out, num_shards=shards, progress=False)
        manifest = json.load(open(os.path.join(out, "dataset.json")))["masks"]
        assert manifest["pixel_stride"] == {"TRAIN": 5, "VALIDATION": 1, "TEST": 1}
        counted[shards] = manifest["pixels"]["TRAIN"]
        stored = [np.asarray(Image.open(io.BytesIO(example["segmentation_mask"]))) for example in  # PNG bytes
                  tfrecorder.load_dataset(out, "TRAIN", features=["segmentation_mask"]).as_numpy_iterator()]
        expected = sum(np.bincount(mask.ravel(), minlength=256) for mask in stored[::5])
        assert {int(k): v for k, v in counted[shards].items()} == {i: int(n) for i, n in enumerate(expected) if n}
        assert "TRAIN" in str(tfrecorder.info(out)) and "(in 1 mask of 5, by content key)" in str(tfrecorder.info(out))
    assert counted[None] == counted[3]


# --- the rules ---------------------------------------------------------------------------------------------

@pytest.fixture()
def few(tmp_path) -> pd.DataFrame:
    return make_segmentation_scenes(str(tmp_path / "few"), n=4, orientations=(1,))[COLUMNS].assign(split="TRAIN")


def convert_errors(table: pd.DataFrame, out, **options) -> pd.DataFrame:
    """errors.csv of converting ``table``; a conversion whose every row failed raises, and leaves it too."""
    try:
        tfrecorder.convert(table, str(out), progress=False, **options)
    except tfrecorder.TFRecorderError as e:
        if "no row was written" not in str(e):
            raise
    return pd.read_csv(out / "errors.csv")


def test_a_mask_of_another_size_is_a_row_error_naming_image_and_mask(few, tmp_path):
    small = tmp_path / "small.png"
    Image.new("L", (64, 48)).save(small)
    table = few.copy()
    table.loc[1, "mask_uri"] = str(small)
    errors = convert_errors(table, tmp_path / "out")
    assert errors["row"].tolist() == [1] and errors["error"].tolist() == ["mask_size"]
    message = errors["message"].iloc[0]
    assert "small.png" in message and "64x48" in message and table.loc[1, "image_uri"] in message


def test_a_mask_made_for_the_stored_pixels_is_turned_with_its_photo(tmp_path):
    scenes = make_segmentation_scenes(str(tmp_path / "s"), n=6, orientations=(6,))
    for uri in scenes["mask_uri"]:  # the masks drawn on the stored (turned) pixels instead
        mask = Image.open(uri)
        mask.transpose(Image.Transpose.ROTATE_90).save(uri)
    out = str(tmp_path / "out")
    tfrecorder.convert(scenes[COLUMNS], out, progress=False)
    for example in tfrecorder.load_dataset(out, "TRAIN"):
        assert_aligned(example["image"].numpy(), example["segmentation_mask"].numpy(), "stored-frame mask")


def test_colour_masks_need_mask_colors(few, tmp_path):
    table = few.copy()
    colour = {class_id: tuple(int(v) for v in rgb) for class_id, rgb in
              enumerate([(0, 0, 0), *OBJECT_COLORS.values()])}
    for uri in table["mask_uri"]:
        ids = np.asarray(Image.open(uri))
        rgb = np.zeros((*ids.shape, 3), np.uint8)
        for class_id, value in colour.items():
            rgb[ids == class_id] = value
        rgb[ids == 255] = (255, 255, 255)
        Image.fromarray(rgb).save(uri)
    errors = convert_errors(table, tmp_path / "refused")
    assert set(errors["error"]) == {"mask_channels"} and "mask_colors" in errors["message"].iloc[0]
    colors = {rgb: class_id for class_id, rgb in colour.items()} | {(255, 255, 255): 255}
    out = tmp_path / "mapped"
    tfrecorder.convert(table, str(out), mask_colors=colors, progress=False)
    for example in tfrecorder.load_dataset(str(out), "TRAIN"):
        assert_aligned(example["image"].numpy(), example["segmentation_mask"].numpy(), "mask_colors")


def test_undecodable_jpeg_and_unknown_class_masks_are_row_errors(few, tmp_path):
    table = few.copy()
    broken, jpeg = tmp_path / "broken.png", tmp_path / "mask.jpg"
    broken.write_bytes(b"\x89PNG\r\n\x1a\n not really")
    Image.open(table.loc[1, "mask_uri"]).convert("L").save(jpeg)
    table.loc[0, "mask_uri"], table.loc[1, "mask_uri"] = str(broken), str(jpeg)
    errors = convert_errors(table, tmp_path / "out", mask_classes=["background", "red"])
    by_row = dict(zip(errors["row"], errors["error"]))
    assert by_row[0] == "mask_decode" and by_row[1] == "mask_format"
    assert set(by_row.values()) - {"mask_decode", "mask_format"} <= {"mask_class"}
    assert any(v == "mask_class" for v in by_row.values())  # the scenes hold ids 2-4 too


@pytest.mark.parametrize("sample", [100, 1], ids=["every mask counted", "one mask counted"])
def test_class_ids_of_every_mask_are_checked_whether_or_not_its_pixels_are_counted(few, tmp_path, monkeypatch,
                                                                                   sample):
    """Unknown ids are a row error in every mask: those whose pixels are counted, and the others (checked by
    their highest id, or, with VOC's 255 border, id by id)."""
    from tfrecorder.write.record import masks

    monkeypatch.setattr(masks, "MASK_PIXELS_SAMPLE", sample)
    rows = []
    for i, (border, extra) in enumerate([(False, None), (True, None), (False, 5), (True, 7)] * 2):
        mask = np.zeros((96, 128), np.uint8)
        mask[10:40, 10:60] = 1 + i % 2
        if border:
            mask[9, 9:61] = 255
        if extra is not None:
            mask[50:60, 70:90] = extra
        path = tmp_path / f"mask{i}.png"
        Image.fromarray(mask).save(path)
        rows.append({"split": "TRAIN", "image_uri": few["image_uri"][i % 4], "mask_uri": str(path)})
    table = pd.DataFrame(rows)
    errors = convert_errors(table, tmp_path / "out", mask_classes=["background", "a", "b"])
    assert dict(zip(errors["row"], errors["error"])) == {2: "mask_class", 3: "mask_class", 6: "mask_class",
                                                          7: "mask_class"}
    assert {int(k) for k in json.load(open(tmp_path / "out" / "dataset.json"))["masks"]["pixels"]["TRAIN"]} <= {
        0, 1, 2, 255}


def test_a_row_without_a_mask_is_refused_before_any_shard(few, tmp_path):
    table = few.astype({"mask_uri": object})
    table.loc[2, "mask_uri"] = None
    with pytest.raises(SchemaError, match="needs its mask"):
        tfrecorder.convert(table, str(tmp_path / "out"), progress=False)


def test_masks_follow_a_resize_when_writing(scenes, tmp_path):
    for mode in ("stretch", "pad", "crop"):
        out = str(tmp_path / mode)
        tfrecorder.convert(scenes[COLUMNS].iloc[:12], out, image_size=(60, 60), resize_mode=mode, progress=False)
        for example in tfrecorder.load_dataset(out, "TRAIN"):
            assert example["segmentation_mask"].shape == (60, 60, 1)
            assert_aligned(example["image"].numpy(), example["segmentation_mask"].numpy(), f"written {mode}")


# --- Model Garden ------------------------------------------------------------------------------------------

def model_garden_segmentation_decoder():
    """Model Garden's ``Decoder`` (tests/model_garden.py loads it)."""
    return model_garden("segmentation_input").Decoder()


def test_model_garden_reads_image_and_mask_aligned_from_the_object_detection_layout(scenes, tmp_path):
    out = str(tmp_path / "od")
    tfrecorder.convert(scenes[COLUMNS], out, record_format="tf_object_detection", progress=False)
    decoder = model_garden_segmentation_decoder()
    decoded = 0
    for file in sorted(f for f in os.listdir(out) if f.endswith(".tfrecord")):
        for record in tf.data.TFRecordDataset(os.path.join(out, file)):
            found = decoder.decode(record)
            image = tf.io.decode_image(found["image/encoded"], channels=3).numpy()
            mask = tf.io.decode_image(found["image/segmentation/class/encoded"], channels=1).numpy()
            assert image.shape[:2] == (found["image/height"], found["image/width"]) == mask.shape[:2]
            assert_aligned(image, mask, f"model garden, {file}")
            decoded += 1
    assert decoded == len(scenes)


def test_verify_with_images_decodes_the_masks(converted):
    """A record whose mask does not decode (its CRCs right: written so) is a problem verify(images=True) names."""
    from tfrecorder.dataset.manifest import Manifest
    from tfrecorder.read.verify import _parse_problem

    manifest = Manifest.from_json(open(os.path.join(converted, "dataset.json")).read())
    shard = sorted(f for f in os.listdir(converted) if f.startswith("train-") and f.endswith(".tfrecord"))[0]
    record = next(iter(tf.data.TFRecordDataset(os.path.join(converted, shard)))).numpy()
    assert _parse_problem(record, manifest.features, decode=True) is None
    example = tf.train.Example.FromString(record)
    example.features.feature["segmentation_mask"].bytes_list.value[0] = b"\x89PNG\r\n\x1a\n broken"
    problem = _parse_problem(example.SerializeToString(), manifest.features, decode=True)
    assert problem is not None and "mask" in problem and "does not decode" in problem


def test_a_voc_segmentation_folder_is_read_and_converted(scenes, tmp_path):
    import shutil

    root = tmp_path / "VOC"
    for folder in ("JPEGImages", "SegmentationClass", "ImageSets/Segmentation"):
        (root / folder).mkdir(parents=True)
    ids = {"TRAIN": [], "VALIDATION": [], "TEST": []}
    for row in scenes.itertuples():
        stem = os.path.basename(row.image_uri)[:-4]
        shutil.copy(row.image_uri, root / "JPEGImages" / f"{stem}.jpg")
        voc = Image.fromarray(np.asarray(Image.open(row.mask_uri)), "P")  # indices are the class ids
        voc.putpalette([v for i in range(256) for v in (i, 255 - i, (7 * i) % 256)])
        voc.save(root / "SegmentationClass" / f"{stem}.png")
        ids[row.split].append(stem)
    for split, name in (("TRAIN", "train"), ("VALIDATION", "val")):
        (root / "ImageSets" / "Segmentation" / f"{name}.txt").write_text("".join(f"{i}\n" for i in ids[split]))
    table = tfrecorder.read_annotations(str(root))
    assert list(table.columns) == COLUMNS and len(table) == len(scenes)
    assert (table["split"] == "TRAIN").sum() == len(ids["TRAIN"])
    assert (table["split"] == "UNASSIGNED").sum() == len(ids["TEST"])  # not listed: split by hash
    out = str(tmp_path / "out")
    tfrecorder.convert(str(root), out, progress=False)  # the folder itself
    for example in tfrecorder.load_dataset(out, "TRAIN"):
        assert_aligned(example["image"].numpy(), example["segmentation_mask"].numpy(), "voc folder")


def test_info_show_and_inspect_lay_the_masks_over_the_pictures(converted, tmp_path):
    counts = tfrecorder.info(converted).label_counts["TRAIN"]
    assert set(counts) <= {*SEGMENT_CLASSES, "ignore"} and counts["background"] > counts["red"] > 0
    assert tfrecorder.show(converted, "TRAIN", n=4, path=str(tmp_path / "s.png")).endswith("s.png")
    folder = tfrecorder.inspect(converted, "TRAIN", num_records=6, output_dir=str(tmp_path / "look"))
    rows = pd.read_csv(os.path.join(folder, "data.csv"))
    assert rows["mask_file"].notna().all() and "segmentation_mask" not in rows
    for row in rows.itertuples():
        laid = np.asarray(Image.open(os.path.join(folder, row.mask_file)).convert("RGB")).astype(int)
        assert laid.shape[:2] == (96, 128)  # as displayed, turned photos too
        shown = ImageOps.exif_transpose(Image.open(os.path.join(folder, row.image_file)))
        picture = np.asarray(shown.convert("RGB")).astype(int)
        assert (np.abs(laid - picture).max(-1) > 12).mean() > 0.1  # the class colours laid over the regions


def test_header_validation_keeps_grey_masks_as_they_are(few, tmp_path):
    """validate_images='header': a grey PNG made for its (upright) photo is stored byte for byte, checked by
    its header; its class ids are checked, and its pixels counted, only when masks are decoded ('full')."""
    grey = [uri for uri in few["mask_uri"] if Image.open(uri).mode == "L"]
    table = few[few["mask_uri"].isin(grey)]
    out = tmp_path / "header"
    result = tfrecorder.convert(table, str(out), validate_images="header", mask_classes=["background", "red"],
                                progress=False)
    assert result.splits["TRAIN"].errors == 0  # ids beyond "red" are not looked for
    stored = {bytes(e["segmentation_mask"].numpy()) for e in tfrecorder.load_dataset(str(out), "TRAIN",
                                                                                     decode_images=False)}
    assert stored == {open(uri, "rb").read() for uri in grey}
    full = convert_errors(table, tmp_path / "full", mask_classes=["background", "red"])
    assert set(full["error"]) == {"mask_class"}


def test_local_and_direct_runner_write_the_same_masks(scenes, tmp_path, monkeypatch):
    """The same shards, and the pixels of the same sample of masks counted (1 in 3 of TRAIN's 12, in 2 shards)."""
    pytest.importorskip("apache_beam")
    from tfrecorder.write.record import masks

    monkeypatch.setattr(masks, "MASK_PIXELS_SAMPLE", 4)
    table = scenes[COLUMNS].iloc[:14]
    tfrecorder.convert(table, str(tmp_path / "local"), num_shards=2, progress=False)
    tfrecorder.convert(table, str(tmp_path / "beam"), num_shards=2, runner="DirectRunner")
    shards = sorted(f for f in os.listdir(tmp_path / "local") if f.endswith(".tfrecord"))
    assert shards
    for name in shards:
        assert (tmp_path / "local" / name).read_bytes() == (tmp_path / "beam" / name).read_bytes(), name
    local, beam = (json.load(open(tmp_path / run / "dataset.json"))["masks"] for run in ("local", "beam"))
    assert local["pixel_stride"]["TRAIN"] == 3 and local["pixels"] == beam["pixels"]


def test_images_and_masks_on_gcs_give_the_masks_of_a_local_run(scenes, gcs_dir, tmp_path):
    """Images and masks on gs:// (the GCS emulator) are fetched with the images' bounds and retries: the masks
    written are those of the same files read locally, and a mask missing there is a row error naming it."""
    import fsspec

    fs = fsspec.filesystem("gs")
    table = scenes[COLUMNS].iloc[:6].reset_index(drop=True)
    remote = table.copy()
    for column in ("image_uri", "mask_uri"):
        remote[column] = [f"{gcs_dir}/{os.path.basename(p)}" for p in table[column]]
        for local, url in zip(table[column], remote[column]):
            fs.pipe(url, open(local, "rb").read())
    remote.loc[5, "mask_uri"] = f"{gcs_dir}/missing-mask.png"
    tfrecorder.convert(table.iloc[:5], str(tmp_path / "local"), progress=False)
    result = tfrecorder.convert(remote, str(tmp_path / "remote"), progress=False)
    errors = pd.read_csv(tmp_path / "remote" / "errors.csv")
    assert errors["row"].tolist() == [5] and "missing-mask.png" in errors["message"].iloc[0]
    assert result.splits[remote.loc[5, "split"]].errors == 1

    def masks(folder):
        return {os.path.basename(e["image_uri"].numpy().decode()): bytes(e["segmentation_mask"].numpy())
                for split in ("TRAIN", "VALIDATION", "TEST")
                if split in tfrecorder.read_manifest(str(folder)).splits
                for e in tfrecorder.load_dataset(str(folder), split, decode_images=False)}

    assert masks(tmp_path / "remote") == masks(tmp_path / "local")
