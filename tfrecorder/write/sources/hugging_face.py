"""Hugging Face ``datasets`` (IO edge): a ``Dataset`` or ``DatasetDict`` as a table read a part at a time from its
Arrow batches, never as one pandas copy - its splits as ours, its ``ClassLabel`` names the label vocabulary in
their order, its ``Image`` column the images themselves (``types.ImageBytes``). ``datasets`` is not imported:
the objects are known by their class, and read through their own methods."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pandas as pd

from tfrecorder.errors import SchemaError, TFRecorderError
from tfrecorder.schema import LABEL_COLUMN, SPLIT_COLUMN
from tfrecorder.write.sources.class_labels import chosen, ids_note, named, union
from tfrecorder.write.sources.embedded import part_rows
from tfrecorder.write.sources.files import arrow_frame
from tfrecorder.write.splits import NAMED_SPLITS


def is_hugging_face(source: Any) -> bool:
    """A ``datasets.Dataset`` or ``DatasetDict`` (told by its class, without importing ``datasets``)."""
    kind = type(source)
    return kind.__module__.startswith("datasets.") and kind.__name__ in ("Dataset", "DatasetDict")


@dataclass(frozen=True)
class DatasetSource:
    """A Hugging Face dataset converted a part at a time (``parts``, as ``TableFiles`` and ``FrameSource`` are):
    each split's rows in Arrow batches of at most ``rows`` rows (fewer for rows of images: ``part_rows``), its
    split given as the ``split`` column, its ClassLabel column read as the names (``vocabulary``)."""

    splits: tuple[tuple[str | None, Any], ...]  # (our split, or None: split by hash; its Dataset)
    class_label: str | None = None  # the ClassLabel column read as names, stored as the label
    vocabulary: tuple[str, ...] | None = None  # its names, in their order: label ids are their positions
    url: str = "the Hugging Face dataset"
    files: tuple[str, ...] = ()
    parquet: bool = False
    skipped: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()

    @property
    def columns(self) -> tuple[str, ...]:
        names = [LABEL_COLUMN if n == self.class_label else n for n in self.splits[0][1].column_names]
        return tuple(names if SPLIT_COLUMN in names or self.splits[0][0] is None else [SPLIT_COLUMN, *names])

    @property
    def rows(self) -> int:
        return sum(len(dataset) for _, dataset in self.splits)

    @property
    def bytes(self) -> int:
        """The splits' Arrow bytes: what the spill is sized by."""
        return sum(_arrow_bytes(dataset) for _, dataset in self.splits)

    def schema_frame(self, first: pd.DataFrame | None) -> pd.DataFrame:
        """What the schema is inferred from and checked against: the first part."""
        return first if first is not None else pd.DataFrame()

    def parts(self, rows: int) -> Iterator[tuple[pd.DataFrame, None, int]]:
        """(part, no folder: its images' paths stay as given, the number of its first row), split after split."""
        first_row = 0
        for split, dataset in self.splits:
            size = part_rows(rows, _arrow_bytes(dataset) / max(1, len(dataset)))
            names = _class_names(dataset).get(self.class_label or "", self.vocabulary or ())
            for batch in dataset.with_format("arrow").iter(batch_size=size):
                part = arrow_frame(self._named(batch, split, names))
                yield part, None, first_row
                first_row += len(part)

    def _named(self, batch: Any, split: str | None, names: tuple[str, ...]) -> Any:
        """A batch with its ClassLabel ids as their names (-1, no label, as missing) and its split column."""
        import pyarrow as pa

        if self.class_label is not None:  # the split's own names: another split may order them otherwise
            batch = named(batch, self.class_label, names, f"the Hugging Face dataset's {split or 'rows'}")
        if split is not None and SPLIT_COLUMN not in batch.column_names:
            batch = batch.add_column(0, SPLIT_COLUMN, pa.array([split] * batch.num_rows, pa.string()))
        return batch


def dataset_source(source: Any) -> DatasetSource:
    """A ``Dataset`` (its own split, if it names one of ours; else split by hash) or a ``DatasetDict`` (each of
    its splits, which must all be ours) as a DatasetSource; its ClassLabel column (``label``, or the first) the
    label. Splits of other names, or of other columns, are a TFRecorderError saying which."""
    if _is_dict(source):
        unknown = [name for name in source if _our_split(name) is None]
        if unknown:
            kept = ", ".join(f"{name!r}: d[{name!r}]" for name in source if _our_split(name) is not None)
            keep = f"convert the splits that are (DatasetDict({{{kept}}})), or " if kept else ""
            unlabelled = " (an 'unsupervised' split has no labels)" if unknown[0].lower() == "unsupervised" else ""
            raise TFRecorderError(
                f"the DatasetDict's split {unknown[0]!r} is none of {', '.join(sorted(NAMED_SPLITS))}: {keep}give "
                f"{unknown[0]!r} one of those names if it is one of them{unlabelled}")
        splits = tuple((_our_split(name), source[name]) for name in source)
    else:
        splits = ((_our_split(str(source.split)) if source.split is not None else None, source),)
    if not splits:
        raise TFRecorderError("the DatasetDict has no split: there are no rows to convert")
    columns = splits[0][1].column_names
    for name, (_, dataset) in zip(list(source) if _is_dict(source) else [], splits):
        if dataset.column_names != columns:
            raise TFRecorderError(f"the DatasetDict's split {name!r} has columns {dataset.column_names}, but the "
                                  f"first has {columns}: every split needs the same columns")
    labels = _class_names(splits[0][1])
    label = chosen(labels, columns)
    vocabulary = union([_class_names(dataset).get(label) for _, dataset in splits]) if label is not None else None
    if label is not None:
        _no_labels(source, splits, label)
    notes = [note for note in (ids_note(splits[0][1].features.to_dict(), label), _own_split_note(source, columns))
             if note]
    return DatasetSource(splits, label, vocabulary, warnings=tuple(notes))


def _own_split_note(source: Any, columns: list[str]) -> str | None:
    """The warning for a DatasetDict whose datasets have a ``split`` column of their own: it gives each row's
    split, whatever the dict's key says (a key's rows may go to another split)."""
    if not _is_dict(source) or SPLIT_COLUMN not in columns:
        return None
    return (f"the DatasetDict's datasets have a {SPLIT_COLUMN!r} column of their own: it gives each row's split, not "
            f"the dict's keys ({', '.join(map(repr, source))}); drop it to split by the keys")


def _no_labels(source: Any, splits: tuple[tuple[str | None, Any], ...], label: str) -> None:
    """A SchemaError naming each split with rows of ClassLabel -1 (no label) and the first of them (missing labels
    are refused, and the general message's rows, counted across splits, and advice - a split column to mark
    DISCARD - fit a Dataset badly), with the filter that drops them. Rows its own split column marks DISCARD
    are left out, as that column says."""
    import pyarrow.compute as pc

    names = list(source) if _is_dict(source) else [str(source.split or "the dataset")]
    found: dict[str, list[int]] = {}
    for name, (_, dataset) in zip(names, splits):
        columns = [label, *([SPLIT_COLUMN] if SPLIT_COLUMN in dataset.column_names else [])]
        table = dataset.select_columns(columns).with_format("arrow")[:]  # its own rows (not a .select()ed
        # Dataset's whole table), these columns only
        unlabelled = pc.less(table[label], 0)
        if SPLIT_COLUMN in table.column_names:
            kept = pc.not_equal(pc.utf8_upper(pc.utf8_trim_whitespace(table[SPLIT_COLUMN])), "DISCARD")
            unlabelled = pc.and_(unlabelled, pc.fill_null(kept, True))
        rows = pc.indices_nonzero(pc.fill_null(unlabelled, False)).to_pylist()
        if rows:
            found[name] = rows
    if found:
        shown = ", ".join(f"{len(rows)} in {name!r} (row {', '.join(map(str, rows[:3]))}"
                          f"{', ...' if len(rows) > 3 else ''})" for name, rows in found.items())
        raise SchemaError(f"ClassLabel column {label!r} is -1 (no label) in {sum(map(len, found.values()))} rows "
                          f"({shown}): drop them first, d = d.filter(lambda row: row[{label!r}] != -1), mark them "
                          f"DISCARD in a split column, or convert an unlabelled split on its own without its "
                          f"{label!r} column")


def _is_dict(source: Any) -> bool:
    """A DatasetDict (of splits), not a Dataset: told without importing datasets."""
    return type(source).__name__ == "DatasetDict"


def _class_names(dataset: Any) -> dict[str, tuple[str, ...]]:
    """A Dataset's ClassLabel columns, each with its names in id order."""
    return {n: tuple(f.names) for n, f in dataset.features.items() if type(f).__name__ == "ClassLabel"}


def _our_split(name: str) -> str | None:
    return NAMED_SPLITS.get(name.split("[", 1)[0].strip().lower())


def _arrow_bytes(dataset: Any) -> int:
    return int(dataset.data.nbytes)
