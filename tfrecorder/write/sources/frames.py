"""Tables held in memory: a DataFrame (or an image folder's listing) converted a part at a time
(``FrameSource``), and a DataFrame staged as Parquet parts for a pipeline to read (``frame_as_arrow``,
``frame_parts``)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pandas as pd

from tfrecorder.errors import SchemaError
from tfrecorder.schema import IMAGE_BYTES_COLUMN, LABEL_COLUMN, holds_images, image_value_kind, is_image_bytes
from tfrecorder.write.sources.embedded import held_bytes_per_row, image_struct_array, part_rows
from tfrecorder.write.sources.folders import skipped_note

BaseDir = str | list[str | None] | None  # one folder for the table, or one per row (a table of several files)


@dataclass(frozen=True)
class FrameSource:
    """A table held in memory - a DataFrame, an image folder's listing, a file the part-wise read cannot take -
    converted a part at a time as ``TableFiles`` are (``parts``): its schema judged on the whole frame."""

    frame: pd.DataFrame
    base_dir: BaseDir = None
    url: str = "the DataFrame"
    files: tuple[str, ...] = ()
    parquet: bool = False
    skipped: tuple[str, ...] = ()  # an image folder's files that are not rows, each "<path> (why)"
    label_names: tuple[str, ...] | None = None  # the class names its format fixes (Annotations.label_names)

    @property
    def warnings(self) -> tuple[str, ...]:
        """What the result says of how the table was read: an image folder's files that are not rows."""
        return (skipped_note(self.url, self.skipped),) if self.skipped else ()

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(str(c) for c in self.frame.columns)

    @property
    def rows(self) -> int:
        return len(self.frame)

    @property
    def bytes(self) -> int:
        """The frame's size in memory (object columns by their pointers, the images it holds by their bytes):
        what its spill is sized by."""
        return int(self.frame.memory_usage(index=False, deep=False).sum()) + self._held_bytes * len(self.frame)

    @property
    def _held_bytes(self) -> int:
        return held_bytes_per_row(self.frame)

    @property
    def vocabulary(self) -> tuple[str, ...] | None:
        return frame_vocabulary(self.frame, self.label_names)

    @property
    def plain_images(self) -> tuple[str, ...]:
        return image_bytes_columns(self.frame)

    def schema_frame(self, first: pd.DataFrame | None) -> pd.DataFrame:
        """What the schema is inferred from and checked against: the whole frame."""
        return self.frame

    def parts(self, rows: int) -> Iterator[tuple[pd.DataFrame, BaseDir, int]]:
        """(part of at most ``rows`` rows, the folder(s) its relative image paths are relative to, its first
        row's number), in order; fewer rows a part when the frame holds its images (``part_rows``)."""
        rows = part_rows(rows, self._held_bytes)
        for start in range(0, len(self.frame), rows):
            base_dir = self.base_dir
            if isinstance(base_dir, list):
                base_dir = base_dir[start:start + rows]
            yield self.frame.iloc[start:start + rows], base_dir, start


def image_bytes_columns(df: pd.DataFrame) -> tuple[str, ...]:
    """The columns other than ``image`` whose first value is an encoded image's bytes: stored as plain bytes,
    since bytes are told as images under that name only (``schema.holds_images``)."""
    found = []
    for name in df.columns:
        if name == IMAGE_BYTES_COLUMN or df[name].dtype != object:
            continue
        index = df[name].first_valid_index()
        value = df[name][index] if index is not None else None
        if isinstance(value, (bytes, bytearray)) and is_image_bytes(value):
            found.append(str(name))
    return tuple(found)


def frame_vocabulary(df: pd.DataFrame, names: tuple[str, ...] | None) -> tuple[str, ...] | None:
    """``names``, the class names the table's format fixes in id order (``Annotations.label_names``: a YOLO
    dataset's), where every label is one of them: label ids are their positions, and a class no row has keeps
    its id."""
    if not names or LABEL_COLUMN not in df:
        return None
    labels = df[LABEL_COLUMN].dropna().unique()
    return tuple(names) if {str(v).strip() for v in labels} <= {n.strip() for n in names} else None


def text_columns(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with every column name as text (``5`` -> ``"5"``), as schemas and stored features name them; two
    names that are one text (``5`` and ``"5"``) are a SchemaError. A frame named by text already is ``df``."""
    if all(isinstance(c, str) for c in df.columns):
        return df
    names = [str(c) for c in df.columns]
    twice = next((n for n in names if names.count(n) > 1), None)
    if twice is not None:
        given = [c for c in df.columns if str(c) == twice]
        raise SchemaError(f"columns {', '.join(map(repr, given))} have the same name as text ({twice!r}), "
                          f"which features are named by: rename one of them")
    return df.set_axis(names, axis=1)


def frame_as_arrow(df: pd.DataFrame, images: tuple[str, ...] = ()) -> Any:
    """``df``'s values as a pyarrow Table, to stage as Parquet for a pipeline that reads it back as it reads any
    Parquet source (``TableFiles``: the same values, dtypes and row numbers); when Parquet would not give them
    back as they are, what it could not hold (a str): column names that are not distinct strings, or an
    object column whose values are of several kinds (str beside bytes, int beside float: Arrow would make
    them one). A column of images (``images``, or one ``holds_images`` tells) holding structs, arrays or PIL
    images is staged as Hugging Face's ``struct<bytes, path>``, arrays and PIL images encoded as PNG."""
    import pyarrow as pa

    names = list(df.columns)
    odd = [name for name in names if not isinstance(name, str)]
    if odd:
        return f"column names must be strings, not {', '.join(repr(n) for n in odd[:3])}"
    if len(set(names)) != len(names):
        return f"column names must be distinct: {sorted({n for n in names if names.count(n) > 1})}"
    held = [name for name in names if _staged_as_struct(name, df[name], images)]
    for name in names:
        if name not in held and df[name].dtype == object and (kinds := _kinds(df[name])) is not None:
            return f"column {name!r} holds {kinds} values"
    try:
        structs = {name: image_struct_array(df[name].tolist()) for name in held}
    except ValueError as e:
        return f"column {held[0]!r}: {e}" if len(held) == 1 else str(e)
    try:
        arrow = pa.Table.from_pandas(df.drop(columns=held), preserve_index=False) if held else \
            pa.Table.from_pandas(df, preserve_index=False)
    except (pa.ArrowException, TypeError, ValueError) as e:
        return str(e)
    for name in held:  # back in its place among the columns
        arrow = arrow.add_column(names.index(name), name, structs[name])
    return arrow


def _staged_as_struct(name: str, column: pd.Series, images: tuple[str, ...]) -> bool:
    """An object column of images (named in ``images``, or told by ``holds_images``) that holds more than bytes:
    Parquet holds it as a struct of bytes and path."""
    if column.dtype != object or not (name in images or holds_images(name, column)):
        return False
    return any(image_value_kind(v) not in (None, "bytes") for v in column.tolist())


_ONE_KIND = {"string", "bytes", "integer", "floating", "boolean", "empty"}  # pandas' infer_dtype names


def _kinds(column: pd.Series) -> str | None:
    """None when an object column's values (or, for a column of lists, their items) are all of one kind; else
    the kinds it mixes (pandas' infer_dtype names, "mixed-integer-float")."""
    kind = pd.api.types.infer_dtype(column, skipna=True)
    given = column.dropna()
    if kind == "mixed" and all(isinstance(v, dict) for v in given) and len({tuple(v) for v in given}) == 1:
        return None  # structs of one set of fields (a kind's staged values): Arrow's struct
    if kind == "mixed" and all(isinstance(v, (list, tuple)) or getattr(v, "ndim", 0) == 1 for v in given):
        kind = pd.api.types.infer_dtype(given.explode(), skipna=True)
    return None if kind in _ONE_KIND else kind


def frame_parts(table: Any, rows: int) -> Iterator[Any]:
    """The Parquet bytes (a pyarrow Buffer) of each part of ``rows`` rows of the Arrow ``table``, in order: the
    same bytes for the same values, which a run's identity relies on."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    for start in range(0, max(table.num_rows, 1), rows):
        sink = pa.BufferOutputStream()
        pq.write_table(table.slice(start, rows), sink)
        yield sink.getvalue()
