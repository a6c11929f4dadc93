"""A file format defined outside the package (``tfrecorder.FileFormat``): defining the class registers it, and
convert writes it and every reader reads it (load_dataset, read_tfr, data_source, verify, info)."""

from __future__ import annotations

import struct
from collections.abc import Iterator

import pytest

import tfrecorder
from tfrecorder.dataset.records import Block, Frame, masked_crc

_LENGTH = struct.Struct("<I")


class _Sink:
    """Records as ``length record`` pairs written to the shard's file."""

    def __init__(self, file):
        self._file, self.records, self.first_crc = file, 0, None

    def write(self, record: bytes) -> None:
        if self.first_crc is None:
            self.first_crc = masked_crc(record)
        self._file.write(_LENGTH.pack(len(record)) + record)
        self.records += 1

    def close(self) -> None:
        pass


def _split(data: bytes) -> list[bytes]:
    records, at = [], 0
    while at < len(data):
        (length,) = _LENGTH.unpack_from(data, at)
        records.append(data[at + 4:at + 4 + length])
        at += 4 + length
    return records


class _Records:
    def __init__(self, records: list[bytes]):
        self._records = records

    def read(self, number: int) -> bytes:
        return self._records[number]

    def close(self) -> None:
        pass


class LengthPrefixed(tfrecorder.FileFormat):
    """A format of the test's own: each record after its 4-byte length, nothing else."""

    name, suffix, tfds_name = "length_prefixed", ".lp", "length_prefixed"

    def open_sink(self, file, *, compression, index, local_file=None):
        return _Sink(file)

    def tf_records(self, file, compression):
        import tensorflow as tf

        def records(url: bytes) -> Iterator[bytes]:
            with open(url.decode(), "rb") as f:
                yield from _split(f.read())

        return tf.data.Dataset.from_generator(records, args=(file,), output_signature=tf.TensorSpec([], tf.string))

    def read_blocks(self, opened, folder, path, compression) -> Iterator[Block]:
        yield Block(0, [], _split(opened.read()))

    def read_frames(self, opened, folder, path, compression) -> Iterator[Frame]:
        return (Frame(0, len(r), r) for r in _split(opened.read()))

    def random_access_problem(self, folder, shard):
        return None

    def open_records(self, folder, shard, split):
        with folder.fs.open(folder.join(shard.file), "rb") as f:
            return _Records(_split(f.read()))


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    from tests.conftest import image_table_at

    root = tmp_path_factory.mktemp("formats")
    table = image_table_at(root)
    ours, theirs = root / "tfrecord", root / "lp"
    tfrecorder.convert(table, str(ours), num_shards=2, progress=False)
    tfrecorder.convert(table, str(theirs), num_shards=2, file_format="length_prefixed", progress=False)
    return ours, theirs


def test_a_format_from_outside_is_written_and_read_by_every_reader(written):
    ours, theirs = written
    assert sorted(p.name for p in theirs.glob("train-*")) == ["train-00000-of-00002.lp", "train-00001-of-00002.lp"]
    assert not list(theirs.glob("*.tfindex"))
    for split in ("TRAIN", "TEST"):
        a = [r["image_uri"] for r in tfrecorder.load_dataset(str(theirs), split).as_numpy_iterator()]
        b = [r["image_uri"] for r in tfrecorder.load_dataset(str(ours), split).as_numpy_iterator()]
        assert a == b
        assert [r["image_uri"] for r in tfrecorder.data_source(str(theirs), split)] == a
    pd_theirs, pd_ours = tfrecorder.read_tfr(str(theirs)), tfrecorder.read_tfr(str(ours))
    assert pd_theirs["image_uri"].tolist() == pd_ours["image_uri"].tolist()
    assert tfrecorder.verify(str(theirs)).ok
    assert tfrecorder.info(str(theirs)).manifest.splits.keys() == tfrecorder.info(str(ours)).manifest.splits.keys()
