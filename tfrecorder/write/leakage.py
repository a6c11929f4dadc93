"""Leakage (pure): the same image in TRAIN and in VALIDATION/TEST, by URI or by content fingerprint."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from tfrecorder.write.splits import TRAIN, WRITTEN_SPLITS

MAX_REPORTED = 100  # entries kept in dataset.json; the count says how many there were


def content_key(data: bytes, crc32c: int) -> int:
    """A 64-bit content key: CRC-32C and length. Equal keys are reported as 'same bytes' (almost surely equal)."""
    return (crc32c << 32) | (len(data) & 0xFFFFFFFF)


def find_leaks(kind: str, keyed_rows: Callable[[], Iterable[tuple[Any, int, str]]]) -> list[dict[str, Any]]:
    """Groups of rows sharing a key (URI or fingerprint) that span TRAIN and VALIDATION/TEST.

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
        found = {split for _, split in members}
        if TRAIN in found and len(found) > 1:
            entry = {"kind": kind, "splits": sorted(found), "rows": sorted(row for row, _ in members)}
            if kind == "same_uri":
                entry["image_uri"] = key
            leaks.append(entry)
    return sorted(leaks, key=lambda e: e["rows"][0])


def summarize(leaks: Sequence[dict[str, Any]]) -> str | None:
    """One warning line for ConvertResult, or None when nothing leaked."""
    if not leaks:
        return None
    first = leaks[0]
    rows = ", ".join(map(str, first["rows"][:4]))
    return (f"{len(leaks)} images appear in TRAIN and in VALIDATION/TEST (same URI or same bytes), "
            f"e.g. rows {rows} ({first['kind']}); see 'leakage' in dataset.json")
