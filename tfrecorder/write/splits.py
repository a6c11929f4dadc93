"""Splits (pure): normalise split values and assign UNASSIGNED rows by a stable hash."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from tfrecorder.errors import SchemaError, describe_rows
from tfrecorder.types import DISCARD, TEST, TRAIN, UNASSIGNED, VALIDATION, SplitKey

__all__ = ["TRAIN", "VALIDATION", "TEST", "DISCARD", "UNASSIGNED", "WRITTEN_SPLITS", "KNOWN_SPLITS",
           "DEFAULT_FRACTIONS", "check_fractions", "normalize_splits", "split_values", "unknown_splits_message",
           "hash_fraction", "assign_split", "NAMED_SPLITS"]
WRITTEN_SPLITS = (TRAIN, VALIDATION, TEST)
KNOWN_SPLITS = SplitKey.allowed_values
DEFAULT_FRACTIONS = (0.8, 0.1, 0.1)
# The names tools give splits -> ours: a Hugging Face DatasetDict's, the Hub's files (train-00000-of-00002.parquet)
NAMED_SPLITS = {"train": TRAIN, "validation": VALIDATION, "valid": VALIDATION, "val": VALIDATION, "dev": VALIDATION,
                "test": TEST}


def check_fractions(fractions: Sequence[float]) -> tuple[float, float, float]:
    """Validate (train, validation, test) fractions: three non-negative numbers summing to 1."""
    values = tuple(float(f) for f in fractions)
    if len(values) != 3 or min(values) < 0 or abs(sum(values) - 1.0) > 1e-6:
        raise SchemaError(
            f"split_fractions={tuple(fractions)!r}: give three non-negative fractions "
            f"(TRAIN, VALIDATION, TEST) that sum to 1, e.g. (0.8, 0.1, 0.1)"
        )
    return values  # type: ignore[return-value]


_CANONICAL = {name: name for name in KNOWN_SPLITS}


def normalize_splits(column: str, values: Sequence[object]) -> list[str]:
    """Upper-case and trim split values; raise one SchemaError listing every unknown value."""
    out, unknown = split_values(values)
    if unknown:
        rows = sorted(r for rs in unknown.values() for r in rs)
        raise SchemaError(unknown_splits_message(column, list(unknown), len(rows), describe_rows(rows)))
    return out


def split_values(values: Sequence[object]) -> tuple[list[str], dict[str, list[int]]]:
    """Split values upper-cased and trimmed (unknown ones as UNASSIGNED), and each unknown value's repr with
    its positions, in the order first seen."""
    out: list[str] = []
    unknown: dict[str, list[int]] = {}
    for pos, value in enumerate(values):
        # ASCII only: str.upper() would turn look-alikes such as "traın" (dotless i) into TRAIN
        text = value.strip().upper() if isinstance(value, str) and value.isascii() else None
        if text == "":
            text = UNASSIGNED
        if text not in KNOWN_SPLITS:
            unknown.setdefault(repr(value), []).append(pos)
            text = UNASSIGNED
        out.append(_CANONICAL[text])  # one shared str per split name, not one per row
    return out, unknown


def unknown_splits_message(column: str, values: Sequence[str], count: int, rows: str) -> str:
    """The error for split values that are not split names: the first 5 (reprs), how many rows, which."""
    return (f"column {column!r}: {count} rows have values outside {'/'.join(KNOWN_SPLITS)}: "
            f"{', '.join(values[:5])} ({rows})")


def hash_fraction(key: str) -> float:
    """A number in [0, 1) from ``key``, the same on every machine, run and Python version."""
    digest = hashlib.sha256(key.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


def assign_split(key: str, fractions: Sequence[float] = DEFAULT_FRACTIONS) -> str:
    """TRAIN, VALIDATION or TEST for ``key`` (an image URI or a row's values), by stable hash."""
    point = hash_fraction(key)
    if point < fractions[0]:
        return TRAIN
    if point < fractions[0] + fractions[1]:
        return VALIDATION
    return TEST
