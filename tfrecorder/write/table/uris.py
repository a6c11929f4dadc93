"""URIs (pure): a table's image and mask URIs read from their column (text, trimmed; anything else a problem)
and resolved against the folder of the file each row came from."""

from __future__ import annotations

import os
import posixpath
from collections.abc import Sequence

import pandas as pd

from tfrecorder.errors import RowSample
from tfrecorder.schema import is_missing
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
                         ((first_row + bad[0], repr(values[bad[0]])),))


def locations(uris: list[str | None], base_dir: str | Sequence[str | None] | None) -> list[str | None]:
    """Where each row's image is: relative paths joined to the folder of the file the row came from
    (``base_dir``: one folder for the whole table, or one per row for a table read from several files)."""
    if base_dir is None or isinstance(base_dir, str):
        return [resolve_uri(u, base_dir) for u in uris]
    return [resolve_uri(u, base) for u, base in zip(uris, base_dir)]


def is_relative(uri: str | None) -> bool:
    """A relative local path: read from a CSV's folder, or from the working directory for a DataFrame."""
    return uri is not None and uri != "" and "://" not in uri and not os.path.isabs(uri)


def resolve_uri(uri: str | None, base_dir: str | None) -> str | None:
    """Join a relative path to ``base_dir`` (the CSV's folder); URLs and absolute paths stay."""
    if base_dir is None or not is_relative(uri):
        return uri
    if "://" in base_dir:
        return posixpath.join(base_dir, uri)
    return os.path.join(base_dir, uri)
