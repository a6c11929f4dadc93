"""Validate (pure): (DataFrame, Schema) -> Table ready to encode, or one error listing every problem."""

from __future__ import annotations

import functools
import os
import posixpath
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from tfrecorder.dataset import dtypes
from tfrecorder.dataset.connectors import BY_KIND, INT64_MAX, INT64_MIN
from tfrecorder.dataset.features import DERIVED_NAMES, OBJECT_LABEL, ROLE_FEATURES, object_feature
from tfrecorder.dataset.redact import redact
from tfrecorder.errors import RowSample, SchemaError
from tfrecorder.schema import IMAGE_COLUMN, ListLike, Schema, flat_message, is_missing
from tfrecorder.types import BOX_EDGES, ColumnType, Kind, Role
from tfrecorder.write import labels, splits
from tfrecorder.write.floats import FloatFacts
from tfrecorder.write.sources.folders import IMAGE_EXTENSIONS
from tfrecorder.write.sources.frames import text_columns
from tfrecorder.write.spellings import SpellingFacts, Spellings, one_spelling
from tfrecorder.write.table import Column, Table


def validate(
    df: pd.DataFrame,
    schema: Schema | None = None,
    *,
    base_dir: str | Sequence[str | None] | None = None,
    split_fractions: Sequence[float] = splits.DEFAULT_FRACTIONS,
    float_precision: str = "auto",
    arrow: Any = None,
) -> Table:
    """Check ``df`` against ``schema`` (None: inferred) and convert it; SchemaError names column, values, rows.

    Float columns are stored as float32, unless float32 would change what the column means (see
    ``FloatFacts``) and ``float_precision`` is "auto", or it is "float64".

    The same steps as a table converted in parts (``validate_part`` on each, their ``Facts`` merged,
    ``Facts.check``, then ``finalize``), with the whole table as the one part.
    """
    df = text_columns(df)
    schema = check_schema(df, schema, arrow)
    part, facts = validate_part(df, schema, base_dir=base_dir, fractions=splits.check_fractions(split_fractions))
    facts.check()
    return finalize(part, facts, float_precision)


def check_schema(df: pd.DataFrame, schema: Schema | None, arrow: Any = None) -> Schema:
    """The schema for a table with ``df``'s columns (None: inferred from ``df``, and from ``arrow``, the pyarrow
    schema of the Parquet file it was read from), checked against them."""
    if len(df) == 0:
        raise SchemaError(EMPTY_TABLE)
    if schema is None:
        schema = Schema.infer(df, arrow)
        _check_image_paths(df, schema)
    missing = [c for c in schema if c not in df.columns]
    if missing:
        raise SchemaError(
            f"missing column{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))}: "
            f"the schema names {'them' if len(missing) > 1 else 'it'} but the table has columns "
            f"{[str(c) for c in df.columns]}"
        )
    _check_feature_names(schema)
    return schema


EMPTY_TABLE = "the table is empty: there are no rows to convert"

# Names a table's image column often has; judged with the values (some end in an image extension).
IMAGE_PATH_NAMES = {"filename", "file_name", "path", "image_path", "filepath", "file_path", "file", "image_file",
                    "image", "img", "img_path", "image_name", "uri", "url", "image_url"}


def _check_image_paths(df: pd.DataFrame, schema: Schema) -> None:
    """An inferred schema without an image column, over a column of image paths (a name such as ``filename``
    with paths ending in an image extension, or every value such a path), would store the paths as text and
    read no image: refuse, saying how to read them (or keep them as text)."""
    if schema.column_for(Role.IMAGE) is not None or schema.column_for(Role.MASK) is not None:
        return
    for name, col_type in schema.items():
        if col_type.kind is Kind.BYTES and not col_type.is_list and col_type.role is Role.FEATURE:
            example = _image_path(df[name], every=name.lower() not in IMAGE_PATH_NAMES)
            if example is not None:
                raise SchemaError(_image_paths_message(name, example, schema))


def _image_path(column: pd.Series, every: bool) -> str | None:
    """The first image path (a text ending in an image extension) in ``column``, if it has one - and, when
    ``every``, if every text in it is one (judged up to the first that is not)."""
    found = None
    for value in column.tolist():
        if not isinstance(value, str) or not value.strip():
            continue
        if value.strip().lower().endswith(IMAGE_EXTENSIONS):
            found = found or value
            if not every:
                return found
        elif every:
            return None
    return found


def _image_paths_message(name: str, example: str, schema: Schema) -> str:
    fixed = [f"{n!r}: types.{'ImageUri' if n == name else t.__name__}" for n, t in schema.items()]
    shown = ", ".join(fixed[:6]) + (", ..." if len(fixed) > 6 else "")
    return (f"column {name!r} holds image paths (e.g. {example!r}) but the table has no image column, so no image "
            f"would be read (text-only records): rename it {IMAGE_COLUMN!r}, or give schema={{{shown}}}; to keep "
            f"the paths as text, give it types.StringInput in schema=")


@dataclass(frozen=True)
class Problem:
    """A problem of one column that fails the whole table: its kind, rows and first distinct values."""

    order: int  # problems are listed in the order validate checks columns
    column: str
    kind: str  # "image_uri_type", "split_value" or "value_type"
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
        if self.kind == "split_value":
            return splits.unknown_splits_message(self.column, [t for _, t in self.examples], self.rows.count, rows)
        if self.kind == "label_line_break":
            return (f"column {self.column!r}: {self.rows.count} labels hold a line break, e.g. {example} ({rows}); "
                    f"the label files TFDS reads hold one class name a line: remove the line breaks")
        if self.kind == "value_shape":
            return flat_message(self.column, self.detail, rows)
        if self.kind.startswith("box_") or self.kind == "mask_missing":
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
            source = self.source if self.source == other.source else _source_name(
                _SOURCE_KINDS[self.source], {self.source, other.source})
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
        )

    @property
    def vocabulary(self) -> list[str]:
        """The sorted distinct text labels of TRAIN rows."""
        return sorted(self.train_labels)

    def check(self) -> None:
        """Raise the SchemaError that lists every problem of the table, if it has any."""
        if self.rows == 0:
            raise SchemaError(EMPTY_TABLE)
        if self.problems:
            messages = [p.message() for _, p in sorted(self.problems.items())]
            raise SchemaError("; ".join(messages))
        if self.label_missing.count:
            raise SchemaError(
                f"column {self.label!r}: {self.label_missing.count} rows have no label "
                f"({self.label_missing.describe()}); fill them, mark them DISCARD, or drop the column"
            )
        unseen = {name: rows for name, rows in self.other_labels.items() if name not in self.train_labels}
        if unseen:
            rows = functools.reduce(RowSample.merge, unseen.values())
            raise SchemaError(labels.unseen_labels_message(self.label or "", sorted(unseen), rows.describe(),
                                                           bool(self.train_labels)))


def _merge_maps(a: Mapping[Any, Any], b: Mapping[Any, Any], merge: Callable[[Any, Any], Any]) -> dict[Any, Any]:
    out = dict(a)
    for key, value in b.items():
        out[key] = merge(out[key], value) if key in out else value
    return out


def validate_part(
    df: pd.DataFrame,
    schema: Schema,
    *,
    first_row: int = 0,
    base_dir: str | Sequence[str | None] | None = None,
    fractions: Sequence[float] = splits.DEFAULT_FRACTIONS,
    spellings: Spellings | None = None,
) -> tuple[Table, Facts]:
    """Check and convert the rows of ``df`` - rows ``first_row`` on of a table with ``schema`` (checked by
    ``check_schema``) - as far as rows alone decide: the part (label values as text, floats as given) and
    its Facts. A part with problems has None for the columns they were found in. ``spellings``: the files a
    detection table names in several ways across its parts, each given its first name in the table."""
    split_col, image_col, label_col = (schema.column_for(r) for r in (Role.SPLIT, Role.IMAGE, Role.LABEL))
    problems: dict[tuple[int, str], Problem] = {}

    def guard(found: tuple[Any, Problem | None]) -> Any:
        value, problem = found
        if problem is not None:
            problems[(problem.order, problem.kind)] = problem
        return value

    given_uris = guard(_image_uris(image_col, df[image_col], first_row)) if image_col else None
    image_uris = [redact(u) if u else u for u in given_uris] if given_uris else given_uris
    image_locations = _locations(given_uris, base_dir) if given_uris else None
    named = None
    if schema.boxes and image_locations is not None and image_uris is not None:
        image_locations, image_uris, named = one_spelling(image_locations, image_uris, first_row, spellings)
    row_splits = guard(_row_splits(df, split_col, image_uris, fractions, first_row))
    mask_col = schema.column_for(Role.MASK)
    given_masks = None
    if mask_col:
        given_masks, problem = _image_uris(mask_col, df[mask_col], first_row)
        if problem is not None:
            problems[(1, "mask_uri_type")] = replace(problem, order=1)
    if given_masks is not None and row_splits is not None:
        unmasked = [i for i, (m, s) in enumerate(zip(given_masks, row_splits)) if m is None and s != splits.DISCARD]
        if unmasked:
            problems[(1, "mask_missing")] = Problem(
                1, mask_col, "mask_missing", RowSample.of(unmasked, first_row),
                ((first_row + unmasked[0], f"row {first_row + unmasked[0]}"),),
                f"column {mask_col!r}: every image of a segmentation table needs its mask; some rows have none")
    columns: dict[str, ColumnFacts] = {}
    converted: list[Column | None] = []
    valued = [(n, t) for n, t in schema.items() if t.role in (Role.FEATURE, Role.LABEL, Role.BOX)]
    for position, (name, col_type) in enumerate(valued):
        order = _LABEL_ORDER if col_type.role is Role.LABEL else _LABEL_ORDER + 1 + position
        column = guard(_convert(name, df[name], col_type, order, first_row))
        converted.append(column)
        if column is not None:
            floats = column.type.kind is Kind.FLOAT32 and not column.type.is_list and col_type.role is Role.FEATURE
            given = isinstance(column.values, np.ndarray) or any(v is not None for v in column.values)
            columns[name] = ColumnFacts(column.nullable, column.source,
                                        FloatFacts.of(_float_array(column.values), first_row) if floats else None,
                                        given, column.pandas)
    label = next((c for c, (_, t) in zip(converted, valued) if t.role is Role.LABEL), None)
    features = tuple(c for c, (_, t) in zip(converted, valued) if t.role in (Role.FEATURE, Role.BOX))
    empty, box_facts = None, None
    boxes = {c.type.edge: c for c in features if c is not None and c.type.role is Role.BOX}
    if schema.boxes and len(boxes) == len(schema.boxes) and label is not None:
        empty, box_facts, box_problems = _box_facts(boxes, label.values, label.name, first_row)
        problems.update(((p.order, p.kind), p) for p in box_problems)
    facts = Facts(len(df), dict(Counter(row_splits)) if row_splits else {}, problems, columns, label_col,
                  boxes=box_facts, spellings=named)
    if label is not None and row_splits is not None:
        label, facts = _label_facts(label, row_splits, first_row, facts, empty)
    part = Table(
        schema=schema, num_rows=len(df), splits=row_splits, image_uris=image_uris,
        image_locations=image_locations,
        label=label, vocabulary=None, features=features,
        mask_uris=[redact(u) if u else u for u in given_masks] if given_masks is not None else None,
        mask_locations=_locations(given_masks, base_dir) if given_masks is not None else None,
    )
    return part, facts


_LABEL_ORDER = 2  # problems of the image URIs (0) and splits (1) come first, then the label, then the other columns


def _label_facts(label: Column, row_splits: list[str], first_row: int, facts: Facts,
                 empty: np.ndarray | None = None) -> tuple[Column, Facts]:
    """The label column as a list (text labels decoded and trimmed), and the facts it adds. ``empty``: a
    detection table's rows of images without objects (no box, no label: not a missing label)."""
    values = label.values.tolist() if isinstance(label.values, np.ndarray) else label.values
    missing = [i for i, (v, s) in enumerate(zip(values, row_splits))
               if v is None and s != splits.DISCARD and (empty is None or not empty[i])]
    train: set[str] = set()
    others: dict[str, list[int]] = {}
    if label.type.kind is Kind.BYTES:
        values = [_decode(v) for v in values]
        for pos, (value, split) in enumerate(zip(values, row_splits)):
            items = value if isinstance(value, list) else [value]
            if split == splits.TRAIN:
                train.update(v for v in items if v is not None)
            elif split != splits.DISCARD:
                for v in items:
                    if v is not None:
                        others.setdefault(v, []).append(pos)
        facts = _line_breaks(label.name, values, train | others.keys(), first_row, facts)
    facts = replace(facts, label_missing=RowSample.of(missing, first_row), train_labels=frozenset(train),
                    other_labels={v: RowSample.of(rows, first_row) for v, rows in others.items()})
    return replace(label, values=values), facts


def _line_breaks(name: str, values: list[Any], labels: set[str], first_row: int, facts: Facts) -> Facts:
    """Text labels (``labels``: the distinct ones of rows not discarded) holding a line break are a problem: the
    label files TFDS reads hold one class name a line."""
    broken = {v for v in labels if "\n" in v or "\r" in v}
    if not broken:
        return facts
    rows = [pos for pos, value in enumerate(values)
            if any(v in broken for v in (value if isinstance(value, list) else [value]))]
    value = values[rows[0]]
    example = next(v for v in (value if isinstance(value, list) else [value]) if v in broken)
    problem = Problem(_LABEL_ORDER, name, "label_line_break", RowSample.of(rows, first_row),
                      ((first_row + rows[0], repr(example)),))
    return replace(facts, problems={**facts.problems, (problem.order, problem.kind): problem})


_BOX_ORDER = 1000  # box problems come after every column's own


def _box_facts(boxes: Mapping[str, Column], labels: Any, label_name: str, first_row: int
               ) -> tuple[np.ndarray, BoxFacts, list[Problem]]:
    """A detection part's box rules, checked on the rows alone: the four edges given together, finite, with
    xmin < xmax and ymin < ymax; a label with every box and none without (a row without either is an image
    without objects). Returns the rows without objects, the edges' range, and the problems found."""
    edges = np.stack([_float_array(boxes[e].values) for e in BOX_EDGES], axis=1)  # [rows, 4], NaN: missing
    given = ~np.isnan(edges)
    labelled = np.fromiter((v is not None for v in labels), bool, len(edges))
    blank = np.fromiter((isinstance(v, (bytes, str)) and not v.strip() for v in labels), bool, len(edges))
    whole, none = given.all(axis=1), ~given.any(axis=1)
    names = ", ".join(boxes[e].name for e in BOX_EDGES)

    def problem(i: int, kind: str, mask: np.ndarray, detail: str) -> Problem | None:
        rows = np.flatnonzero(mask)
        if not len(rows):
            return None
        shown = "(" + ", ".join(_edge_text(v) for v in edges[rows[0]]) + ")"
        return Problem(_BOX_ORDER + i, names, kind, RowSample.of(rows.tolist(), first_row),
                       ((first_row + int(rows[0]), f"row {first_row + int(rows[0])}: {shown}"),), detail)

    with np.errstate(invalid="ignore"):
        finite = np.isfinite(edges).all(axis=1)
        ordered = (edges[:, 0] < edges[:, 2]) & (edges[:, 1] < edges[:, 3])
    found = [
        problem(0, "box_partial", ~whole & ~none, f"columns {names}: a box needs all four edges; some are empty"),
        problem(1, "box_value", whole & ~finite, f"columns {names}: box edges must be finite numbers"),
        problem(2, "box_order", whole & finite & ~ordered,
                f"columns {names}: a box needs xmin < xmax and ymin < ymax"),
        problem(3, "box_missing", none & labelled,
                f"columns {names}: a row with a label needs its box (an image without objects has neither)"),
        problem(4, "box_label_blank", whole & blank,
                f"column {label_name!r}: every box needs a label, and these boxes' labels are blank; give each "
                f"its class name, or drop the rows"),
    ]
    values = edges[whole & finite]
    bounds = BoxFacts(edges=names)
    if len(values):
        with np.errstate(invalid="ignore"):
            fractions = whole & finite & ((edges >= 0) & (edges <= 1)).all(axis=1)
            beyond = whole & finite & (edges > 1).any(axis=1)
        bounds = BoxFacts(float(values.min()), float(values.max()),
                          RowSample.of(np.flatnonzero(fractions).tolist(), first_row),
                          RowSample.of(np.flatnonzero(beyond).tolist(), first_row), names)
    return none & ~labelled, bounds, [p for p in found if p is not None]


def _edge_text(value: float) -> str:
    return "empty" if np.isnan(value) else f"{value:g}"


def finalize(part: Table, facts: Facts, float_precision: str = "auto") -> Table:
    """A part (``validate_part``) as the validated Table of the whole table its ``facts`` (merged over every
    part, checked) describe: label ids from the TRAIN vocabulary, each float column stored as the whole column
    allows, every column's missing values and input type those of the whole column."""
    label, vocabulary = part.label, None
    if label is not None:
        label = replace(label, nullable=facts.columns[label.name].nullable, source=facts.columns[label.name].source)
        if label.type.kind is Kind.BYTES:
            vocabulary = facts.vocabulary
            ids = labels.to_label_ids(label.name, label.values, part.splits, vocabulary)
            label = replace(label, nullable=False, values=ids)
    features = []
    for column in part.features:
        whole = facts.columns[column.name]
        column = replace(column, nullable=whole.nullable, source=whole.source, pandas=whole.pandas)
        features.append(column if column.type.role is Role.BOX else store_floats(column, float_precision, whole.floats))
    units = None
    if part.schema.boxes:  # a value per object: the label and every extra column, under objects/
        units = (facts.boxes or BoxFacts()).units(facts.box_units)
        label = replace(label, feature=OBJECT_LABEL.name) if label is not None else None
        features = [c if c.type.role is Role.BOX else replace(c, feature=object_feature(c.name)) for c in features]
    return replace(part, label=label, vocabulary=vocabulary, features=tuple(features), box_units=units)


def feature_name(column: str, col_type: type[ColumnType]) -> str:
    """The feature a column is stored under: its role's (``split``, ``image_uri``, ``label``) or its own name."""
    role_feature = ROLE_FEATURES.get(col_type.role)
    return role_feature.name if role_feature else column


def store_floats(column: Column, precision: str, floats: FloatFacts | None = None) -> Column:
    """A float column as float32, unless float32 would change what the column means (``FloatFacts``) and
    ``precision`` is "auto", or ``precision`` is "float64": then as float64, its values the int64 bits of each
    float, with the reason kept for the result's warnings. ``floats``: the whole column's facts, when
    ``column`` is a part of it. Forcing float32 over values beyond its range is a SchemaError."""
    if column.type.kind is not Kind.FLOAT32 or column.type.is_list:
        return column
    array = _float_array(column.values)
    floats = FloatFacts.of(array) if floats is None else floats
    if precision == "float32":
        if floats.beyond.count:
            raise SchemaError(
                f"column {column.name!r}: {floats.beyond.count} values are beyond float32's range (+-3.4e38), "
                f"e.g. {floats.beyond_value!r} ({floats.beyond.describe()}): float_precision='float32' would make "
                f"them infinite; use 'auto' or 'float64'")
        return column
    reason = floats.float64_reason() if precision == "auto" else None
    if precision == "auto" and reason is None:
        return column
    bits: Any = array.view(np.int64)
    values = column.values
    if not isinstance(values, np.ndarray):
        bits = [None if v is None else b for v, b in zip(values, bits.tolist())]
    return replace(column, values=bits, stored_as=Kind.FLOAT64, float64_reason=reason)


def _float_array(values: list[Any] | np.ndarray) -> np.ndarray:
    """A float column's values as float64, missing ones NaN."""
    if isinstance(values, np.ndarray):
        return values
    return np.array([np.nan if v is None else v for v in values], dtype=np.float64)


def _check_feature_names(schema: Schema) -> None:
    taken: dict[str, str] = {}
    for name, col_type in schema.items():
        feature = feature_name(name, col_type)
        if col_type.role is Role.FEATURE and name in DERIVED_NAMES:
            raise SchemaError(
                f"column {name!r}: the name is reserved for a feature tfrecorder writes "
                f"({', '.join(sorted(DERIVED_NAMES))}); rename the column or give it that role in schema="
            )
        if feature in taken:
            raise SchemaError(f"columns {taken[feature]!r} and {name!r} would both be stored as {feature!r}")
        taken[feature] = name


def _image_uris(name: str, series: pd.Series, first_row: int) -> tuple[list[str | None], Problem | None]:
    values = series.tolist()
    bad = [i for i, v in enumerate(values) if not is_missing(v) and not isinstance(v, str)]
    uris = [None if is_missing(v) or not isinstance(v, str) or not v.strip() else v.strip() for v in values]
    if not bad:
        return uris, None
    return uris, Problem(0, name, "image_uri_type", RowSample.of(bad, first_row),
                         ((first_row + bad[0], repr(values[bad[0]])),))


def _row_splits(df: pd.DataFrame, split_col: str | None, image_uris, fractions,
                first_row: int) -> tuple[list[str], Problem | None]:
    problem = None
    if split_col is None:
        row_splits = [splits.UNASSIGNED] * len(df)
    else:
        values = [None if is_missing(v) else v for v in df[split_col].tolist()]
        row_splits, unknown = splits.split_values([v if v is not None else "" for v in values])
        if unknown:
            rows = sorted(r for rs in unknown.values() for r in rs)
            examples = tuple((first_row + rs[0], text) for text, rs in list(unknown.items())[:5])
            problem = Problem(1, split_col, "split_value", RowSample.of(rows, first_row), examples)
    if splits.UNASSIGNED not in row_splits:
        return row_splits, problem
    keys = image_uris if image_uris is not None else _row_keys(df)
    return [
        splits.assign_split(keys[i] or _row_keys(df.iloc[[i]])[0], fractions) if s == splits.UNASSIGNED else s
        for i, s in enumerate(row_splits)
    ], problem


def _row_keys(df: pd.DataFrame) -> list[str]:
    """A stable text per row (its values joined) to hash tables that have no image URI."""
    return ["\x1f".join(map(str, row)) for row in df.astype(str).itertuples(index=False, name=None)]


def _decode(value: Any) -> Any:
    """A label as text, trimmed at both ends: "cat " and " cat" are the class "cat"."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace").strip()
    if isinstance(value, list):
        return [_decode(v) for v in value]
    return value.strip() if isinstance(value, str) else value


def _locations(uris: list[str | None], base_dir: str | Sequence[str | None] | None) -> list[str | None]:
    """Where each row's image is: relative paths joined to the folder of the file the row came from
    (``base_dir``: one folder for the whole table, or one per row for a table read from several files)."""
    if base_dir is None or isinstance(base_dir, str):
        return [resolve_uri(u, base_dir) for u in uris]
    return [resolve_uri(u, base) for u, base in zip(uris, base_dir)]


def resolve_uri(uri: str | None, base_dir: str | None) -> str | None:
    """Join a relative path to ``base_dir`` (the CSV's folder); URLs and absolute paths stay."""
    if uri is None or base_dir is None or "://" in uri or uri.startswith("/"):
        return uri
    if "://" in base_dir:
        return posixpath.join(base_dir, uri)
    return os.path.join(base_dir, uri)


# --- values ------------------------------------------------------------------------------

def convert_column(name: str, series: pd.Series, col_type: type[ColumnType]) -> Column:
    """Convert one column's values for ``col_type``; SchemaError names the values and rows that do not fit."""
    column, problem = _convert(name, series, col_type, 0, 0)
    if problem is not None:
        raise SchemaError(problem.message())
    return column


def _convert(name: str, series: pd.Series, col_type: type[ColumnType], order: int,
             first_row: int) -> tuple[Column, Problem | None]:
    """``convert_column`` for rows ``first_row`` on of a table: the column, and the problem of the values
    that do not fit (None when they all do); ``order`` places the problem among the table's."""
    feature = feature_name(name, col_type)
    pandas = dtypes.describe(series.dtype) if col_type.role is Role.FEATURE and not col_type.is_list else None
    fast = _fast_numeric(series, col_type)
    if fast is not None:
        given, source = fast
        nullable = not isinstance(given, np.ndarray) and any(v is None for v in given)
        return Column(name, feature, col_type, nullable, source, given, pandas=pandas), None
    if series.dtype == object and (shaped := _shaped(name, series, order, first_row)) is not None:
        return Column(name, feature, col_type, True, "int", [None] * len(series), pandas=pandas), shaped
    convert = BY_KIND[col_type.kind].check
    values: list[Any] = []
    bad: list[int] = []
    sources: set[str] = set()
    common = None if col_type.is_list else _COMMON_TYPES[col_type.kind]
    quick = 0
    for pos, raw in enumerate(series.tolist()):
        # The usual values take a short path; anything else (None, NaN, numpy scalars, out of range) the checked one.
        exact = type(raw) is common
        if exact and common is str:
            values.append(raw.encode("utf-8"))
            quick += 1
            continue
        if exact and (raw == raw if common is float else INT64_MIN <= raw <= INT64_MAX):  # NaN: missing
            values.append(raw)
            quick += 1
            continue
        try:
            values.append(_convert_value(raw, col_type.is_list, convert, sources))
        except (TypeError, ValueError, OverflowError):
            values.append(None)
            bad.append(pos)
    problem = None
    if bad:
        example = series.iloc[bad[0]]
        example = example.item() if isinstance(example, np.generic) else example
        wanted = f"list of {col_type.kind.name.lower()}" if col_type.is_list else col_type.kind.name.lower()
        problem = Problem(order, name, "value_type", RowSample.of(bad, first_row),
                          ((first_row + bad[0], repr(example)),), f"{col_type.__name__} ({wanted})")
    if quick:
        sources.add(common.__name__)
    source = _source_name(col_type.kind, sources)
    return Column(name, feature, col_type, any(v is None for v in values), source, values, pandas=pandas), problem


def _shaped(name: str, series: pd.Series, order: int, first_row: int) -> Problem | None:
    """The problem of a column holding 2-D (or higher) arrays: a feature's flat list would lose their shape."""
    shaped = [pos for pos, v in enumerate(series.tolist()) if isinstance(v, np.ndarray) and v.ndim > 1]
    if not shaped:
        return None
    shape = series.iloc[shaped[0]].shape
    return Problem(order, name, "value_shape", RowSample.of(shaped, first_row),
                   ((first_row + shaped[0], str(shape)),), str(shape))


def _fast_numeric(series: pd.Series, col_type: type[ColumnType]) -> tuple[list[Any] | np.ndarray, str] | None:
    """Whole-column conversion for plain numeric dtypes and all-str text columns (no per-value checks)."""
    dtype = series.dtype
    if col_type.is_list:
        return None
    textual = isinstance(dtype, pd.StringDtype) or (isinstance(dtype, np.dtype) and dtype.kind == "O")
    if col_type.kind is Kind.BYTES and textual:
        values = series.tolist()
        try:  # every value a str (the usual text column): encode in one pass, no per-value checks
            return [v.encode("utf-8") for v in values], "str"
        except AttributeError:  # missing values, bytes or other types: the checked path
            return None
    if col_type.kind is Kind.INT64 and (times := dtypes.as_int64(series)) is not None:
        counts, missing = times
        return (counts, "int") if not missing.any() else (
            [None if m else c for c, m in zip(counts.tolist(), missing.tolist())], "int")
    if not isinstance(dtype, np.dtype):
        return None
    if col_type.kind is Kind.INT64 and dtype.kind in "bi":
        return series.to_numpy(dtype=np.int64), "bool" if dtype.kind == "b" else "int"
    if col_type.kind is Kind.FLOAT32 and dtype.kind in "iu":  # whole numbers in a float column (pixel edges)
        return series.to_numpy(dtype=np.float64), "float"
    if col_type.kind is Kind.FLOAT32 and dtype.kind == "f":
        arr = series.to_numpy(dtype=np.float64)
        if not np.isnan(arr).any():
            return arr, "float"
        return [None if v != v else v for v in arr.tolist()], "float"
    return None


def _convert_value(raw: Any, is_list: bool, convert: Callable[[Any, set[str]], Any], sources: set[str]) -> Any:
    if is_list:
        if isinstance(raw, ListLike):
            items = raw.ravel().tolist() if isinstance(raw, np.ndarray) else list(raw)
            return [convert(v, sources) for v in items]
        if is_missing(raw):
            return None
        raise TypeError("not a list")
    if isinstance(raw, ListLike):
        raise TypeError("a list where one value was expected")
    return None if is_missing(raw) else convert(raw, sources)


# The exact Python type most values of a kind have.
_COMMON_TYPES: dict[Kind, type] = {Kind.INT64: int, Kind.FLOAT32: float, Kind.BYTES: str}



_SOURCE_KINDS = {"bytes": Kind.BYTES, "str": Kind.BYTES, "bool": Kind.INT64, "int": Kind.INT64, "float": Kind.FLOAT32}


def _source_name(kind: Kind, sources: set[str]) -> str:
    if kind is Kind.BYTES:
        return "bytes" if sources == {"bytes"} else "str"
    if kind is Kind.INT64:
        return "bool" if sources == {"bool"} else "int"
    return "float"
