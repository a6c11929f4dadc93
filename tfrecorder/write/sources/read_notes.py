"""How a source was read, as its result says it: a CSV's separator, an image folder's files that are not rows, the
columns a given schema leaves out. Found by the process that submits a Beam pipeline (``beam_notes``), which
lists and sniffs the source but never reads the table, as the local runner's sources say it (``.warnings``,
``.skipped``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tfrecorder.dataset.storage import open_url
from tfrecorder.write.sources.csv_text import csv_layout, csv_separator, separator_note
from tfrecorder.write.sources.files import BeamInput, ListedFolder, StagedRows, parquet_schema
from tfrecorder.write.sources.folders import skipped_files, skipped_note

SNIFFED_FILES = 20  # a glob's CSV files whose separator the submitting process reads to say it in the result


@dataclass(frozen=True)
class ReadNotes:
    """What a result says of how its source was read: warnings, an image folder's files that are not rows
    (each ``"<path in it> (why)"``) and the table's columns (None: not known without reading it)."""

    warnings: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()
    columns: tuple[str, ...] | None = None
    plain_images: tuple[str, ...] = ()  # a DataFrame's columns of image bytes under another name than image


def beam_notes(files: BeamInput, columns: Iterable[Any] | None = None) -> ReadNotes:
    """What a Beam runner's result says of how ``files`` were read, found here, by listing and sniffing: each
    CSV read with another separator than a comma (its first line; the first SNIFFED_FILES of a glob), an image
    folder's files that are not rows, and the table's columns (a CSV's header, a Parquet file's footer;
    ``columns``: a DataFrame's)."""
    if isinstance(files, ListedFolder):
        skipped = skipped_files(files.url)
        return ReadNotes((skipped_note(files.url, skipped),) if skipped else (), skipped)
    if isinstance(files, StagedRows) or files.parquet:
        names = columns if columns is not None else parquet_schema(files.files).names if files.files else None
        return ReadNotes(columns=None if names is None else tuple(str(c) for c in names))
    warnings, header = [], None
    # A glob's parts are one export, written alike: a sample is sniffed here (one round trip each), not
    # thousands of them before a job starts; the pipeline's workers sniff every file they read.
    for index, url in enumerate(files.files[:SNIFFED_FILES]):
        with open_url(url) as f:
            sep = csv_separator(f, url)
            layout = csv_layout(f, sep) if index == 0 else None
        if sep != ",":
            warnings.append(separator_note(url, sep))
        if layout is not None and layout[0] is None:  # a header: its names
            header = tuple(str(c).strip() for c in layout[1])
    return ReadNotes(tuple(warnings), columns=header)


def plain_images_note(columns: Iterable[str], schema: Mapping[str, Any] | None) -> str | None:
    """The warning for columns of encoded images under another name than ``image`` that ``schema`` does not
    type as ImageBytes: stored as plain bytes, neither checked nor decoded, which the user rarely means."""
    from tfrecorder.types import ImageBytes

    plain = [c for c in columns if schema is None or schema.get(c) is not ImageBytes]
    if not plain:
        return None
    return (f"column {', '.join(map(repr, plain))} holds encoded images, stored as plain bytes (bytes are images "
            f"under the name 'image' only): rename it 'image', or type it tfrecorder.types.ImageBytes in schema=, "
            f"to have them checked and decoded")


def left_out_note(columns: Iterable[str] | None, schema: Mapping[str, Any] | None) -> str | None:
    """The warning for a given ``schema`` that names some of the table's ``columns``: the others are not
    written (TFRecorder 2.0's rule: a schema lists what is converted), and how to keep them."""
    if schema is None or columns is None:
        return None
    left = [c for c in columns if c not in schema]
    if not left:
        return None
    shown = ", ".join(map(repr, left[:8])) + (", ..." if len(left) > 8 else "")
    return (f"schema= names {len(schema)} of the table's columns; the {len(left)} others are not written: {shown}. "
            f"Name them in schema= to keep them (or give no schema: every column is inferred)")
