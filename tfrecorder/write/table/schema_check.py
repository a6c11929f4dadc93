"""Schema check (pure): a table's columns against its schema (given, or inferred from the values) before any row
is converted - every column it names present, feature names free and distinct, image paths not taken for text."""

from __future__ import annotations

from typing import Any

import pandas as pd

from tfrecorder.dataset.connectors import Connector
from tfrecorder.dataset.connectors.tensors import DEFAULT_ENCODING as DEFAULT_TENSOR_ENCODING
from tfrecorder.dataset.connectors.tensors import Tensor
from tfrecorder.dataset.features import DERIVED_NAMES, ROLE_FEATURES
from tfrecorder.errors import SchemaError
from tfrecorder.schema import IMAGE_COLUMN, IMAGE_EXTENSIONS, Schema
from tfrecorder.types import ColumnType, Kind, Role, column_type


def check_schema(df: pd.DataFrame, schema: Schema | None, arrow: Any = None,
                 tensor_encoding: str = DEFAULT_TENSOR_ENCODING) -> Schema:
    """The schema for a table with ``df``'s columns (None: inferred from ``df``, and from ``arrow``, the pyarrow
    schema of the Parquet file it was read from), checked against them; its tensor columns whose type gives no
    encoding stored with ``tensor_encoding`` (convert's)."""
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
    return _stored_tensors(schema, tensor_encoding)


def _stored_tensors(schema: Schema, encoding: str) -> Schema:
    """``schema`` with every tensor column's encoding decided (``Tensor.stored_with``): before any row is checked,
    since a checked array is its stored bytes."""
    tensors = {name: t.connector.stored_with(encoding) for name, t in schema.items() if isinstance(t.connector, Tensor)}
    if all(tensor is schema[name].connector for name, tensor in tensors.items()):
        return schema
    return Schema({name: column_type(tensors[name]) if name in tensors else t for name, t in schema.items()})


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


def feature_name(column: str, col_type: type[ColumnType]) -> str:
    """The feature a column is stored under: its role's (``split``, ``image_uri``, ``label``) or its own name."""
    role_feature = ROLE_FEATURES.get(col_type.role)
    if role_feature is None and isinstance(col_type.connector, Connector):  # a kind that names its feature
        return col_type.connector.feature_name(column)
    return role_feature.name if role_feature else column


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
