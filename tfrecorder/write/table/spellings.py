"""Spellings (pure but for ``os.path.realpath``): a detection table's local image files named in several ways
(``./a.jpg`` and ``a.jpg``, relative and absolute, a symlink and its target) made one image, whatever parts of
the table the names are in.

Within a part (``one_spelling``) each file keeps the first name seen. Across parts, each part says which files it
named and how (``SpellingFacts``, hashes: a few bytes an image); a table whose parts name one file in two ways
is summarized again, every part given the files to watch (``Spellings``), so that each of them keeps the first
name of the whole table: one record, in one split, under that name. A table without such a file is read once,
as before, and keeps its bytes."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from tfrecorder.dataset.connectors import BYTES


@dataclass
class Spellings:
    """What a second summary pass carries from part to part: the files named in several ways (hashes of their
    resolved paths, ``SpellingFacts.aliased``) and, once a part names one, its first name and URI."""

    wanted: frozenset[int] = frozenset()
    first: dict[str, tuple[str, str | None]] = field(default_factory=dict)  # resolved path -> (location, URI)


@dataclass(frozen=True)
class SpellingFacts:
    """Which local files parts of a table named and how: for each part, a hash of each file's resolved path, of
    the name (location) it kept there, and the first row so naming it. Merging keeps the parts' arrays as they
    are (no copy of what came before: a part at a time, it stays linear); ``aliased`` reads them once."""

    parts: tuple[tuple[np.ndarray, np.ndarray, np.ndarray], ...] = ()

    def merge(self, other: SpellingFacts) -> SpellingFacts:
        return SpellingFacts(self.parts + other.parts)

    def aliased(self) -> dict[int, list[int]]:
        """The files named in more than one way: each one's (resolved path's hash) first row of each name, in
        row order."""
        if len(self.parts) < 2:  # a part names each file one way (``one_spelling``)
            return {}
        files, names, rows = (np.concatenate([part[i] for part in self.parts]) for i in range(3))
        order = np.lexsort((rows, names, files))
        files, names, rows = files[order], names[order], rows[order]
        first = np.r_[True, (files[1:] != files[:-1]) | (names[1:] != names[:-1])]  # each (file, name) once
        files, rows = files[first], rows[first]
        found: dict[int, list[int]] = {}
        starts = np.flatnonzero(np.r_[True, files[1:] != files[:-1]])
        for start, stop in zip(starts.tolist(), [*starts[1:].tolist(), len(files)]):
            if stop - start > 1:
                found[int(files[start])] = sorted(rows[start:stop].tolist())
        return found


def one_spelling(locations: list[str | None], uris: list[str | None], first_row: int = 0,
                 spellings: Spellings | None = None) -> tuple[list[str | None], list[str | None], SpellingFacts]:
    """A detection part's image locations and URIs with every spelling of one local file (one
    ``os.path.realpath``) as the first one seen - in the part, or for a file of ``spellings.wanted``, in the whole
    table (its earlier parts) - and which files it named how. URLs stay as they are. A part without two
    spellings of a file keeps its locations and URIs (and so its bytes)."""
    first: dict[str, tuple[str, str | None]] = {}  # resolved path -> (first location, its URI)
    resolved: dict[str, str] = {}
    folders: dict[str, str] = {}  # each folder's real path, resolved once for all its files
    out_locations, out_keys = list(locations), list(uris)
    rows: dict[str, int] = {}  # resolved path -> the part's first position naming it
    for pos, (location, uri) in enumerate(zip(locations, uris)):
        if location is None or "://" in location:
            continue
        path = resolved.get(location)
        if path is None:
            path = resolved[location] = _realpath(location, folders)
            rows.setdefault(path, pos)
        out_locations[pos], out_keys[pos] = first.setdefault(path, (location, uri))
    paths = list(rows)
    hashes = BYTES.hashes(paths) if paths else np.zeros(0, np.uint64)
    if spellings is not None and spellings.wanted:
        _table_first(spellings, paths, hashes, first)
        for pos, location in enumerate(locations):
            path = resolved.get(location) if location is not None else None
            if path in spellings.first:
                out_locations[pos], out_keys[pos] = spellings.first[path]
    chosen = spellings.first if spellings is not None else {}
    names = [chosen.get(p, first[p])[0] for p in paths]
    facts = SpellingFacts(((hashes, BYTES.hashes(names) if names else np.zeros(0, np.uint64),
                            np.array([first_row + rows[p] for p in paths], np.int64)),))
    return out_locations, out_keys, facts


def _realpath(location: str, folders: dict[str, str]) -> str:
    """``os.path.realpath(location)``, its folder's links resolved once for all the files in it (``folders``):
    only the file itself is looked at again, and fully resolved when it is a link."""
    folder, name = os.path.split(location)
    if name in ("", ".", "..") or os.path.islink(location):
        return os.path.realpath(location)
    real = folders.get(folder)
    if real is None:
        real = folders[folder] = os.path.realpath(folder)
    return os.path.join(real, name)


def _table_first(spellings: Spellings, paths: Sequence[str], hashes: np.ndarray,
                 first: dict[str, tuple[str, str | None]]) -> None:
    """Record the part's name of each watched file not named by an earlier part: the table's first."""
    for path, digest in zip(paths, hashes.tolist()):
        if digest in spellings.wanted:
            spellings.first.setdefault(path, first[path])
