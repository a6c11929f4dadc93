"""Facts (pure): what the rows of a part of a table tell - row counts, problems, labels, box ranges, each
column's missing values, input type and floats - merged over the parts (in any order) into the whole table's,
whose ``check`` raises the one SchemaError listing every problem."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from tfrecorder.dataset import dtypes
from tfrecorder.errors import RowSample, SchemaError
from tfrecorder.schema import flat_message
from tfrecorder.types import Kind
from tfrecorder.write import splits
from tfrecorder.write.table import labels
from tfrecorder.write.table.floats import FloatFacts
from tfrecorder.write.table.schema_check import EMPTY_TABLE
from tfrecorder.write.table.spellings import SpellingFacts


@dataclass(frozen=True)
class Problem:
    """A problem of one column that fails the whole table: its kind, rows and first distinct values."""

    order: int  # problems are listed in the order validate checks columns
    column: str
    kind: str  # "image_uri_type", "image_value", "split_value", "value_type", ...
    rows: RowSample
    examples: tuple[tuple[int, str], ...]  # (first row, repr) of the first distinct values, by first row
    detail: str = ""  # value_type: the column type wanted

    def merge(self, other: Problem) -> Problem:
        first: dict[str, int] = {}
        for row, text in sorted(self.examples + other.examples):
            first.setdefault(text, row)
        examples = tuple(sorted((row, text) for text, row in first.items())[:5])
        return replace(self, rows=self.rows.merge(other.rows), examples=examples)

    def message(self) -> str:
        rows, example = self.rows.describe(), self.examples[0][1]
        if self.kind == "image_uri_type":
            return f"column {self.column!r}: image URIs must be strings; found {example} ({rows})"
        if self.kind == "image_value":
            return (f"column {self.column!r}: {self.rows.count} values are no image ({rows}), e.g. row "
                    f"{self.examples[0][0]}: {example}; a column of the images themselves takes encoded bytes, "
                    f"{{'bytes', 'path'}} dicts, uint8 arrays (HxW, HxWx1, 3 or 4) or PIL images")
        if self.kind == "split_value":
            return splits.unknown_splits_message(self.column, [t for _, t in self.examples], self.rows.count, rows)
        if self.kind == "label_line_break":
            return (f"column {self.column!r}: {self.rows.count} labels hold a line break, e.g. {example} ({rows}); "
                    f"the label files TFDS reads hold one class name a line: remove the line breaks")
        if self.kind == "value_shape":
            return flat_message(self.column, self.detail, rows)
        if self.kind.startswith(("box_", "keypoints_")) or self.kind == "mask_missing":
            return f"{self.detail}: {self.rows.count} rows ({rows}), e.g. {example}"
        return f"column {self.column!r}: {self.rows.count} values do not fit {self.detail}, e.g. {example} ({rows})"


@dataclass(frozen=True)
class ColumnFacts:
    """What the whole of a converted column decides: missing values, input type, and for a float column what
    float32 would do to it."""

    nullable: bool
    source: str
    floats: FloatFacts | None = None
    valued: bool = True  # some value was given: a part of missing values alone says nothing of the input type
    pandas: dict[str, Any] | None = None  # the input's pandas dtype (dataset.dtypes.describe)

    def merge(self, other: ColumnFacts) -> ColumnFacts:
        if not (self.valued and other.valued):  # the input type and dtype of the part that had values
            source, pandas = (self.source, self.pandas) if self.valued else (other.source, other.pandas)
        else:
            source = self.source if self.source == other.source else source_name(
                SOURCE_KINDS.get(self.source), {self.source, other.source})
            pandas = dtypes.merge(self.pandas, other.pandas)
        floats = self.floats.merge(other.floats) if self.floats and other.floats else self.floats or other.floats
        return ColumnFacts(self.nullable or other.nullable, source, floats, self.valued or other.valued, pandas)

    def settled(self) -> ColumnFacts:
        """These facts as the shard writers need them: the float decision without the distinct values."""
        return replace(self, floats=self.floats.settled()) if self.floats else self


@dataclass(frozen=True)
class BoxFacts:
    """The range of a detection table's given box edges: "auto" units are normalized when it lies in [0, 1];
    and the rows of boxes within [0, 1] (``fractions``) and of boxes with an edge beyond 1 (``beyond``)."""

    low: float = float("inf")
    high: float = float("-inf")
    fractions: RowSample = RowSample()
    beyond: RowSample = RowSample()
    edges: str = ""  # the box columns, for messages

    def merge(self, other: BoxFacts) -> BoxFacts:
        return BoxFacts(min(self.low, other.low), max(self.high, other.high), self.fractions.merge(other.fractions),
                        self.beyond.merge(other.beyond), self.edges or other.edges)

    def units(self, box_units: str) -> str:
        """"pixels" or "normalized": as ``box_units`` says, or for "auto" as the edges' range says. "auto" over
        boxes of both kinds (a row in pixels among normalized ones) is a SchemaError naming the rows: judged on
        the whole table, one such row would make every box pixels."""
        if box_units != "auto":
            return box_units
        if self.fractions.count and self.beyond.count:
            raise SchemaError(
                f"columns {self.edges}: {self.beyond.count} boxes have an edge beyond 1, as pixels "
                f"({self.beyond.describe()}), and {self.fractions.count} lie within [0, 1], as normalized "
                f"({self.fractions.describe()}): box_units='auto' cannot tell which the table holds; fix those "
                f"rows, or give box_units='pixels' or 'normalized'")
        return "normalized" if 0.0 <= self.low and self.high <= 1.0 else "pixels"


@dataclass(frozen=True)
class Facts:
    """The table-level facts of a validated table or part of one - row counts, problems, label vocabulary,
    column facts - that merge (in any order) into those of the whole table: what ``check`` and ``finalize``
    need, however the table was read."""

    rows: int = 0
    split_counts: Mapping[str, int] = field(default_factory=dict)  # every split, DISCARD included
    problems: Mapping[tuple[int, str], Problem] = field(default_factory=dict)
    columns: Mapping[str, ColumnFacts] = field(default_factory=dict)
    label: str | None = None  # the label column
    label_missing: RowSample = RowSample()  # rows without a label, DISCARD rows left out
    train_labels: frozenset[str] = frozenset()  # text labels of TRAIN rows
    other_labels: Mapping[str, RowSample] = field(default_factory=dict)  # text labels of VALIDATION/TEST rows
    boxes: BoxFacts | None = None  # a detection table's: the range of its box edges
    box_units: str = "auto"  # convert's box_units: "auto" is decided by ``boxes`` (``BoxFacts.units``)
    spellings: SpellingFacts | None = None  # a detection table's: which local files it named how
    keypoints: Mapping[int, RowSample] | None = None  # a keypoints column's rows by the keypoints they give (K)
    names: tuple[str, ...] | None = None  # the label vocabulary the source fixes (a Hugging Face ClassLabel's)

    def merge(self, other: Facts) -> Facts:
        boxes = self.boxes.merge(other.boxes) if self.boxes and other.boxes else self.boxes or other.boxes
        spellings = (self.spellings.merge(other.spellings) if self.spellings and other.spellings else
                     self.spellings or other.spellings)
        return Facts(
            self.rows + other.rows,
            _merge_maps(self.split_counts, other.split_counts, lambda a, b: a + b),
            _merge_maps(self.problems, other.problems, Problem.merge),
            _merge_maps(self.columns, other.columns, ColumnFacts.merge),
            self.label or other.label,
            self.label_missing.merge(other.label_missing),
            self.train_labels | other.train_labels,
            _merge_maps(self.other_labels, other.other_labels, RowSample.merge),
            boxes,
            self.box_units,
            spellings,
            _merge_maps(self.keypoints or {}, other.keypoints or {}, RowSample.merge)
            if self.keypoints is not None or other.keypoints is not None else None,
            self.names or other.names,
        )

    @property
    def keypoint_count(self) -> int | None:
        """K, the keypoints every object gives (checked: one number); None: no keypoints column, or no object
        gives keypoints."""
        return next(iter(self.keypoints), None) if self.keypoints else None

    @property
    def vocabulary(self) -> list[str]:
        """The sorted distinct text labels of TRAIN rows; or the names the source fixes, in their order."""
        return list(self.names) if self.names is not None else sorted(self.train_labels)

    def check(self) -> None:
        """Raise the SchemaError that lists every problem of the table, if it has any."""
        if self.rows == 0:
            raise SchemaError(EMPTY_TABLE)
        if self.problems:
            messages = [p.message() for _, p in sorted(self.problems.items())]
            raise SchemaError("; ".join(messages))
        if self.keypoints and len(self.keypoints) > 1:
            found = ", ".join(f"{count} ({rows.describe()})" for count, rows in sorted(self.keypoints.items()))
            raise SchemaError(f"keypoints: objects give different numbers of keypoints: {found}; every object of "
                              f"a dataset has the same K keypoints (an unlabelled one as 0, 0, 0)")
        if self.label_missing.count:
            raise SchemaError(
                f"column {self.label!r}: {self.label_missing.count} rows have no label "
                f"({self.label_missing.describe()}); fill them, mark them DISCARD, or drop the column"
            )
        known = self.train_labels if self.names is None else frozenset(self.names)
        unseen = {name: rows for name, rows in self.other_labels.items() if name not in known}
        if unseen:
            rows = functools.reduce(RowSample.merge, unseen.values())
            raise SchemaError(labels.unseen_labels_message(self.label or "", sorted(unseen), rows.describe(),
                                                           bool(self.train_labels)))


def _merge_maps(a: Mapping[Any, Any], b: Mapping[Any, Any], merge: Callable[[Any, Any], Any]) -> dict[Any, Any]:
    out = dict(a)
    for key, value in b.items():
        out[key] = merge(out[key], value) if key in out else value
    return out


# The input types a column's values may have had (Column.source), by the kind they are stored as.
SOURCE_KINDS = {"bytes": Kind.BYTES, "str": Kind.BYTES, "bool": Kind.INT64, "int": Kind.INT64, "float": Kind.FLOAT32}


def source_name(kind: Kind | None, sources: set[str]) -> str:
    """The input type of a column of ``kind`` whose values had the types ``sources``: one name for the whole
    column (text over bytes, int over bool, as a mix reads back). A column typed for a connector of its own
    (``kind`` None) keeps every name its connector gave, joined."""
    if kind is None or not sources <= SOURCE_KINDS.keys():
        return "/".join(sorted({part for source in sources for part in source.split("/")}))
    if kind is Kind.BYTES:
        return "bytes" if sources == {"bytes"} else "str"
    if kind is Kind.INT64:
        return "bool" if sources == {"bool"} else "int"
    return "float"
