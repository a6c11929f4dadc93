"""Records: TFRecord framing (length, masked CRC-32C) over any binary file object.

Format: uint64 length | uint32 masked_crc(length) | data | uint32 masked_crc(data),
little-endian, as TensorFlow's ``TFRecordWriter`` writes it. Compression wraps
the whole stream (gzip with a fixed header so output is deterministic, or zlib).
"""

from __future__ import annotations

import gzip
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

import google_crc32c

from tfrecorder.errors import TFRecorderError

if google_crc32c.implementation != "c":  # pragma: no cover - depends on the wheel installed
    raise ImportError(
        "google-crc32c has no C extension on this platform; install a wheel with one "
        "(pip install --force-reinstall google-crc32c) - the pure-Python CRC is ~100x slower"
    )

COMPRESSIONS = (None, "gzip", "zlib")
SUFFIXES = {None: ".tfrecord", "gzip": ".tfrecord.gz", "zlib": ".tfrecord.zlib"}
# TensorFlow's spelling, for TFRecordDataset(compression_type=...): it reads "gzip" as no compression.
TF_COMPRESSION_TYPES = {None: "", "gzip": "GZIP", "zlib": "ZLIB"}
# ``<shard stem>.tfindex``: one "offset length" line per record, the format of the PyTorch ``tfrecord``
# package's tfrecord2idx (and NVIDIA DALI's); offsets count in the decompressed stream of gzip/zlib shards.
INDEX_SUFFIX = ".tfindex"
INDEX_LINE_MAX_BYTES = 42  # the longest "offset length\n" line: two 20-digit numbers


def index_max_bytes(records: int) -> int:
    """The most bytes the index of a shard of ``records`` records can hold (a larger one is damaged, or another
    file: it is not read)."""
    return (records + 1) * INDEX_LINE_MAX_BYTES

_MASK_DELTA = 0xA282EAD8
_LENGTH = struct.Struct("<Q")
_CRC = struct.Struct("<I")
_FLUSH_BYTES = 1 << 20
MAX_RECORD_BYTES = 2**31 - 1  # protobuf's limit on one message: no tf.train.Example is longer
_DRAIN_CHUNK = 1 << 22
_FIRST_READ, _BLOCK_READ = 1 << 16, 1 << 23  # read_blocks' first and largest reads


class ChecksumFile:
    """A file wrapper that counts the bytes written to or read from ``raw`` and their CRC-32C.

    The one checksum of whole shard files: the writer records it, resume and verify check it.
    """

    def __init__(self, raw: BinaryIO):
        self._raw = raw
        self.bytes = 0
        self._checksum = google_crc32c.Checksum()

    @property
    def crc32c(self) -> str:
        """CRC-32C of the bytes so far, as hex (dataset.json's ``crc32c``)."""
        return self._checksum.digest().hex()

    def write(self, data: bytes) -> int:
        self._raw.write(data)
        return self.count(data)

    def count(self, data: bytes) -> int:
        """Count ``data`` as written to ``raw`` by someone else (a writer that opens the file by its path)."""
        self._checksum.update(data)
        self.bytes += len(data)
        return len(data)

    def read(self, size: int = -1) -> bytes:
        data = self._raw.read(size)
        self._checksum.update(data)
        self.bytes += len(data)
        return data

    def drain(self) -> ChecksumFile:
        """Read to the end of the file (what the caller did not read still counts)."""
        while self.read(_DRAIN_CHUNK):
            pass
        return self


_ZEROS = bytes(1 << 20)


def joined_crc(first: str, second: str, second_bytes: int) -> str:
    """CRC-32C (hex, as ``ChecksumFile.crc32c``) of two byte strings one after the other, from each one's and the
    second's length, without their bytes: a CRC is linear, so crc(A + B) = crc(A extended by len(B) zero bytes)
    ^ crc(B) ^ crc(len(B) zero bytes); the zeros cost a pass at the CRC instruction's speed."""
    extended, zeros = int(first, 16), 0
    for start in range(0, second_bytes, len(_ZEROS)):
        chunk = _ZEROS[:min(len(_ZEROS), second_bytes - start)]
        extended, zeros = google_crc32c.extend(extended, chunk), google_crc32c.extend(zeros, chunk)
    return f"{extended ^ int(second, 16) ^ zeros:08x}"


def masked_crc(data: bytes) -> int:
    """CRC-32C of ``data``, masked as TFRecord stores it."""
    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def frame(record: bytes) -> bytes:
    """One record with its TFRecord header and footer."""
    length = _LENGTH.pack(len(record))
    return b"".join((length, _CRC.pack(masked_crc(length)), record, _CRC.pack(masked_crc(record))))


def check_compression(compression: str | None) -> str | None:
    """Normalise a compression name: None/""/"none" -> None, "gzip"/"GZIP" -> "gzip", "zlib"."""
    name = None if compression in (None, "", "none", "NONE") else str(compression).lower()
    if name not in COMPRESSIONS:
        raise TFRecorderError(f"compression={compression!r}: use None, 'gzip' or 'zlib'")
    return name


class _ZlibWriter:
    """A write-only file object that zlib-compresses into ``raw``."""

    def __init__(self, raw: BinaryIO):
        self._raw = raw
        self._compressor = zlib.compressobj(6)

    def write(self, data: bytes) -> int:
        self._raw.write(self._compressor.compress(data))
        return len(data)

    def close(self) -> None:
        self._raw.write(self._compressor.flush())


class RecordWriter:
    """Writes framed records to an open binary file; counts records and the bytes given to it.

    With ``index``, writes each record's ``offset length`` line there too (see INDEX_SUFFIX).
    The caller owns ``raw`` and ``index`` and closes them after ``close()``.
    """

    def __init__(self, raw: BinaryIO, compression: str | None = None, index: BinaryIO | None = None):
        self.records = 0
        self.first_crc: int | None = None  # the first record's masked CRC: a cheap identity of the shard
        self._offset = 0  # in the uncompressed stream
        self._index = index
        self._index_lines: list[str] = []
        self._raw = raw
        self._out: Any
        if compression == "gzip":
            self._out = gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0, filename="")
        elif compression == "zlib":
            self._out = _ZlibWriter(raw)
        else:
            self._out = raw
        self._compressed = compression is not None
        self._pending: list[bytes] = []
        self._pending_bytes = 0

    def write(self, record: bytes) -> None:
        length = _LENGTH.pack(len(record))
        crc = masked_crc(record)
        if self.first_crc is None:
            self.first_crc = crc
        self._pending += (length, _CRC.pack(masked_crc(length)), record, _CRC.pack(crc))
        self._pending_bytes += len(record) + 16
        if self._index is not None:
            self._index_lines.append(f"{self._offset} {len(record) + 16}\n")
        self._offset += len(record) + 16
        self.records += 1
        if self._pending_bytes >= _FLUSH_BYTES:
            self._flush()

    def _flush(self) -> None:
        if self._pending:
            self._out.write(b"".join(self._pending))  # one write per ~1 MiB, not four small ones per record
            self._pending.clear()
            self._pending_bytes = 0
        if self._index_lines and self._index is not None:
            self._index.write("".join(self._index_lines).encode("ascii"))
            self._index_lines.clear()

    def close(self) -> None:
        self._flush()
        if self._compressed:
            self._out.close()


@dataclass(frozen=True)
class Frame:
    """One record as stored: where its frame starts (in the uncompressed stream), the frame's length, the data."""

    offset: int
    length: int
    data: bytes


def read_records(raw: BinaryIO, compression: str | None = None, *, check_crc: bool = True) -> Iterator[bytes]:
    """Yield the records of a TFRecord stream, raising TFRecorderError on damage (with the record number)."""
    return (frame.data for frame in read_frames(raw, compression, check_crc=check_crc))


def read_frames(raw: BinaryIO, compression: str | None = None, *, check_crc: bool = True) -> Iterator[Frame]:
    """Yield the records of a TFRecord stream with their offsets; TFRecorderError on damage (record number)."""
    for block in read_blocks(raw, compression, check_crc=check_crc):
        for offset, data in zip(block.offsets, block.records):
            yield Frame(offset, len(data) + 16, data)


def unframe(frame: bytes, length: int) -> bytes:
    """The record in one whole frame read at an index's offset (``length``: the index's length of it), its CRCs
    checked; TFRecorderError saying what is wrong with it (the caller names the file and record)."""
    if len(frame) < 16 or len(frame) != length:
        raise TFRecorderError(f"truncated ({len(frame)} of the {length} bytes the index gives it)")
    (size,) = _LENGTH.unpack_from(frame)
    if _CRC.unpack_from(frame, 8)[0] != masked_crc(frame[:8]):
        raise TFRecorderError("length CRC mismatch (corrupt length field)")
    if size != length - 16:
        raise TFRecorderError(f"its length field says {size} bytes, its index {length - 16}")
    data = frame[12:-4]
    if _CRC.unpack_from(frame, length - 4)[0] != masked_crc(data):
        raise TFRecorderError("data CRC mismatch (corrupt payload)")
    return data


@dataclass(frozen=True)
class Block:
    """The records framed from one read of a stream: the number of the first, each frame's offset, the data."""

    first: int
    offsets: list[int]
    records: list[bytes]


def read_blocks(raw: BinaryIO, compression: str | None = None, *, check_crc: bool = True) -> Iterator[Block]:
    """The records of a TFRecord stream, a read at a time: 64 KiB first (a reader that wants one record reads
    little), doubling to 8 MiB. One loop over the buffer frames them; TFRecorderError on damage."""
    stream: BinaryIO
    if compression == "gzip":
        stream = gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[assignment]
    elif compression == "zlib":
        stream = _ZlibReader(raw)  # type: ignore[assignment]
    else:
        stream = raw
    index = base = 0  # the number of the next record, and the stream offset of ``pending``
    pending, size, needed = b"", _FIRST_READ, 0

    def read(size: int) -> bytes:
        try:
            return stream.read(size)
        except (OSError, EOFError, zlib.error) as e:  # BadGzipFile is an OSError
            if compression is None:
                raise
            raise TFRecorderError(f"record {index}: the {compression} stream is damaged ({e})") from e

    while True:
        chunk = read(max(size, needed))
        buf = pending + chunk if pending else chunk
        pos, offsets, records, needed, damage = 0, [], [], 0, None
        while len(buf) - pos >= 12:
            (length,) = _LENGTH.unpack_from(buf, pos)
            if check_crc and _CRC.unpack_from(buf, pos + 8)[0] != masked_crc(buf[pos:pos + 8]):
                damage = "length CRC mismatch (corrupt length field)"
                break
            if length > MAX_RECORD_BYTES:  # before reading on: a damaged or hostile length is not a MemoryError
                damage = (f"length {length} is over the {MAX_RECORD_BYTES}-byte limit of one tf.train.Example "
                          f"(a damaged file, or not a TFRecord file)")
                break
            end = pos + 16 + length
            if end > len(buf):
                needed = end - len(buf)  # the rest of this record, in the next read
                break
            data = buf[pos + 12:end - 4]
            if check_crc and _CRC.unpack_from(buf, end - 4)[0] != masked_crc(data):
                damage = "data CRC mismatch (corrupt payload)"
                break
            offsets.append(base + pos)
            records.append(data)
            pos = end
        if records:  # the good records before any damage are read
            yield Block(index, offsets, records)
            index += len(records)
        if damage:
            raise TFRecorderError(f"record {index}: {damage}")
        pending, base = buf[pos:], base + pos
        if not chunk:
            break
        size = min(size * 2, _BLOCK_READ)
    if len(pending) >= 12:
        (length,) = _LENGTH.unpack_from(pending)
        raise TFRecorderError(f"record {index}: truncated data ({len(pending) - 12} of {length + 4} bytes)")
    if pending:
        raise TFRecorderError(f"record {index}: truncated header ({len(pending)} of 12 bytes)")


class _ZlibReader:
    def __init__(self, raw: BinaryIO):
        self._raw = raw
        self._decompressor = zlib.decompressobj()
        self._buffer = b""

    def read(self, size: int) -> bytes:
        while len(self._buffer) < size:
            chunk = self._raw.read(1 << 16)
            if not chunk:
                self._buffer += self._decompressor.flush()
                break
            self._buffer += self._decompressor.decompress(chunk)
        out, self._buffer = self._buffer[:size], self._buffer[size:]
        return out
