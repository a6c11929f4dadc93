"""data_source: a split's records by position, read through each shard's .tfindex and decoded as load_dataset
decodes them (pixels, boxes, keypoints, masks, labels), thread-safe and picklable."""

from __future__ import annotations

import io
import multiprocessing
import pickle
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import tfrecorder
from tfrecorder import sample_data
from tfrecorder.dataset.records import read_records

# image_size, resize_mode: a reduced-scale JPEG decode then bilinear (20x28 from 48x64 JPEGs: a 1/2 decode), pad
# and crop, and a shrink of more than 3x (PNGs to 8x8), which load_dataset antialiases.
SIZES = [(None, "stretch"), ((20, 28), "stretch"), ((16, 16), "pad"), ((16, 16), "crop"), ((8, 8), "stretch")]


@pytest.fixture(scope="module")
def converted(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("data_source")
    images = sample_data.make_sample_images(str(root / "images"), n=12, size=(48, 64))
    scenes = sample_data.make_detection_scenes(str(root / "scenes"), n=10, size=(48, 64))  # EXIF 1, 3, 6, 8
    people = sample_data.make_keypoint_scenes(str(root / "people"), n=4, size=(48, 64))
    segments = sample_data.make_segmentation_scenes(str(root / "segments"), n=5, size=(48, 64))
    instances = sample_data.make_instance_scenes(str(root / "shapes"), n=4, size=(48, 64))  # EXIF-turned too
    out = {name: str(root / name) for name in ("classification", "detection", "keypoints", "segmentation",
                                               "instances")}
    tfrecorder.convert(images, out["classification"], num_shards=2, progress=False)
    tfrecorder.convert(scenes, out["detection"], progress=False)
    tfrecorder.convert(people, out["keypoints"], progress=False)
    tfrecorder.convert(segments[["split", "image_uri", "mask_uri"]], out["segmentation"],
                       mask_classes=list(sample_data.SEGMENT_CLASSES), progress=False)
    tfrecorder.convert(instances, out["instances"], progress=False)
    return out


def _flat(example: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in example.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}/"))
        else:
            out[prefix + key] = value.numpy() if hasattr(value, "numpy") else value
    return out


def _assert_same(expected: dict[str, Any], got: dict[str, Any], antialiased: bool) -> None:
    expected, got = _flat(expected), _flat(got)
    assert got.keys() == expected.keys()
    for key, want in expected.items():
        if isinstance(want, bytes):
            assert got[key] == want, key
            continue
        assert np.asarray(got[key]).dtype == want.dtype and np.shape(got[key]) == want.shape, key
        if key == "image" and antialiased:
            # TensorFlow's antialiasing kernel sums each pixel's weights in its own order: a float32 sum that
            # ends a rounding step away at most, so one level either way (measured: none differ here)
            assert np.abs(got[key].astype(int) - want.astype(int)).max() <= 1
        elif want.dtype == np.float32:  # boxes and points: the same float32 steps, allowed an ulp
            np.testing.assert_allclose(got[key], want, rtol=0, atol=1e-6, err_msg=key)
        else:
            np.testing.assert_array_equal(got[key], want, err_msg=key)


@pytest.mark.slow  # a tf.data pipeline for every resize mode (conftest.py)
@pytest.mark.parametrize("name", ["classification", "detection", "keypoints", "segmentation", "instances"])
def test_records_are_load_datasets(converted, name):
    for image_size, mode in SIZES if name in ("classification", "detection", "instances") else SIZES[2:4]:
        kwargs = dict(image_size=image_size, resize_mode=mode) if image_size else {}
        source = tfrecorder.data_source(converted[name], "train", **kwargs)
        dataset = tfrecorder.load_dataset(converted[name], "TRAIN", **kwargs)
        assert len(source) == int(dataset.cardinality())
        for index, expected in enumerate(dataset):
            _assert_same(expected, source[index], antialiased=image_size == (8, 8))


def test_detection_boxes_labels_and_turned_pictures(converted):
    source = tfrecorder.data_source(converted["detection"], "TRAIN")
    turned = [r for r in source if r["image_orientation"] in (6, 8)]
    assert turned and all(r["image"].shape == (48, 64, 3) for r in turned)  # stored 64x48, shown upright
    record = source[0]
    assert record["objects"]["bbox"].dtype == np.float32 and record["objects"]["bbox"].shape[1] == 4
    assert record["objects"]["label"].dtype == np.int64
    assert len(record["objects"]["bbox"]) == len(record["objects"]["label"])


def test_index_lists_slices_and_negative_indices(converted):
    source = tfrecorder.data_source(converted["classification"], "TRAIN", decode=False)
    stored = [r for shard in sorted(Path(converted["classification"]).glob("train-*.tfrecord"))
              for r in read_records(shard.open("rb"))]
    assert list(source) == stored  # the records of both shards in order, as serialized Examples
    order = np.random.default_rng(0).permutation(len(source))
    assert source[order] == [stored[i] for i in order]
    assert source[[3, -1, 3]] == [stored[3], stored[-1], stored[3]]
    assert source[1:7:2] == stored[1:7:2] and source[-2] == stored[-2]
    with pytest.raises(IndexError, match=f"index {len(source)} is out of range for {len(source)} records"):
        source[len(source)]
    with pytest.raises(TypeError, match="ints, slices or lists of ints, not str"):
        source["0"]
    assert source[range(1, 7, 2)] == stored[1:7:2]  # a range is a list of ints
    with pytest.raises(TypeError, match=r"lists of ints; this list holds a list \(\[0, 1\]\)"):
        source[[[0, 1]]]  # it said "not list"


def test_a_damaged_record_is_named(converted, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(converted["detection"], copy)
    shard = copy / "train-00000-of-00001.tfrecord"
    offset, length = (int(v) for v in (copy / "train-00000-of-00001.tfindex").read_text().splitlines()[2].split())
    data = bytearray(shard.read_bytes())
    data[offset + length - 10] ^= 0xFF  # a byte of record 2's payload
    shard.write_bytes(bytes(data))
    source = tfrecorder.data_source(str(copy), "TRAIN")
    assert source[1]["image"].shape == (48, 64, 3)  # the others read
    with pytest.raises(tfrecorder.TFRecorderError,
                       match=r"train-00000-of-00001.tfrecord: record 2 \(item 2 of TRAIN\) is damaged: data CRC "
                             r"mismatch \(corrupt payload\); `tfrecorder verify .*` checks every shard$"):
        source[2]


@pytest.mark.parametrize("damage", ["a huge length", "a negative offset", "words", "an odd count", "two lines swapped"])
def test_a_damaged_index_is_one_line_naming_it(converted, tmp_path, damage):
    """A .tfindex edited or damaged: a one-line error naming it, never numpy's or os.pread's (a MemoryError for a
    huge length), nor - two lines swapped, each record's CRC fine - another record than the one asked for."""
    copy = tmp_path / "copy"
    shutil.copytree(converted["detection"], copy)
    index = copy / "train-00000-of-00001.tfindex"
    lines = index.read_text().splitlines()
    first = lines[0].split()
    lines = {"a huge length": [f"{first[0]} 99999999999", *lines[1:]],
             "a negative offset": [f"-5 {first[1]}", *lines[1:]], "words": ["abc def", *lines[1:]],
             "an odd count": [*lines[:-1], lines[-1].split()[0]],
             "two lines swapped": [lines[1], lines[0], *lines[2:]]}[damage]
    index.write_text("\n".join(lines) + "\n")
    with pytest.raises(tfrecorder.TFRecorderError, match=r"train-00000-of-00001.tfindex: .*the index is damaged; "
                                                         r"`tfrecorder verify .*` checks the dataset$"):
        tfrecorder.data_source(str(copy), "TRAIN")[0]


def test_a_compressed_dataset_is_refused(tmp_path):
    table = sample_data.make_sample_images(str(tmp_path / "images"), n=3, size=(16, 16))
    out = str(tmp_path / "gz")
    tfrecorder.convert(table, out, compression="gzip", progress=False)
    with pytest.raises(tfrecorder.TFRecorderError, match=r"is gzip-compressed: data_source reads each record at its "
                                                         r"offset.*convert again with compression=None"):
        tfrecorder.data_source(out, "TRAIN")


def test_pickled_sources_open_the_files_again(converted):
    source = tfrecorder.data_source(converted["detection"], "TRAIN", image_size=16)
    first = source[0]  # a file is open now: the pickle holds the arguments only
    copy = pickle.loads(pickle.dumps(source))
    assert len(pickle.dumps(source)) < 1000
    _assert_same(first, copy[0], antialiased=False)


def test_many_threads_read_what_one_does(converted):
    source = tfrecorder.data_source(converted["classification"], "TRAIN", image_size=(20, 28))
    order = np.random.default_rng(1).integers(0, len(source), 200)
    alone = [source[int(i)]["image"] for i in order[:len(source)]]
    with ThreadPoolExecutor(8) as pool:
        together = list(pool.map(lambda i: source[int(i)]["image"], order))
    fresh = tfrecorder.data_source(converted["classification"], "TRAIN", image_size=(20, 28))
    with ThreadPoolExecutor(8) as pool:  # the shards' indexes and files opened by many threads at once
        first_reads = list(pool.map(lambda i: fresh[int(i)]["image"], order))
    for images in (together, first_reads):
        for i, image in zip(order, images):
            np.testing.assert_array_equal(image, source[int(i)]["image"])
    assert len(alone) == len(source)


def _labels(source: Any, indices: list[int]) -> list[int]:
    return [int(source[i]["label"]) for i in indices]


@pytest.mark.slow  # a subprocess
def test_worker_processes_get_the_source_pickled(converted):
    """What a PyTorch DataLoader with workers does: the source pickled to each worker process, read there."""
    source = tfrecorder.data_source(converted["classification"], "TRAIN")
    batches = [[0, 1, 2], [5, 4, 3], [7, 6]]
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        got = pool.starmap(_labels, [(source, b) for b in batches])
    assert got == [_labels(source, b) for b in batches]


@pytest.mark.parametrize("channels", [1, 3, 4])
def test_numpy_resize_is_tensorflows(channels):
    """data_source's numpy resize gives load_dataset's pixels bit for bit, whatever the channels, the size (grown,
    shrunk, one axis each way, a shrink read from only some rows) and the mode."""
    import tensorflow as tf

    from tfrecorder.dataset.connectors import np_geometry
    from tfrecorder.read import tf_image

    pixels = np.random.default_rng(channels).integers(0, 256, (37, 50, channels), dtype=np.uint8)
    for size in [(20, 28), (80, 90), (15, 70), (37, 50), (13, 49)]:
        for mode in ("stretch", "pad", "crop"):
            want = tf_image.resize(tf.constant(pixels), size, mode).numpy()
            np.testing.assert_array_equal(np_geometry.resize(pixels, size, mode), want, err_msg=f"{size} {mode}")
            # the same pixels as a view of wider ones (Pillow keeps RGB as RGBX): read where they lie, never the rest
            wide = np.concatenate([pixels, np.full((37, 50, 1), 255, np.uint8)], axis=2)[..., :channels]
            np.testing.assert_array_equal(np_geometry.resize(wide, size, mode), want, err_msg=f"{size} {mode} view")


def test_a_crop_computes_only_what_it_keeps_and_keeps_the_full_resizes_pixels():
    """A crop's cut rows and columns are never computed (a quarter of a 4:3 picture's work at a square size): what
    it keeps is the whole resize's pixels, cut - bilinear and antialiased (a shrink of more than 3x) alike."""
    from tfrecorder.dataset.connectors import np_geometry

    pixels = np.random.default_rng(5).integers(0, 256, (37, 50, 3), dtype=np.uint8)
    shrinks = []
    for size in [(20, 20), (10, 12), (9, 30)]:  # columns cut; columns cut, antialiased; rows cut
        (h, w), (top, left) = np_geometry.fitted(pixels.shape[:2], size, "crop")
        shrinks.append(max(37 / h, 50 / w))
        assert (top, left) != (0, 0)
        whole = (np_geometry._antialiased(pixels.astype(np.float32), (h, w)) if shrinks[-1] > 3 else
                 np_geometry._bilinear(pixels, (h, w)).copy()) + np.float32(0.5)
        np.testing.assert_array_equal(np_geometry.resize(pixels, size, "crop"),
                                      np_geometry.place(whole, size, top, left, dtype=np.uint8), err_msg=str(size))
    assert max(shrinks) > 3 > min(shrinks)


def test_a_strip_padded_keeps_a_pixel_of_picture_when_written_and_read(tmp_path):
    """A 3x400 strip padded into 64x64 rounds to no row: the writer's PIL resize failed and took the whole
    conversion down, load_dataset's TensorFlow failed, data_source divided by zero. Each keeps a row now."""
    import tensorflow as tf
    from PIL import Image

    from tfrecorder.dataset.connectors import np_geometry
    from tfrecorder.read import tf_image

    strip = np.random.default_rng(2).integers(0, 256, (3, 400, 3), dtype=np.uint8)
    for pixels in (strip, strip.transpose(1, 0, 2)):
        want = tf_image.resize(tf.constant(pixels), (64, 64), "pad").numpy()
        assert want.shape == (64, 64, 3) and want.any()
        # a shrink of more than 3x is antialiased: a pixel may be a level apart (TensorFlow's sum order)
        np.testing.assert_allclose(np_geometry.resize(pixels, (64, 64), "pad"), want, atol=1)
    Image.fromarray(strip).save(tmp_path / "strip.png")
    Image.fromarray(strip[:, :64]).save(tmp_path / "square.png")
    table = pd.DataFrame({"split": "TRAIN", "image_uri": [str(tmp_path / "strip.png"), str(tmp_path / "square.png")],
                          "label": ["a", "b"]})
    result = tfrecorder.convert(table, str(tmp_path / "out"), progress=False, image_size=(64, 64), resize_mode="pad")
    assert (result.rows.written, result.errors) == (2, 0)
    source = tfrecorder.data_source(str(tmp_path / "out"), "TRAIN", image_size=(32, 32), resize_mode="pad")
    for record, example in zip(source, tfrecorder.load_dataset(str(tmp_path / "out"), "TRAIN", image_size=(32, 32),
                                                               resize_mode="pad")):
        np.testing.assert_array_equal(record["image"], example["image"].numpy())


def test_pillows_own_pixels_are_read_after_the_image_is_closed():
    from PIL import Image

    from tfrecorder.dataset.connectors import np_geometry

    pixels = np.random.default_rng(0).integers(0, 256, (30, 41, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    with Image.open(io.BytesIO(buffer.getvalue())) as picture:
        picture.load()
        view = np_geometry.pixel_view(picture)
    if view is None:
        pytest.skip("this Pillow does not share its pixels (Arrow export: Pillow 11.2 and later)")
    del picture
    others = [Image.new("RGB", (41, 30), (7, 7, 7)).load() for _ in range(20)]  # memory a freed image would give
    assert others and not view.flags.writeable
    np.testing.assert_array_equal(view, pixels)
    np.testing.assert_array_equal(np_geometry.resize(view, (17, 23), "crop"),
                                  np_geometry.resize(pixels, (17, 23), "crop"))
