"""Floats (pure): whether float32 keeps what a float column means, from facts that merge over its parts."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from tfrecorder.errors import RowSample

FLOAT32_MAX = float(np.finfo(np.float32).max)
# Float32 keeps a float column unless it would change what the column means (issue #26): distinct values
# as written (whole numbers, short decimals) made equal, values moved by more than this share of the
# column's range, or values beyond float32's range made infinite.
FLOAT32_RANGE_SHARE = 1e-4
WRITTEN_DECIMALS = 6  # values with at most this many decimals are taken as written, each naming a value
MAX_DISTINCT = 1 << 20  # distinct values a column's facts keep to find values float32 makes equal across parts


@dataclass(frozen=True, eq=False)
class FloatFacts:
    """What float32 would do to a float column, mergeable over the parts of a table: its finite range, the
    largest change of a value, whether every value is as written (a whole number or short decimal), two
    distinct values it makes equal, and the values beyond its range."""

    low: float = math.inf
    high: float = -math.inf
    change: float = 0.0  # the largest |x - float32(x)| of a value within float32's range
    changed: float = 0.0  # a value changed that much
    written: bool = True  # every finite value has at most WRITTEN_DECIMALS decimals
    distinct: np.ndarray | None = None  # sorted distinct finite values; None past MAX_DISTINCT
    merged: tuple[float, float] | None = None  # two distinct values float32 makes equal
    beyond: RowSample = RowSample()  # finite values beyond float32's range
    beyond_value: float | None = None

    @classmethod
    def of(cls, values: np.ndarray, first_row: int = 0) -> FloatFacts:
        """The facts of a column's values (float64, NaN where missing), rows ``first_row`` on of a table."""
        finite_at = np.isfinite(values)
        finite = values[finite_at]
        if not finite.size:
            return cls(distinct=np.empty(0))
        outside = np.abs(finite) > FLOAT32_MAX
        beyond_rows = np.flatnonzero(finite_at)[outside]
        inside = finite[~outside]
        with np.errstate(over="ignore"):
            change = np.abs(inside - inside.astype(np.float32).astype(np.float64))
        worst = int(np.argmax(change)) if change.size else None
        distinct = np.unique(finite)
        return cls(
            float(finite.min()), float(finite.max()),
            float(change[worst]) if worst is not None else 0.0, float(inside[worst]) if worst is not None else 0.0,
            _as_written(distinct), distinct if distinct.size <= MAX_DISTINCT else None, _merged(distinct),
            RowSample.of(beyond_rows.tolist(), first_row), float(finite[outside][0]) if outside.any() else None)

    def merge(self, other: FloatFacts) -> FloatFacts:
        distinct = None
        if self.distinct is not None and other.distinct is not None:
            distinct = np.union1d(self.distinct, other.distinct)
            distinct = distinct if distinct.size <= MAX_DISTINCT else None
        worst = self if self.change >= other.change else other
        return FloatFacts(
            min(self.low, other.low), max(self.high, other.high), worst.change, worst.changed,
            self.written and other.written, distinct,
            self.merged or other.merged or (_merged(distinct) if distinct is not None else None),
            self.beyond.merge(other.beyond), self.beyond_value if self.beyond_value is not None else other.beyond_value)

    def settled(self) -> FloatFacts:
        """These facts without the distinct values (what the shard writers need: the decision alone)."""
        return replace(self, distinct=None)

    def float64_reason(self) -> str | None:
        """Why float32 would change what the column means, or None when it keeps it."""
        if self.beyond.count:
            values = "a value" if self.beyond.count == 1 else f"{self.beyond.count} values"
            return f"float32 would make {values} beyond its range (+-3.4e38) infinite, e.g. {self.beyond_value!r}"
        if self.written and self.merged is not None:
            a, b = self.merged
            return (f"float32 would make distinct values equal, e.g. {a!r} and {b!r} both become "
                    f"{float(np.float32(a))!r}")
        spread = self.high - self.low
        if spread > 0 and self.change > FLOAT32_RANGE_SHARE * spread:
            return (f"float32 would change values by up to {self.change:.3g} ({self.change / spread:.2%} of the "
                    f"column's range), e.g. {self.changed!r} becomes {float(np.float32(self.changed))!r}")
        return None


def _as_written(distinct: np.ndarray) -> bool:
    """Whether every value is a whole number or a decimal of at most WRITTEN_DECIMALS places (as written in a
    CSV: ids, counts, prices, whole-second times), rather than a computed value such as 7/3 or a random draw."""
    rest = distinct[np.abs(distinct) < 2.0 ** 53]  # larger floats are whole numbers
    for decimals in range(WRITTEN_DECIMALS + 1):
        if not rest.size:
            return True
        rest = rest[np.round(rest, decimals) != rest]
    return not rest.size


def _merged(distinct: np.ndarray) -> tuple[float, float] | None:
    """Two of these sorted distinct values that float32 makes equal (neighbours, as rounding keeps order)."""
    inside = distinct[np.abs(distinct) <= FLOAT32_MAX]
    with np.errstate(over="ignore"):
        rounded = inside.astype(np.float32)
    same = np.flatnonzero(rounded[1:] == rounded[:-1])
    return (float(inside[same[0]]), float(inside[same[0] + 1])) if same.size else None
