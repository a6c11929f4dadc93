"""Validate (pure): (DataFrame, Schema) -> Table ready to encode, or one error listing every problem."""

from __future__ import annotations

import os
import posixpath
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from tfrecorder.dataset.features import DERIVED_NAMES, ROLE_FEATURES
from tfrecorder.dataset.redact import redact
from tfrecorder.errors import SchemaError, describe_rows
from tfrecorder.schema import ListLike, Schema, is_missing
from tfrecorder.types import ColumnType, Kind, Role
from tfrecorder.write import labels, splits
from tfrecorder.write.table import Column, Table

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
FLOAT32_MAX = float(np.finfo(np.float32).max)


def validate(
    df: pd.DataFrame,
    schema: Schema | None = None,
    *,
    base_dir: str | Sequence[str | None] | None = None,
    split_fractions: Sequence[float] = splits.DEFAULT_FRACTIONS,
    float_precision: str = "auto",
) -> Table:
    """Check ``df`` against ``schema`` (None: inferred) and convert it; SchemaError names column, values, rows.

    Float columns are stored as float32, unless float32 would change a value as written (see
    ``store_floats``) and ``float_precision`` is "auto", or it is "float64".
    """
    if len(df) == 0:
        raise SchemaError("the table is empty: there are no rows to convert")
    if schema is None:
        schema = Schema.infer(df)
    missing = [c for c in schema if c not in df.columns]
    if missing:
        raise SchemaError(
            f"missing column{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))}: "
            f"the schema names {'them' if len(missing) > 1 else 'it'} but the table has columns "
            f"{[str(c) for c in df.columns]}"
        )
    _check_feature_names(schema)
    fractions = splits.check_fractions(split_fractions)
    split_col, image_col, label_col = (schema.column_for(r) for r in (Role.SPLIT, Role.IMAGE, Role.LABEL))

    problems: list[str] = []
    given_uris = _guard(problems, lambda: _image_uris(image_col, df[image_col])) if image_col else None
    image_uris = [redact(u) if u else u for u in given_uris] if given_uris else given_uris
    row_splits = _guard(problems, lambda: _row_splits(df, split_col, image_uris, fractions))
    label = _guard(problems, lambda: _as_list(convert_column(label_col, df[label_col], schema[label_col]))) \
        if label_col else None
    features = []
    for name, col_type in schema.items():
        if col_type.role is Role.FEATURE:
            column = _guard(problems, lambda n=name, t=col_type: convert_column(n, df[n], t))
            features.append(store_floats(column, float_precision) if column else column)
    if problems:
        raise SchemaError("; ".join(problems) if len(problems) > 1 else problems[0])

    vocabulary = None
    if label is not None:
        label, vocabulary = _label_ids(label, row_splits)
    return Table(
        schema=schema,
        num_rows=len(df),
        splits=row_splits,
        image_uris=image_uris,
        image_locations=_locations(given_uris, base_dir) if given_uris else None,
        label=label,
        vocabulary=vocabulary,
        features=tuple(features),
    )


def feature_name(column: str, col_type: type[ColumnType]) -> str:
    """The feature a column is stored under: its role's (``split``, ``image_uri``, ``label``) or its own name."""
    role_feature = ROLE_FEATURES.get(col_type.role)
    return role_feature.name if role_feature else column


def store_floats(column: Column, precision: str) -> Column:
    """A float column as float32 when that keeps every value as written; else (precision "auto"), or always
    (precision "float64"), as float64 - its values then the int64 bits of each float. Never a silent rounding."""
    if column.type.kind is not Kind.FLOAT32 or column.type.is_list or precision == "float32":
        return column
    values = column.values
    array = values if isinstance(values, np.ndarray) else np.array([np.nan if v is None else v for v in values],
                                                                    dtype=np.float64)
    if precision == "auto" and float32_holds(array):
        return column
    bits = array.view(np.int64)
    if not isinstance(values, np.ndarray):
        bits = [None if v is None else b for v, b in zip(values, bits.tolist())]
    return replace(column, values=bits, stored_as=Kind.FLOAT64)


def float32_holds(values: np.ndarray) -> bool:
    """Whether every value reads the same after float32: exact in float32, a decimal of at most 6 significant
    digits (which float32's 24 bits always give back: 0.1, 2.35), or one whose shortest decimal survives it.
    1700000001.75 does not (float32 gives 1700000000.0), nor do most computed values such as pi."""
    finite = values[np.isfinite(values)]
    rest = finite[finite.astype(np.float32).astype(np.float64) != finite]
    for decimals in range(7):  # cheap, vectorised: short decimals, the values of most CSVs
        if not rest.size:
            return True
        rest = rest[~((np.round(rest, decimals) == rest) & (np.abs(rest) * 10.0**decimals < 1e6))]
    for start in range(0, rest.size, 4096):  # the rest by their shortest decimal; stops at the first change
        chunk = rest[start:start + 4096]
        if not (chunk.astype(np.float32).astype(str).astype(np.float64) == chunk).all():
            return False
    return True


def _guard(problems: list[str], step: Callable[[], Any]) -> Any:
    """Run one column's check, collecting its SchemaError so that one error lists every problem."""
    try:
        return step()
    except SchemaError as e:
        problems.append(str(e))
        return None


def _check_feature_names(schema: Schema) -> None:
    taken: dict[str, str] = {}
    for name, col_type in schema.items():
        feature = feature_name(name, col_type)
        if col_type.role is Role.FEATURE and name in DERIVED_NAMES:
            raise SchemaError(
                f"column {name!r}: the name is reserved for a feature tfrecorder writes "
                f"({', '.join(sorted(DERIVED_NAMES))}); rename the column or give it that role in schema="
            )
        if feature in taken:
            raise SchemaError(f"columns {taken[feature]!r} and {name!r} would both be stored as {feature!r}")
        taken[feature] = name


def _image_uris(name: str, series: pd.Series) -> list[str | None]:
    values = series.tolist()
    bad = [i for i, v in enumerate(values) if not is_missing(v) and not isinstance(v, str)]
    if bad:
        raise SchemaError(
            f"column {name!r}: image URIs must be strings; found {values[bad[0]]!r} ({describe_rows(bad)})"
        )
    return [None if is_missing(v) or not v.strip() else v.strip() for v in values]


def _row_splits(df: pd.DataFrame, split_col: str | None, image_uris, fractions) -> list[str]:
    if split_col is None:
        row_splits = [splits.UNASSIGNED] * len(df)
    else:
        values = [None if is_missing(v) else v for v in df[split_col].tolist()]
        row_splits = splits.normalize_splits(split_col, [v if v is not None else "" for v in values])
    if splits.UNASSIGNED not in row_splits:
        return row_splits
    keys = image_uris if image_uris is not None else _row_keys(df)
    return [
        splits.assign_split(keys[i] or _row_keys(df.iloc[[i]])[0], fractions) if s == splits.UNASSIGNED else s
        for i, s in enumerate(row_splits)
    ]


def _row_keys(df: pd.DataFrame) -> list[str]:
    """A stable text per row (its values joined) to hash tables that have no image URI."""
    return ["\x1f".join(map(str, row)) for row in df.astype(str).itertuples(index=False, name=None)]


def _as_list(column: Column) -> Column:
    if isinstance(column.values, np.ndarray):
        return replace(column, values=column.values.tolist())
    return column


def _label_ids(label: Column, row_splits: list[str]) -> tuple[Column, list[str] | None]:
    missing = [i for i, (v, s) in enumerate(zip(label.values, row_splits)) if v is None and s != splits.DISCARD]
    if missing:
        raise SchemaError(
            f"column {label.name!r}: {len(missing)} rows have no label ({describe_rows(missing)}); "
            f"fill them, mark them DISCARD, or drop the column"
        )
    if label.type.kind is not Kind.BYTES:
        return label, None
    texts = [_decode(v) for v in label.values]
    vocabulary = labels.build_vocabulary(texts, row_splits)
    ids = labels.to_label_ids(label.name, texts, row_splits, vocabulary)
    converted = Column(label.name, label.feature, label.type, False, label.source, ids)
    return converted, vocabulary


def _decode(value: Any) -> Any:
    """A label as text, trimmed at both ends: "cat " and " cat" are the class "cat"."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace").strip()
    if isinstance(value, list):
        return [_decode(v) for v in value]
    return value.strip() if isinstance(value, str) else value


def _locations(uris: list[str | None], base_dir: str | Sequence[str | None] | None) -> list[str | None]:
    """Where each row's image is: relative paths joined to the folder of the file the row came from
    (``base_dir``: one folder for the whole table, or one per row for a table read from several files)."""
    if base_dir is None or isinstance(base_dir, str):
        return [resolve_uri(u, base_dir) for u in uris]
    return [resolve_uri(u, base) for u, base in zip(uris, base_dir)]


def resolve_uri(uri: str | None, base_dir: str | None) -> str | None:
    """Join a relative path to ``base_dir`` (the CSV's folder); URLs and absolute paths stay."""
    if uri is None or base_dir is None or "://" in uri or uri.startswith("/"):
        return uri
    if "://" in base_dir:
        return posixpath.join(base_dir, uri)
    return os.path.join(base_dir, uri)


# --- values ------------------------------------------------------------------------------

def convert_column(name: str, series: pd.Series, col_type: type[ColumnType]) -> Column:
    """Convert one column's values for ``col_type``; SchemaError names the values and rows that do not fit."""
    feature = feature_name(name, col_type)
    fast = _fast_numeric(series, col_type)
    if fast is not None:
        values, source = fast
        nullable = not isinstance(values, np.ndarray) and any(v is None for v in values)
        return Column(name, feature, col_type, nullable, source, values)
    convert = _CONVERTERS[col_type.kind]
    values: list[Any] = []
    bad: list[int] = []
    sources: set[str] = set()
    common = None if col_type.is_list else _COMMON_TYPES[col_type.kind]
    quick = 0
    for pos, raw in enumerate(series.tolist()):
        # The usual values take a short path; anything else (None, NaN, numpy scalars, out of range) the checked one.
        exact = type(raw) is common
        if exact and common is str:
            values.append(raw.encode("utf-8"))
            quick += 1
            continue
        if exact and (INT64_MIN <= raw <= INT64_MAX if common is int else abs(raw) <= FLOAT32_MAX):
            values.append(raw)
            quick += 1
            continue
        try:
            values.append(_convert_value(raw, col_type.is_list, convert, sources))
        except (TypeError, ValueError, OverflowError):
            values.append(None)
            bad.append(pos)
    if bad:
        example = series.iloc[bad[0]]
        example = example.item() if isinstance(example, np.generic) else example
        wanted = f"list of {col_type.kind.name.lower()}" if col_type.is_list else col_type.kind.name.lower()
        raise SchemaError(
            f"column {name!r}: {len(bad)} values do not fit {col_type.__name__} ({wanted}), "
            f"e.g. {example!r} ({describe_rows(bad)})"
        )
    if quick:
        sources.add(common.__name__)
    source = _source_name(col_type.kind, sources)
    return Column(name, feature, col_type, any(v is None for v in values), source, values)


def _fast_numeric(series: pd.Series, col_type: type[ColumnType]) -> tuple[list[Any], str] | None:
    """Whole-column conversion for plain numeric dtypes and all-str text columns (no per-value checks)."""
    dtype = series.dtype
    if col_type.is_list:
        return None
    textual = isinstance(dtype, pd.StringDtype) or (isinstance(dtype, np.dtype) and dtype.kind == "O")
    if col_type.kind is Kind.BYTES and textual:
        values = series.tolist()
        try:  # every value a str (the usual text column): encode in one pass, no per-value checks
            return [v.encode("utf-8") for v in values], "str"
        except AttributeError:  # missing values, bytes or other types: the checked path
            return None
    if not isinstance(dtype, np.dtype):
        return None
    if col_type.kind is Kind.INT64 and dtype.kind in "bi":
        return series.to_numpy(dtype=np.int64), "bool" if dtype.kind == "b" else "int"
    if col_type.kind is Kind.FLOAT32 and dtype.kind == "f":
        arr = series.to_numpy(dtype=np.float64)
        finite = np.isfinite(arr)
        if np.any(np.abs(arr[finite]) > FLOAT32_MAX):
            return None  # let the slow path name the rows
        if not np.isnan(arr).any():
            return arr, "float"
        return [None if v != v else v for v in arr.tolist()], "float"
    return None


def _convert_value(raw: Any, is_list: bool, convert: Callable[[Any, set[str]], Any], sources: set[str]) -> Any:
    if is_list:
        if isinstance(raw, ListLike):
            items = raw.ravel().tolist() if isinstance(raw, np.ndarray) else list(raw)
            return [convert(v, sources) for v in items]
        if is_missing(raw):
            return None
        raise TypeError("not a list")
    if isinstance(raw, ListLike):
        raise TypeError("a list where one value was expected")
    return None if is_missing(raw) else convert(raw, sources)


def _to_int(value: Any, sources: set[str]) -> int:
    if isinstance(value, (bool, np.bool_)):
        sources.add("bool")
        return int(value)
    if isinstance(value, (int, np.integer)):
        result = int(value)
    elif isinstance(value, (float, np.floating)) and float(value).is_integer():
        result = int(value)
    else:
        raise TypeError("not an integer")
    if not INT64_MIN <= result <= INT64_MAX:
        raise OverflowError("outside int64")
    sources.add("int")
    return result


def _to_float(value: Any, sources: set[str]) -> float:
    if isinstance(value, (str, bytes)) or not isinstance(value, (int, float, np.number, np.bool_)):
        raise TypeError("not a number")
    result = float(value)
    if result == result and abs(result) != float("inf") and abs(result) > FLOAT32_MAX:
        raise OverflowError("outside float32")
    sources.add("float")
    return result


def _to_bytes(value: Any, sources: set[str]) -> bytes:
    if isinstance(value, (bytes, np.bytes_)):
        sources.add("bytes")
        return bytes(value)
    if isinstance(value, (str, np.str_)):
        sources.add("str")
        return str(value).encode("utf-8")
    if isinstance(value, (int, float, np.number, np.bool_)):
        sources.add("str")
        return str(value).encode("utf-8")
    raise TypeError("not text")


# The exact Python type most values of a kind have.
_COMMON_TYPES: dict[Kind, type] = {Kind.INT64: int, Kind.FLOAT32: float, Kind.BYTES: str}

_CONVERTERS: dict[Kind, Callable[[Any, set[str]], Any]] = {
    Kind.INT64: _to_int,
    Kind.FLOAT32: _to_float,
    Kind.BYTES: _to_bytes,
}


def _source_name(kind: Kind, sources: set[str]) -> str:
    if kind is Kind.BYTES:
        return "bytes" if sources == {"bytes"} else "str"
    if kind is Kind.INT64:
        return "bool" if sources == {"bool"} else "int"
    return "float"
