"""Schema (pure): which column plays which role and how it is stored; inference from dtypes."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from tfrecorder import types
from tfrecorder.dataset.connectors.base import REGISTERED, Connector
from tfrecorder.dataset.connectors.tensors import Tensor
from tfrecorder.errors import SchemaError, describe_rows
from tfrecorder.types import ColumnType, Kind, Role

# Default column names (AutoML Vision CSV order); the features they are stored under are in dataset.features.
SPLIT_COLUMN = "split"
IMAGE_COLUMN = "image_uri"
LABEL_COLUMN = "label"
MASK_COLUMN = "mask_uri"
IMAGE_BYTES_COLUMN = "image"  # a column of this name holding the images themselves (not paths) is types.ImageBytes

ListLike = (list, tuple, np.ndarray)


def _check_image_roles(columns: Mapping[str, type[ColumnType]]) -> None:
    """A detection table names each box edge once, all four of them, beside an image and a single label; a
    segmentation table's mask goes with an image."""
    masks = [n for n, t in columns.items() if t.role is Role.MASK]
    if masks and not any(t.role is Role.IMAGE for t in columns.values()):
        raise SchemaError(f"column {masks[0]!r} holds segmentation masks: the table needs the image column they "
                          f"belong to (image_uri, or types.ImageUri in schema=)")
    held = [n for n, t in columns.items() if t is types.ImageBytes]
    if held and any(t.role is Role.BOX for t in columns.values()):
        raise SchemaError(f"column {held[0]!r} holds the images themselves; a detection table (a row per box) names "
                          f"each image by its URI, so that an image's boxes meet: give an image_uri column "
                          f"(types.ImageUri) instead")
    if masks and any(t.role is Role.BOX for t in columns.values()):
        raise SchemaError(f"column {masks[0]!r}: a table has box columns (a row per box) or a mask column (a row "
                          f"per image), not both")
    edges: dict[str, list[str]] = {}
    for name, col_type in columns.items():
        if col_type.role is Role.BOX:
            edges.setdefault(col_type.edge, []).append(name)
    for kinds, what, one in (((types.Keypoints,), "keypoints", "one set"),
                             (types.INSTANCE_MASK_TYPES, "instance masks", "one mask")):  # an object's values
        held = [n for n, t in columns.items() if t in kinds]
        if held and not edges:
            raise SchemaError(f"column {held[0]!r} holds {what}, an object's: the table needs box columns too "
                              f"(xmin, ymin, xmax, ymax: a row per object)")
        if len(held) > 1:
            raise SchemaError(f"columns {held} all hold {what}; an object has {one}: give one column")
    if not edges:
        return
    own = [n for n, t in columns.items() if isinstance(t.connector, Connector)]
    if own:
        raise SchemaError(f"column {own[0]!r} is stored with the connector {columns[own[0]].connector.name}, a value "
                          f"a record; a detection table (a row per box) stores its columns' values per object: give "
                          f"it in a table of a row per image")
    twice = {edge: names for edge, names in edges.items() if len(names) > 1}
    if twice:
        edge, names = next(iter(twice.items()))
        raise SchemaError(f"columns {names} all hold the box edge {edge!r}; give each edge one column")
    lacking = [edge for edge in types.BOX_EDGES if edge not in edges]
    if lacking:
        raise SchemaError(
            f"box columns {[edges[e][0] for e in edges]} without {', '.join(lacking)}: a detection table has "
            f"all four edges (xmin, ymin, xmax, ymax), as types.BoxXMin, BoxYMin, BoxXMax, BoxYMax")
    roles = {t.role: (n, t) for n, t in columns.items()}
    if Role.IMAGE not in roles or Role.LABEL not in roles:
        missing = " and ".join(r.value for r in (Role.IMAGE, Role.LABEL) if r not in roles)
        raise SchemaError(f"a detection table (box columns {[n for ns in edges.values() for n in ns]}) needs "
                          f"{missing} columns too: one row per box, with its image and its label")
    name, label = roles[Role.LABEL]
    if label.is_list:
        raise SchemaError(f"column {name!r}: a box has one label; {label.__name__} gives several per row")


class Schema(Mapping[str, type[ColumnType]]):
    """An ordered mapping of column name to column type.

    Examples:
        >>> from tfrecorder import Schema, types
        >>> s = Schema({"split": types.SplitKey, "image_uri": types.ImageUri,
        ...             "label": types.StringLabel, "weight": types.FloatInput})
        >>> s.column_for(types.Role.LABEL)
        'label'
    """

    def __init__(self, columns: Mapping[str, type[ColumnType] | Connector | type[Connector]]):
        checked: dict[str, type[ColumnType]] = {}
        for name, given in dict(columns).items():
            col_type: Any = given
            if isinstance(col_type, type) and issubclass(col_type, Connector):  # a kind of value that takes no
                col_type = col_type()  # parameters, given by its class
            if isinstance(col_type, Connector):
                col_type = types.column_type(col_type)
            if not (isinstance(col_type, type) and issubclass(col_type, ColumnType)):
                raise SchemaError(
                    f"column {name!r}: {col_type!r} is not a column type; "
                    f"use one of tfrecorder.types: {', '.join(t.__name__ for t in types.ALL_TYPES)}"
                )
            checked[str(name)] = col_type
        for role in (Role.SPLIT, Role.IMAGE, Role.LABEL, Role.MASK):
            named = [n for n, t in checked.items() if t.role is role]
            if len(named) > 1:
                raise SchemaError(f"schema has {len(named)} {role.value} columns ({named}); at most one is allowed")
        _check_image_roles(checked)
        self._columns = checked

    def __getitem__(self, name: str) -> type[ColumnType]:
        return self._columns[name]

    def __iter__(self):
        return iter(self._columns)

    def __len__(self) -> int:
        return len(self._columns)

    def __repr__(self) -> str:
        inner = ", ".join(f"{n!r}: types.{t.__name__}" for n, t in self._columns.items())
        return f"Schema({{{inner}}})"

    @property
    def boxes(self) -> dict[str, str]:
        """A detection table's box columns by the edge each holds (``types.BOX_TYPES``); empty for others."""
        return {t.edge: n for n, t in self._columns.items() if t.role is Role.BOX}

    def column_for(self, role: Role) -> str | None:
        """The column that plays ``role``, or None."""
        return next((n for n, t in self._columns.items() if t.role is role), None)

    # TFRecorder 2.0's names for the same facts.
    @property
    def split_key(self) -> str | None:
        """The split column (TFRecorder 2.0's name)."""
        return self.column_for(Role.SPLIT)

    @property
    def image_uri_key(self) -> str | None:
        """The image URI column (TFRecorder 2.0's name)."""
        return self.column_for(Role.IMAGE)

    @property
    def label_key(self) -> str | None:
        """The label column (TFRecorder 2.0's name)."""
        return self.column_for(Role.LABEL)

    @property
    def input_schema_map(self) -> dict[str, type[ColumnType]]:
        """``{column: type}``, as given (TFRecorder 2.0's name)."""
        return dict(self._columns)

    def get_input_keys(self) -> list[str]:
        """The column names, in order (TFRecorder 2.0's name)."""
        return list(self._columns)

    @classmethod
    def infer(cls, df: pd.DataFrame, arrow: Any = None) -> Schema:
        """Infer a schema from column names (split, image_uri, label) and dtypes; ``arrow``: the pyarrow schema of
        the Parquet file ``df`` was read from, whose types decide where they can (a list<double> column of
        empty lists is a list of floats, a null binary column bytes)."""
        kinds = {name: arrow_kind(arrow.field(name).type) for name in arrow.names} if arrow is not None else {}
        structs = {name for name in arrow.names if is_image_struct(arrow.field(name).type)} if arrow is not None \
            else set()
        hf = hf_features(arrow) if arrow is not None else {}
        for name, feature in hf.items():
            kind = feature.get("_type") if isinstance(feature, dict) else None
            if name in structs and kind not in (None, "Image") and claimed_type(df[name]) is not None:
                structs.discard(name)  # a kind of value claims it (Audio): its values decide below
            elif name in structs and kind not in (None, "Image"):  # Video: the same struct, no image in it
                raise SchemaError(f"column {name!r} holds Hugging Face {kind} values, not images: tfrecorder stores "
                                  f"images and columns of numbers and text; drop it (Dataset.remove_columns"
                                  f"([{name!r}]), or the column from the table) to convert the rest")
        # a tensor by the file's own schema: Arrow's fixed shapes, Hugging Face's ArrayND
        tensors = {name: types.column_type(found) for name in (arrow.names if arrow is not None else ())
                   if (found := Tensor.of_arrow(arrow.field(name).type, hf.get(name))) is not None}
        names = [str(name) for name in df.columns]
        boxes = set(types.BOX_EDGES) <= set(names)  # the four edges by their names: a detection table
        return cls({name: types.BOX_TYPES[name] if boxes and name in types.BOX_TYPES else
                    types.Keypoints if boxes and name == types.KEYPOINTS_COLUMN else
                    types.ImageBytes if name in structs else
                    tensors[name] if name in tensors else
                    types.InstanceMask if boxes and name == types.INSTANCE_MASK_COLUMN else
                    types.InstanceMaskUri if boxes and name == types.INSTANCE_MASK_URI_COLUMN else
                    infer_column_type(name, df[name], kinds.get(name)) for name in names})


# TFRecorder 2.0's default schema: split, image_uri, label (string); the map under its 2.0 name too.
image_csv_schema_map = {SPLIT_COLUMN: types.SplitKey, IMAGE_COLUMN: types.ImageUri, LABEL_COLUMN: types.StringLabel}
IMAGE_CSV_SCHEMA = Schema(image_csv_schema_map)


def is_missing(value: Any) -> bool:
    """True for None, NaN (a complex one too), pd.NA and NaT (never for a list)."""
    if value is None or value is pd.NA or value is pd.NaT:
        return True
    if isinstance(value, (float, np.floating, complex, np.complexfloating)):
        return bool(np.isnan(value))  # as pandas: a complex number is missing where either part is NaN
    return False


def infer_column_type(name: str, series: pd.Series, known: tuple[Kind, bool] | None = None) -> type[ColumnType]:
    """The column type for one column, by its name for the three roles and by its values otherwise (or by
    ``known``: (kind, is_list) from a file's own schema)."""
    if name == SPLIT_COLUMN:
        return types.SplitKey
    if name == IMAGE_COLUMN:
        return types.ImageUri
    if name == MASK_COLUMN:
        return types.MaskUri
    if holds_images(name, series):
        return types.ImageBytes
    if (by_name := named_type(name)) is not None:  # whatever a file's own schema says of it (a string column)
        return by_name
    # a file's own schema decides over the values of a part (a list<double> column of numpy arrays stays lists)
    if name != LABEL_COLUMN and known is None and (claimed := claimed_type(series)) is not None:
        return claimed
    kind, is_list = known or infer_kind(name, series)
    if name == LABEL_COLUMN:
        if kind is Kind.FLOAT32 and not is_list:
            return _float_label(name, series)
        return types.LABEL_TYPES[(Kind.BYTES if kind is Kind.BYTES else Kind.INT64, is_list)]
    return types.FEATURE_TYPES[(kind, is_list)]


def named_type(name: str) -> type[ColumnType] | None:
    """The type of a column a connector claims by its name (``Connector.claimed_names``: ``audio_uri``), or None."""
    for connector_class in tuple(REGISTERED.values()):
        if name in connector_class.claimed_names:
            return types.column_type(connector_class())
    return None


def claimed_type(series: pd.Series) -> type[ColumnType] | None:
    """The type of a column a connector claims (``Connector.claim``: the first defined that does), or None."""
    for connector_class in tuple(REGISTERED.values()):
        connector = connector_class.claim(series)
        if connector is not None:
            return types.column_type(connector)
    return None


def _float_label(name: str, series: pd.Series) -> type[ColumnType]:
    values = series.dropna()
    if len(values) and all(float(v).is_integer() for v in values):
        return types.IntegerLabel
    bad = [i for i, v in enumerate(series) if not is_missing(v) and not float(v).is_integer()]
    raise SchemaError(
        f"column {name!r}: labels must be strings or integers; found floats such as "
        f"{series.iloc[bad[0]]!r} ({describe_rows(bad)}). Use a regression target as an extra column instead."
    )


def infer_kind(name: str, series: pd.Series) -> tuple[Kind, bool]:
    """(feature kind, is_list) for a column, from its dtype or, for object columns, its values."""
    dtype = series.dtype
    if isinstance(dtype, pd.CategoricalDtype):
        return infer_kind(name, pd.Series(np.asarray(series.astype(object))))
    if pd.api.types.is_bool_dtype(dtype) or pd.api.types.is_integer_dtype(dtype):
        return Kind.INT64, False
    if pd.api.types.is_float_dtype(dtype):
        return Kind.FLOAT32, False
    if pd.api.types.is_datetime64_any_dtype(dtype) or pd.api.types.is_timedelta64_dtype(dtype):
        return Kind.INT64, False  # int64 counts of the unit (dataset.dtypes), given back as they were by read_tfr
    if pd.api.types.is_string_dtype(dtype) and not pd.api.types.is_object_dtype(dtype):
        return Kind.BYTES, False
    if not pd.api.types.is_object_dtype(dtype):
        raise SchemaError(
            f"column {name!r}: dtype {dtype} is not supported; convert it to numbers or strings"
        )
    return _infer_object_kind(name, series)


def arrow_kind(arrow_type: Any) -> tuple[Kind, bool] | None:
    """(kind, is_list) of a pyarrow type: what a Parquet file says its column holds, whatever the values of a
    part of it (all empty lists, all null); None for a type that only the values can tell (or that fits none)."""
    import pyarrow as pa

    if pa.types.is_dictionary(arrow_type):
        arrow_type = arrow_type.value_type
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type) or pa.types.is_fixed_size_list(arrow_type):
        inner = arrow_kind(arrow_type.value_type)
        return (inner[0], True) if inner is not None and not inner[1] else None
    if pa.types.is_boolean(arrow_type) or pa.types.is_integer(arrow_type):
        return Kind.INT64, False
    if pa.types.is_floating(arrow_type):
        return Kind.FLOAT32, False
    if (pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type) or pa.types.is_binary(arrow_type)
            or pa.types.is_large_binary(arrow_type)):
        return Kind.BYTES, False
    return None


def _scalar_kind(value: Any) -> Kind | None:
    if isinstance(value, (str, bytes, np.str_, np.bytes_)):
        return Kind.BYTES
    if isinstance(value, (bool, int, np.bool_, np.integer)):
        return Kind.INT64
    if isinstance(value, (float, np.floating)):
        return Kind.FLOAT32
    return None


def _combine(name: str, kinds: dict[Kind, list[int]], what: str) -> Kind:
    if set(kinds) == {Kind.INT64, Kind.FLOAT32}:
        return Kind.FLOAT32
    if len(kinds) == 1:
        return next(iter(kinds))
    words = {Kind.INT64: "integers", Kind.FLOAT32: "floats", Kind.BYTES: "strings"}
    detail = "; ".join(f"{words[k]} in {describe_rows(rows, 3)}" for k, rows in kinds.items())
    raise SchemaError(
        f"column {name!r}: {what} mix types ({detail}); make them one type or give the type in schema="
    )


def check_flat(name: str, series: pd.Series) -> None:
    """A feature holds flat lists: a column of 2-D (or higher) arrays would lose its shape, so it is refused
    naming the shape and rows."""
    shaped = [pos for pos, v in enumerate(series.tolist()) if isinstance(v, np.ndarray) and v.ndim > 1]
    if shaped:
        raise SchemaError(flat_message(name, series.iloc[shaped[0]].shape, describe_rows(shaped)))


def flat_message(name: str, shape: tuple[int, ...] | str, rows: str) -> str:
    return (f"column {name!r}: holds arrays of more than one dimension (shape {shape}, {rows}); a feature is a flat "
            f"list that would lose the shape: type it types.Tensor(shape=..., dtype=...), or leave its type to "
            f"be inferred (a column of arrays is a tensor)")


# The kind of a list column whose items are all of these exact Python types (a tokenizer's ids, scores), found
# at C speed; any other column takes the item-by-item path, which also names the rows of what is wrong.
_PLAIN_ITEM_KINDS = {frozenset({int}): Kind.INT64, frozenset({float}): Kind.FLOAT32,
                     frozenset({int, float}): Kind.FLOAT32, frozenset({str}): Kind.BYTES}


def plain_list_items(values: list[Any]) -> frozenset[type] | None:
    """The exact Python types of the items of ``values`` where every one is a Python list or None (found at C
    speed: a tokenizer's ids); None where any is something else (a tuple, an array, a scalar)."""
    if not all(type(v) is list or v is None for v in values):
        return None
    return frozenset(map(type, itertools.chain.from_iterable(v for v in values if v is not None)))


def _infer_object_kind(name: str, series: pd.Series) -> tuple[Kind, bool]:
    items = plain_list_items(series.tolist())
    found = _PLAIN_ITEM_KINDS.get(items) if items is not None else None
    if found is not None:
        return found, True
    check_flat(name, series)
    scalar: dict[Kind, list[int]] = {}
    element: dict[Kind, list[int]] = {}
    lists: list[int] = []
    bad: list[int] = []
    for pos, value in enumerate(series):
        if isinstance(value, ListLike):
            lists.append(pos)
            for item in _iter_list(value):
                kind = _scalar_kind(item)
                if kind is None:
                    bad.append(pos)  # a row once, however many of its items are bad
                    break
                element.setdefault(kind, []).append(pos)
        elif not is_missing(value):
            kind = _scalar_kind(value)
            if kind is None:
                bad.append(pos)
            else:
                scalar.setdefault(kind, []).append(pos)
    if bad:
        example = series.iloc[bad[0]]
        if isinstance(example, ListLike) and any(image_value_kind(v) for v in _iter_list(example)):
            raise SchemaError(f"column {name!r} holds lists of images such as {brief(example)} "
                              f"({describe_rows(bad)}): a record holds one image; give each its own row "
                              f"(DataFrame.explode({name!r})) in a column named 'image'")
        raise SchemaError(
            f"column {name!r}: values of type {type(example).__name__} such as {brief(example)} "
            f"({describe_rows(bad)}) cannot be stored; use numbers, strings, bytes or lists of them"
        )
    if lists and scalar:
        first = next(iter(scalar.values()))
        raise SchemaError(
            f"column {name!r}: mixes lists ({describe_rows(lists, 3)}) and single values "
            f"({describe_rows(first, 3)}); make every value a list"
        )
    if lists:
        return (_combine(name, element, "list items") if element else Kind.INT64), True
    if not scalar:
        raise SchemaError(
            f"column {name!r}: every value is missing, so its type cannot be inferred; "
            f"drop the column or give its type in schema="
        )
    return _combine(name, scalar, "values"), False


def _iter_list(value: Any) -> Iterable[Any]:
    return value.ravel().tolist() if isinstance(value, np.ndarray) else value


HF_METADATA = b"huggingface"  # the Arrow schema metadata key datasets writes its features under
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".gif", ".bmp", ".webp", ".tif", ".tiff")  # file names read as images
# The first bytes of each image format a column's bytes are told by (the formats Pillow reads and TensorFlow or
# a re-encode stores): JPEG, PNG, GIF, BMP, TIFF (both byte orders); WebP is RIFF....WEBP.
IMAGE_SIGNATURES = (b"\xff\xd8\xff", b"\x89PNG\r\n\x1a\n", b"GIF87a", b"GIF89a", b"BM", b"II*\x00", b"MM\x00*")


def is_image_bytes(value: Any) -> bool:
    """Whether ``value`` (bytes) starts as an encoded image does."""
    head = bytes(value[:12])
    return head.startswith(IMAGE_SIGNATURES) or (head[:4] == b"RIFF" and head[8:12] == b"WEBP")


def is_pil_image(value: Any) -> bool:
    """A PIL image, told without importing Pillow."""
    return type(value).__module__.startswith("PIL.") and hasattr(value, "mode") and hasattr(value, "size")


def is_image_struct(arrow_type: Any) -> bool:
    """A pyarrow struct of ``bytes`` (binary) and ``path``: Hugging Face ``datasets``' ``Image`` as stored."""
    import pyarrow as pa

    return pa.types.is_struct(arrow_type) and {f.name for f in arrow_type} >= {"bytes", "path"}


def image_value_kind(value: Any) -> str | None:
    """What a value of an image column holding the images themselves is: "bytes", "struct" (a dict with
    ``bytes`` or ``path``), "array" (a numpy array), "pil"; None for anything else."""
    if isinstance(value, (bytes, bytearray, memoryview, np.bytes_)):
        return "bytes"
    if isinstance(value, dict) and ("bytes" in value or "path" in value):
        return "struct"
    if isinstance(value, np.ndarray):
        return "array"
    return "pil" if is_pil_image(value) else None


def holds_images(name: str, series: pd.Series) -> bool:
    """A column of the images themselves (``types.ImageBytes``): under any name, dicts of ``bytes`` and ``path``
    (Hugging Face's ``Image``) or PIL images; named ``image``, also encoded image bytes (told by their first
    bytes) or arrays of pixels (of another dtype than uint8 a row error). Every value given is one of those
    kinds (a bad one is then a row error); a value of none of them beside images, and a column named ``image``
    of bytes none of which is an image, are SchemaErrors naming the row. A categorical column (Parquet's
    dictionary encoding of repeated images) is read by its values."""
    if isinstance(series.dtype, pd.CategoricalDtype):
        series = series.astype(object)
    if series.dtype != object:
        return False
    kinds: set[str] = set()
    told = False
    other: tuple[int, Any] | None = None  # the first value of no image kind, and its row
    first: tuple[int, Any] | None = None  # the first value given, and its row
    for row, value in enumerate(series.tolist()):
        if is_missing(value):
            continue
        first = first or (row, value)
        kind = image_value_kind(value)
        if kind is None:
            other = other or (row, value)
            continue
        kinds.add(kind)
        told = told or kind == "pil" or (kind == "bytes" and is_image_bytes(value)) or (
            kind == "struct" and _image_struct(value)) or (kind == "array" and value.ndim in (2, 3))
    images = told and (name == IMAGE_BYTES_COLUMN or kinds <= {"struct", "pil"})
    if images and other is not None:
        raise SchemaError(f"column {name!r} holds images, and in row {other[0]} {brief(other[1])}, which is none: "
                          f"a column of images holds encoded bytes, {{'bytes', 'path'}} dicts, uint8 arrays or PIL "
                          f"images (a file as {{'bytes': None, 'path': ...}})")
    if not told and other is None and kinds == {"bytes"} and name == IMAGE_BYTES_COLUMN and first is not None:
        raise SchemaError(f"column {name!r} holds bytes none of which is an image (row {first[0]}: "
                          f"{brief(first[1])}): a column named {name!r} holds encoded images (JPEG, PNG, GIF, "
                          f"BMP, WebP, TIFF); rename it to store other bytes as a feature of their own")
    return images


def _image_struct(value: dict) -> bool:
    """Whether a ``{bytes, path}`` struct is an image's (Hugging Face's ``Image``), told by its bytes, or by its
    path's extension where it has only a path: ``Audio`` stores its clips in the same struct."""
    data, path = value.get("bytes"), value.get("path")
    if isinstance(data, (bytes, bytearray, memoryview)) and len(data):
        return is_image_bytes(data)
    return isinstance(path, str) and path.strip().lower().endswith(IMAGE_EXTENSIONS)


def hf_features(arrow_schema: Any) -> dict[str, Any]:
    """The features Hugging Face ``datasets`` keeps in an Arrow schema's ``huggingface`` metadata (a Parquet file
    it wrote, a ``Dataset``'s table), by column; {} without them."""
    import json

    try:
        features = json.loads((arrow_schema.metadata or {})[HF_METADATA])["info"]["features"]
    except (KeyError, TypeError, ValueError):
        return {}
    return features if isinstance(features, dict) else {}


def brief(value: Any, limit: int = 80) -> str:
    """A value as an error message shows it: bytes by their size and first bytes, a struct's bytes likewise,
    an array by its shape, anything else its repr cut at ``limit`` characters - never a whole image."""
    if isinstance(value, (bytes, bytearray, memoryview, np.bytes_)):
        return f"<{len(value)} bytes: {bytes(value[:8])!r}...>"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {brief(v, 40)}" for k, v in list(value.items())[:4]) + "}"
    if isinstance(value, np.ndarray):
        return f"<array of shape {value.shape}, dtype {value.dtype}>"
    if isinstance(value, (list, tuple)):  # its items as each is shown: a list of images shows no bytes either
        items = ", ".join(brief(v, 40) for v in value[:3]) + (", ..." if len(value) > 3 else "")
        return f"[{items}]" if isinstance(value, list) else f"({items})"
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."
