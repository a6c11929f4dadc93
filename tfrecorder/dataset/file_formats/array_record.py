"""ArrayRecord shards (``file_format="array_record"``): the same serialized Examples as our TFRecord shards, in
files of Google's ``array_record`` package, which index every record for random access (what Grain and
``tfds.data_source`` read): ``ArrayRecordFormat``. ``array_record`` is imported only by the functions that read
or write them.

Its reader and writer open local paths only. A shard of a local folder is written by the writer straight into the
file the caller opened for it (its partial file), then read back once for its size and checksum; a shard of an
object store is written to a local temporary file and copied into the caller's file object (so the store gets it
like any other shard, counted and checksummed). A shard in an object store is read from a local copy.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import weakref
from collections.abc import Iterator
from typing import Any, BinaryIO

from tfrecorder.dataset.file_formats.base import FileFormat
from tfrecorder.dataset.manifest import ShardInfo
from tfrecorder.dataset.records import Block, ChecksumFile, Frame, masked_crc
from tfrecorder.dataset.storage import Folder, filesystem
from tfrecorder.errors import TFRecorderError

SUFFIX = ".array_record"  # TFDS's name for the format and its files' suffix: train-00000-of-00002.array_record
# A record per chunk: each record is read alone, never a group of them (as TFDS's own convert_format writes; a
# larger group compresses better and reads each record at the cost of its whole group). Uncompressed: the records'
# images are compressed already, and array_record's default zstd costs a fifth of the write and part of each read
# for files as large (benchmarks/bench_random_access.py).
WRITER_OPTIONS = "group_size:1,uncompressed"
READER_OPTIONS = "readahead_buffer_size:0"  # random reads: nothing read ahead (array_record's data source's)
_READ_BUFFER = 32768
_COPY_CHUNK = 1 << 20


def _module() -> Any:
    try:
        from array_record.python import array_record_module
    except ImportError as e:
        raise TFRecorderError(f"ArrayRecord shards need the array_record package ({e}): pip install "
                              f"array-record") from e
    return array_record_module


class ArrayRecordSink:
    """``RecordWriter``'s interface (``write``, ``close``, ``records``, ``first_crc``) over an ArrayRecord file.

    ``raw`` is the ``ChecksumFile`` over the shard's file. With ``local``, that file's local file object (its
    ``name`` the path it is open at), the writer writes there itself (a copy would write every byte twice),
    tells ``local`` what it wrote (``wrote_elsewhere``: a durable file sends it to the disk as it comes,
    as it does its own writes), and ``close`` counts the file's bytes into ``raw`` without writing them again;
    without, the writer writes a local temporary file whose bytes ``close`` copies into ``raw``."""

    def __init__(self, raw: ChecksumFile, local: Any = None):
        self._raw = raw
        self._dir = None if local is not None else tempfile.mkdtemp(prefix="tfrecorder-array-record-")
        self._path = local.name if local is not None else os.path.join(self._dir or "", "shard" + SUFFIX)
        # the temporary folder goes with the sink even when the shard fails before ``close``
        self._remove = weakref.finalize(self, shutil.rmtree, self._dir, True) if self._dir is not None else None
        self._wrote = getattr(local, "wrote_elsewhere", None)
        self._writer = _module().ArrayRecordWriter(self._path, WRITER_OPTIONS)
        self.records = 0
        self.first_crc: int | None = None

    def write(self, record: bytes) -> None:
        if self.first_crc is None:
            self.first_crc = masked_crc(record)
        self._writer.write(record)
        self.records += 1
        if self._wrote is not None:
            self._wrote(len(record))

    def close(self) -> None:
        try:
            self._writer.close()
            with open(self._path, "rb") as f:
                for chunk in iter(lambda: f.read(_COPY_CHUNK), b""):
                    if self._dir is None:
                        self._raw.count(chunk)
                    else:
                        self._raw.write(chunk)
        finally:
            if self._remove is not None:
                self._remove()


@contextlib.contextmanager
def local_path(fs: Any, path: str) -> Iterator[str]:
    """A local path of the file ``path`` of filesystem ``fs``: itself where it is local, else a temporary copy."""
    protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
    if protocol in ("file", "local"):
        yield path
        return
    folder = tempfile.mkdtemp(prefix="tfrecorder-array-record-")
    try:
        copy = os.path.join(folder, os.path.basename(path))
        fs.get_file(path, copy)
        yield copy
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def reader(path: str) -> Any:
    """An ``ArrayRecordReader`` of the local file ``path`` for random reads (``read([i, ...])``), or a
    TFRecorderError naming the file where it is not an ArrayRecord file."""
    try:
        return _module().ArrayRecordReader(path, options=READER_OPTIONS, file_reader_buffer_size=_READ_BUFFER)
    except (RuntimeError, ValueError, OSError) as e:
        raise TFRecorderError(f"{path}: not a readable ArrayRecord file ({e})") from e


def read_all(fs: Any, path: str, batch: int = 256) -> Iterator[bytes]:
    """Every record of the ArrayRecord file ``path`` of ``fs``, in order; a damaged one a TFRecorderError
    ``record N: why`` (the caller names the file)."""
    for block in read_blocks(fs, path, batch):
        yield from block.records


def read_blocks(fs: Any, path: str, batch: int = 256) -> Iterator[Block]:
    """The records of the ArrayRecord file ``path`` of ``fs`` ``batch`` at a time, as ``records.read_blocks``
    gives a TFRecord file's (no offsets: the file's own index finds them)."""
    with local_path(fs, path) as local:
        opened = reader(local)
        start, done = 0, False
        try:
            count = opened.num_records()
            for start in range(0, count, batch):
                records = opened.read(list(range(start, min(start + batch, count))))
                yield Block(start, [], list(records))
            done = True
        except (RuntimeError, ValueError, OSError) as e:  # riegeli's checks: a chunk's hash, its framing, its index
            raise TFRecorderError(f"record {start}: damaged ArrayRecord chunk ({e})") from e
        finally:
            # riegeli reports some damage (its footer, a block header) again, or only, as the file is closed
            try:
                opened.close()
            except (RuntimeError, ValueError, OSError) as e:
                if done:
                    raise TFRecorderError(f"record {start}: damaged ArrayRecord file ({e})") from e


class ArrayRecordFormat(FileFormat):
    """ArrayRecord files: ``train-00000-of-00002.array_record``, uncompressed, indexing their records themselves."""

    name = "array_record"
    suffix = SUFFIX
    tfds_name = "array_record"

    def check_compression(self, compression: str | None) -> None:
        if compression is not None:
            raise TFRecorderError(f"compression={compression!r} compresses TFRecord shards; "
                                  f"file_format='array_record' writes ArrayRecord files, read a record at a time: "
                                  f"give one or the other")

    def open_sink(self, file: ChecksumFile, *, compression: str | None, index: ChecksumFile,
                  local_file: Any = None) -> ArrayRecordSink:
        return ArrayRecordSink(file, local_file)

    def tf_records(self, file: Any, compression: str | None) -> Any:
        import tensorflow as tf

        # array_record's own reader (no TensorFlow op reads ArrayRecord files), in order
        return tf.data.Dataset.from_generator(_records_at, args=(file,), output_signature=tf.TensorSpec([], tf.string))

    def read_blocks(self, opened: BinaryIO, folder: Folder, path: str, compression: str | None) -> Iterator[Block]:
        return read_blocks(folder.fs, path)

    def read_frames(self, opened: BinaryIO, folder: Folder, path: str, compression: str | None) -> Iterator[Frame]:
        return (Frame(0, len(data), data) for data in read_all(folder.fs, path))  # no offsets: the file indexes them

    def first_record(self, folder: Folder, path: str, compression: str | None) -> bytes | None:
        return next(read_all(folder.fs, path, batch=1), None)

    def random_access_problem(self, folder: Folder, shard: ShardInfo) -> str | None:
        if folder.is_local:
            return None
        return (f"{folder.url} holds ArrayRecord shards, which array_record's reader opens from local disk only: "
                f"copy the folder to a local disk, or convert with file_format='tfrecord' (data_source reads those "
                f"from object stores by ranges)")

    def open_records(self, folder: Folder, shard: ShardInfo, split: str) -> _Records:
        return _Records(reader(folder.join(shard.file)))


class _Records:
    """An ArrayRecord shard's records by number, by array_record's reader (the file indexes its records)."""

    def __init__(self, opened: Any):
        self._reader = opened

    def read(self, number: int) -> bytes:
        try:
            return self._reader.read([number])[0]
        except (RuntimeError, ValueError, OSError) as e:  # riegeli's checks: a chunk's hash, its framing
            raise TFRecorderError(f"damaged ArrayRecord chunk ({e})") from None

    def close(self) -> None:
        """Nothing: the reader is closed as it is collected (riegeli may raise on close; no reader's error)."""


def _records_at(url: bytes) -> Iterator[bytes]:
    """The records of the ArrayRecord shard at ``url``, in order (``Dataset.from_generator``'s generator); a
    damaged one names the shard (TensorFlow raises it as its own error, with this message)."""
    fs, path = filesystem(url.decode("utf-8"))
    try:
        yield from read_all(fs, path)
    except TFRecorderError as e:
        raise TFRecorderError(f"{url.decode('utf-8')}: {e}; `tfrecorder verify` checks every shard") from None
