"""Table (pure data): the validated table every later stage reads - converted columns, splits and image URIs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from tfrecorder.schema import Schema
from tfrecorder.types import ColumnType, Kind


@dataclass(frozen=True)
class Column:
    """One input column, converted: values are int, float, bytes, lists of them, or None (missing).

    A numeric column without missing values keeps its values in a numpy array (8 bytes a value
    instead of ~36 for a list of Python numbers); ``Table.take`` hands each shard a plain list.
    """

    name: str
    feature: str
    type: type[ColumnType]
    nullable: bool
    source: str  # python type of the input values: int, bool, float, str or bytes
    values: list[Any] | np.ndarray  # float64-stored columns hold each value's bits as an int
    stored_as: Kind | None = None  # the kind written, when it is not the type's (float64 for a float column)

    @property
    def kind(self) -> Kind:
        """The kind its values are written as."""
        return self.stored_as or self.type.kind


@dataclass(frozen=True)
class Table:
    """The validated table: every column converted, every row with a known split."""

    schema: Schema
    num_rows: int
    splits: list[str]
    image_uris: list[str | None] | None  # as written in the input, credentials in URLs redacted
    image_locations: list[str | None] | None  # what to fetch (relative paths resolved)
    label: Column | None
    vocabulary: list[str] | None
    features: tuple[Column, ...]

    @property
    def columns(self) -> tuple[Column, ...]:
        """Label (if any) and extra columns, in encoding order."""
        return ((self.label,) if self.label else ()) + self.features

    def take(self, rows: Sequence[int]) -> Table:
        """The table of just ``rows`` (positions), in that order: what one shard's writer needs."""

        def pick(values: list[Any] | np.ndarray | None) -> list[Any] | None:
            if isinstance(values, np.ndarray):
                return values[np.asarray(rows, dtype=np.intp)].tolist()
            return None if values is None else [values[i] for i in rows]

        return replace(
            self,
            num_rows=len(rows),
            splits=pick(self.splits),
            image_uris=pick(self.image_uris),
            image_locations=pick(self.image_locations),
            label=replace(self.label, values=pick(self.label.values)) if self.label else None,
            features=tuple(replace(c, values=pick(c.values)) for c in self.features),
        )
