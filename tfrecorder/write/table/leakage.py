"""Leakage (pure): the same image in TRAIN and in VALIDATION/TEST, by URI or by content key."""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from tfrecorder.write.splits import TRAIN, WRITTEN_SPLITS

KeyedRows = tuple[np.ndarray, np.ndarray, np.ndarray]  # rows' 64-bit keys (URI or content hash), numbers, split codes
KEY_RANGES = 64  # ranges of 64-bit key a pipeline groups rows by to find leaks (a key's rows are in one range)

MAX_REPORTED = 100  # entries kept in dataset.json; the count says how many there were
ROWS_REPORTED = 10  # rows listed per entry; row_count says how many share the image


def content_key(data: bytes) -> int:
    """A 64-bit content hash (the first 8 bytes of SHA-256): equal keys are reported as 'same bytes'. A CRC
    would not do (it matches distinct images); SHA-256 rather than BLAKE2b for CPUs with SHA extensions
    (figures: benchmarks/CONSTANTS.md)."""
    return int.from_bytes(hashlib.sha256(data).digest()[:8], "little")


def bounded(entry: dict[str, Any]) -> dict[str, Any]:
    """A leak entry as dataset.json keeps it: its first ROWS_REPORTED rows and how many there are."""
    if len(entry["rows"]) <= ROWS_REPORTED:
        return entry
    return {**entry, "rows": entry["rows"][:ROWS_REPORTED], "row_count": len(entry["rows"])}


def find_leaks(kind: str, keyed_rows: Callable[[], Iterable[tuple[Any, int, str]]], *,
               any_splits: bool = False) -> list[dict[str, Any]]:
    """Groups of rows sharing a key (URI or content key) that span TRAIN and VALIDATION/TEST (``any_splits``:
    any two written splits).

    ``keyed_rows()`` gives (key, row, split) afresh each call: a first pass finds the keys seen
    twice, a second groups only their rows, so memory follows the duplicates, not the table.
    """
    seen: set[Any] = set()
    repeated: set[Any] = set()
    for key, _, split in keyed_rows():
        if key is not None and split in WRITTEN_SPLITS:
            if key in seen:
                repeated.add(key)
            else:
                seen.add(key)
    del seen
    groups: dict[Any, list[tuple[int, str]]] = defaultdict(list)
    if repeated:
        for key, row, split in keyed_rows():
            if key in repeated and split in WRITTEN_SPLITS:
                groups[key].append((row, split))
    leaks = []
    for key, members in groups.items():
        found = [split for split in WRITTEN_SPLITS if any(s == split for _, s in members)]
        if (any_splits or TRAIN in found) and len(found) > 1:
            # the first row of each split (in the splits' order), then the rest: a group of 30 TRAIN rows and 5
            # TEST ones names a TEST row in its first ROWS_REPORTED, and the warning both splits' rows
            firsts = [min(row for row, s in members if s == split) for split in found]
            rest = sorted(row for row, _ in members if row not in firsts)
            entry = {"kind": kind, "splits": found, "rows": firsts + rest}
            if kind == "same_uri":
                entry["image_uri"] = key
            leaks.append(entry)
    return sorted(leaks, key=lambda e: min(e["rows"][:len(e["splits"])]))


def across_train(leaks: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The entries of ``leaks`` whose rows are in TRAIN and in VALIDATION/TEST: the leaks reported."""
    return [entry for entry in leaks if TRAIN in entry["splits"]]


def summarize(leaks: Sequence[dict[str, Any]]) -> str | None:
    """One warning line for ConvertResult, or None when nothing leaked."""
    if not leaks:
        return None
    first = leaks[0]
    rows = ", ".join(f"{row} ({split})" for row, split in zip(first["rows"], first["splits"]))
    return (f"{len(leaks)} images appear in TRAIN and in VALIDATION/TEST (same URI or same bytes), "
            f"e.g. rows {rows} ({first['kind']}); see 'leakage' in dataset.json")


def key_range(keys: np.ndarray, ranges: int) -> np.ndarray:
    """The range of each 64-bit key among ``ranges`` equal ranges of them, in key order (spill buckets, and
    the groups a pipeline finds leaks in)."""
    return ((keys >> np.uint64(32)) * np.uint64(ranges)) >> np.uint64(32)


def key_ranges(keys: Sequence[KeyedRows]) -> dict[int, KeyedRows]:
    """``keys`` by range of key (KEY_RANGES ranges): every row of one key falls in one range, so each range's
    leaks are found alone (``range_leaks``), as a pipeline does after grouping them by range."""
    if not keys:
        return {}
    hashes, rows, splits = (np.concatenate(column) for column in zip(*keys))
    ranges = key_range(hashes, KEY_RANGES)
    return {int(r): (hashes[ranges == r], rows[ranges == r], splits[ranges == r]) for r in np.unique(ranges)}


def range_leaks(kind: str, keys: Sequence[KeyedRows]) -> list[dict[str, Any]]:
    """The leaks of ``kind`` ("same_uri": URI hashes, "same_bytes": content keys) among ``keys`` (all of a
    table's, or all of one range): entries of ``find_leaks`` (a same-URI one without its URI text, and for
    any two written splits: ``across_train`` picks the leaks, and a detection table refuses them all, as an
    image's boxes go in one split). The one leak finder: the local runner gives it every key at once, a
    pipeline one range of keys at a time."""
    if not keys:
        return []
    hashes, rows, splits = (np.concatenate(column) for column in zip(*keys))
    written = splits >= 0
    found, counts = np.unique(hashes[written], return_counts=True)
    repeated = np.isin(hashes, found[counts > 1]) & written
    if not repeated.any():
        return []
    names = np.array(WRITTEN_SPLITS, dtype=object)
    return find_leaks(kind, lambda: zip(hashes[repeated].tolist(), rows[repeated].tolist(),
                                        names[splits[repeated]].tolist()), any_splits=kind == "same_uri")
