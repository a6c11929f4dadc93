"""Labels (pure): string labels to their ids in the vocabulary, and the error for labels TRAIN lacks."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tfrecorder.errors import SchemaError, describe_rows
from tfrecorder.write.splits import DISCARD


def to_label_ids(
    column: str, labels: Sequence[object] | np.ndarray, splits: Sequence[str], vocabulary: Sequence[str]
) -> list[object]:
    """Map string labels (or lists of them) to vocabulary indices.

    A VALIDATION/TEST label absent from TRAIN cannot be learned, so it is an error
    naming the labels and rows; DISCARD rows are not checked.
    """
    index = {name: i for i, name in enumerate(vocabulary)}
    unseen: dict[str, list[int]] = {}
    out: list[object] = []
    for pos, (label, split) in enumerate(zip(labels, splits)):
        items = label if isinstance(label, list) else [label]
        ids = []
        for item in items:
            if item in index:
                ids.append(index[item])
            elif split != DISCARD and item is not None:
                unseen.setdefault(str(item), []).append(pos)
        out.append(ids if isinstance(label, list) else (ids[0] if ids else None))
    if unseen:
        rows = sorted(r for rs in unseen.values() for r in rs)
        raise SchemaError(unseen_labels_message(column, sorted(unseen), describe_rows(rows), bool(vocabulary)))
    return out


def unseen_labels_message(column: str, names: Sequence[str], rows: str, has_train: bool) -> str:
    """The error for VALIDATION/TEST labels that TRAIN lacks: the first 10 of them (sorted), and their rows."""
    shown = ", ".join(repr(n) for n in names[:10])
    where = "TRAIN has none of them" if has_train else "the table has no TRAIN rows"
    return (f"column {column!r}: labels {shown} appear in VALIDATION/TEST but not in TRAIN ({rows}); {where}, "
            f"so a model could never learn them. Add TRAIN examples or mark those rows DISCARD.")
