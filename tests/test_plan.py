"""The shard plan: which rows go to which shard file, decided before any IO."""

from __future__ import annotations

import pytest

from tfrecorder.errors import TFRecorderError
from tfrecorder.write.table.plan import TARGET_SHARD_BYTES, plan_shards


def test_rows_split_in_order_into_near_equal_contiguous_shards():
    plan = plan_shards({"TRAIN": 8, "TEST": 5}, num_shards=3)
    train = [s for s in plan if s.split == "TRAIN"]
    assert [s.filename for s in train] == [f"train-0000{i}-of-00003.tfrecord" for i in range(3)]
    assert [(s.start, s.stop) for s in train] == [(0, 2), (2, 5), (5, 8)]
    test = [s for s in plan if s.split == "TEST"]
    assert len(test) == 3 and sum(s.rows for s in test) == 5


def test_automatic_count_targets_128_mib_shards():
    plan = plan_shards({"TRAIN": 1000}, bytes_per_row={"TRAIN": TARGET_SHARD_BYTES / 250})
    assert len(plan) == 4
    assert len(plan_shards({"TRAIN": 10}, bytes_per_row={"TRAIN": 100})) == 1


def test_automatic_shards_hold_100_to_200_mb_whatever_the_split_size():
    """The nearest whole number of 128 MiB shards: a split of 1.05 targets gets one shard, not two half-empty."""
    for total in range(TARGET_SHARD_BYTES, 40 * TARGET_SHARD_BYTES, TARGET_SHARD_BYTES // 20):
        shards = len(plan_shards({"TRAIN": 1000}, bytes_per_row={"TRAIN": total / 1000}))
        assert 100e6 <= total / shards <= 1.5 * TARGET_SHARD_BYTES, total
        if total >= 1.5 * TARGET_SHARD_BYTES:
            assert 0.75 * TARGET_SHARD_BYTES <= total / shards <= 1.25 * TARGET_SHARD_BYTES, total


def test_never_more_shards_than_rows_and_gzip_names():
    plan = plan_shards({"VALIDATION": 2}, num_shards=8, compression="gzip")
    assert [s.filename for s in plan] == ["validation-00000-of-00002.tfrecord.gz",
                                          "validation-00001-of-00002.tfrecord.gz"]


def test_negative_num_shards_is_an_error():
    with pytest.raises(TFRecorderError, match=r"num_shards=-1"):
        plan_shards({"TRAIN": 1}, num_shards=-1)


def test_explicit_num_shards_cannot_make_shards_over_the_cap():
    with pytest.raises(TFRecorderError, match=r"num_shards=1 makes shards of about 9.3 GiB, over the 4 GiB cap; "
                                              r"pass num_shards=3 or more"):
        plan_shards({"TRAIN": 100_000}, num_shards=1, bytes_per_row={"TRAIN": 100_000})
    assert len(plan_shards({"TRAIN": 100_000}, num_shards=3, bytes_per_row={"TRAIN": 100_000})) == 3


@pytest.mark.parametrize("kind", ["alternating small JPEG and PNG", "tabular"])
def test_shard_size_estimate_counts_whole_records_and_samples_every_kind(tmp_path, kind):
    """The bytes a shard count is chosen from match the records written (within 10%): for tiny images the
    other features are a large part of each record, and a table alternating two formats of different sizes
    is sampled across both (an evenly spaced sample of 32 saw only one)."""
    import pandas as pd

    import tfrecorder
    from tests.conftest import write_image
    from tfrecorder.write.run import planning
    from tfrecorder.write.run.spill_folder import spill_folder
    from tfrecorder.write.settings import FetchLimits
    from tfrecorder.write.sources import FrameSource
    from tfrecorder.write.table import summary_pass

    rows = 640
    if kind == "tabular":
        df = pd.DataFrame({"split": "TRAIN", "x": range(rows), "note": [f"row {i}" for i in range(rows)]})
    else:
        files = [write_image(tmp_path / f"{i}.{'png' if i % 2 else 'jpg'}", "PNG" if i % 2 else "JPEG",
                             size=(32, 32), seed=i) for i in range(rows)]
        df = pd.DataFrame({"split": "TRAIN", "image_uri": [str(f) for f in files],
                           "label": [f"class {i % 7}" for i in range(rows)], "weight": 0.5})
        assert files[1].stat().st_size > 2 * files[0].stat().st_size
    with spill_folder(str(tmp_path / "out"), FrameSource(df)) as rows:
        summary = summary_pass.summarize(FrameSource(df), None, rows, fractions=(0.8, 0.1, 0.1))
        estimate = planning.bytes_per_row(summary, "auto", FetchLimits())["TRAIN"]
    tfrecorder.convert(df, str(tmp_path / "out"), progress=False)
    shards = tfrecorder.read_manifest(str(tmp_path / "out")).splits["TRAIN"]
    actual = sum(s.bytes for s in shards) / sum(s.records for s in shards)
    # The 64 rows sampled are those of smallest content key, which hashes the image's path (here under a
    # tmp_path that changes from run to run): for the even mix of ~1 KB and ~2.2 KB records the estimate's
    # standard error is ~4.5%, so 20% fails one run in millions, while a sample of one kind is 36% off.
    tolerance = 0.10 if kind == "tabular" else 0.20
    assert abs(estimate - actual) / actual < tolerance, (estimate, actual)


def test_a_detection_split_gets_no_more_shards_than_images_and_none_empty():
    """A shard holds the images whose first box row is in its range: one image of 50,000 boxes makes one shard
    (5 gave 4 empty files), and a large image that would span a shard's whole range lowers the count; where
    no shard is left empty the ranges are those of the rows alone."""
    import numpy as np

    one = plan_shards({"TRAIN": 50_000}, num_shards=5, images={"TRAIN": np.array([50_000])})
    assert [(s.filename, s.start, s.stop) for s in one] == [("train-00000-of-00001.tfrecord", 0, 50_000)]
    estimated = {"TRAIN": 5 * TARGET_SHARD_BYTES / 50_000}  # what the size estimate said: 5 shards
    assert len(plan_shards({"TRAIN": 50_000}, bytes_per_row=estimated)) == 5
    assert len(plan_shards({"TRAIN": 50_000}, bytes_per_row=estimated, images={"TRAIN": np.array([50_000])})) == 1
    # the small image first: a second shard's range (25,000 on) would hold no image's first row
    assert len(plan_shards({"TRAIN": 50_000}, num_shards=2, images={"TRAIN": np.array([1, 49_999])})) == 1
    assert len(plan_shards({"TRAIN": 50_000}, num_shards=4, images={"TRAIN": np.array([49_999, 1])})) == 2
    even = {"TRAIN": np.full(100, 10)}
    assert plan_shards({"TRAIN": 1000}, num_shards=7, images=even) == plan_shards({"TRAIN": 1000}, num_shards=7)


def test_content_hashes_of_text_and_bytes_are_pandas_default_hashes():
    """Content keys (and so splits and record order) hash text and bytes as pandas' hash_array does by default,
    beside bytes that are no ASCII; every kind of missing value (None, NaN, pd.NA, NaT) as None: a faster hash
    that gave other values would move rows between splits."""
    import numpy as np
    import pandas as pd
    from pandas.util import hash_array

    from tfrecorder.dataset.connectors import BYTES

    plain = [b"a.jpg", "b.jpg", None, float("nan"), b"caf\xc3\xa9", b"\xff\xfe", "", b"a.jpg"]
    array = np.empty(len(plain), dtype=object)
    array[:] = plain
    got = BYTES.hashes([*plain, pd.NA, pd.NaT])
    np.testing.assert_array_equal(got[:len(plain)], hash_array(array))
    assert (got[len(plain):] == got[2]).all()
