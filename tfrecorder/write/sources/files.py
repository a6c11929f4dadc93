"""CSV and Parquet files (one path or URL, or a glob of them) as a table read a part at a time: found without
reading them (``MatchedFiles``), read once for their rows and their columns' kinds (``FileFacts``), then read
in parts, each typed as the whole table is (``TableFiles``)."""

from __future__ import annotations

import contextlib
import csv
import os
import posixpath
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pandas as pd

from tfrecorder.dataset.storage import filesystem, open_url
from tfrecorder.errors import SchemaError, TFRecorderError
from tfrecorder.schema import LABEL_COLUMN, SPLIT_COLUMN, hf_features, is_image_struct
from tfrecorder.write.sources.class_labels import (
    chosen,
    ids_note,
    named,
    named_schema,
    parquet_class_labels,
    union,
)
from tfrecorder.write.sources.csv_text import (
    SPARE_COLUMNS,
    as_kind,
    check_header,
    checked_layout,
    csv_layout,
    csv_options,
    csv_separator,
    headerless_names,
    judge,
    merge_kinds,
    merge_labels,
    name_headerless,
    separator_note,
)
from tfrecorder.write.sources.embedded import image_structs, part_rows
from tfrecorder.write.sources.folders import YAML_EXTENSIONS, file_url, not_read_yet
from tfrecorder.write.sources.long_form import file_folder
from tfrecorder.write.splits import NAMED_SPLITS

PARQUET_EXTENSIONS = (".parquet", ".pq")
_PARQUET_MAGIC = b"PAR1"
GLOB_CHARACTERS = "*?["


def parquet_schema(files: Sequence[str]) -> Any:
    """The pyarrow schema of the first of these Parquet files: what its columns hold, whatever the values of any
    part of it (``Schema.infer``'s ``arrow``)."""
    import pyarrow.parquet as pq

    with open_url(files[0]) as f:
        return pq.read_schema(f)


def is_parquet(url: str) -> bool:
    if url.lower().endswith(PARQUET_EXTENSIONS):
        return True
    with open_url(url) as f:
        return f.read(4) == _PARQUET_MAGIC


def glob_urls(url: str, fs: Any, path: str) -> list[str]:
    """The files the glob ``url`` (``path`` on ``fs``) matches, sorted, named as ``url`` names them."""
    return [file_url(url, fs, p) for p in sorted(p for p in fs.glob(path) if not fs.isdir(p))]


def _columns_differ(url: str, other: str, columns: list[str], first: str, first_columns: list[str]) -> SchemaError:
    return SchemaError(f"source {url!r}: {other!r} has columns {columns}, but {first!r} has {first_columns}; "
                       f"every file of a glob needs the same columns")


_NULLABLE_TYPES = None  # pyarrow type -> pandas nullable dtype, as pd.read_parquet(dtype_backend="numpy_nullable")


@dataclass(frozen=True)
class MatchedFiles:
    """The CSV or Parquet files a source names (one path or URL, or a glob), found without reading them. Relative
    image paths in them are relative to each file's folder."""

    url: str
    files: tuple[str, ...]
    parquet: bool
    bytes: int
    paths_as_given: ClassVar[bool] = False


@dataclass(frozen=True)
class StagedRows(MatchedFiles):
    """The Parquet parts (``frames.frame_parts``) a DataFrame, or a pipeline's rows, are staged as under the
    folder ``url`` for a Beam runner, which reads them as it reads any Parquet source: named once written.
    Relative image paths stay as given, as the DataFrame's do."""

    files: tuple[str, ...] = ()
    parquet: bool = True
    bytes: int = 0
    paths_as_given: ClassVar[bool] = True
    names: tuple[str, ...] | None = None  # the class names the DataFrame's format fixes (frames.frame_vocabulary)


@dataclass(frozen=True)
class ListedFolder(MatchedFiles):
    """The image folder ``url``, listed by a pipeline (a worker per label folder) into Parquet parts of its rows:
    named once written."""

    files: tuple[str, ...] = ()
    parquet: bool = True
    bytes: int = 0


BeamInput = MatchedFiles | StagedRows | ListedFolder  # what a Beam runner's pipeline reads, as Parquet or CSV files


def match_table_files(source: Any) -> MatchedFiles | None:
    """``source``'s files when it names CSV or Parquet files of one kind (a path, URL or glob); None for
    anything else (a DataFrame, an image folder, a missing path, a glob of both kinds: ``read_source``
    says what is wrong). Lists and sizes the files; reads at most their first bytes (CSV or Parquet)."""
    if not isinstance(source, (str, os.PathLike)):
        return None
    url = os.fspath(source)
    fs, path = filesystem(url)
    if fs.exists(path):
        if fs.isdir(path):
            return None
        if path.lower().endswith(YAML_EXTENSIONS):
            raise not_read_yet(url, "is a YAML file, not a table (a YOLO dataset's data.yaml?)")
        urls = [file_url(url, fs, path)]
    elif any(c in path for c in GLOB_CHARACTERS):
        urls = glob_urls(url, fs, path)
        if not urls:
            return None
    else:
        return None
    kinds = {is_parquet(u) for u in urls}
    if len(kinds) > 1:
        return None
    return MatchedFiles(url, tuple(urls), kinds == {True}, sum(int(fs.size(u) or 0) for u in urls))


@dataclass(frozen=True)
class FileFacts:
    """What reading one file of a table says: its rows, its columns (without a headerless CSV's multi-label
    ones) and, for CSV, its layout, multi-label columns and the kind each column's text is (``judge``)."""

    rows: int
    columns: tuple[str, ...]
    layout: tuple[list[str] | None, list[str], int] | None = None  # CSV: headerless names, first row, width
    labels: tuple[str, ...] = ()
    kinds: Mapping[str, tuple[str, bool]] = field(default_factory=dict)  # CSV: column -> (kind, missing)
    # CSV of one part, read by this process (``keep``): that part as read and its columns' numbers, so the
    # parts pass need not read and parse the file again. Never pickled into a pipeline.
    kept: tuple[pd.DataFrame, dict[str, pd.Series]] | None = field(default=None, compare=False, repr=False)
    separator: str = ","  # CSV: its cells' separator (``csv_separator``)
    data_bytes: int = 0  # Parquet: its row groups' bytes uncompressed (images held in a compressed file)
    class_labels: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # Parquet: its ClassLabels' names


def file_facts(url: str, parquet: bool, rows: int, keep: bool = False) -> FileFacts:
    """Read one file a part of ``rows`` rows at a time (Parquet: its footer only) for its ``FileFacts``; a file
    that cannot be read is a TFRecorderError naming it (and for a CSV, the line). ``keep``: keep a CSV of one
    part (``FileFacts.kept``)."""
    if parquet:
        import pyarrow.parquet as pq

        with open_url(url) as f:
            try:
                file = pq.ParquetFile(f)
                metadata, schema = file.metadata, file.schema_arrow
            except (OSError, ValueError) as e:  # pyarrow's ArrowInvalid is a ValueError
                raise TFRecorderError(f"Parquet file {url!r} cannot be read: {e}") from e
        class_labels = {name: tuple(names) for name, names in parquet_class_labels(schema).items()}
        return FileFacts(metadata.num_rows, tuple(schema.names), class_labels=class_labels,
                         data_bytes=sum(metadata.row_group(i).total_byte_size for i in range(metadata.num_row_groups)))
    with open_url(url) as f:
        sep = csv_separator(f, url)
        layout = csv_layout(f, sep)
    if layout is None:  # long first records, or a head the checked scan must judge: it names any problem
        first, _ = checked_layout(url, sep)
        layout = (headerless_names(first, len(first) + SPARE_COLUMNS), first)
    try:
        read = _read_csv_facts(url, *layout, rows, keep, sep)
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError, csv.Error) as e:
        first, widest = checked_layout(url, sep)  # names the line, a block of the file at a time
        names = headerless_names(first, widest)
        if names is None:
            raise TFRecorderError(f"CSV {url!r} cannot be parsed: {str(e).strip()}") from e
        read = _read_csv_facts(url, names, first, rows, keep, sep)  # headerless rows wider than the first ones
    names, first, width, count, kinds, kept = read
    if names is None:
        check_header(url, [str(c).strip() for c in first])
        return FileFacts(count, tuple(kinds), (names, first, width), (), kinds, kept, sep)
    named = headerless_names(first, width) or []
    labels = named[named.index(LABEL_COLUMN):] if LABEL_COLUMN in named and named[-1] != LABEL_COLUMN else []
    return FileFacts(count, tuple(c for c in named if c not in labels), (names, first, width), tuple(labels),
                     {name: kinds[f"_{i}"] for i, name in enumerate(named)}, kept, sep)


def _read_csv_facts(url: str, names: list[str] | None, first: list[str], rows: int, keep: bool,
                    sep: str) -> tuple[Any, ...]:
    """One pass over a CSV of this layout: its names, first row, width used, rows, kinds and kept part."""
    count, kinds, kept = 0, {}, None  # type: tuple[int, dict[str, Any], Any]
    width = len(first)
    with open_url(url) as f, pd.read_csv(f, chunksize=rows, **csv_options(names, sep)) as reader:
        for part in reader:
            count += len(part)
            kept = (part, {}) if keep and count == len(part) else None  # the first part, if the only one
            if names is not None:
                given = [i for i, c in enumerate(part.columns) if part[c].notna().any()]
                width = max(width, given[-1] + 1 if given else 0)
            for column in part.columns:
                kind, missing, numbers = judge(part[column])
                _add_kind(kinds, str(column), kind, missing)
                if kept is not None and numbers is not None:
                    kept[1][str(column)] = numbers
    return names, first, width, count, kinds, kept


def _add_kind(kinds: dict[str, tuple[str, bool]], name: str, kind: str, missing: bool) -> None:
    """Merge what another part of column ``name`` says (its kind, whether it has missing cells) into ``kinds``."""
    old_kind, old_missing = kinds.get(name, ("empty", False))
    kinds[name] = (merge_kinds(old_kind, kind), old_missing or missing)


def table_files(files: MatchedFiles, facts: Sequence[FileFacts]) -> TableFiles:
    """The table of ``files`` from each file's facts: a column's kind is what every file's text allows.
    Raises the SchemaError ``read_source`` gives when the files' columns differ."""
    for u, found in zip(files.files[1:], facts[1:]):
        if found.columns != facts[0].columns:
            raise _columns_differ(files.url, u, list(found.columns), files.files[0], list(facts[0].columns))
    kinds: dict[str, tuple[str, bool]] = {}
    for found in facts:
        for name, (kind, missing) in found.kinds.items():
            _add_kind(kinds, name, kind, missing)
    class_label, vocabulary, schema = None, None, None
    if files.parquet and files.files:  # a Hugging Face export's ClassLabel: its ids read as their names
        schema = parquet_schema(files.files)
        labels = parquet_class_labels(schema)
        class_label = chosen(labels, schema.names)
        if class_label is not None:  # every file's names: a later one may order them otherwise, or add some
            vocabulary = union([labels[class_label], *(f.class_labels.get(class_label) for f in facts)])
    if class_label is None and isinstance(files, StagedRows):
        vocabulary = files.names  # a staged DataFrame's text labels: the names its format fixes, or none
    splits = file_splits(files.files) if facts and SPLIT_COLUMN not in facts[0].columns else ()
    return TableFiles(files.url, files.files, files.parquet, tuple(f.rows for f in facts), files.bytes,
                      tuple(f.layout for f in facts if f.layout is not None), kinds, tuple(f.labels for f in facts),
                      files.paths_as_given, tuple(f.kept for f in facts), tuple(f.separator for f in facts),
                      class_label, vocabulary, schema, sum(f.data_bytes for f in facts), splits)


@dataclass(frozen=True)
class TableFiles:
    """A CSV or Parquet source (one file, or a glob of them) read a part at a time, each part typed as the
    whole table is by ``read_source``: what converts a table larger than memory. Made by ``table_files``
    once every CSV has been read (the columns' types need the whole table) and its rows counted."""

    url: str
    files: tuple[str, ...]
    parquet: bool
    file_rows: tuple[int, ...]
    bytes: int
    layouts: tuple[tuple[list[str] | None, list[str], int], ...] = ()  # CSV: headerless names, first row, width
    kinds: Mapping[str, tuple[str, bool]] = field(default_factory=dict)  # CSV: column -> (TEXT_KINDS, missing)
    label_columns: tuple[tuple[str, ...], ...] = ()  # CSV: each file's headerless multi-label columns
    paths_as_given: bool = False  # StagedRows: relative image paths stay as given, as the DataFrame's do
    kept: tuple[Any, ...] = field(default=(), compare=False, repr=False)  # each file's FileFacts.kept
    separators: tuple[str, ...] = ()  # CSV: each file's FileFacts.separator
    class_label: str | None = None  # Parquet written by Hugging Face datasets: its ClassLabel column, read as names
    vocabulary: tuple[str, ...] | None = None  # ... its names in id order: label ids stay the ids it gave them
    stored_schema: Any = field(default=None, compare=False, repr=False)  # Parquet: the first file's, read once
    data_bytes: int = 0  # Parquet: the files' row groups' bytes uncompressed (FileFacts.data_bytes)
    splits: tuple[str, ...] = ()  # each file's split, from its name, for a table without a split column

    @property
    def rows(self) -> int:
        return sum(self.file_rows)

    @property
    def warnings(self) -> tuple[str, ...]:
        """What the result says of how the files were read: each CSV read with a separator other than a comma,
        ClassLabel columns stored as their ids, the splits the files' names say."""
        notes = [separator_note(url, sep) for url, sep in zip(self.files, self.separators) if sep != ","]
        ids = ids_note(hf_features(self.stored_schema), self.class_label) if self.stored_schema is not None else None
        notes += [ids] if ids else []
        if self.splits:
            shown = ", ".join(f"{posixpath.basename(u)}: {s}" for u, s in list(zip(self.files, self.splits))[:4])
            notes.append(f"the table has no {SPLIT_COLUMN!r} column; its files' names say their splits, so each "
                         f"file's rows are that split ({shown}{', ...' if len(self.files) > 4 else ''})")
        return tuple(notes)

    @property
    def skipped(self) -> tuple[str, ...]:
        """An image folder's files that are not rows: none in a table of files."""
        return ()

    @property
    def columns(self) -> tuple[str, ...]:
        """The table's columns as its parts have them (a headerless CSV's labels merged into one)."""
        if self.parquet:
            return tuple(self.arrow_schema().names)
        labels = set(self.label_columns[0]) if self.label_columns else set()
        named = (SPLIT_COLUMN,) if self.splits else ()
        return named + tuple(c for c in self.kinds if c not in labels or c == LABEL_COLUMN)

    def arrow_schema(self) -> Any:
        """A Parquet table's Arrow schema as its parts have it (a ClassLabel column the text ``label``)."""
        import pyarrow as pa

        schema = self.stored_schema if self.stored_schema is not None else parquet_schema(self.files)
        schema = named_schema(schema, self.class_label) if self.class_label is not None else schema
        return schema.insert(0, pa.field(SPLIT_COLUMN, pa.string())) if self.splits else schema

    def schema_frame(self, first: pd.DataFrame | None) -> pd.DataFrame:
        """What the schema is inferred from and checked against: the first part (its columns typed as the whole
        table's text says)."""
        return first if first is not None else pd.DataFrame()

    def parts(self, rows: int) -> Iterator[tuple[pd.DataFrame, str | None, int]]:
        """(part of at most ``rows`` rows, the folder of its file, the number of its first row), in order."""
        for index in range(len(self.files)):
            yield from self.file_parts(index, rows)

    def file_parts(self, index: int, rows: int) -> Iterator[tuple[pd.DataFrame, str | None, int]]:
        """``parts`` of the file ``files[index]`` alone: numbered as in the whole table."""
        url = self.files[index]
        first_row = sum(self.file_rows[:index])
        base_dir = None if self.paths_as_given else file_folder(url)
        for part in (self._parquet_parts(url, rows) if self.parquet else self._csv_parts(index, url, rows)):
            if self.splits:  # the split its file's name says
                part.insert(0, SPLIT_COLUMN, pd.array([self.splits[index]] * len(part), dtype=pd.StringDtype()))
            yield part, base_dir, first_row
            first_row += len(part)

    def _csv_parts(self, index: int, url: str, rows: int) -> Iterator[pd.DataFrame]:
        names, first, width = self.layouts[index]
        sep = self.separators[index] if index < len(self.separators) else ","
        labels = list(self.label_columns[index])
        found: Any = (self.kept[index] if index < len(self.kept) else None) or (None, {})
        kept, numbers = found
        with contextlib.ExitStack() as reading:
            if kept is not None and len(kept) <= rows:
                reader: Iterable[pd.DataFrame] = [kept]
            else:
                f = reading.enter_context(open_url(url))
                reader = reading.enter_context(pd.read_csv(f, chunksize=rows, **csv_options(names, sep)))
                numbers = {}
            for part in reader:
                if names is not None:
                    part = name_headerless(part, first, width)[0]
                    numbers = {}  # judged under the headerless columns' own names
                part = part.assign(**{str(c): as_kind(part[c], *self.kinds[str(c)], numbers.get(str(c)))
                                      for c in part.columns if c not in labels})
                yield merge_labels(part, labels) if labels else part

    def _parquet_parts(self, url: str, rows: int) -> Iterator[pd.DataFrame]:
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            with _open_parquet(url) as f:
                file = pq.ParquetFile(f)
                size = part_rows(rows, _row_bytes(file.metadata))
                if size < rows:  # rows of images: pre-buffered reads would stay held as the file is read on
                    file = pq.ParquetFile(f, pre_buffer=False, metadata=file.metadata)
                names = _class_names_of(self, file.schema_arrow)
                for batch in file.iter_batches(batch_size=size):
                    table = pa.Table.from_batches([batch], schema=file.schema_arrow)
                    if self.class_label is not None:
                        table = named(table, self.class_label, names, f"Parquet file {url!r}")
                    yield arrow_frame(table)
        except TFRecorderError:
            raise
        except (OSError, ValueError) as e:  # pyarrow's ArrowInvalid is a ValueError
            raise TFRecorderError(f"Parquet file {url!r} cannot be read: {e}") from e


def _open_parquet(url: str) -> Any:
    """A Parquet file opened for reading: a local one by pyarrow itself (its reads let go of the GIL, where a
    Python file's hold it against the part being validated meanwhile: ``summary_pass.read_ahead``)."""
    import pyarrow as pa
    from fsspec.implementations.local import LocalFileSystem

    fs, path = filesystem(url)
    return pa.OSFile(path) if isinstance(fs, LocalFileSystem) else open_url(url)


def _class_names_of(files: TableFiles, schema: Any) -> tuple[str, ...]:
    """The names one file's ClassLabel ids stand for: its own, where its schema keeps them; else the table's."""
    own = parquet_class_labels(schema).get(files.class_label) if files.class_label is not None else None
    return tuple(own) if own is not None else files.vocabulary or ()


# The word a file's name starts with, which may be its split (data/train-00000-of-00002.parquet)
_SPLIT_NAME = re.compile(r"([a-z]+)(?=$|[-_.\d])")


def file_splits(urls: Sequence[str]) -> tuple[str, ...]:
    """Each file's split where every file's name (or folder) says one and they say two or more (the Hub's
    train and test files: a table without a split column would hash them together); () otherwise, a table of
    files of one split hashed into the three as before."""
    found = []
    for url in urls:
        name = posixpath.basename(url).lower()
        word = _SPLIT_NAME.match(name)
        split = NAMED_SPLITS.get(word.group(1)) if word else None
        found.append(split or NAMED_SPLITS.get(posixpath.basename(posixpath.dirname(url)).lower()))
    return tuple(found) if None not in found and len(set(found)) > 1 else ()  # type: ignore[arg-type]


def arrow_frame(table: Any) -> pd.DataFrame:
    """A pyarrow table as pandas does it for a part of a Parquet file: integers, booleans, floats and text as
    pandas' nullable dtypes (a missing value stays missing, an int stays an int)."""
    import pyarrow as pa

    global _NULLABLE_TYPES
    if _NULLABLE_TYPES is None:
        _NULLABLE_TYPES = {pa.int8(): pd.Int8Dtype(), pa.int16(): pd.Int16Dtype(), pa.int32(): pd.Int32Dtype(),
                           pa.int64(): pd.Int64Dtype(), pa.uint8(): pd.UInt8Dtype(),
                           pa.uint16(): pd.UInt16Dtype(), pa.uint32(): pd.UInt32Dtype(),
                           pa.uint64(): pd.UInt64Dtype(), pa.bool_(): pd.BooleanDtype(),
                           pa.float32(): pd.Float32Dtype(), pa.float64(): pd.Float64Dtype(),
                           pa.string(): pd.StringDtype(), pa.large_string(): pd.StringDtype()}
    images = [i for i, field in enumerate(table.schema) if is_image_struct(field.type) and (
        pa.types.is_binary(field.type.field("bytes").type) or pa.types.is_large_binary(field.type.field("bytes").type))]
    if not images:
        return table.to_pandas(types_mapper=_NULLABLE_TYPES.get).reset_index(drop=True)
    frame = table.drop_columns([table.schema.names[i] for i in images]).to_pandas(
        types_mapper=_NULLABLE_TYPES.get).reset_index(drop=True)
    if not len(frame.columns):
        frame = pd.DataFrame(index=pd.RangeIndex(table.num_rows))
    for i in images:  # images as memoryviews of the part's buffers, not copied (image_structs)
        frame.insert(i, table.schema.names[i], pd.Series(image_structs(table.column(i)), index=frame.index,
                                                          dtype=object))
    return frame


def _row_bytes(metadata: Any) -> float:
    """A Parquet file's bytes a row, uncompressed: rows of images read in parts of PART_BYTES."""
    groups = [metadata.row_group(i) for i in range(metadata.num_row_groups)]
    return sum(g.total_byte_size for g in groups) / max(1, metadata.num_rows)


KEEP_BYTES = 16 * 1024 * 1024  # CSV sources this small are read once: the typing pass keeps what it parsed
