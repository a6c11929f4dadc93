"""A size argument is bounded up front: ``image_size=(60000, 60000)`` at every entry point (convert, to_tfr,
WriteDataset, the ``--image-size`` flag, load_dataset, data_source) is one line naming the value, the bound
(``max_image_pixels``, Pillow's decompression-bomb limit by default) and how to raise it where there is a way,
before any work - never PIL's MemoryError, numpy's "Unable to allocate 40.2 GiB" or TensorFlow's
ResourceExhaustedError. A size at the bound is taken."""

from __future__ import annotations

import os

import pandas as pd
import pytest

import tfrecorder
from tests.conftest import write_image
from tfrecorder import cli
from tfrecorder.arguments import DEFAULT_MAX_PIXELS
from tfrecorder.errors import TFRecorderError
from tfrecorder.sample_data import make_instance_scenes
from tfrecorder.write.options import Options

HUGE = (60000, 60000)
WRITE_REFUSAL = (r"^image_size=\(60000, 60000\) makes images of 3,600,000,000 pixels, more than "
                 rf"max_image_pixels={DEFAULT_MAX_PIXELS}: give a smaller size, or a larger max_image_pixels=$")
READ_REFUSAL = (r"^image_size=\(60000, 60000\) makes images of 3,600,000,000 pixels, more than the 178,956,970 an "
                r"image may have \(Pillow's decompression-bomb limit\): give a smaller size$")
AT_THE_BOUND = 13377  # 13377 x 13377 = 178,945,129 pixels, the largest square within DEFAULT_MAX_PIXELS


def _missing_images(tmp_path) -> pd.DataFrame:
    """Rows whose images do not exist: a conversion that started would report them as row errors, so only the
    up-front check answers with the size's line (and nothing is resized, whatever the code does)."""
    return pd.DataFrame({"split": ["TRAIN", "TEST"], "image_uri": [str(tmp_path / "a.png"), str(tmp_path / "b.png")],
                         "label": ["a", "b"]})


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> str:
    tmp = tmp_path_factory.mktemp("sizes")
    table = pd.DataFrame({"split": ["TRAIN", "TRAIN"], "label": ["a", "b"],
                          "image_uri": [str(write_image(tmp / f"{i}.png", "PNG", seed=i)) for i in range(2)]})
    tfrecorder.convert(table, str(tmp / "out"), progress=False)
    return str(tmp / "out")


def test_convert_and_to_tfr_refuse_a_huge_image_size_before_any_work(tmp_path):
    table = _missing_images(tmp_path)
    with pytest.raises(TFRecorderError, match=WRITE_REFUSAL):
        tfrecorder.convert(table, str(tmp_path / "out"), image_size=HUGE, progress=False)
    with pytest.raises(TFRecorderError, match=WRITE_REFUSAL):
        table.tensorflow.to_tfr(str(tmp_path / "out"), image_size=HUGE, progress=False)
    assert not os.path.exists(tmp_path / "out")


def test_write_dataset_refuses_a_huge_image_size_when_made(tmp_path):
    pytest.importorskip("apache_beam")
    from tfrecorder.beam import WriteDataset

    with pytest.raises(TFRecorderError, match=WRITE_REFUSAL):
        WriteDataset(str(tmp_path / "out"), image_size=HUGE)


def test_the_image_size_flag_refuses_a_huge_size_in_one_line(tmp_path, capfd):
    _missing_images(tmp_path).to_csv(tmp_path / "table.csv", index=False)
    status = cli.main(["convert", str(tmp_path / "table.csv"), str(tmp_path / "out"), "--image-size", "60000x60000",
                       "--no-progress"])
    assert (status, capfd.readouterr().err) == (1, (
        "tfrecorder: error: --image-size (60000, 60000) makes images of 3,600,000,000 pixels, more than "
        f"--max-image-pixels {DEFAULT_MAX_PIXELS}: give a smaller size, or a larger --max-image-pixels\n"))
    assert not os.path.exists(tmp_path / "out")


def test_max_image_pixels_is_the_bound_of_convert_image_size(tmp_path):
    """A size of max_image_pixels pixels is written; one pixel row more is refused, naming the bound given."""
    table = pd.DataFrame({"split": ["TRAIN"], "label": ["a"],
                          "image_uri": [str(write_image(tmp_path / "small.png", "PNG", size=(4, 4)))]})
    with pytest.raises(TFRecorderError, match=r"^image_size=\(5, 4\) makes images of 20 pixels, more than "
                                              r"max_image_pixels=16: give a smaller size, or a larger "
                                              r"max_image_pixels=$"):
        tfrecorder.convert(table, str(tmp_path / "refused"), image_size=(5, 4), max_image_pixels=16, progress=False)
    result = tfrecorder.convert(table, str(tmp_path / "out"), image_size=(4, 4), max_image_pixels=16, progress=False)
    assert result.splits["TRAIN"].written == 1
    raised = Options(image_size=HUGE, max_image_pixels=HUGE[0] * HUGE[1]).checked()
    assert raised.image_size == HUGE  # the bound raised: the size is the caller's to pay for


def test_load_dataset_refuses_a_huge_image_size_and_takes_one_at_the_bound(written):
    with pytest.raises(TFRecorderError, match=READ_REFUSAL):
        tfrecorder.load_dataset(written, "TRAIN", image_size=HUGE)
    with pytest.raises(TFRecorderError, match=READ_REFUSAL):
        tfrecorder.load_dataset(written, image_size=HUGE)  # every split
    tfrecorder.load_dataset(written, "TRAIN", image_size=AT_THE_BOUND)  # built, not run: 537 MB an image


def test_data_source_refuses_a_huge_image_size_and_takes_one_at_the_bound(written):
    with pytest.raises(TFRecorderError, match=READ_REFUSAL):
        tfrecorder.data_source(written, "TRAIN", image_size=HUGE)
    assert len(tfrecorder.data_source(written, "TRAIN", image_size=AT_THE_BOUND)) == 2


@pytest.fixture(scope="module")
def instances(tmp_path_factory) -> str:
    tmp = tmp_path_factory.mktemp("instances")
    scenes = make_instance_scenes(str(tmp / "scenes"), n=2, size=(48, 64))
    tfrecorder.convert(scenes, str(tmp / "out"), progress=False, split_fractions=(1.0, 0.0, 0.0))
    return str(tmp / "out")


def test_load_dataset_refuses_a_max_objects_whose_padded_masks_exceed_the_bound(instances):
    """Each record's objects padded to max_objects=2**31 (48x64 instance masks) were TensorFlow's
    ResourceExhaustedError on the first batch; now one line, and the largest that fits is built."""
    with pytest.raises(TFRecorderError, match=r"^max_objects=2147483648 pads each record's objects to "
                                              r"6,597,069,766,656 values \(a 48x64 mask each\), more than the "
                                              r"178,956,970 pixels an image may have: give at most 58,254 \(an "
                                              r"image of this dataset holds up to \d\)$"):
        tfrecorder.load_dataset(instances, "TRAIN", max_objects=2**31, batch_size=1)
    with pytest.raises(TFRecorderError, match=r"^max_objects=2796203 pads .* \(a 8x8 mask each\).*: give at most "
                                              r"2,796,202 "):
        tfrecorder.load_dataset(instances, "TRAIN", max_objects=DEFAULT_MAX_PIXELS // 64 + 1, image_size=8)
    tfrecorder.load_dataset(instances, "TRAIN", max_objects=DEFAULT_MAX_PIXELS // (48 * 64), batch_size=1)
