"""Values (pure): one column's values converted for its type - a whole-column path for plain numeric and text
columns, a checked one per value for the rest - and a float column stored as float32 or float64."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from tfrecorder.dataset import dtypes
from tfrecorder.dataset.connectors import BY_KIND, INT64_MAX, INT64_MIN, Connector, of_type
from tfrecorder.dataset.connectors.base import STAGED, STAGED_SOURCES
from tfrecorder.errors import RowSample, SchemaError
from tfrecorder.schema import ListLike, brief, is_missing, plain_list_items
from tfrecorder.types import ColumnType, Kind, Role
from tfrecorder.write.table.facts import Problem, source_name
from tfrecorder.write.table.floats import FloatFacts
from tfrecorder.write.table.schema_check import feature_name
from tfrecorder.write.table.table import Column


def convert_values(name: str, series: pd.Series, col_type: type[ColumnType], order: int,
                   first_row: int) -> tuple[Column, Problem | None]:
    """Convert the values of column ``name`` - rows ``first_row`` on of a table - for ``col_type``: the column,
    and the problem of the values that do not fit (None when they all do); ``order`` places the problem among
    the table's."""
    feature = feature_name(name, col_type)
    pandas = dtypes.describe(series.dtype) if col_type.role is Role.FEATURE and not col_type.is_list else None
    # a list's items and a scalar are checked by their kind's connector; a type made for a connector by its own,
    # which checks each whole value (an array too)
    own = isinstance(col_type.connector, Connector)
    connector = of_type(col_type) if own else BY_KIND[col_type.kind]
    fast = None if col_type.is_list else connector.whole_column(series)
    if fast is not None:
        given, source = fast
        nullable = not isinstance(given, np.ndarray) and any(v is None for v in given)
        return Column(name, feature, col_type, nullable, source, given, pandas=pandas), None
    plain = _plain_lists(series, connector) if col_type.is_list and not own and series.dtype == object else None
    if plain is not None:
        given, source = plain
        return Column(name, feature, col_type, any(v is None for v in given), source_name(col_type.kind, {source}),
                      given, pandas=pandas), None
    if series.dtype == object and not own and (shaped := _shaped(name, series, order, first_row)) is not None:
        return Column(name, feature, col_type, True, "int", [None] * len(series), pandas=pandas), shaped
    convert = connector.check
    values: list[Any] = []
    bad: list[int] = []
    sources: set[str] = set()
    common = None if col_type.is_list else connector.quick_type
    quick = 0
    for pos, raw in enumerate(series.tolist()):
        # The usual values take a short path; anything else (None, NaN, numpy scalars, out of range) the checked one.
        exact = type(raw) is common
        if exact and common is str:
            values.append(raw.encode("utf-8"))
            quick += 1
            continue
        if exact and (raw == raw if common is float else INT64_MIN <= raw <= INT64_MAX):  # NaN: missing
            values.append(raw)
            quick += 1
            continue
        if own and isinstance(raw, dict) and STAGED in raw:  # checked before a Beam runner staged it
            values.append(raw[STAGED])
            sources.update(raw[STAGED_SOURCES].split("/"))
            continue
        try:
            values.append(convert(raw, sources) if own and not is_missing(raw) else None if own else
                          _convert_value(raw, col_type.is_list, convert, sources))
        except (TypeError, ValueError, OverflowError):
            values.append(None)
            bad.append(pos)
    problem = None
    if bad:
        example = series.iloc[bad[0]]
        example = example.item() if isinstance(example, np.generic) else example
        wanted = f"list of {col_type.kind.name.lower()}" if col_type.is_list else col_type.kind.name.lower()
        problem = Problem(order, name, "value_type", RowSample.of(bad, first_row),
                          ((first_row + bad[0], brief(example)),),
                          col_type.__name__ if own else
                          f"{col_type.__name__} ({wanted})")
    if quick:
        sources.add(common.__name__)
    source = source_name(None if own else col_type.kind, sources)
    return Column(name, feature, col_type, any(v is None for v in values), source, values, pandas=pandas), problem


def _plain_lists(series: pd.Series, item: Connector) -> tuple[list[Any], str] | None:
    """A list column's values as its checked path would give them, at once, where every value is a Python list
    (or None) of items of exactly the kind's usual type (``quick_type``: int, float, str) - a tokenizer's ids -
    and the input type; None for any other column (the checked path, item by item)."""
    common = item.quick_type
    values = series.tolist()
    kinds = plain_list_items(values) if common is not None else None
    if kinds is None or not kinds <= {common}:
        return None
    given = [v for v in values if v is not None]
    if common is int:
        try:  # int64's range, as the checked path holds each to it
            np.fromiter(itertools.chain.from_iterable(given), np.int64)
        except OverflowError:
            return None
    if common is str:
        values = [None if v is None else [s.encode("utf-8") for s in v] for v in values]
    return values, common.__name__


def _shaped(name: str, series: pd.Series, order: int, first_row: int) -> Problem | None:
    """The problem of a column holding 2-D (or higher) arrays: a feature's flat list would lose their shape."""
    shaped = [pos for pos, v in enumerate(series.tolist()) if isinstance(v, np.ndarray) and v.ndim > 1]
    if not shaped:
        return None
    shape = series.iloc[shaped[0]].shape
    return Problem(order, name, "value_shape", RowSample.of(shaped, first_row),
                   ((first_row + shaped[0], str(shape)),), str(shape))


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


def store_floats(column: Column, precision: str, floats: FloatFacts | None = None) -> Column:
    """A float column as float32, unless float32 would change what the column means (``FloatFacts``) and
    ``precision`` is "auto", or ``precision`` is "float64": then as float64, its values the int64 bits of each
    float, with the reason kept for the result's warnings. ``floats``: the whole column's facts, when
    ``column`` is a part of it. Forcing float32 over values beyond its range is a SchemaError."""
    if column.type.kind is not Kind.FLOAT32 or column.type.is_list or column.type.connector:
        return column
    array = float_array(column.values)
    floats = FloatFacts.of(array) if floats is None else floats
    if precision == "float32":
        if floats.beyond.count:
            raise SchemaError(
                f"column {column.name!r}: {floats.beyond.count} values are beyond float32's range (+-3.4e38), "
                f"e.g. {floats.beyond_value!r} ({floats.beyond.describe()}): float_precision='float32' would make "
                f"them infinite; use 'auto' or 'float64'")
        return column
    reason = floats.float64_reason() if precision == "auto" else None
    if precision == "auto" and reason is None:
        return column
    bits: Any = array.view(np.int64)
    values = column.values
    if not isinstance(values, np.ndarray):
        bits = [None if v is None else b for v, b in zip(values, bits.tolist())]
    return replace(column, values=bits, stored_as=Kind.FLOAT64, float64_reason=reason)


def float_array(values: list[Any] | np.ndarray) -> np.ndarray:
    """A float column's values as float64, missing ones NaN."""
    if isinstance(values, np.ndarray):
        return values
    return np.array([np.nan if v is None else v for v in values], dtype=np.float64)
