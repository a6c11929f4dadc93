"""load_dataset / load / label_names: shapes, batching, supervision, shuffling, channels, errors."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf
from PIL import Image

import tfrecorder
from tests.conftest import in_stored_order, write_image
from tfrecorder.errors import TFRecorderError


@pytest.fixture
def dataset(image_table, tmp_path):
    out = tmp_path / "out"
    tfrecorder.convert(image_table, str(out), progress=False, num_shards=2)
    return str(out)


def test_dict_of_splits_and_tfrecorder2_load(dataset):
    splits = tfrecorder.load_dataset(dataset)
    assert sorted(splits) == ["TEST", "TRAIN", "VALIDATION"]
    assert sorted(tfrecorder.load(dataset)) == sorted(splits)
    assert isinstance(tfrecorder.load_dataset(dataset, split=" train"), tf.data.Dataset)


def test_cardinality_matches_manifest_counts(dataset):
    assert int(tfrecorder.load_dataset(dataset, split="TRAIN").cardinality()) == 6
    batched = tfrecorder.load_dataset(dataset, split="TRAIN", batch_size=4, image_size=(8, 8))
    assert int(batched.cardinality()) == 2
    assert [b["image"].shape[0] for b in batched] == [4, 2]


def test_resize_channels_and_supervised(dataset):
    ds = tfrecorder.load_dataset(dataset, split="TRAIN", batch_size=6, image_size=(10, 12), channels=1,
                                 as_supervised=True)
    images, labels = next(iter(ds))
    assert images.shape == (6, 10, 12, 1) and images.dtype == tf.uint8
    assert sorted(labels.numpy().tolist()) == [0, 0, 1, 1, 2, 2]  # rows 0, 1, 4, 5, 8, 9: cat, dog, dog, goat...


def test_shuffle_is_seeded_and_reshuffles_each_epoch(dataset):
    def order(seed):
        ds = tfrecorder.load_dataset(dataset, split="TRAIN", shuffle=True, seed=seed, decode_images=False)
        return [[x["count"] for x in ds.as_numpy_iterator()] for _ in range(2)]

    first, again = order(7), order(7)
    assert first == again
    assert sorted(first[0]) == [0, 1, 4, 5, 8, 9]
    assert first[0] != first[1] or first[0] != sorted(first[0])


def test_features_selection_and_encoded_images(dataset, image_table):
    ds = tfrecorder.load_dataset(dataset, split="TEST", features=["image", "note"], decode_images=False)
    example = next(ds.as_numpy_iterator())
    assert {"image", "note"} <= set(example) and "weight" not in example
    stored = in_stored_order(image_table)
    first_test = stored[stored.split.str.strip().str.upper() == "TEST"].iloc[0]
    assert example["image"] == open(first_test.image_uri, "rb").read()


def test_mixed_sizes_need_image_size_to_batch(dataset):
    with pytest.raises(TFRecorderError, match=r"different sizes.*pass image_size=\(height, width\)"):
        tfrecorder.load_dataset(dataset, split="TRAIN", batch_size=2)


@pytest.mark.parametrize("mode,fmt,channels", [
    ("L", "PNG", 1), ("LA", "PNG", 2), ("RGB", "PNG", 3), ("RGBA", "PNG", 4), ("P", "PNG", 3),
    ("L", "JPEG", 1), ("RGB", "GIF", 3), ("RGB", "BMP", 3), ("RGBA", "WEBP", 4),
])
def test_image_modes_keep_bytes_and_channels(tmp_path, mode, fmt, channels):
    path = write_image(tmp_path / f"img.{fmt.lower()}", fmt, mode, (9, 11))
    df = pd.DataFrame({"split": ["TRAIN"], "image_uri": [str(path)], "label": [1]})
    tfrecorder.convert(df, str(tmp_path / "out"), progress=False)
    manifest = tfrecorder.read_manifest(str(tmp_path / "out"))
    assert manifest.image["channels"] == [channels]
    example = next(tfrecorder.load_dataset(str(tmp_path / "out"), split="TRAIN").as_numpy_iterator())
    assert example["image"].shape == (9, 11, channels)
    assert example["image"].dtype == np.uint8
    if fmt in ("PNG", "BMP", "GIF") or (fmt == "WEBP" and Image.open(path).info.get("lossless")):
        source = Image.open(path)
        expected = np.asarray(source.convert({1: "L", 2: "LA", 3: "RGB", 4: "RGBA"}[channels]))
        np.testing.assert_array_equal(example["image"].reshape(expected.shape), expected)


@pytest.mark.parametrize("image_format", ["png", "jpeg", "raw"])
def test_reencoded_and_raw_images_with_resize(tmp_path, image_format):
    path = write_image(tmp_path / "a.png", "PNG", "RGB", (30, 40))
    df = pd.DataFrame({"split": ["TRAIN"], "image_uri": [str(path)], "label": ["x"]})
    tfrecorder.convert(df, str(tmp_path / "out"), progress=False, image_format=image_format, image_size=(15, 20))
    example = next(tfrecorder.load_dataset(str(tmp_path / "out"), split="TRAIN").as_numpy_iterator())
    assert example["image_format"].decode() == image_format
    assert example["image"].shape == (15, 20, 3)
    expected = np.asarray(Image.open(path).resize((20, 15), Image.Resampling.BICUBIC))
    tolerance = 12 if image_format == "jpeg" else 0
    assert np.abs(example["image"].astype(int) - expected.astype(int)).mean() <= tolerance


def test_label_names_none_for_integer_labels(tmp_path, tabular_table):
    tfrecorder.convert(tabular_table, str(tmp_path / "out"), progress=False)
    assert tfrecorder.label_names(str(tmp_path / "out")) is None
    features, label = next(iter(tfrecorder.load_dataset(str(tmp_path / "out"), split="TRAIN", batch_size=6,
                                                        as_supervised=True)))
    assert sorted(label.numpy().tolist()) == [0, 0, 1, 1, 2, 2]
    assert set(features) >= {"x", "n", "flag", "text", "scores"} and "label" not in features


def test_reader_errors(tmp_path, dataset):
    with pytest.raises(TFRecorderError, match=r"split='DEV': the dataset has TRAIN, VALIDATION, TEST"):
        tfrecorder.load_dataset(dataset, split="DEV")
    (tmp_path / "partial").mkdir()
    (tmp_path / "partial" / ".train-00000-of-00001.tfrecord.partial").write_bytes(b"x")
    with pytest.raises(TFRecorderError, match=r"unfinished conversion.*run the same conversion .* again to resume it"):
        tfrecorder.load_dataset(str(tmp_path / "partial"))
    with pytest.raises(TFRecorderError, match=r"does not exist or is empty"):
        tfrecorder.load_dataset(str(tmp_path / "nothing"))
    (tmp_path / "partial" / "dataset.json").write_text('{"format": "other"}')
    with pytest.raises(TFRecorderError, match=r"not a tfrecorder dataset.json"):
        tfrecorder.load_dataset(str(tmp_path / "partial"))


def test_cmyk_jpeg_is_reencoded_losslessly_as_rgb_png(tmp_path):
    rgb = write_image(tmp_path / "rgb.png", "PNG", "RGB", (12, 16))
    Image.open(rgb).convert("CMYK").save(tmp_path / "cmyk.jpg", quality=95)
    df = pd.DataFrame({"split": ["TRAIN"], "image_uri": [str(tmp_path / "cmyk.jpg")], "label": [0]})
    tfrecorder.convert(df, str(tmp_path / "out"), progress=False)
    example = next(tfrecorder.load_dataset(str(tmp_path / "out"), split="TRAIN").as_numpy_iterator())
    assert example["image_format"] == b"png" and example["image_channels"] == 3
    np.testing.assert_array_equal(example["image"], np.asarray(Image.open(tmp_path / "cmyk.jpg").convert("RGB")))


@pytest.mark.parametrize("num_shards", [2, 3])
def test_workers_get_disjoint_parts_that_cover_the_split(dataset, num_shards):
    # dataset has 2 TRAIN files: 2 workers split by file, 3 workers by record
    parts = []
    for index in range(num_shards):
        ds = tfrecorder.load_dataset(dataset, split="TRAIN", decode_images=False, num_shards=num_shards,
                                     shard_index=index)
        counts = [int(x["count"]) for x in ds.as_numpy_iterator()]
        assert int(ds.cardinality()) == len(counts)
        parts.append(counts)
    assert sorted(c for p in parts for c in p) == [0, 1, 4, 5, 8, 9]
    context = tf.distribute.InputContext(num_input_pipelines=num_shards, input_pipeline_id=1)
    ds = tfrecorder.load_dataset(dataset, split="TRAIN", decode_images=False, input_context=context)
    assert [int(x["count"]) for x in ds.as_numpy_iterator()] == parts[1]
    with pytest.raises(TFRecorderError, match=r"shard_index=5 with num_shards=2"):
        tfrecorder.load_dataset(dataset, split="TRAIN", num_shards=2, shard_index=5)


def test_cache_gives_the_same_records_every_epoch_and_label_key(dataset):
    ds = tfrecorder.load_dataset(dataset, split="TEST", cache=True, decode_images=False, as_supervised=True,
                                 label_key="count")
    epochs = [[int(label) for _, label in ds.as_numpy_iterator()] for _ in range(2)]
    assert epochs[0] == epochs[1] and sorted(epochs[0]) == [3, 7, 11]


@pytest.mark.parametrize("mode", ["stretch", "pad", "crop"])
def test_load_dataset_resize_modes(tmp_path, mode):
    path = write_image(tmp_path / "wide.png", "PNG", "RGB", (20, 40))
    df = pd.DataFrame({"split": ["TRAIN"], "image_uri": [str(path)], "label": [0]})
    tfrecorder.convert(df, str(tmp_path / "out"), progress=False)
    image = next(tfrecorder.load_dataset(str(tmp_path / "out"), split="TRAIN", image_size=(10, 10),
                                         resize_mode=mode).as_numpy_iterator())["image"]
    assert image.shape == (10, 10, 3)
    source = np.asarray(Image.open(path)).astype(float)
    if mode == "pad":  # 40x20 fits as 10x5: black bars above and below
        assert image[:2].max() == 0 and image[-2:].max() == 0 and image[4:6].mean() > 20
    elif mode == "crop":  # the centre 20x20 of the source, scaled by 1/2
        centre = source[:, 10:30].reshape(10, 2, 10, 2, 3).mean(axis=(1, 3))
        assert np.abs(image - centre).mean() < 3
    else:
        assert image.min() >= 0 and image[:2].max() > 0


@pytest.mark.parametrize("height,width,mode,ratio", [
    (1200, 1600, "stretch", 4), (375, 500, "stretch", 1), (3024, 4032, "stretch", 8), (448, 448, "stretch", 2),
    (1200, 1600, "crop", 4), (1200, 1600, "pad", 4), (600, 2400, "crop", 2), (600, 2400, "pad", 8),
])
def test_the_largest_jpeg_ratio_that_still_covers_the_target_is_chosen(height, width, mode, ratio):
    from tfrecorder.read.tf_image import JPEG_RATIOS, jpeg_scale

    assert JPEG_RATIOS[int(jpeg_scale(height, width, (224, 224), mode))] == ratio


@pytest.mark.parametrize("have,want", [((375, 500), (256, 256)), ((7, 9), (256, 300)), ((1000, 1), (3, 3)),
                                       ((333, 777), (224, 224)), ((1, 1), (5, 5)), ((480, 640), (513, 1025)),
                                       ((256, 256), (256, 256)), ((1199, 37), (1201, 36))])
def test_our_nearest_neighbour_resize_is_tensorflows_pixel_for_pixel(have, want):
    """Masks are resized by gathers, with the source indices worked out in the graph or, when every shape is
    known, once in numpy: both give exactly what ``tf.image.resize(method="nearest")`` gives."""
    from tfrecorder.dataset.connectors.tf_geometry import nearest

    values = tf.reshape(tf.range(have[0] * have[1]) % 251, [*have, 1])
    expected = tf.image.resize(values, want, method="nearest").numpy()
    np.testing.assert_array_equal(nearest(values, want).numpy(), expected)  # every shape known: numpy indices
    unknown = tf.function(lambda v, s: nearest(v, s), input_signature=[
        tf.TensorSpec([None, None, 1], tf.int32), tf.TensorSpec([2], tf.int32)])
    np.testing.assert_array_equal(unknown(values, tf.constant(want)).numpy(), expected)


@pytest.mark.parametrize("method", ["bilinear", "auto", "area", "lanczos3"])
def test_resized_pixels_are_tensorflows_rounded_to_the_nearest_level(method):
    """Pixels come back as uint8 rounded from TensorFlow's float resize, and the filter whose lobes overshoot
    (lanczos3) is clipped to 0 and 255, never wrapped around."""
    from tfrecorder.read.tf_image import resize

    image = tf.constant(np.kron(np.random.default_rng(0).integers(0, 2, (12, 16, 3)) * 255, np.ones((8, 8, 1))),
                        tf.uint8)  # black and white blocks: edges where lanczos rings past 0 and 255
    size = (37, 50)
    ours = resize(image, size, "stretch", method).numpy().astype(int)
    tf_method = "bilinear" if method == "auto" else method  # auto: a 2.6x shrink, not antialiased
    reference = tf.image.resize(image, size, method=tf_method, antialias=method == "lanczos3").numpy()
    np.testing.assert_array_equal(ours, np.clip(np.floor(reference + 0.5), 0, 255))
    if method == "lanczos3":
        assert reference.max() > 255.5 and reference.min() < -0.5  # the case the clip is for


def _psnr(a, b) -> float:
    error = np.mean((np.asarray(a, np.float64) - np.asarray(b, np.float64)) ** 2)
    return float(10 * np.log10(255.0**2 / error))


@pytest.mark.parametrize("sizes", [
    [(1200, 1600)] * 3,  # one size: the decode scale is chosen once for the dataset
    [(1200, 1600), (600, 800), (2400, 1800)],  # mixed: chosen per record (1/4, 1/2, 1/8)
], ids=["uniform", "mixed"])
def test_reduced_scale_decoding_keeps_shapes_and_beats_the_naive_pipelines_quality(tmp_path, sizes):
    """Against Pillow LANCZOS from the full-size decode: ours (reduced-scale decode + bilinear) is at least as
    close as TensorFlow's default pipeline (full decode + bilinear without antialiasing), and close."""
    from PIL import Image

    from benchmarks.common import scene

    paths = []
    for i, size in enumerate(sizes):  # photo-like scenes: edges and textures, where resizing filters differ
        paths.append(tmp_path / f"{i}.jpg")
        scene(i, size).save(paths[-1], quality=90)
    df = pd.DataFrame({"split": "TRAIN", "image_uri": [str(p) for p in paths], "label": 1})
    tfrecorder.convert(df, str(tmp_path / "out"), progress=False)
    def load(method):
        ds = tfrecorder.load_dataset(str(tmp_path / "out"), split="TRAIN", image_size=(224, 224),
                                     resize_method=method)
        return [example["image"] for example in ds.as_numpy_iterator()]

    ours, naive = load("auto"), load("bilinear")
    stored = [row.image_uri for row in in_stored_order(df).itertuples()]  # records are stored by content hash
    reference = [np.asarray(Image.open(p).convert("RGB").resize((224, 224), Image.Resampling.LANCZOS)) for p in stored]
    assert all(image.shape == (224, 224, 3) for image in ours + naive)
    ours_psnr = np.mean([_psnr(a, r) for a, r in zip(ours, reference)])
    naive_psnr = np.mean([_psnr(a, r) for a, r in zip(naive, reference)])
    assert ours_psnr >= naive_psnr and ours_psnr > 30, (ours_psnr, naive_psnr)
    with pytest.raises(tfrecorder.TFRecorderError, match="resize_method='cubic': use one of 'auto'"):
        tfrecorder.load_dataset(str(tmp_path / "out"), image_size=(8, 8), resize_method="cubic")
