"""TFRecord shards (``file_format="tfrecord"``, the default): framed records (``dataset/records``), gzip or zlib
compressed or not, each shard with a ``.tfindex`` of its records' offsets beside it (what ``data_source`` reads them
by)."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from typing import Any, BinaryIO

import numpy as np

from tfrecorder.dataset.file_formats.base import DEFAULT_FILE_FORMAT, FileFormat
from tfrecorder.dataset.manifest import ShardInfo, records_problem
from tfrecorder.dataset.records import (
    SUFFIXES,
    TF_COMPRESSION_TYPES,
    Block,
    ChecksumFile,
    Frame,
    RecordWriter,
    index_max_bytes,
    read_blocks,
    read_frames,
    read_records,
    unframe,
)
from tfrecorder.dataset.storage import Folder
from tfrecorder.errors import TFRecorderError


class TFRecordFormat(FileFormat):
    """TFRecord files: ``train-00000-of-00002.tfrecord`` (``.tfrecord.gz``, ``.tfrecord.zlib`` compressed)."""

    name = DEFAULT_FILE_FORMAT
    suffix = SUFFIXES[None]
    tfds_name = "tfrecord"
    side_index = True

    def suffixes(self) -> tuple[str, ...]:
        return tuple(SUFFIXES.values())

    def file_suffix(self, compression: str | None) -> str:
        return SUFFIXES[compression]

    def joinable(self, compression: str | None) -> bool:
        return compression is None  # records are self-delimiting; a gzip stream cannot be joined byte for byte

    def open_sink(self, file: ChecksumFile, *, compression: str | None, index: ChecksumFile,
                  local_file: Any = None) -> RecordWriter:
        return RecordWriter(file, compression, index)  # type: ignore[arg-type]

    def tf_records(self, file: Any, compression: str | None) -> Any:
        import tensorflow as tf

        return tf.data.TFRecordDataset(file, compression_type=TF_COMPRESSION_TYPES.get(compression, ""))

    def read_blocks(self, opened: BinaryIO, folder: Folder, path: str, compression: str | None) -> Iterator[Block]:
        return read_blocks(opened, compression)

    def read_frames(self, opened: BinaryIO, folder: Folder, path: str, compression: str | None) -> Iterator[Frame]:
        return read_frames(opened, compression)

    def first_record(self, folder: Folder, path: str, compression: str | None) -> bytes | None:
        with folder.fs.open(path, "rb") as f:
            return next(iter(read_records(f, compression, check_crc=False)), None)

    def random_access_problem(self, folder: Folder, shard: ShardInfo) -> str | None:
        if shard.index is not None:
            return None
        return (f"{folder.url_of(shard.file)} has no .tfindex beside it: data_source finds records by their "
                f"offsets in it (tfrecorder writes one beside each shard); convert with tfrecorder, or read it with "
                f"load_dataset")

    def open_records(self, folder: Folder, shard: ShardInfo, split: str) -> IndexedRecords:
        return IndexedRecords(folder, shard.file, read_offsets(folder, shard, split))


def read_offsets(folder: Folder, shard: ShardInfo, split: str) -> np.ndarray:
    """The ``offset length`` rows of ``shard``'s .tfindex, each checked to frame the record it stands for."""
    try:
        with folder.open_side(str(shard.index), index_max_bytes(shard.records)) as f:
            text = f.read()
    except FileNotFoundError:
        raise TFRecorderError(f"{folder.url_of(str(shard.index))} is missing: data_source finds records by "
                              f"their shard's index; `tfrecorder verify {folder.url}` checks the "
                              f"dataset") from None
    where = folder.url_of(str(shard.index))
    try:
        values = np.array(text.split(), dtype=np.int64)
    except (ValueError, OverflowError):
        values = np.zeros(1, np.int64)  # an odd count: refused below
    if len(values) % 2:
        raise TFRecorderError(f"{where}: its lines are not 'offset length' whole numbers: the index is damaged; "
                              f"`tfrecorder verify {folder.url}` checks the dataset")
    rows = values.reshape(-1, 2)
    if len(rows) != shard.records:
        raise TFRecorderError(f"{where}: {records_problem(split, shard, len(rows))}"
                              f" (lines of its index): `tfrecorder verify {folder.url}` checks the dataset")
    # each record starts where the one before ends, the first at 0, the last ends the shard's bytes; each is
    # a frame of 16 bytes at least: an index that says otherwise would read the wrong bytes, or too many
    ends = rows[:, 0] + rows[:, 1]
    starts = np.concatenate([[0], ends[:-1]])
    wrong = np.flatnonzero((rows[:, 0] != starts) | (rows[:, 1] < 16))
    if len(wrong) or (len(rows) and ends[-1] != shard.bytes):
        line = int(wrong[0]) + 1 if len(wrong) else len(rows)
        raise TFRecorderError(f"{where}: line {line} does not give record {line - 1}'s place in "
                              f"{shard.file} (each record starts where the one before ends): the index is "
                              f"damaged; `tfrecorder verify {folder.url}` checks the dataset")
    return rows


class IndexedRecords:
    """A TFRecord shard's records by number: a ranged read at the offset its index gives, the frame's CRCs checked.
    A local file is read by ``os.pread`` (reads at offsets share no file position: thread-safe)."""

    def __init__(self, folder: Folder, name: str, offsets: np.ndarray):
        self._folder, self._name, self._offsets = folder, name, offsets
        self._fd: int | None = None
        self._lock = threading.Lock()

    def read(self, number: int) -> bytes:
        offset, length = int(self._offsets[number, 0]), int(self._offsets[number, 1])
        return unframe(self._read(offset, length), length)

    def _read(self, offset: int, length: int) -> bytes:
        folder, name = self._folder, self._name
        if not (folder.is_local and hasattr(os, "pread")):
            path = name if "://" in name else folder.join(name)
            return folder.fs.cat_file(path, start=offset, end=offset + length)
        fd = self._fd
        if fd is None:
            with self._lock:
                fd = self._fd
                if fd is None:
                    fd = self._fd = os.open(folder.join(name) if not name.startswith("/") else name, os.O_RDONLY)
        return os.pread(fd, length, offset)

    def close(self) -> None:
        if self._fd is not None:
            try:
                os.close(self._fd)
            except OSError:
                pass
            self._fd = None
