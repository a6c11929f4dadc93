"""Append (IO edge): ``convert(..., mode="append")`` - the finished dataset in the output folder read (never its
shards), the new table held to its features and vocabulary, its images checked against the content keys kept
beside the shards (``duplicate``), and its shards named and recorded as the dataset's next version.

The run itself is a conversion's: the folder's lock, a journal that lets a killed append resume, dataset.json
replaced last (atomically), so until then the previous version is whole and readable. ``versioning.History``
merges the new version into dataset.json at the end.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from tfrecorder import types
from tfrecorder.dataset import connectors
from tfrecorder.dataset.feature_info import FeatureInfo
from tfrecorder.dataset.manifest import MANIFEST_NAME, Manifest
from tfrecorder.dataset.storage import Folder
from tfrecorder.dataset.versions import (
    CONTENT_KEYS_MAX_BYTES,
    Version,
    content_keys_of,
    version_mark,
    versions_of,
)
from tfrecorder.errors import ImageError, SchemaError, TFRecorderError
from tfrecorder.schema import Schema
from tfrecorder.write.run.journal import Journal
from tfrecorder.write.run.lock import Lock
from tfrecorder.write.run.resume import Claim, Run, begin_run
from tfrecorder.write.run.versioning import History
from tfrecorder.write.settings import EXTEND_LABELS, Conversion, WriteOptions
from tfrecorder.write.splits import WRITTEN_SPLITS
from tfrecorder.write.table.facts import Facts
from tfrecorder.write.table.plan import ShardSpec

logger = logging.getLogger(__name__)


def finished_dataset(folder: Folder) -> Manifest:
    """The finished dataset in ``folder`` an append adds to; one line saying why there is none."""
    if MANIFEST_NAME not in folder.names():
        raise TFRecorderError(f"mode='append': {folder.url} holds no finished dataset (no {MANIFEST_NAME}); convert "
                              f"into it first (mode='create'), or finish the conversion running there")
    manifest = Manifest.from_json(folder.read_text(MANIFEST_NAME), where=folder.url_of(MANIFEST_NAME))
    if manifest.objects is not None or manifest.masks is not None or manifest.sequences is not None:
        raise TFRecorderError(f"mode='append': {folder.url} holds a detection, segmentation or SequenceExample "
                              f"dataset; appending to those is not supported yet: convert the whole table again")
    return manifest


def dataset_schema(manifest: Manifest) -> Schema:
    """The schema dataset.json's features were written from: each feature's input column and type (a type
    made for a connector as ``types.column_type`` makes it), in their order."""
    columns: dict[str, type[types.ColumnType]] = {}
    for feature in manifest.features:
        if feature.column is not None and feature.type is not None:
            columns[feature.column] = _column_type(feature)
    return Schema(columns)


def _column_type(feature: FeatureInfo) -> type[types.ColumnType]:
    named = getattr(types, str(feature.type), None)
    if isinstance(named, type) and named in types.ALL_TYPES:
        return named
    return types.column_type(connectors.of(feature))


def check_columns(columns: Sequence[str], schema: Schema, where: str) -> None:
    """One SchemaError naming the new table's columns the dataset lacks (it has the dataset's: ``check_schema``
    names a missing one)."""
    extra = [str(c) for c in columns if c not in schema]
    if extra:
        raise SchemaError(f"mode='append': column {extra[0]!r} is not one of the dataset's ({where}: "
                          f"{', '.join(schema)}){f'; nor are {extra[1:]}' if len(extra) > 1 else ''}: drop it, "
                          f"or convert the whole table again")


def vocabulary_rule(manifest: Manifest, new_labels: str) -> Callable[[Facts], tuple[str, ...] | None]:
    """What fixes an append's label vocabulary (``summary_pass.summarize``'s ``vocabulary``): the dataset's, a
    label it lacks refused with its rows; or with ``new_labels="extend"`` the dataset's followed by the new
    names, sorted (no existing id changes)."""
    known = manifest.vocabulary

    def fixed(facts: Facts) -> tuple[str, ...] | None:
        if known is None:
            return None
        seen = set(facts.train_labels) | set(facts.other_labels)
        new = sorted(seen - set(known))
        if new and new_labels != EXTEND_LABELS:
            rows = facts.other_labels.get(new[0])
            where = f" ({rows.describe()})" if rows is not None else ""
            raise SchemaError(f"column {facts.label!r}: label {new[0]!r}{where} is not in the dataset's vocabulary "
                              f"({', '.join(map(repr, known[:8]))}{', ...' if len(known) > 8 else ''})"
                              f"{f'; nor are {new[1:6]}' if len(new) > 1 else ''}: fix it, or pass "
                              f"new_labels='extend' to add it after the existing labels")
        if new:
            logger.warning("new_labels='extend': adding %s to the label vocabulary as ids %d to %d", new, len(known),
                           len(known) + len(new) - 1)
        return (*known, *new)

    return fixed


@dataclass(frozen=True, eq=False)
class KnownContent:
    """The content keys of a dataset's images, sorted, each with where it is: what an append's shard writers
    check each new image against (``duplicate``). Inherited by forked writers, never written to a journal."""

    keys: np.ndarray  # uint64, sorted
    splits: np.ndarray  # each key's split code (WRITTEN_SPLITS)
    shards: np.ndarray  # each key's shard: an index into ``names``
    names: tuple[str, ...]  # "train-00000-of-00002.tfrecord (version 1)"

    def duplicate(self, key: int, split: str) -> ImageError | None:
        """The row error for an image of content ``key`` when the dataset's ``split`` holds it. In another split
        it is written, and the leakage report names it (as a conversion's own leaks are)."""
        code = WRITTEN_SPLITS.index(split)
        first, last = np.searchsorted(self.keys, np.uint64(key), "left"), np.searchsorted(self.keys, np.uint64(key),
                                                                                          "right")
        same = [at for at in range(int(first), int(last)) if self.splits[at] == code]
        if not same:
            return None
        return ImageError("duplicate", f"its image is already in the dataset's {split}: "
                                       f"{self.names[int(self.shards[same[0]])]}")


def earlier_keys(folder: Folder, versions: Sequence[Version]) -> list[tuple[Version, np.ndarray]]:
    """Each version's content keys, read from the files beside the shards (a version without one: none)."""
    found = []
    for version in versions:
        if version.content_keys is None:
            continue
        try:
            with folder.open_side(version.content_keys, CONTENT_KEYS_MAX_BYTES) as f:
                found.append((version, content_keys_of(f.read(), folder.url_of(version.content_keys))))
        except FileNotFoundError:
            logger.warning("%s: version %d was converted before content keys were kept: its images are not "
                           "checked for duplicates or leaks", folder.url, version.version)
    return found


def known_content(keyed: Sequence[tuple[Version, np.ndarray]]) -> KnownContent | None:
    """The KnownContent of every version's keys (None: no version kept any)."""
    if not keyed:
        return None
    names: list[str] = []
    keys, splits, shards = [], [], []
    for version, found in keyed:
        keys.append(found["key"])
        splits.append(found["split"])
        shards.append(len(names) + found["shard"].astype(np.int64))
        names += [f"{shard} (version {version.version})" for shard in version.shards]
    all_keys = np.concatenate(keys)
    order = np.argsort(all_keys, kind="stable")
    return KnownContent(all_keys[order], np.concatenate(splits)[order], np.concatenate(shards)[order], tuple(names))


def versioned(spec: ShardSpec, version: int) -> ShardSpec:
    """``spec`` as a shard of ``version`` (``train-v2-00000-of-00001.tfrecord``, its index likewise): no name of
    another version's shards."""
    split = spec.split.lower()
    return replace(spec, version=version,
                   filename=spec.filename.replace(f"{split}-", f"{split}{version_mark(version)}-", 1))


@dataclass(frozen=True)
class Appending:
    """An append under way: the dataset it adds to and what the new table is held to."""

    earlier: Manifest
    versions: tuple[Version, ...]
    schema: Schema
    vocabulary: Callable[[Facts], tuple[str, ...] | None]
    known: KnownContent | None
    keyed: tuple[tuple[Version, np.ndarray], ...]

    @property
    def version(self) -> int:
        return self.versions[-1].version + 1

    def history(self, identity: str, run: Run, options: WriteOptions) -> History:
        """What the last step merges this version into: the dataset, its versions and keys, this run's identity,
        when it started (an interrupted append's first start: a resumed one records the same) and options."""
        started = (run.journal.read_run() or {}).get("started")
        return History(self.version, self.earlier, self.versions, self.keyed, identity, started, options.identity)


def prepare(folder: Folder, conversion: Conversion, schema: Schema | None, columns: Sequence[str]) -> Appending:
    """Read what an append needs of the dataset in ``folder``: its manifest, schema and content keys; check the
    new table's columns and ``schema`` (it must be the dataset's, or None) against it."""
    earlier = finished_dataset(folder)
    if conversion.options.compression != earlier.compression:
        raise TFRecorderError(f"mode='append': compression={conversion.options.compression!r}, the dataset's "
                              f"shards are compression={earlier.compression!r}: give the dataset's")
    derived = dataset_schema(earlier)
    if schema is not None and dict(schema) != dict(derived):
        differs = next(name for name in {*schema, *derived} if schema.get(name) is not derived.get(name))
        raise SchemaError(f"mode='append': schema= gives column {differs!r} as {_type_name(schema.get(differs))}, "
                          f"the dataset has it as {_type_name(derived.get(differs))}: leave schema out (the "
                          f"dataset's is used)")
    check_columns(columns, derived, folder.url_of(MANIFEST_NAME))
    versions = tuple(versions_of(earlier, folder.url_of(MANIFEST_NAME)))
    keyed = tuple(earlier_keys(folder, versions))
    return Appending(earlier, versions, derived, vocabulary_rule(earlier, conversion.new_labels), known_content(keyed),
                     keyed)


def _type_name(column_type: Any) -> str:
    return "absent" if column_type is None else column_type.__name__


def start_append(folder: Folder, identity: str, plan: Sequence[ShardSpec], runner: str) -> Run:
    """Lock ``folder`` for an append and start it, or resume the unfinished append of the same identity (an
    unfinished run of another is refused by ``begin_run``). Another conversion or append running there:
    ``OutputLocked``, one line naming it."""
    lock = Lock.acquire(folder, runner)
    try:
        journal = Journal(folder)
        earlier = journal.read_run()
        return Run(lock, journal, begin_run(Claim(lock, journal, earlier), identity, plan))
    except BaseException:
        lock.release()
        raise


def appended_already(appending: Appending, identity: str) -> Version | None:
    """The version the same append made already (its run identity is the latest's): nothing to write again."""
    latest = appending.versions[-1]
    return latest if latest.identity == identity else None
