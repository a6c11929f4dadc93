"""Sources (IO edge): a DataFrame, CSV or Parquet files (one, or a glob), or an image folder -> (DataFrame,
the folder(s) its relative image paths are relative to)."""

from __future__ import annotations

import codecs
import contextlib
import csv
import hashlib
import io
import json
import os
import posixpath
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import fsspec
import pandas as pd

from tfrecorder.dataset.storage import filesystem, open_url
from tfrecorder.errors import SchemaError, TFRecorderError
from tfrecorder.schema import IMAGE_COLUMN, LABEL_COLUMN, SPLIT_COLUMN
from tfrecorder.write.splits import KNOWN_SPLITS

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".gif", ".bmp", ".webp", ".tif", ".tiff")
_COLUMN_NAMES = {SPLIT_COLUMN, IMAGE_COLUMN, LABEL_COLUMN}


PARQUET_EXTENSIONS = (".parquet", ".pq")
_PARQUET_MAGIC = b"PAR1"
_GLOB_CHARACTERS = "*?["

BaseDir = str | list[str | None] | None  # one folder for the table, or one per row (a table of several files)


def parquet_schema(files: Sequence[str]) -> Any:
    """The pyarrow schema of the first of these Parquet files: what its columns hold, whatever the values of any
    part of it (``Schema.infer``'s ``arrow``)."""
    import pyarrow.parquet as pq

    with open_url(files[0]) as f:
        return pq.read_schema(f)


def image_folder_url(source: Any) -> str | None:
    """``source`` as a URL when it names an existing folder (an image folder), else None."""
    if not isinstance(source, (str, os.PathLike)):
        return None
    url = os.fspath(source)
    fs, path = filesystem(url)
    return url if fs.isdir(path) else None


def is_parquet(url: str) -> bool:
    if url.lower().endswith(PARQUET_EXTENSIONS):
        return True
    with open_url(url) as f:
        return f.read(4) == _PARQUET_MAGIC


def _glob_urls(url: str, fs: Any, path: str) -> list[str]:
    """The files the glob ``url`` (``path`` on ``fs``) matches, sorted, named as ``url`` names them."""
    return _urls(url, fs, sorted(p for p in fs.glob(path) if not fs.isdir(p)))


def _urls(url: str, fs: Any, paths: list[str]) -> list[str]:
    return [fs.unstrip_protocol(p) if "://" in url else p for p in paths]


def _columns_differ(url: str, other: str, columns: list[str], first: str, first_columns: list[str]) -> SchemaError:
    return SchemaError(f"source {url!r}: {other!r} has columns {columns}, but {first!r} has {first_columns}; "
                       f"every file of a glob needs the same columns")


def _parent(url: str) -> str:
    if "://" in url:
        return posixpath.dirname(url)
    return os.path.dirname(os.path.abspath(url))


_HEAD_BYTES = 1 << 16  # read first, to tell a header from a headerless first row
_SPARE_COLUMNS = 32  # headerless: columns beyond the first row's that the fast path makes room for


def _csv_layout(f: Any) -> tuple[list[str] | None, list[str]] | None:
    """From the head of an open CSV: the names of a headerless CSV's columns (as many as the fast read makes
    room for; None: the first row is a header) and its first row; None when the checked read must judge.
    Leaves ``f`` at its start, for the read."""
    head = f.read(_HEAD_BYTES)
    f.seek(0)
    try:
        records = list(csv.reader(io.StringIO(head.decode("utf-8-sig"))))
    except (UnicodeDecodeError, csv.Error):
        return None
    records = [r for r in records if r]
    if len(records) < 3 and len(head) == _HEAD_BYTES:  # the first rows may be cut off: let the scan judge
        return None
    if not records:
        return None  # empty: the slow path says so
    first = records[0]
    names = _headerless_names(first, len(first) + _SPARE_COLUMNS)
    if names is None and len(records) > 1 and len(records[1]) > len(first):
        return None  # pandas would take the extra field as an index column: the scan names the line
    return names, first


def _csv_options(names: list[str] | None) -> dict[str, Any]:
    """pd.read_csv's arguments for the fast read: every cell text, only an empty one missing."""
    return dict(encoding="utf-8-sig", header=None if names else 0, skipinitialspace=True,
                names=[f"_{i}" for i in range(len(names))] if names else None, index_col=False,
                dtype=str, keep_default_na=False, na_values=[""])


def _name_headerless(df: pd.DataFrame, first: list[str], width: int) -> tuple[pd.DataFrame, list[str]]:
    """A headerless CSV's cells under their names, ``width`` columns used; and its multi-label columns."""
    names = _headerless_names(first, width) or []
    df = df.iloc[:, :len(names)].set_axis(names, axis=1)
    if LABEL_COLUMN in names and names[-1] != LABEL_COLUMN:  # multi-label rows: labels stay text
        return df, names[names.index(LABEL_COLUMN):]
    return df, []


def _check_header(url: str, header: list[str]) -> None:
    """Two columns of one name would be renamed by pandas (``label.1``) and one silently used: refuse."""
    seen: dict[str, int] = {}
    for position, name in enumerate(header, 1):
        if name in seen:
            raise SchemaError(f"CSV {url!r}: the header names column {name!r} twice (columns {seen[name]} and "
                              f"{position}); rename one of them")
        seen[name] = position


_LEADING_ZERO = r"^[+-]?0\d"  # 007, -01.5: an id or a code, not a number
_INTEGER = r"^[+-]?\d+$"
_BOOLEANS = {"True": True, "False": False, "true": True, "false": False, "TRUE": True, "FALSE": False}


TEXT_KINDS = ("empty", "bool", "int", "float", "text")  # what a CSV column's text says it is


def _judge(column: pd.Series) -> tuple[str, bool, pd.Series | None]:
    """What ``column``'s text says it is (one of TEXT_KINDS), whether it has missing cells, and its numbers."""
    given = column.dropna()
    missing = len(given) < len(column)
    if given.empty:
        return "empty", missing, None
    if given.isin(_BOOLEANS.keys()).all():
        return "bool", missing, None
    import pyarrow as pa

    text = pa.array(given, pa.string())  # once, for both checks
    numbers = _numbers(given, text)
    if numbers is None or numbers.dtype.kind not in "if" or _has_leading_zero(text):
        return "text", missing, None  # beyond int64 (uint64, object), or codes with leading zeros
    return ("int" if numbers.dtype.kind == "i" else "float"), missing, numbers


def merge_kinds(a: str, b: str) -> str:
    """The kind of a column whose parts are of kinds ``a`` and ``b``: what ``_judge`` says of the whole."""
    if a == "empty" or a == b:
        return b
    if b == "empty":
        return a
    return "float" if {a, b} == {"int", "float"} else "text"


def as_kind(column: pd.Series, kind: str, missing: bool, numbers: pd.Series | None = None) -> pd.Series:
    """CSV text typed as ``kind`` (what the whole column is; ``missing``: whether the whole column has missing
    cells, so that every part gets the same dtype)."""
    if kind in ("empty", "text"):
        return column
    if kind == "bool":
        values = column.map(_BOOLEANS)
        return values.astype("boolean") if missing else values.astype(bool)
    if numbers is None:
        import pyarrow as pa

        given = column.dropna()
        numbers = _numbers(given, pa.array(given, pa.string()))
    dtype = ("Int64" if missing else "int64") if kind == "int" else "float64"
    numbers = numbers.astype(dtype)
    return numbers.reindex(column.index) if len(numbers) < len(column) else numbers


def _numbers(given: pd.Series, values: Any) -> pd.Series | None:
    """``given`` (its text also as the pyarrow array ``values``) as numbers, or None if a value is not one.
    pyarrow's casts first (a tenth of pd.to_numeric's time on 1M cells); what they refuse ("+5", integers
    beyond int64) is judged by pd.to_numeric."""
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        return pd.Series(values.cast(pa.int64()).to_numpy(), index=given.index, name=given.name)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    if not pc.any(pc.match_substring_regex(values, _INTEGER)).as_py():  # an integer beyond int64 is no float
        try:
            return pd.Series(values.cast(pa.float64()).to_numpy(), index=given.index, name=given.name)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            pass
    try:
        return pd.to_numeric(given)
    except (ValueError, TypeError):
        return None


def _has_leading_zero(values: Any) -> bool:
    """Whether any value of the pyarrow string array looks like ``007`` or ``-01.5`` (pyarrow's regex, far
    faster than pandas': benchmarks/CONSTANTS.md)."""
    import pyarrow.compute as pc

    return bool(pc.any(pc.match_substring_regex(values, _LEADING_ZERO)).as_py())


def _checked_layout(url: str) -> tuple[list[str], int]:
    """A CSV's first record and the most fields in any record, from a scan of the file that holds a block of it
    at a time; a CSV that cannot be read is a TFRecorderError naming the line (bytes that are not UTF-8, a
    record wider than the header): the same answer for a file of any size, at the memory of a clean read."""
    with open_url(url) as f, _no_field_size_limit():
        first, widest, longer = _scan_records(csv.reader(_utf8_lines(f, url)))
    if not first:
        raise TFRecorderError(f"CSV {url!r} is empty")
    if _headerless_names(first, widest) is None:
        _check_header(url, [f.strip() for f in first])
        if longer:
            raise TFRecorderError(f"CSV {url!r} cannot be parsed: line {longer[0]} has {longer[1]} fields, the "
                                  f"header has {len(first)}")
    return first, widest


def _utf8_lines(f: Any, url: str, block: int = 1 << 20) -> Iterator[str]:
    """The lines of a UTF-8 file (a BOM dropped, each with its "\\n"), read a block at a time; bytes that are not
    UTF-8 are a TFRecorderError naming the byte and its line."""
    decoder = codecs.getincrementaldecoder("utf-8-sig")()
    lines_before, rest = 0, ""
    while True:
        raw = f.read(block)
        try:
            text = rest + decoder.decode(raw, final=not raw)
        except UnicodeDecodeError as e:  # e.object: this block, after the bytes of a character it cut in two
            line = lines_before + e.object[:e.start].count(b"\n") + 1
            raise TFRecorderError(f"CSV {url!r} is not UTF-8 text: byte 0x{e.object[e.start]:02x} at line {line}; "
                                  f"save it as UTF-8") from None
        lines = text.split("\n")
        rest = lines.pop()
        lines_before += len(lines)
        yield from (line + "\n" for line in lines)
        if not raw:
            if rest:
                yield rest
            return


@contextlib.contextmanager
def _no_field_size_limit():
    """The csv module refuses cells over 131,072 characters (a module-wide setting): lift it while we scan."""
    limit = csv.field_size_limit()
    csv.field_size_limit(2**31 - 1)
    try:
        yield
    finally:
        csv.field_size_limit(limit)


def _scan_records(reader: Any) -> tuple[list[str], int, tuple[int, int] | None]:
    first: list[str] = []
    widest, longer, line = 0, None, 1
    for record in reader:
        if record:
            if not first:
                first = record
            elif len(record) > len(first) and longer is None:
                longer = (line, len(record))
            widest = max(widest, len(record))
        line = reader.line_num + 1
    return first, widest, longer


def _headerless_names(first: list[str], width: int) -> list[str] | None:
    """Column names for a headerless CSV of ``width`` fields at most, judged from its first row; None when
    the row is a header."""
    fields = [f.strip() for f in first]
    if any(f.lower() in _COLUMN_NAMES for f in fields):
        return None
    if fields[0].upper() in KNOWN_SPLITS:
        base = [SPLIT_COLUMN, IMAGE_COLUMN, LABEL_COLUMN]
    elif "/" in fields[0] or "\\" in fields[0] or fields[0].lower().endswith(IMAGE_EXTENSIONS):
        base = [IMAGE_COLUMN, LABEL_COLUMN]
    else:
        return None
    extra = [f"{LABEL_COLUMN}_{i}" for i in range(1, width - len(base) + 1)]
    return (base + extra)[: max(width, 1)]


def _merge_labels(df: pd.DataFrame, label_columns: list[str]) -> pd.DataFrame:
    """AutoML multi-label rows (``[split,]uri,label1,label2,...``) -> one list-valued label column."""
    labels = [
        [str(v).strip() for v in row if isinstance(v, str) and v.strip()]
        for row in df[label_columns].itertuples(index=False, name=None)
    ]
    out = df.drop(columns=label_columns)
    out[LABEL_COLUMN] = pd.Series(labels, index=df.index, dtype=object)
    return out


def image_folder_table(url: str) -> pd.DataFrame:
    """Rows for ``<dir>/<SPLIT>/<label>/<file>`` or ``<dir>/<label>/<file>`` (split then assigned by hash): each
    of its ``label_folders``' images (``folder_rows``), as a pipeline lists them a folder per worker."""
    rows = [row for folder in label_folders(url) for row in folder_rows(url, folder)[0]]
    if not rows:
        raise no_images(url)
    return listing_frame(rows, any(split is not None for split, _, _ in rows))


def no_images(url: str) -> TFRecorderError:
    return TFRecorderError(
        f"image folder {url!r} has no images laid out as <dir>/<SPLIT>/<label>/<file> or <dir>/<label>/<file> "
        f"(extensions {', '.join(IMAGE_EXTENSIONS)})"
    )


def listing_frame(rows: Sequence[tuple[str | None, str, str]], with_split: bool) -> pd.DataFrame:
    """An image folder's (split or None, image URL, label) rows as its table: a split column only when some
    image is under a split folder (``with_split``, a fact of the whole folder), the others UNASSIGNED."""
    df = pd.DataFrame(list(rows), columns=[SPLIT_COLUMN, IMAGE_COLUMN, LABEL_COLUMN])
    if not with_split:
        return df.drop(columns=[SPLIT_COLUMN])
    df[SPLIT_COLUMN] = df[SPLIT_COLUMN].fillna("UNASSIGNED")
    return df


@dataclass(frozen=True)
class LabelFolder:
    """A folder of an image folder whose images are rows of one label, and one split under a split folder."""

    path: str  # on the image folder's filesystem
    split: str | None
    label: str


def label_folders(url: str) -> list[LabelFolder]:
    """The folders of the image folder ``url`` that hold its rows, in path order: each folder in it (its
    images labelled with its name) and, in a split folder, each folder in that (split and label). Lists two
    levels of folders, not the images: a pipeline lists those a folder per worker (``folder_rows``)."""
    fs, root = filesystem(url)
    root = root.rstrip("/")
    found = []
    for top in _folders(fs, root):
        name = top.rsplit("/", 1)[-1]
        found.append(LabelFolder(top, None, name))
        if name.upper() in KNOWN_SPLITS:
            found += [LabelFolder(sub, name.upper(), sub.rsplit("/", 1)[-1]) for sub in _folders(fs, top)]
    return sorted(found, key=lambda f: f.path.split("/"))


def _folders(fs: Any, path: str) -> list[str]:
    return [e["name"].rstrip("/") for e in fs.ls(path, detail=True) if e.get("type") == "directory"]


def folder_rows(url: str, folder: LabelFolder) -> tuple[list[tuple[str | None, str, str]], str]:
    """The rows of one of ``label_folders(url)``, its images in name order, and the identity of what was listed
    (a SHA-256 of each image's name, size and modification time or object generation)."""
    fs = filesystem(url)[0]
    files = sorted((e for e in fs.ls(folder.path, detail=True)
                    if e.get("type") == "file" and e["name"].lower().endswith(IMAGE_EXTENSIONS)),
                   key=lambda e: e["name"])
    identity = hashlib.sha256()
    for e in files:
        version = [str(e.get(k)) for k in ("size", "mtime", "updated", "generation", "ETag") if k in e]
        identity.update(json.dumps([e["name"], *version]).encode("utf-8"))
    return [(folder.split, _file_url(url, fs, e["name"]), folder.label) for e in files], identity.hexdigest()


def _file_url(url: str, fs: Any, path: str) -> str:
    return fs.unstrip_protocol(path) if "://" in url else path


def create_image_csv(image_dir: str, output_csv: str) -> pd.DataFrame:
    """Write the table of an image folder as a CSV (``tfrecorder create-image-csv``); returns it.

    Examples:
        >>> images = make_sample_images(str(tmp_path / "imgs"), n=6)
        >>> table = tfrecorder.create_image_csv(str(tmp_path / "imgs"), str(tmp_path / "imgs.csv"))
        >>> list(table.columns), len(table)
        (['split', 'image_uri', 'label'], 6)
    """
    df = image_folder_table(image_dir)
    with fsspec.open(output_csv, "w", encoding="utf-8", newline="") as f:
        df.to_csv(f, index=False)
    return df


# --- a table read a part at a time ----------------------------------------------------------

_NULLABLE_TYPES = None  # pyarrow type -> pandas nullable dtype, as pd.read_parquet(dtype_backend="numpy_nullable")


@dataclass(frozen=True)
class MatchedFiles:
    """The CSV or Parquet files a source names (one path or URL, or a glob), found without reading them."""

    url: str
    files: tuple[str, ...]
    parquet: bool
    bytes: int
    frame: bool = False  # Parquet parts a DataFrame was staged as (``frame_parts``): see TableFiles.frame

    @classmethod
    def to_stage(cls, url: str = "") -> MatchedFiles:
        """The Parquet parts a DataFrame or a pipeline's rows will be staged as in the folder ``url``: named
        once they are written (a pipeline's parts, by the pipeline itself)."""
        return cls(url, (), True, 0, frame=True)

    @classmethod
    def to_list(cls, url: str) -> MatchedFiles:
        """The image folder ``url``, listed by a pipeline into Parquet parts."""
        return cls(url, (), True, 0)


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
        urls = _urls(url, fs, [path])
    elif any(c in path for c in _GLOB_CHARACTERS):
        urls = _glob_urls(url, fs, path)
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
    ones) and, for CSV, its layout, multi-label columns and the kind each column's text is (``_judge``)."""

    rows: int
    columns: tuple[str, ...]
    layout: tuple[list[str] | None, list[str], int] | None = None  # CSV: headerless names, first row, width
    labels: tuple[str, ...] = ()
    kinds: Mapping[str, tuple[str, bool]] = field(default_factory=dict)  # CSV: column -> (kind, missing)
    # CSV of one part, read by this process (``keep``): that part as read and its columns' numbers, so the
    # parts pass need not read and parse the file again. Never pickled into a pipeline.
    kept: tuple[pd.DataFrame, dict[str, pd.Series]] | None = field(default=None, compare=False, repr=False)


def file_facts(url: str, parquet: bool, rows: int, keep: bool = False) -> FileFacts:
    """Read one file a part of ``rows`` rows at a time (Parquet: its footer only) for its ``FileFacts``; a file
    that cannot be read is a TFRecorderError naming it (and for a CSV, the line). ``keep``: keep a CSV of one
    part (``FileFacts.kept``)."""
    if parquet:
        import pyarrow.parquet as pq

        with open_url(url) as f:
            try:
                metadata = pq.ParquetFile(f).metadata
            except (OSError, ValueError) as e:  # pyarrow's ArrowInvalid is a ValueError
                raise TFRecorderError(f"Parquet file {url!r} cannot be read: {e}") from e
        return FileFacts(metadata.num_rows, tuple(metadata.schema.to_arrow_schema().names))
    with open_url(url) as f:
        layout = _csv_layout(f)
    if layout is None:  # long first records, or a head the checked scan must judge: it names any problem
        first, _ = _checked_layout(url)
        layout = (_headerless_names(first, len(first) + _SPARE_COLUMNS), first)
    try:
        read = _read_csv_facts(url, *layout, rows, keep)
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError, csv.Error) as e:
        first, widest = _checked_layout(url)  # names the line, a block of the file at a time
        names = _headerless_names(first, widest)
        if names is None:
            raise TFRecorderError(f"CSV {url!r} cannot be parsed: {e}") from e
        read = _read_csv_facts(url, names, first, rows, keep)  # headerless rows wider than the first ones
    names, first, width, count, kinds, kept = read
    if names is None:
        _check_header(url, [str(c).strip() for c in first])
        return FileFacts(count, tuple(kinds), (names, first, width), (), kinds, kept)
    named = _headerless_names(first, width) or []
    labels = named[named.index(LABEL_COLUMN):] if LABEL_COLUMN in named and named[-1] != LABEL_COLUMN else []
    return FileFacts(count, tuple(c for c in named if c not in labels), (names, first, width), tuple(labels),
                     {name: kinds[f"_{i}"] for i, name in enumerate(named)}, kept)


def _read_csv_facts(url: str, names: list[str] | None, first: list[str], rows: int, keep: bool) -> tuple[Any, ...]:
    """One pass over a CSV of this layout: its names, first row, width used, rows, kinds and kept part."""
    count, kinds, kept = 0, {}, None  # type: tuple[int, dict[str, Any], Any]
    width = len(first)
    with open_url(url) as f, pd.read_csv(f, chunksize=rows, **_csv_options(names)) as reader:
        for part in reader:
            count += len(part)
            kept = (part, {}) if keep and count == len(part) else None  # the first part, if the only one
            if names is not None:
                given = [i for i, c in enumerate(part.columns) if part[c].notna().any()]
                width = max(width, given[-1] + 1 if given else 0)
            for column in part.columns:
                kind, missing, numbers = _judge(part[column])
                _add_kind(kinds, str(column), kind, missing)
                if kept is not None and numbers is not None:
                    kept[1][str(column)] = numbers
    return names, first, width, count, kinds, kept


def _add_kind(kinds: dict[str, tuple[str, bool]], name: str, kind: str, missing: bool) -> None:
    """Merge what another part of column ``name`` says (its kind, whether it has missing cells) into ``kinds``."""
    old_kind, old_missing = kinds.get(name, ("empty", False))
    kinds[name] = (merge_kinds(old_kind, kind), old_missing or missing)


def whole_table(files: MatchedFiles, facts: Sequence[FileFacts]) -> TableFiles:
    """The table of ``files`` from each file's facts: a column's kind is what every file's text allows.
    Raises the SchemaError ``read_source`` gives when the files' columns differ."""
    for u, found in zip(files.files[1:], facts[1:]):
        if found.columns != facts[0].columns:
            raise _columns_differ(files.url, u, list(found.columns), files.files[0], list(facts[0].columns))
    kinds: dict[str, tuple[str, bool]] = {}
    for found in facts:
        for name, (kind, missing) in found.kinds.items():
            _add_kind(kinds, name, kind, missing)
    return TableFiles(files.url, files.files, files.parquet, tuple(f.rows for f in facts), files.bytes,
                      tuple(f.layout for f in facts if f.layout is not None), kinds, tuple(f.labels for f in facts),
                      files.frame, tuple(f.kept for f in facts))


@dataclass(frozen=True)
class TableFiles:
    """A CSV or Parquet source (one file, or a glob of them) read a part at a time, each part typed as the
    whole table is by ``read_source``: what converts a table larger than memory. Made by ``whole_table``
    once every CSV has been read (the columns' types need the whole table) and its rows counted."""

    url: str
    files: tuple[str, ...]
    parquet: bool
    file_rows: tuple[int, ...]
    bytes: int
    layouts: tuple[tuple[list[str] | None, list[str], int], ...] = ()  # CSV: headerless names, first row, width
    kinds: Mapping[str, tuple[str, bool]] = field(default_factory=dict)  # CSV: column -> (TEXT_KINDS, missing)
    label_columns: tuple[tuple[str, ...], ...] = ()  # CSV: each file's headerless multi-label columns
    frame: bool = False  # a staged DataFrame: relative image paths stay as given, as the DataFrame's do
    kept: tuple[Any, ...] = field(default=(), compare=False, repr=False)  # each file's FileFacts.kept

    @property
    def rows(self) -> int:
        return sum(self.file_rows)

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
        base_dir = None if self.frame else _parent(url)
        for part in (self._parquet_parts(url, rows) if self.parquet else self._csv_parts(index, url, rows)):
            yield part, base_dir, first_row
            first_row += len(part)

    def _csv_parts(self, index: int, url: str, rows: int) -> Iterator[pd.DataFrame]:
        names, first, width = self.layouts[index]
        labels = list(self.label_columns[index])
        found: Any = (self.kept[index] if index < len(self.kept) else None) or (None, {})
        kept, numbers = found
        with contextlib.ExitStack() as reading:
            if kept is not None and len(kept) <= rows:
                reader: Iterable[pd.DataFrame] = [kept]
            else:
                f = reading.enter_context(open_url(url))
                reader = reading.enter_context(pd.read_csv(f, chunksize=rows, **_csv_options(names)))
                numbers = {}
            for part in reader:
                if names is not None:
                    part = _name_headerless(part, first, width)[0]
                    numbers = {}  # judged under the headerless columns' own names
                part = part.assign(**{str(c): as_kind(part[c], *self.kinds[str(c)], numbers.get(str(c)))
                                      for c in part.columns if c not in labels})
                yield _merge_labels(part, labels) if labels else part

    @staticmethod
    def _parquet_parts(url: str, rows: int) -> Iterator[pd.DataFrame]:
        import pyarrow as pa
        import pyarrow.parquet as pq

        global _NULLABLE_TYPES
        if _NULLABLE_TYPES is None:
            _NULLABLE_TYPES = {pa.int8(): pd.Int8Dtype(), pa.int16(): pd.Int16Dtype(), pa.int32(): pd.Int32Dtype(),
                               pa.int64(): pd.Int64Dtype(), pa.uint8(): pd.UInt8Dtype(),
                               pa.uint16(): pd.UInt16Dtype(), pa.uint32(): pd.UInt32Dtype(),
                               pa.uint64(): pd.UInt64Dtype(), pa.bool_(): pd.BooleanDtype(),
                               pa.float32(): pd.Float32Dtype(), pa.float64(): pd.Float64Dtype(),
                               pa.string(): pd.StringDtype(), pa.large_string(): pd.StringDtype()}
        try:
            with open_url(url) as f:
                file = pq.ParquetFile(f)
                for batch in file.iter_batches(batch_size=rows):
                    table = pa.Table.from_batches([batch], schema=file.schema_arrow)
                    yield table.to_pandas(types_mapper=_NULLABLE_TYPES.get).reset_index(drop=True)
        except (OSError, ValueError) as e:  # pyarrow's ArrowInvalid is a ValueError
            raise TFRecorderError(f"Parquet file {url!r} cannot be read: {e}") from e


@dataclass(frozen=True)
class FrameSource:
    """A table held in memory - a DataFrame, an image folder's listing, a file the part-wise read cannot take -
    converted a part at a time as ``TableFiles`` are (``parts``): its schema judged on the whole frame."""

    frame: pd.DataFrame
    base_dir: BaseDir = None
    url: str = "the DataFrame"
    files: tuple[str, ...] = ()
    parquet: bool = False

    @property
    def rows(self) -> int:
        return len(self.frame)

    @property
    def bytes(self) -> int:
        """The frame's size in memory (object columns by their pointers): what its spill is sized by."""
        return int(self.frame.memory_usage(index=False, deep=False).sum())

    def schema_frame(self, first: pd.DataFrame | None) -> pd.DataFrame:
        """What the schema is inferred from and checked against: the whole frame."""
        return self.frame

    def parts(self, rows: int) -> Iterator[tuple[pd.DataFrame, BaseDir, int]]:
        """(part of at most ``rows`` rows, the folder(s) its relative image paths are relative to, its first
        row's number), in order."""
        for start in range(0, len(self.frame), rows):
            base_dir = self.base_dir
            if isinstance(base_dir, list):
                base_dir = base_dir[start:start + rows]
            yield self.frame.iloc[start:start + rows], base_dir, start


def table_source(source: Any, rows: int) -> TableFiles | FrameSource:
    """``source`` as the parts the conversion reads: CSV or Parquet files (a path, URL or glob) part-wise,
    each CSV read once in parts of ``rows`` rows to type its columns (``file_facts``); a DataFrame, or an
    image folder's listing, held whole. A source that cannot be read is a TFRecorderError saying why."""
    if isinstance(source, pd.DataFrame):
        return FrameSource(source)
    url = image_folder_url(source)
    if url is not None:
        return FrameSource(image_folder_table(url))
    files = match_table_files(source)
    if files is None:
        raise unreadable(source)
    keep = files.bytes <= KEEP_BYTES
    return whole_table(files, [file_facts(url, files.parquet, rows, keep) for url in files.files])


KEEP_BYTES = 16 * 1024 * 1024  # CSV sources this small are read once: the typing pass keeps what it parsed


def unreadable(source: Any) -> TFRecorderError:
    """Why ``source`` is none of a DataFrame, an image folder, or CSV or Parquet files of one kind."""
    if not isinstance(source, (str, os.PathLike)):
        return TFRecorderError(
            f"source={type(source).__name__}: give a pandas DataFrame, a CSV or Parquet path/URL (or a glob of "
            f"them) or an image folder")
    url = os.fspath(source)
    fs, path = filesystem(url)
    if not any(c in path for c in _GLOB_CHARACTERS):
        return TFRecorderError(f"source {url!r} does not exist")
    if not _glob_urls(url, fs, path):
        return TFRecorderError(f"source {url!r} matches no file")
    return TFRecorderError(f"source {url!r} matches both CSV and Parquet files: give a glob of one kind")


def frame_as_arrow(df: pd.DataFrame) -> Any:
    """``df``'s values as a pyarrow Table, to stage as Parquet for a pipeline that reads it back as it reads any
    Parquet source (``TableFiles``: the same values, dtypes and row numbers); when Parquet would not give them
    back as they are, what it could not hold (a str): column names that are not distinct strings, or an
    object column whose values are of several kinds (str beside bytes, int beside float: Arrow would make
    them one)."""
    import pyarrow as pa

    names = list(df.columns)
    odd = [name for name in names if not isinstance(name, str)]
    if odd:
        return f"column names must be strings, not {', '.join(repr(n) for n in odd[:3])}"
    if len(set(names)) != len(names):
        return f"column names must be distinct: {sorted({n for n in names if names.count(n) > 1})}"
    for name in names:
        if df[name].dtype == object and (kinds := _kinds(df[name])) is not None:
            return f"column {name!r} holds {kinds} values"
    try:
        return pa.Table.from_pandas(df, preserve_index=False)
    except (pa.ArrowException, TypeError, ValueError) as e:
        return str(e)


_ONE_KIND = {"string", "bytes", "integer", "floating", "boolean", "empty"}  # pandas' infer_dtype names


def _kinds(column: pd.Series) -> str | None:
    """None when an object column's values (or, for a column of lists, their items) are all of one kind; else
    the kinds it mixes (pandas' infer_dtype names, "mixed-integer-float")."""
    kind = pd.api.types.infer_dtype(column, skipna=True)
    if kind == "mixed" and all(isinstance(v, (list, tuple)) or getattr(v, "ndim", 0) == 1 for v in column.dropna()):
        kind = pd.api.types.infer_dtype(column.dropna().explode(), skipna=True)
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
