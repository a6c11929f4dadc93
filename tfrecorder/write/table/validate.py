"""Validate (pure): the rows of a part of a table, with its checked schema (``schema_check``), as far as rows
alone decide - the part as a Table (``values`` per column, ``uris``) and its ``Facts``; once the whole table's
facts are merged and checked, ``finalize`` gives the part its label ids, float storage and column facts."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from tfrecorder.dataset.connectors import of_type
from tfrecorder.dataset.connectors.media import LOCATION, LOCATIONS_SEPARATOR, URI, Media
from tfrecorder.dataset.features import OBJECT_LABEL, object_feature
from tfrecorder.errors import RowSample
from tfrecorder.redact import redact
from tfrecorder.schema import Schema, is_missing
from tfrecorder.types import BOX_EDGES, ImageBytes, Kind, Role
from tfrecorder.write import splits
from tfrecorder.write.table import labels
from tfrecorder.write.table.facts import BoxFacts, ColumnFacts, Facts, Problem
from tfrecorder.write.table.floats import FloatFacts
from tfrecorder.write.table.spellings import Spellings, one_spelling
from tfrecorder.write.table.table import Column, Table
from tfrecorder.write.table.uris import held_images, locations, uri_column
from tfrecorder.write.table.values import convert_values, float_array, store_floats


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

    held = guard(held_images(image_col, df[image_col], first_row, base_dir)) \
        if image_col and schema[image_col] is ImageBytes else None
    if held is not None:  # the images themselves: named by their struct's path or their row
        image_uris, image_locations = held.uris, held.locations
    else:
        given_uris = guard(uri_column(image_col, df[image_col], first_row)) if image_col else None
        image_uris = [redact(u) if u else u for u in given_uris] if given_uris else given_uris
        image_locations = locations(given_uris, base_dir) if given_uris else None
    named = None
    if schema.boxes and image_locations is not None and image_uris is not None:
        image_locations, image_uris, named = one_spelling(image_locations, image_uris, first_row, spellings)
    row_splits = guard(_row_splits(df, split_col, held.split_keys if held is not None else image_uris, fractions,
                                   first_row))  # held images: their digests, made only for UNASSIGNED rows
    mask_col = schema.column_for(Role.MASK)
    given_masks = None
    if mask_col:
        given_masks, problem = uri_column(mask_col, df[mask_col], first_row)
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
        column = guard(convert_values(name, df[name], col_type, order, first_row))
        converted.append(column)
        if column is not None:
            floats = (column.type.kind is Kind.FLOAT32 and not column.type.is_list and col_type.role is Role.FEATURE
                      and not column.type.connector)
            given = isinstance(column.values, np.ndarray) or any(v is not None for v in column.values)
            columns[name] = ColumnFacts(column.nullable, column.source,
                                        FloatFacts.of(float_array(column.values), first_row) if floats else None,
                                        given, column.pandas)
    label = next((c for c, (_, t) in zip(converted, valued) if t.role is Role.LABEL), None)
    features = tuple(_media_located(c, base_dir) for c, (_, t) in zip(converted, valued)
                     if t.role in (Role.FEATURE, Role.BOX))
    empty, box_facts = None, None
    boxes = {c.type.edge: c for c in features if c is not None and c.type.role is Role.BOX}
    if schema.boxes and len(boxes) == len(schema.boxes) and label is not None:
        empty, box_facts, box_problems = _box_facts(boxes, label.values, label.name, first_row)
        problems.update(((p.order, p.kind), p) for p in box_problems)
    keypoints = None
    for column in features:
        points = None if column is None else of_type(column.type).point_counts(column.values)
        if column is not None and points is not None:
            keypoints, problem = _keypoint_facts(column, points, first_row)
            if problem is not None:
                problems[(problem.order, problem.kind)] = problem
    facts = Facts(len(df), dict(Counter(row_splits)) if row_splits else {}, problems, columns, label_col,
                  boxes=box_facts, spellings=named, keypoints=keypoints)
    if label is not None and row_splits is not None:
        label, facts = _label_facts(label, row_splits, first_row, facts, empty)
    part = Table(
        schema=schema, num_rows=len(df), splits=row_splits, image_uris=image_uris,
        image_locations=image_locations,
        label=label, vocabulary=None, features=features,
        mask_uris=[redact(u) if u else u for u in given_masks] if given_masks is not None else None,
        mask_locations=locations(given_masks, base_dir) if given_masks is not None else None,
        image_data=held.data if held is not None else None,
    )
    return part, facts


def _media_located(column: Column | None, base_dir: str | Sequence[str | None] | None) -> Column | None:
    """A media column (``connectors.media``) with each location resolved against the folder of the file its row
    came from, as image URIs are, and each location as given redacted for messages; other columns as they are."""
    if column is None or not isinstance(column.connector, Media):
        return column
    given = [None if v is None else v[LOCATION] for v in column.values]
    several = {i for i, g in enumerate(given) if g is not None and LOCATIONS_SEPARATOR in g}  # a clip's frames
    found = locations([None if i in several else g for i, g in enumerate(given)], base_dir)
    for i in several:  # each resolved against its row's folder, as one location is
        folder = base_dir if base_dir is None or isinstance(base_dir, str) else base_dir[i]
        found[i] = LOCATIONS_SEPARATOR.join(map(str, locations(given[i].split(LOCATIONS_SEPARATOR), folder)))
    return replace(column, values=[None if v is None else {**v, URI: v[URI] and redact(v[URI]), LOCATION: place}
                                   for v, place in zip(column.values, found)])


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
    edges = np.stack([float_array(boxes[e].values) for e in BOX_EDGES], axis=1)  # [rows, 4], NaN: missing
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


def _keypoint_facts(column: Column, points: tuple[dict[int, list[int]], list[tuple[int, str]]], first_row: int
                    ) -> tuple[dict[int, RowSample], Problem | None]:
    """The rows of a keypoints column giving each number of keypoints (the table must give one), and the problem
    of the rows that do not give ``[x, y, v] * K`` (``points``: its connector's ``point_counts``)."""
    counts, bad = points
    found = {count: RowSample.of(rows, first_row) for count, rows in counts.items()}
    if not bad:
        return found, None
    rows = [position for position, _ in bad]
    position, reason = bad[0]
    return found, Problem(_BOX_ORDER + 10, column.name, "keypoints_shape", RowSample.of(rows, first_row),
                          ((first_row + position, f"row {first_row + position}: {reason}"),),
                          f"column {column.name!r}: keypoints are [x, y, v] for each point, v 0, 1 or 2")


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
    return replace(part, label=label, vocabulary=vocabulary, features=tuple(features), box_units=units,
                   keypoint_count=facts.keypoint_count)


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
    keys = image_uris() if callable(image_uris) else image_uris if image_uris is not None else _row_keys(df)
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
