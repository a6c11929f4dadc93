"""File formats (on-disk contract): ``FileFormat``, the one interface a shard file's format implements - its
writer (sink), tf.data source, numpy block reader, random access and index - and the registry of formats by name,
filled as each subclass is defined (TFDS's ``core/file_adapters.py``)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, BinaryIO, ClassVar, Protocol

from tfrecorder.dataset.manifest import ShardInfo
from tfrecorder.dataset.records import Block, ChecksumFile, Frame
from tfrecorder.dataset.storage import Folder
from tfrecorder.errors import TFRecorderError


class RecordSink(Protocol):
    """What the shard writer writes records into: ``write`` each, then ``close``; it counts them."""

    records: int
    first_crc: int | None  # the first record's masked CRC (None: no record yet)

    def write(self, record: bytes) -> None: ...

    def close(self) -> None: ...


class ShardRecords(Protocol):
    """One shard's records by number, for random access (``data_source``)."""

    def read(self, number: int) -> bytes:
        """Record ``number``, or a TFRecorderError saying what is damaged (the caller names the shard)."""
        ...

    def close(self) -> None: ...


DEFAULT_FILE_FORMAT = "tfrecord"  # convert's default; a shard file no format claims is read as one (others' files)
_FORMATS: dict[str, FileFormat] = {}  # by name, in the order they were defined


class FileFormat:
    """The format of a dataset's shard files: a subclass defines one, and defining it registers it by ``name``
    (``convert(file_format=name)``); readers find a shard's format by its file's name (``suffixes``).

    A subclass sets ``name``, ``suffix`` and ``tfds_name`` and implements the methods that raise
    NotImplementedError here. It may be defined outside the package: defining the class is registering it.

    Examples:
        >>> class Lines(tfrecorder.FileFormat):  # doctest: +SKIP
        ...     name, suffix, tfds_name = "lines", ".lines", "lines"
    """

    name: ClassVar[str]  # convert's file_format= value
    suffix: ClassVar[str]  # the shard files' suffix when uncompressed: train-00000-of-00002{suffix}
    tfds_name: ClassVar[str]  # dataset_info.json's fileFormat for TFDS's readers
    side_index: ClassVar[bool] = False  # whether each shard has a .tfindex beside it (else it indexes itself)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "name" in cls.__dict__:  # a format, not an abstract step between
            _FORMATS[cls.name] = cls()

    def __repr__(self) -> str:
        return f"FileFormat({self.name!r})"

    def suffixes(self) -> tuple[str, ...]:
        """Every suffix its shard files end with (compressed ones too)."""
        return (self.suffix,)

    def file_suffix(self, compression: str | None) -> str:
        """The suffix of a shard file written with ``compression``."""
        return self.suffix

    def check_compression(self, compression: str | None) -> None:
        """A TFRecorderError naming both keywords where the format cannot be written with ``compression``."""

    def joinable(self, compression: str | None) -> bool:
        """Whether a shard's segments, written apart and concatenated in order, are the file one writer would
        write (the local runner then splits large shards among its writers)."""
        return False

    def open_sink(self, file: ChecksumFile, *, compression: str | None, index: ChecksumFile,
                  local_file: Any = None) -> RecordSink:
        """The record writer of a shard.

        Args:
            file: the shard's file, counted and checksummed.
            compression: convert's compression (checked by ``check_compression``).
            index: the .tfindex's file when ``side_index``, else a ChecksumFile over None.
            local_file: the shard's local file object, where the folder is local (its ``name`` its path).

        Returns:
            A RecordSink; the caller closes ``file`` and ``index`` after closing it.
        """
        raise NotImplementedError(f"file format {self.name!r} writes no shards")

    def tf_records(self, file: Any, compression: str | None) -> Any:
        """The serialized records of the shard at URL ``file`` (a string tensor), in order, as tf.data reads them."""
        raise NotImplementedError(f"file format {self.name!r} has no tf.data reader")

    def read_blocks(self, opened: BinaryIO, folder: Folder, path: str, compression: str | None) -> Iterator[Block]:
        """The records of the shard at ``path`` of ``folder`` in blocks (``read_tfr``); ``opened``: the file, open.
        A damaged record is a TFRecorderError ``record N: why`` (the caller names the file)."""
        raise NotImplementedError(f"file format {self.name!r} has no block reader")

    def read_frames(self, opened: BinaryIO, folder: Folder, path: str, compression: str | None) -> Iterator[Frame]:
        """Every record of the shard as stored (``verify``): ``opened`` is the file, checksummed as it is read (a
        format that reads ``path`` otherwise leaves ``opened`` to be drained after)."""
        raise NotImplementedError(f"file format {self.name!r} has no frame reader")

    def first_record(self, folder: Folder, path: str, compression: str | None) -> bytes | None:
        """The first record of the shard at ``path``, None if it has none (its CRC names the shard cheaply)."""
        with folder.fs.open(path, "rb") as opened:
            return next((record for block in self.read_blocks(opened, folder, path, compression)
                         for record in block.records), None)

    def random_access_problem(self, folder: Folder, shard: ShardInfo) -> str | None:
        """Why ``data_source`` cannot read ``shard`` of ``folder`` record by record (one line naming the file and
        what to do), or None."""
        return f"{folder.url_of(shard.file)}: file format {self.name!r} has no random access"

    def open_records(self, folder: Folder, shard: ShardInfo, split: str) -> ShardRecords:
        """``shard``'s records by number (``data_source``), its index read and checked (the caller has checked
        the shard itself against dataset.json)."""
        raise NotImplementedError(f"file format {self.name!r} has no random access")


def format_named(name: str) -> FileFormat:
    """The registered format ``name`` (convert's ``file_format=``), or a TFRecorderError listing them."""
    return _FORMATS[checked_format_name(name)]


def format_names() -> tuple[str, ...]:
    """Every registered format's name, the default (TFRecord) first, then in the order they were defined."""
    return tuple(sorted(_FORMATS, key=lambda name: name != DEFAULT_FILE_FORMAT))


def checked_format_name(name: Any) -> str:
    """``name`` where it names a registered format (``Options``' check), else a TFRecorderError listing them."""
    if not isinstance(name, str) or name not in _FORMATS:
        raise TFRecorderError(f"file_format={name!r}: use one of {', '.join(map(repr, format_names()))}")
    return name


def format_of_file(filename: str) -> FileFormat:
    """The format of the shard file ``filename``, by its suffix; the default (TFRecord) for a name no format
    claims (others' TFRecord files are named anything)."""
    for name, file_format in _FORMATS.items():
        if name != DEFAULT_FILE_FORMAT and filename.endswith(file_format.suffixes()):
            return file_format
    return _FORMATS[DEFAULT_FILE_FORMAT]


def format_of_files(filenames: Sequence[str]) -> FileFormat:
    """The format every one of ``filenames`` has; the default (TFRecord) for none, or for files of mixed ones."""
    found = {format_of_file(name).name for name in filenames}
    return _FORMATS[found.pop() if len(found) == 1 else DEFAULT_FILE_FORMAT]
