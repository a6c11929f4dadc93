"""Property tests: any table tfrecorder accepts comes back from read_tfr unchanged (floats at float32)."""

from __future__ import annotations

import tempfile

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

import tfrecorder
from tests.conftest import in_stored_order
from tfrecorder.errors import SchemaError

names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=12).filter(
    lambda n: n not in {"split", "image_uri", "label", "image", "image_height", "image_width", "image_channels",
                        "image_format", "image_name", "image_orientation"})
ints = st.integers(-(2**63), 2**63 - 1)
floats = st.floats(allow_nan=False, allow_infinity=False, width=32)
texts = st.text(max_size=20)


def columns(n: int):
    """Strategies for a column of ``n`` values of each supported kind, missing values included."""
    def of(values, **series):
        return st.lists(values, min_size=n, max_size=n).map(lambda v: pd.Series(v, **series))

    return st.one_of(
        of(ints, dtype="int64"),
        of(floats, dtype="float32"),
        of(st.one_of(floats, st.just(float("nan"))), dtype="float64").filter(lambda s: s.notna().any()),
        of(st.booleans(), dtype=bool),
        of(texts, dtype=object),
        of(texts, dtype="string"),
        of(st.sampled_from(["x", "y", "é z"]), dtype="category"),
        of(st.binary(max_size=8), dtype=object),
        of(st.one_of(st.none(), texts), dtype=object),
        of(st.one_of(st.none(), st.just(pd.NA), ints), dtype="Int64"),
        of(st.lists(ints, max_size=4), dtype=object),
        of(st.lists(floats, max_size=3), dtype=object),
        of(st.lists(texts, max_size=3), dtype=object),
    )


tables = st.integers(1, 4).flatmap(lambda n: st.dictionaries(names, columns(n), min_size=1, max_size=5).map(
    lambda cols: pd.DataFrame({"split": ["TRAIN"] * n, **cols})))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tables)
@example(pd.DataFrame({"split": ["TRAIN"] * 3, "ü n": pd.array([1, None, 2**62], dtype="Int64"),
                       "t": ["a", None, ""], "l": [[1], [], [2, 3]], "f": np.float32([0.5, -1e30, 3])}))
def test_to_tfr_then_read_tfr_returns_the_table_or_a_schema_error(df):
    with tempfile.TemporaryDirectory() as out:
        try:
            df.tensorflow.to_tfr(out + "/d", progress=False)
        except SchemaError:
            event("refused with SchemaError")
            return  # e.g. a column whose values are all missing: refused with a clear error
        event("round trip")
        back = tfrecorder.read_tfr(out + "/d")
    df = in_stored_order(df)  # rows come back in the order they are stored: by the hash of their content
    assert list(back.columns) == list(df.columns)
    for name in df.columns:
        original, got = df[name], back[name]
        if original.dtype.kind == "f":  # stored as float32; NaN is missing and comes back as NaN
            np.testing.assert_array_equal(got.to_numpy(dtype="float32"), original.to_numpy(dtype="float32"))
        elif original.dtype == object and len(original) and isinstance(original.iloc[0], list):
            assert [list(v) for v in got] == [list(v) for v in original]
        else:
            assert [None if pd.isna(v) else v for v in got] == [None if pd.isna(v) else v for v in original], name
