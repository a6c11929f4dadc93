"""file_format="array_record": the same records in ArrayRecord files, read by tfds.data_source and by every reader of
ours (load_dataset, read_tfr, verify, info, data_source); local and DirectRunner write the same bytes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import tfrecorder
from tests import test_resume

pytest.importorskip("array_record")
csv_table = test_resume.csv_table  # the fixture: 30 images in three splits, one corrupt


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> tuple[Path, Path]:
    """The conftest image table converted twice into TFDS's layout: TFRecord shards, and ArrayRecord files."""
    from tests.conftest import image_table_at

    root = tmp_path_factory.mktemp("array_record")
    table = image_table_at(root)
    tfrecord, array = root / "data" / "pets" / "1.0.0", root / "array" / "pets" / "1.0.0"
    tfrecorder.convert(table, str(tfrecord), num_shards=2, progress=False)
    tfrecorder.convert(table, str(array), num_shards=2, file_format="array_record", progress=False)
    return tfrecord, array


def test_the_shards_are_array_record_files_tfds_reads(folders):
    tfds = pytest.importorskip("tensorflow_datasets")
    tfrecord, array = folders
    assert sorted(p.name for p in array.glob("train-*")) == ["train-00000-of-00002.array_record",
                                                            "train-00001-of-00002.array_record"]
    assert not list(array.glob("*.tfindex"))  # an ArrayRecord file indexes its records itself
    assert json.loads((array / "dataset_info.json").read_text())["fileFormat"] == "array_record"
    theirs = tfds.data_source("pets", data_dir=str(array.parents[1]), split="train")
    ours = list(tfrecorder.load_dataset(str(tfrecord), "TRAIN").as_numpy_iterator())
    assert len(theirs) == len(ours) == 6
    anywhere = tfds.builder_from_directory(str(array)).as_data_source(split="train")  # any folder, by its path
    assert [r["image_uri"] for r in anywhere] == [r["image_uri"] for r in theirs]
    for i, record in enumerate(ours):
        assert theirs[i]["label"] == record["label"] and theirs[i]["image_uri"] == record["image_uri"]
        if record["image_format"] == b"png":  # TFDS decodes JPEGs with the fast IDCT, ours the accurate one
            np.testing.assert_array_equal(theirs[i]["image"], record["image"])


def test_our_readers_read_them_as_the_tfrecord_shards(folders):
    tfrecord, array = folders
    for split in ("TRAIN", "TEST"):
        a = list(tfrecorder.load_dataset(str(array), split, shuffle=True, seed=1).as_numpy_iterator())
        b = list(tfrecorder.load_dataset(str(tfrecord), split, shuffle=True, seed=1).as_numpy_iterator())
        assert sorted(x["image_uri"] for x in a) == sorted(x["image_uri"] for x in b)
        c = list(tfrecorder.load_dataset(str(array), split).as_numpy_iterator())
        d = list(tfrecorder.load_dataset(str(tfrecord), split).as_numpy_iterator())
        for x, y in zip(c, d, strict=True):
            np.testing.assert_array_equal(x["image"], y["image"])
            assert x["label"] == y["label"]
    assert tfrecorder.read_tfr(str(array)).equals(tfrecorder.read_tfr(str(tfrecord)))
    report = tfrecorder.verify(str(array))
    assert report.ok and report.records == 12, str(report)
    assert tfrecorder.info(str(array)).label_counts == tfrecorder.info(str(tfrecord)).label_counts
    source, plain = (tfrecorder.data_source(str(f), "train", image_size=(16, 16)) for f in (array, tfrecord))
    for i in (0, 5, -1, 2):
        np.testing.assert_array_equal(source[i]["image"], plain[i]["image"])
    assert tfrecorder.data_source(str(array), "train", decode=False)[:] == \
        tfrecorder.data_source(str(tfrecord), "train", decode=False)[:]


def test_a_damaged_array_record_shard_is_named_by_verify(folders, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(folders[1], copy)
    shard = copy / "train-00000-of-00002.array_record"
    data = bytearray(shard.read_bytes())
    data[200] ^= 0xFF  # inside the first record's chunk
    shard.write_bytes(bytes(data))
    problems = [str(p) for p in tfrecorder.verify(str(copy)).problems]
    assert any(p.startswith("train-00000-of-00002.array_record: ") for p in problems), problems
    assert any("CRC-32C of the file is" in p for p in problems), problems


def test_a_damaged_block_header_is_one_line_naming_the_shard_in_every_reader(tmp_path):
    """Damage riegeli finds only as it reads the file's structure (a block header every 64 KiB) or closes it:
    a TFRecorderError naming the shard in every reader, never riegeli's RuntimeError."""
    import pandas as pd
    from PIL import Image

    paths = []
    for i in range(4):  # ~140 KB of noise PNGs: a shard with a block header at 64 KiB
        paths.append(tmp_path / f"{i}.png")
        Image.fromarray(np.random.default_rng(i).integers(0, 256, (100, 120, 3), np.uint8)).save(paths[-1])
    out = tmp_path / "out"
    tfrecorder.convert(pd.DataFrame({"split": "TRAIN", "image_uri": [str(p) for p in paths], "label": ["a", "b"] * 2}),
                       str(out), file_format="array_record", progress=False)
    shard = next(out.glob("*.array_record"))
    data = bytearray(shard.read_bytes())
    assert len(data) > 65536
    data[65536] ^= 1  # the hash of the block header at 64 KiB
    shard.write_bytes(bytes(data))
    readers = {"data_source": lambda: list(tfrecorder.data_source(str(out), "TRAIN")),
               "load_dataset": lambda: list(tfrecorder.load_dataset(str(out), "TRAIN")),
               "read_tfr": lambda: tfrecorder.read_tfr(str(out))}
    for name, read in readers.items():
        # load_dataset's reads run inside TensorFlow, which raises the error as its own, message and all
        with pytest.raises(Exception if name == "load_dataset" else tfrecorder.TFRecorderError,
                           match=f"{shard.name}.* damaged"):
            read()
    assert any(p.file == shard.name for p in tfrecorder.verify(str(out)).problems)


def test_compression_and_array_record_are_one_or_the_other(image_table, tmp_path):
    with pytest.raises(tfrecorder.TFRecorderError, match=r"compression='gzip' compresses TFRecord shards; "
                                                         r"file_format='array_record' writes ArrayRecord files"):
        tfrecorder.convert(image_table, str(tmp_path / "out"), compression="gzip", file_format="array_record")


def test_direct_runner_writes_the_same_bytes_as_local(image_table, tmp_path):
    pytest.importorskip("apache_beam")
    tfrecorder.convert(image_table, str(tmp_path / "local"), num_shards=2, file_format="array_record",
                       progress=False)
    tfrecorder.convert(image_table, str(tmp_path / "direct"), num_shards=2, file_format="array_record",
                       runner="DirectRunner")
    names = sorted(p.name for p in (tmp_path / "local").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "direct").iterdir())
    assert "train-00001-of-00002.array_record" in names
    for name in names:
        a, b = (tmp_path / "local" / name).read_bytes(), (tmp_path / "direct" / name).read_bytes()
        if name == "dataset.json":  # identical but for the runner that wrote it
            a, b = json.loads(a), json.loads(b)
            assert (a.pop("runner"), b.pop("runner")) == ("local", "DirectRunner")
        if name != ".conversion.json":  # what each conversion was made of: its runner among them
            assert a == b, name


@pytest.mark.slow  # a subprocess
def test_a_killed_array_record_conversion_resumes_to_the_same_bytes(tmp_path, csv_table):
    """As tests/test_resume.py's kill, with ArrayRecord files: the shards done before the kill are kept (they
    have no .tfindex to check), the rest written, and the folder is the uninterrupted run's, byte for byte."""
    import subprocess
    import sys

    from tests.test_resume import CHILD, files, kill

    clean, out = tmp_path / "clean", tmp_path / "out"
    tfrecorder.convert(str(csv_table), str(clean), num_shards=4, file_format="array_record", progress=False)
    code = CHILD.replace("progress=False, mode=mode)", "progress=False, mode=mode, file_format='array_record')")
    assert code != CHILD
    child = subprocess.Popen([sys.executable, "-c", code, str(csv_table), str(out), "local", "2"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "BLOCKED", child.stderr.read()[-2000:]
    kill(child)
    done = [n for n in (out / ".tfrecorder" / "done").iterdir() if n.suffix == ".json"]
    result = tfrecorder.convert(str(csv_table), str(out), num_shards=4, file_format="array_record", progress=False)
    assert result.resumed_shards == len(done) >= 2
    assert files(out) == files(clean)


def test_overwrite_removes_an_unfinished_array_record_runs_shards(tmp_path, csv_table):
    """overwrite=True deletes an unfinished run's shards by their names (no dataset.json lists them yet):
    ArrayRecord files as TFRecord ones, so none of another shard count stays beside the new dataset."""
    from tests.test_resume import files

    clean, out = tmp_path / "clean", tmp_path / "out"
    tfrecorder.convert(str(csv_table), str(clean), num_shards=2, file_format="array_record", progress=False)
    with pytest.raises(tfrecorder.errors.RowError):  # stopped at the corrupt image, in the last TRAIN shard
        tfrecorder.convert(str(csv_table), str(out), num_shards=4, file_format="array_record", progress=False,
                           on_error="raise")
    assert list(out.glob("*-of-00004.array_record"))  # the shards finished before it
    tfrecorder.convert(str(csv_table), str(out), num_shards=2, file_format="array_record", progress=False,
                       overwrite=True)
    assert files(out) == files(clean)
