"""URIs (pure): a table's image and mask URIs read from their column (text, trimmed; anything else a problem)
and resolved against the folder of the file each row came from; or, for a column of the images themselves
(``types.ImageBytes``), their encoded bytes and the names they are stored under (``held_images``)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from tfrecorder.errors import RowSample
from tfrecorder.redact import redact
from tfrecorder.schema import brief, is_missing
from tfrecorder.write.sources.embedded import ROW_NAME, image_bytes
from tfrecorder.write.sources.long_form import resolve_uri
from tfrecorder.write.table.facts import Problem


def uri_column(name: str, series: pd.Series, first_row: int) -> tuple[list[str | None], Problem | None]:
    """The URIs of column ``name`` (rows ``first_row`` on), trimmed, blank ones None; and the problem of its
    values that are not text (None when all are)."""
    values = series.tolist()
    bad = [i for i, v in enumerate(values) if not is_missing(v) and not isinstance(v, str)]
    uris = [None if is_missing(v) or not isinstance(v, str) or not v.strip() else v.strip() for v in values]
    if not bad:
        return uris, None
    return uris, Problem(0, name, "image_uri_type", RowSample.of(bad, first_row),
                         ((first_row + bad[0], brief(values[bad[0]])),))


@dataclass(frozen=True)
class HeldImages:
    """The images a part of a table holds itself: each row's encoded bytes (None: a struct that only names a
    file, or no image), the name each is stored under (``image_uri``: the struct's path, else ``row-<n>``),
    and where to read the rows that name a file instead; UNASSIGNED rows are split by the bytes' digest
    (``split_keys``: the same image falls in the same split wherever it is in the table)."""

    data: list[bytes | memoryview | None]
    uris: list[str | None]
    locations: list[str | None]

    def split_keys(self) -> list[str | None]:
        """The text UNASSIGNED rows are split by: the bytes' digest (a name where the row names a file)."""
        return [hashlib.blake2b(found, digest_size=16).hexdigest() if found is not None else uri
                for found, uri in zip(self.data, self.uris)]


def held_images(name: str, series: pd.Series, first_row: int,
                base_dir: str | Sequence[str | None] | None) -> tuple[HeldImages, Problem | None]:
    """The images of column ``name`` (rows ``first_row`` on), and the problem of its values that are no image
    (named by row, never by their bytes); None when every value is an image, a struct naming a file, or missing."""
    data: list[bytes | memoryview | None] = []
    paths: list[str | None] = []
    bad: list[int] = []
    why = ""
    for position, value in enumerate(series.tolist()):
        try:
            found, path = image_bytes(value)
        except ValueError as e:
            found, path = None, None
            bad.append(position)
            why = why or str(e)
        data.append(found)
        paths.append(path)
    wrong = set(bad)
    uris = [redact(path) if path else ROW_NAME.format(row=first_row + i) if found is not None or i in wrong else None
            for i, (found, path) in enumerate(zip(data, paths))]
    named = [path if found is None else None for found, path in zip(data, paths)]
    held = HeldImages(data, uris, locations(named, base_dir))
    if not bad:
        return held, None
    return held, Problem(0, name, "image_value", RowSample.of(bad, first_row), ((first_row + bad[0], why),))


def locations(uris: list[str | None], base_dir: str | Sequence[str | None] | None) -> list[str | None]:
    """Where each row's image is: relative paths joined to the folder of the file the row came from
    (``base_dir``: one folder for the whole table, or one per row for a table read from several files)."""
    if base_dir is None or isinstance(base_dir, str):
        return [resolve_uri(u, base_dir) for u in uris]
    return [resolve_uri(u, base) for u, base in zip(uris, base_dir)]
