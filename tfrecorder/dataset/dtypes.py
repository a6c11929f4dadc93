"""Dtypes (pure): a column's pandas dtype as dataset.json records it, and read_tfr's way back to it.

A record holds int64, float32 or bytes; the input column's own dtype (int8, float16, category with its
categories, datetime64 with its time zone, ...) is kept beside it so that ``read_tfr`` gives the column back as
it was given. Datetimes and timedeltas are stored as int64 counts of their unit (nanoseconds for ``[ns]``),
datetimes with a time zone as UTC instants.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd

INTEGERS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
FLOATS = ("float16", "float32", "float64")


def describe(dtype: Any) -> dict[str, Any] | None:
    """dataset.json's description of a column of ``dtype``: ``{"dtype": name}`` (plus ``categories`` and
    ``ordered`` for a category); None where read_tfr's own rule gives the column back (text, lists, objects).
    Nullable and plain dtypes of a kind are one name (Int8 and int8 are "int8"): whether a column has missing
    values is the feature's ``nullable``, the same whichever way a source held them."""
    if isinstance(dtype, pd.CategoricalDtype):
        categories = dtype.categories.tolist()
        try:
            json.dumps(categories, allow_nan=False)
        except (TypeError, ValueError):  # categories JSON cannot hold (timestamps, NaN): the values as they are
            return None
        return {"dtype": "category", "categories": categories, "ordered": bool(dtype.ordered)}
    if isinstance(dtype, pd.DatetimeTZDtype):
        return {"dtype": f"datetime64[{dtype.unit}, {dtype.tz}]"}
    numpy = getattr(dtype, "numpy_dtype", dtype)  # the masked dtypes' numpy counterpart
    if not isinstance(numpy, np.dtype):
        return None
    if numpy.kind in "Mm":
        return {"dtype": numpy.name}
    if numpy.kind == "b":
        return {"dtype": "bool"}
    if numpy.name in INTEGERS or numpy.name in FLOATS:
        return {"dtype": numpy.name}
    return None


def merge(a: dict[str, Any] | None, b: dict[str, Any] | None) -> dict[str, Any] | None:
    """The description of a column whose parts are described by ``a`` and ``b`` (a category's categories
    joined in order of appearance, ordered only where both agree); None when they differ in kind."""
    if a == b:
        return a
    if a is not None and b is not None and a["dtype"] == b["dtype"] == "category":
        categories = list(dict.fromkeys([*a["categories"], *b["categories"]]))
        return {"dtype": "category", "categories": categories, "ordered": a["ordered"] and b["ordered"]
                and a["categories"] == b["categories"]}
    return None


def as_int64(series: pd.Series) -> tuple[np.ndarray, np.ndarray] | None:
    """A datetime or timedelta column as int64 counts of its unit (UTC instants where it has a time zone) and
    the mask of missing values (NaT); None for any other column."""
    dtype = series.dtype
    if not (isinstance(dtype, pd.DatetimeTZDtype) or (isinstance(dtype, np.dtype) and dtype.kind in "Mm")):
        return None
    counts = series.array.asi8 if isinstance(dtype, pd.DatetimeTZDtype) else series.to_numpy().view(np.int64)
    return counts, series.isna().to_numpy()


def restore(values: Any, missing: np.ndarray | None, described: dict[str, Any] | None) -> Any:
    """A column as read back (numbers: int64, float32/float64 with NaN, or booleans; text) in the dtype
    ``described`` says it was given in; ``missing``: the mask of a number column's missing values."""
    if described is None:
        return values
    dtype = described["dtype"]
    if dtype == "category":
        return pd.Categorical(values, categories=described["categories"], ordered=described["ordered"])
    raw = np.asarray(getattr(values, "_data", values))  # a masked array's numbers, the mask being ``missing``
    if dtype.startswith(("datetime64", "timedelta64")):
        return _times(raw, missing, dtype)
    if dtype in FLOATS:
        return raw.astype(dtype)
    if dtype in INTEGERS:
        numbers = raw.astype(dtype)
        if missing is not None and missing.any():  # the nullable dtype of that width: Int8, UInt64, ...
            return pd.arrays.IntegerArray(numbers, missing)
        return numbers
    return values


def _times(counts: np.ndarray, missing: np.ndarray | None, dtype: str) -> Any:
    """int64 counts back into datetime64 or timedelta64 of their unit, NaT where missing, in their time zone."""
    kind, _, rest = dtype.partition("[")
    unit, _, zone = rest.rstrip("]").partition(", ")
    times = counts.astype(np.int64).view(f"{kind}[{unit}]").copy()
    if missing is not None:
        times[missing] = np.datetime64("NaT") if kind == "datetime64" else np.timedelta64("NaT")
    if not zone:
        return times
    return pd.DatetimeIndex(times).tz_localize("UTC").tz_convert(zone).array
