"""The entrance of the Beam and spill paths (issue 41): ``WriteDataset`` types the whole PCollection, not each
staged part; a plan over few images writes no empty shard; a full temporary folder names TMPDIR."""

from __future__ import annotations

import datetime
import hashlib
import os

import numpy as np
import pandas as pd
import pytest

import tfrecorder
from tests.test_beam import _same_files
from tfrecorder.errors import TFRecorderError
from tfrecorder.write.table import summary_pass

PART_ROWS = 4  # WriteDataset stages a part for every PART_ROWS rows: 12 rows make 3 parts


def _write_dataset(rows, output, monkeypatch) -> list[str]:
    """``rows`` through WriteDataset in a pipeline, staged PART_ROWS rows a part; the parts it staged."""
    import apache_beam as beam

    from tfrecorder.beam import WriteDataset
    from tfrecorder.write.runners import beam as beam_module

    staged, real = [], beam_module.stage_part
    monkeypatch.setattr(summary_pass, "PART_ROWS", PART_ROWS)
    monkeypatch.setattr(beam_module, "stage_part", lambda folder, name, data: staged.append(name)
                        or real(folder, name, data))
    with beam.Pipeline() as pipeline:
        _ = pipeline | beam.Create(rows) | WriteDataset(str(output), num_shards=2)
    return staged


def _rows(change) -> list[dict]:
    rows = [{"split": ("TRAIN", "TRAIN", "TEST")[i % 3], "label": "ab"[i % 2], "x": i, "note": f"n{i}"}
            for i in range(12)]
    change(rows)
    return rows


@pytest.mark.parametrize("change", [
    pytest.param(lambda rows: rows[5].update(extra="only here"), id="a key in one row"),
    pytest.param(lambda rows: rows[9].update(x=7.5), id="ints and one float"),
    pytest.param(lambda rows: [row.update(note=None) for row in rows[1:]], id="a column null but in one row"),
    pytest.param(lambda rows: [row.pop("note") for row in rows[::2]], id="a key in half the rows"),
])
def test_write_dataset_types_the_whole_pcollection_as_convert_does(tmp_path, monkeypatch, change):
    """Rows staged in several parts are typed as one table: the files convert writes for a DataFrame of the same
    rows, byte for byte (each part typed on its own failed naming an internal part-0000N.parquet, or typed a
    column of ints with one 7.5 in another part as int64)."""
    rows = _rows(change)
    tfrecorder.convert(pd.DataFrame(rows), str(tmp_path / "convert"), num_shards=2, progress=False)
    staged = _write_dataset(rows, tmp_path / "beam", monkeypatch)
    assert len(staged) == 3
    _same_files(tmp_path / "convert", tmp_path / "beam")


def test_write_dataset_refuses_a_column_of_two_kinds_naming_it_and_leaves_the_folder_as_it_was(tmp_path, monkeypatch):
    """Ints and text in one column: one line naming the column, and output_dir left as it was (no staged part,
    no lock); the same when the two kinds are in different parts."""
    from tfrecorder.write.runners import beam as beam_module

    rows = _rows(lambda rows: [row.update(x=f"t{i}") for i, row in enumerate(rows) if i % 2])
    message = "column 'x' holds mixed-integer values"
    with pytest.raises(Exception, match=r"WriteDataset stages its rows as Parquet, which cannot hold them as they "
                                        rf"are: {message}\. Give each column one kind of value"):
        _write_dataset(rows, tmp_path / "beam", monkeypatch)
    assert not list((tmp_path / "beam").iterdir())
    ints, text = ([(bytes([i]), row) for i, row in enumerate(rows) if i % 2 == odd] for odd in (0, 1))
    kinds = beam_module._merged_kinds([beam_module._part_kinds((0, ints)), beam_module._part_kinds((1, text))])
    assert beam_module._staged_schema(kinds) == message


WITNESSED = {  # column -> its values: each of the kinds pandas and Arrow type a column by
    "ints with a missing one": [1, None, 3, 4, 5, 6],
    "ints and a float": [1, 2, 3, 7.5, 5, 6],
    "bools with a missing one": [True, False, None, True, True, False],
    "text with a missing one": ["a", None, "c", "d", "e", "f"],
    "bytes": [b"a", b"b", None, b"d", b"e", b"f"],
    "ints over int64": [1, 2, 3, 2**63 + 5, 4, 5],
    "null but once": [None, None, None, None, "x", None],
    "NaN but once": [np.nan, 1.5, np.nan, np.nan, np.nan, np.nan],
    "numpy int32": [np.int32(i) for i in range(6)],
    "arrays": [np.arange(i % 3) for i in range(6)],
    "lists of floats, some empty": [[1.5], [], [2.5, 0.0], [], [3.0], []],
    "times": [datetime.datetime(2020, 1, i + 1) for i in range(6)],
}


@pytest.mark.parametrize("column", WITNESSED)
@pytest.mark.parametrize("part_rows", [1, 2, 4])
def test_every_staged_part_has_the_schema_of_the_whole_table(column, part_rows):
    """The Arrow schema every part is staged with - from a witness of each kind of value of every column, merged
    over the parts - is the one a DataFrame of all the rows gives, and each part is cast to it."""
    from tfrecorder.write.runners import beam as beam_module
    from tfrecorder.write.sources import frame_as_arrow

    keyed = sorted((hashlib.blake2b(str(i).encode(), digest_size=16).digest(), {"k": i, column: value})
                   for i, value in enumerate(WITNESSED[column]))
    whole = frame_as_arrow(pd.DataFrame.from_records([row for _, row in keyed])).schema
    groups = [keyed[i:i + part_rows] for i in range(0, len(keyed), part_rows)]
    found = [beam_module._part_kinds((n, group)) for n, group in enumerate(groups)]
    schema = beam_module._staged_schema(beam_module._merged_kinds(reversed(found)))
    assert schema.equals(whole, check_metadata=True)
    for group in groups:
        part = pd.DataFrame.from_records([row for _, row in group], columns=schema.names)
        assert beam_module._as_staged(part, schema).schema.equals(whole, check_metadata=True)


def _boxes(tmp_path, images: int, boxes: int) -> pd.DataFrame:
    """A detection table of ``images`` images and ``boxes`` box rows, the rows of its images interleaved."""
    from tests.conftest import write_image

    uris = [str(write_image(tmp_path / "img" / f"{i}.png", "PNG", size=(32, 32), seed=i)) for i in range(images)]
    return pd.DataFrame({"split": "TRAIN", "image_uri": [uris[b % images] for b in range(boxes)],
                         "label": ["ab"[b % 2] for b in range(boxes)], "xmin": 0.1, "ymin": 0.2, "xmax": 0.5,
                         "ymax": 0.6})


@pytest.mark.parametrize("how", [
    pytest.param({"num_shards": 5}, id="num_shards over the images"),
    pytest.param({"target": 4096}, id="a size estimate over the images"),
    pytest.param({"num_shards": 5, "streamed": True}, id="an image's boxes in several parts"),
    pytest.param({"num_shards": 5, "runner": "DirectRunner", "files": 2}, id="Beam, an image's boxes in two files"),
])
@pytest.mark.parametrize("images", [1, 2])
def test_a_detection_table_of_few_images_writes_no_empty_shard(tmp_path, monkeypatch, how, images):
    """One image with 300 boxes (or two) gets one shard per image at most and no empty shard file: the plan's
    ranges of box rows moved to whole images left 4 of 5 shards empty."""
    from tfrecorder.write.table import plan

    how = dict(how)
    if how.pop("target", None):
        monkeypatch.setattr(plan, "TARGET_SHARD_BYTES", 4096)  # each box row is estimated at ~100 bytes
    if how.pop("streamed", False):
        monkeypatch.setattr(summary_pass, "MEMORY_SPILL_BYTES", 0)
        monkeypatch.setattr(summary_pass, "PART_ROWS", 64)
    if "runner" not in how:
        how["progress"] = False
    source = _boxes(tmp_path, images, 300)
    if files := how.pop("files", 0):
        for n in range(files):
            source.iloc[n::files].to_csv(tmp_path / f"boxes-{n}.csv", index=False)
        source = str(tmp_path / "boxes-*.csv")
    result = tfrecorder.convert(source, str(tmp_path / "out"), **how)
    shards = sorted((tmp_path / "out").glob("*.tfrecord"))
    assert 1 <= len(shards) <= images and all(shard.stat().st_size > 0 for shard in shards), shards
    manifest = tfrecorder.read_manifest(str(tmp_path / "out")).splits["TRAIN"]
    assert result.rows.written == 300 and len(tfrecorder.read_tfr(str(tmp_path / "out"))) == 300
    assert len(manifest) == len(shards) and sum(s.records for s in manifest) == images


MOVE_TMPDIR = (r"; set TMPDIR to a folder with more room \(TMPDIR=/bigger/disk tfrecorder convert \.\.\., or in Python "
               r"tempfile\.tempdir = '/bigger/disk' before converting\), then run the same conversion again")


def _segments_table() -> pd.DataFrame:
    """600 rows of columns whose TRAIN shard the forked writers write in segments (SEGMENT_MIN_ROWS lowered)."""
    rng = np.random.default_rng(0)
    return pd.DataFrame({"split": "TRAIN", "label": [f"c{i % 5}" for i in range(600)], "x": rng.normal(size=600),
                         "pad": [rng.bytes(200).hex() for _ in range(600)]})


def test_a_full_temporary_folder_while_writing_segments_names_tmpdir_not_output_dir(tmp_path, forked, monkeypatch):
    """Shards written in segments by forked writers put them in the temporary folder: a full disk there names
    that folder and TMPDIR (it said "free some space (or move output_dir)", naming a file in the spill)."""
    import errno
    import tempfile

    from tfrecorder.write.runners import local, segments

    real = local.write_spilled_shard

    def full_tmpdir(shard, folder, *args, **kwargs):  # what a write into a full TMPDIR raises (storage names it)
        if folder.url.startswith(shard.spill):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), folder.join(shard.spec.filename))
        return real(shard, folder, *args, **kwargs)

    monkeypatch.setattr(segments, "SEGMENT_MIN_ROWS", 4)
    monkeypatch.setattr(local, "write_spilled_shard", full_tmpdir)
    with pytest.raises(TFRecorderError) as caught:
        tfrecorder.convert(_segments_table(), str(tmp_path / "out"), progress=False)
    assert caught.match(rf"^no space left in the temporary folder {tempfile.gettempdir()} for the segments of "
                        rf"train-00000-of-00001\.tfrecord, .*{MOVE_TMPDIR}: it keeps the shards already written$")
    assert "move output_dir" not in str(caught.value)


def test_a_temporary_folder_too_full_for_the_spill_folder_names_tmpdir(tmp_path, monkeypatch):
    """A temporary folder so full that the spill's own folder cannot be made: the same one line (it was a raw
    OSError)."""
    import errno
    import tempfile

    def full(prefix=None, **_):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), os.path.join(tempfile.gettempdir(), prefix + "x"))

    monkeypatch.setattr(tempfile, "mkdtemp", full)
    with pytest.raises(TFRecorderError, match=rf"^no space left in the temporary folder {tempfile.gettempdir()} for "
                                              rf"the spill files of this conversion: .*{MOVE_TMPDIR}$"):
        tfrecorder.convert(_segments_table(), str(tmp_path / "out"), progress=False)


@pytest.fixture
def small_tmpdir(tmp_path, monkeypatch):
    """A 64 KiB tmpfs as the temporary folder (root only: skipped where mounting is not allowed)."""
    import subprocess
    import tempfile

    small = tmp_path / "small"
    small.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(small)],
                                           capture_output=True).returncode != 0:
        pytest.skip("needs root to mount a small tmpfs")
    monkeypatch.setattr(tempfile, "tempdir", str(small))
    try:
        yield small
    finally:
        subprocess.run(["umount", str(small)], capture_output=True)


def test_a_real_full_temporary_folder_while_writing_segments_names_tmpdir(tmp_path, forked, monkeypatch,
                                                                        small_tmpdir):
    from tfrecorder.write.runners import segments

    monkeypatch.setattr(segments, "SEGMENT_MIN_ROWS", 4)
    with pytest.raises(TFRecorderError, match=rf"^no space left in the temporary folder {small_tmpdir} for the "
                                              rf"segments of train-00000-of-00001\.tfrecord, .*{MOVE_TMPDIR}"):
        tfrecorder.convert(_segments_table(), str(tmp_path / "out"), progress=False)
    assert os.listdir(small_tmpdir) == []
