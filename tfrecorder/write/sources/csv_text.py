"""CSV text: a CSV's layout (a header, or AutoML's headerless rows), its records checked a block at a time, and
the kind of value each column's text holds (``TEXT_KINDS``), judged so that every part of a table agrees."""

from __future__ import annotations

import codecs
import contextlib
import csv
import io
from collections.abc import Iterator
from typing import Any

import pandas as pd

from tfrecorder.dataset.storage import open_url
from tfrecorder.errors import SchemaError, TFRecorderError
from tfrecorder.schema import IMAGE_COLUMN, IMAGE_EXTENSIONS, LABEL_COLUMN, SPLIT_COLUMN
from tfrecorder.write.splits import KNOWN_SPLITS

_COLUMN_NAMES = {SPLIT_COLUMN, IMAGE_COLUMN, LABEL_COLUMN}


_HEAD_BYTES = 1 << 16  # read first, to tell a header from a headerless first row
SPARE_COLUMNS = 32  # headerless: columns beyond the first row's that the fast path makes room for


# Separators a CSV's first line may hold instead of commas (Excel's in many locales, TSV, pipes): by name.
OTHER_SEPARATORS = {";": "semicolon", "\t": "tab", "|": "pipe"}


def csv_separator(f: Any, url: str) -> str:
    """The separator of an open CSV, from its first line: a comma, or when that line holds none, the one of
    ``OTHER_SEPARATORS`` it holds (a first line of several of them is a TFRecorderError: it cannot be told).
    Leaves ``f`` at its start."""
    head = f.read(_HEAD_BYTES)
    f.seek(0)
    line = head.split(b"\n", 1)[0].decode("utf-8-sig", "replace")
    found = [c for c in OTHER_SEPARATORS if c in line]
    if "," in line or not found:
        return ","
    if len(found) > 1:
        raise TFRecorderError(
            f"CSV {url!r}: its first line holds no comma but {' and '.join(OTHER_SEPARATORS[c] + 's' for c in found)}"
            f", so its separator cannot be told; save it comma-separated")
    return found[0]


def separator_note(url: str, separator: str) -> str:
    """What a result says of a CSV read with a separator other than a comma."""
    return (f"CSV {url!r} was read as {OTHER_SEPARATORS[separator]}-separated: its first line holds "
            f"{OTHER_SEPARATORS[separator]}s and no comma")


def csv_layout(f: Any, separator: str = ",") -> tuple[list[str] | None, list[str]] | None:
    """From the head of an open CSV: the names of a headerless CSV's columns (as many as the fast read makes
    room for; None: the first row is a header) and its first row; None when the checked read must judge.
    Leaves ``f`` at its start, for the read."""
    head = f.read(_HEAD_BYTES)
    f.seek(0)
    try:
        records = list(csv.reader(io.StringIO(head.decode("utf-8-sig")), delimiter=separator))
    except (UnicodeDecodeError, csv.Error):
        return None
    records = [r for r in records if r]
    if len(records) < 3 and len(head) == _HEAD_BYTES:  # the first rows may be cut off: let the scan judge
        return None
    if not records:
        return None  # empty: the slow path says so
    first = records[0]
    names = headerless_names(first, len(first) + SPARE_COLUMNS)
    if names is None and len(records) > 1 and len(records[1]) > len(first):
        return None  # pandas would take the extra field as an index column: the scan names the line
    return names, first


def csv_options(names: list[str] | None, separator: str = ",") -> dict[str, Any]:
    """pd.read_csv's arguments for the fast read: every cell text, only an empty one missing."""
    return dict(encoding="utf-8-sig", sep=separator, header=None if names else 0, skipinitialspace=True,
                names=[f"_{i}" for i in range(len(names))] if names else None, index_col=False,
                dtype=str, keep_default_na=False, na_values=[""])


def name_headerless(df: pd.DataFrame, first: list[str], width: int) -> tuple[pd.DataFrame, list[str]]:
    """A headerless CSV's cells under their names, ``width`` columns used; and its multi-label columns."""
    names = headerless_names(first, width) or []
    df = df.iloc[:, :len(names)].set_axis(names, axis=1)
    if LABEL_COLUMN in names and names[-1] != LABEL_COLUMN:  # multi-label rows: labels stay text
        return df, names[names.index(LABEL_COLUMN):]
    return df, []


def check_header(url: str, header: list[str]) -> None:
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


def judge(column: pd.Series) -> tuple[str, bool, pd.Series | None]:
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
    """The kind of a column whose parts are of kinds ``a`` and ``b``: what ``judge`` says of the whole."""
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


def checked_layout(url: str, separator: str = ",") -> tuple[list[str], int]:
    """A CSV's first record and the most fields in any record, from a scan of the file that holds a block of it
    at a time; a CSV that cannot be read is a TFRecorderError naming the line (bytes that are not UTF-8, a
    record wider than the header): the same answer for a file of any size, at the memory of a clean read."""
    with open_url(url) as f, _no_field_size_limit():
        first, widest, longer = _scan_records(csv.reader(_utf8_lines(f, url), delimiter=separator))
    if not first:
        raise TFRecorderError(f"CSV {url!r} is empty")
    if headerless_names(first, widest) is None:
        check_header(url, [f.strip() for f in first])
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


def headerless_names(first: list[str], width: int) -> list[str] | None:
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


def merge_labels(df: pd.DataFrame, label_columns: list[str]) -> pd.DataFrame:
    """AutoML multi-label rows (``[split,]uri,label1,label2,...``) -> one list-valued label column."""
    labels = [
        [str(v).strip() for v in row if isinstance(v, str) and v.strip()]
        for row in df[label_columns].itertuples(index=False, name=None)
    ]
    out = df.drop(columns=label_columns)
    out[LABEL_COLUMN] = pd.Series(labels, index=df.index, dtype=object)
    return out
