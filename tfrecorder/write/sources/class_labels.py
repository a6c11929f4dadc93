"""Hugging Face ``ClassLabel`` columns (pure): which column of a ``datasets`` table is its label, and its ids as
their names - for a ``Dataset`` (its ``features``) and for the Parquet files ``datasets`` writes, whose schema
keeps the same features in its ``huggingface`` metadata (``Dataset.to_parquet``, the Hub's ``data/*.parquet``).
Read without them, such a file's labels would be bare ids, their names lost."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tfrecorder.errors import TFRecorderError
from tfrecorder.schema import LABEL_COLUMN, hf_features


def chosen(labels: Mapping[str, Sequence[str]], columns: Sequence[str]) -> str | None:
    """The ClassLabel column that is the label: ``label``, else the first; none where a ``label`` column of its
    own is there (the ClassLabel then stays its ids)."""
    label = LABEL_COLUMN if LABEL_COLUMN in labels else next(iter(labels), None)
    if label is not None and label != LABEL_COLUMN and LABEL_COLUMN in columns:
        return None
    return label


def ids_note(features: Mapping[str, Any], label: str | None) -> str | None:
    """The warning for ClassLabel columns other than the label (CIFAR-100's coarse_label beside fine_label), and
    lists of them: they are stored as their ids, which their names are not kept beside; None where there is none.
    ``features``: Hugging Face's, as ``Features.to_dict()`` and a Parquet file's metadata give them."""
    others = {}
    for name, feature in features.items():
        inner = feature.get("feature") if isinstance(feature, dict) and feature.get("_type") != "ClassLabel" \
            else feature  # a Sequence or List of ClassLabel
        if name != label and isinstance(inner, dict) and inner.get("_type") == "ClassLabel" \
                and isinstance(inner.get("names"), list):
            others[name] = inner["names"]
    if not others:
        return None
    shown = "; ".join(f"{name!r} ({len(names)} names: {', '.join(map(str, names[:3]))}"
                      f"{', ...' if len(names) > 3 else ''})" for name, names in others.items())
    return (f"ClassLabel columns other than the label are stored as their ids, their names not kept: {shown}; "
            f"to keep a name, store it as text (map its ids to names before converting)")


def parquet_class_labels(schema: Any) -> dict[str, list[str]]:
    """The ClassLabel columns a Parquet file's Arrow ``schema`` names in its Hugging Face metadata, each with its
    names in id order (none without that metadata, or where it is not the JSON datasets writes)."""
    features = hf_features(schema)
    return {name: [str(n) for n in feature["names"]] for name, feature in features.items()
            if isinstance(feature, dict) and feature.get("_type") == "ClassLabel"
            and isinstance(feature.get("names"), list) and name in schema.names}


def named(batch: Any, column: str, vocabulary: Sequence[str], where: str) -> Any:
    """An Arrow batch or table with its ClassLabel ``column`` as the ``label`` column of the ids' names (-1, no
    label, as missing); an id beyond the names is a TFRecorderError naming ``where`` the batch is from."""
    import pyarrow as pa
    import pyarrow.compute as pc

    ids = batch[column]
    ids = pc.if_else(pc.less(ids, 0), pa.scalar(None, ids.type), ids)
    largest = pc.max(ids).as_py()
    if largest is not None and largest >= len(vocabulary):
        shown = ", ".join(vocabulary[:5]) + (", ..." if len(vocabulary) > 5 else "")
        raise TFRecorderError(f"{where}: ClassLabel column {column!r} holds id {largest}, but its names are "
                              f"{len(vocabulary)} ({shown}): its features do not describe its values; cast the "
                              f"column to the ClassLabel that does")
    names = pc.take(pa.array(list(vocabulary), pa.string()), ids)
    return batch.set_column(batch.column_names.index(column), LABEL_COLUMN, names)


def union(names: Sequence[Sequence[str] | None]) -> tuple[str, ...]:
    """The label vocabulary of files or splits whose ClassLabels name ``names`` (None: none of its own): the
    first one's names in their order (its ids stay the ids it gave them), then each later name once, as found.
    Each file's ids are read with its own names (``named``), so a later file that orders them otherwise keeps
    its labels."""
    vocabulary: dict[str, None] = {}
    for found in names:
        vocabulary.update(dict.fromkeys(found or ()))
    return tuple(vocabulary)


def named_schema(schema: Any, column: str) -> Any:
    """``schema`` as ``named`` leaves its batches: the ClassLabel ``column`` a text ``label``."""
    import pyarrow as pa

    return schema.set(schema.get_field_index(column), pa.field(LABEL_COLUMN, pa.string()))
