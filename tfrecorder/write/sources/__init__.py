"""Sources (IO edge): every input a conversion takes, as one of two kinds of ``Source`` that yield typed parts.

- ``TableFiles`` (``files``): CSV or Parquet files - one path or URL, or a glob - read a part at a time; CSV
  text is typed as the whole table's text allows (``csv_text``).
- ``FrameSource`` (``frames``): a table held in memory - a DataFrame, or an image folder's listing
  (``folders``) - converted a part at a time as ``TableFiles`` are.

``table_source`` picks the kind; ``summary_pass`` summarizes whichever it gets, part by part.

A Beam runner's pipeline reads files only (``BeamInput``): the user's ``MatchedFiles``, a DataFrame's or a
pipeline's rows as ``StagedRows``, an image folder as the ``ListedFolder`` its workers list into Parquet parts.
Each becomes ``TableFiles`` once its files are known; what its result says of how it was read is found by the
submitting process (``notes``).
"""

from __future__ import annotations

import os
from typing import Any

import pandas as pd

from tfrecorder.dataset.storage import filesystem
from tfrecorder.errors import TFRecorderError
from tfrecorder.write.sources.embedded import PART_BYTES, part_rows
from tfrecorder.write.sources.files import (
    GLOB_CHARACTERS,
    KEEP_BYTES,
    BeamInput,
    FileFacts,
    ListedFolder,
    MatchedFiles,
    StagedRows,
    TableFiles,
    file_facts,
    glob_urls,
    match_table_files,
    parquet_schema,
    table_files,
)
from tfrecorder.write.sources.folders import (
    IMAGE_EXTENSIONS,
    LabelFolder,
    create_image_csv,
    folder_rows,
    image_folder_table,
    image_folder_url,
    label_folders,
    listing_frame,
    no_images,
    skipped_files,
    skipped_note,
)
from tfrecorder.write.sources.frames import (
    BaseDir,
    FrameSource,
    frame_as_arrow,
    frame_parts,
    frame_vocabulary,
    image_bytes_columns,
    text_columns,
)
from tfrecorder.write.sources.hugging_face import DatasetSource, dataset_source, is_hugging_face
from tfrecorder.write.sources.read_notes import ReadNotes, beam_notes, left_out_note, plain_images_note

Source = TableFiles | FrameSource | DatasetSource

__all__ = ["IMAGE_EXTENSIONS", "BaseDir", "BeamInput", "beam_notes", "DatasetSource", "is_hugging_face",
           "left_out_note", "plain_images_note", "ReadNotes",
           "create_image_csv", "file_facts", "FileFacts", "folder_rows",
           "frame_as_arrow", "frame_parts", "frame_vocabulary", "FrameSource", "image_bytes_columns",
           "image_folder_table", "image_folder_url", "label_folders",
           "LabelFolder", "ListedFolder", "listing_frame", "match_table_files", "MatchedFiles", "no_images",
           "parquet_schema", "PART_BYTES", "part_rows",
           "skipped_files", "skipped_note", "Source", "StagedRows", "table_source", "TableFiles", "text_columns",
           "unreadable", "table_files"]


def table_source(source: Any, rows: int, label_names: tuple[str, ...] | None = None) -> Source:
    """``source`` as the parts the conversion reads: CSV or Parquet files (a path, URL or glob) part-wise,
    each CSV read once in parts of ``rows`` rows to type its columns (``file_facts``); a DataFrame, or an
    image folder's listing, held whole (a DataFrame's ``label_names``: the class names its annotation format
    fixes); a Hugging Face Dataset or DatasetDict in Arrow batches. A source that cannot be read is a
    TFRecorderError saying why."""
    if isinstance(source, pd.DataFrame):
        return FrameSource(text_columns(source), label_names=label_names)
    if is_hugging_face(source):
        return dataset_source(source)
    url = image_folder_url(source)
    if url is not None:
        return FrameSource(image_folder_table(url), url=url, skipped=skipped_files(url))
    files = match_table_files(source)
    if files is None:
        raise unreadable(source)
    keep = files.bytes <= KEEP_BYTES
    return table_files(files, [file_facts(url, files.parquet, rows, keep) for url in files.files])


def unreadable(source: Any) -> TFRecorderError:
    """Why ``source`` is none of a DataFrame, an image folder, or CSV or Parquet files of one kind."""
    if not isinstance(source, (str, os.PathLike)):
        return TFRecorderError(
            f"source={type(source).__name__}: give a pandas DataFrame, a CSV or Parquet path/URL (or a glob of "
            f"them), an image folder or a Hugging Face Dataset")
    url = os.fspath(source)
    fs, path = filesystem(url)
    if not any(c in path for c in GLOB_CHARACTERS):
        return TFRecorderError(f"source {url!r} does not exist")
    if not glob_urls(url, fs, path):
        return TFRecorderError(f"source {url!r} matches no file")
    return TFRecorderError(f"source {url!r} matches both CSV and Parquet files: give a glob of one kind")
