"""Value conversion edge cases a user would notice: bytes stay bytes, ranges are checked, NaN is missing."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tests.conftest import convert_column
from tfrecorder import types
from tfrecorder.errors import SchemaError


def test_bytes_column_is_recorded_as_bytes_and_text_as_str():
    assert convert_column("b", pd.Series([b"\x00", b"a"], dtype=object), types.StringInput).source == "bytes"
    text = convert_column("t", pd.Series(["é", None], dtype=object), types.StringInput)
    assert (text.source, text.values, text.nullable) == ("str", ["é".encode(), None], True)


@pytest.mark.parametrize("values,col_type,expected,nullable", [
    ([1, 2**63 - 1, None], types.IntegerInput, [1, 2**63 - 1, None], True),
    ([0.5, float("nan"), float("inf")], types.FloatInput, [0.5, None, float("inf")], True),
    ([True, False], types.IntegerInput, [1, 0], False),
    ([np.int64(3), 4], types.IntegerInput, [3, 4], False),
])
def test_values(values, col_type, expected, nullable):
    column = convert_column("c", pd.Series(values, dtype=object), col_type)
    assert column.values == expected and column.nullable is nullable


@pytest.mark.parametrize("values,col_type,message", [
    ([1, 2**63], types.IntegerInput, r"1 values do not fit IntegerInput.*9223372036854775808 \(row 1\)"),
    ([1.0, "1e39x"], types.FloatInput, r"1 values do not fit FloatInput.*'1e39x' \(row 1\)"),
    (["a", 3.5], types.IntegerInput, r"2 values do not fit IntegerInput.*'a' \(rows 0, 1\)"),
])
def test_values_out_of_range_are_schema_errors(values, col_type, message):
    with pytest.raises(SchemaError, match=message):
        convert_column("c", pd.Series(values, dtype=object), col_type)
