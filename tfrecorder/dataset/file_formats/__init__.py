"""File formats (on-disk contract): the shard files' formats, one adapter each - TFRecord (the default) and
ArrayRecord - registered by name as they are defined (``base.FileFormat``)."""

from __future__ import annotations

from tfrecorder.dataset.file_formats.array_record import ArrayRecordFormat
from tfrecorder.dataset.file_formats.base import (
    DEFAULT_FILE_FORMAT,
    FileFormat,
    RecordSink,
    ShardRecords,
    checked_format_name,
    format_named,
    format_names,
    format_of_file,
    format_of_files,
)
from tfrecorder.dataset.file_formats.tfrecord import TFRecordFormat

__all__ = ["DEFAULT_FILE_FORMAT", "ArrayRecordFormat", "FileFormat", "RecordSink", "ShardRecords", "TFRecordFormat",
           "checked_format_name", "format_named", "format_names", "format_of_file", "format_of_files"]
