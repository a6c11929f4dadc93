"""Versioning (the last step's share of datasets that grow): each conversion's content keys written beside its
shards, and an append's version merged into the dataset.json it replaces - shards and counts added, the
vocabulary as extended, the leakage report over every version's images.

A fresh conversion's dataset.json lists no versions (it is version 1 of everything it lists, and the same
conversion still writes the same bytes); the first append lists version 1 and itself, and each later one adds
its entry.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from tfrecorder.dataset.manifest import Manifest
from tfrecorder.dataset.storage import Folder
from tfrecorder.dataset.versions import (
    CONTENT_KEYS_DTYPE,
    FIRST_VERSION,
    Version,
    content_keys_bytes,
    content_keys_file,
    errors_file,
    summed,
    with_versions,
)
from tfrecorder.write.record.shard import ShardResult
from tfrecorder.write.table import leakage

ROW_BITS = 40  # a leak's rows across versions are found as (version << ROW_BITS) | row: up to 10^12 rows a version


@dataclass(frozen=True)
class History:
    """What a conversion's version is added to: nothing (``earlier`` None: a fresh dataset, version 1), or the
    dataset an append adds ``version`` to, with its earlier versions and their content keys."""

    version: int = FIRST_VERSION
    earlier: Manifest | None = None
    versions: tuple[Version, ...] = ()
    keyed: tuple[tuple[Version, np.ndarray], ...] = ()
    identity: str | None = None
    started: str | None = None
    options: tuple[tuple[str, Any], ...] = ()

    @property
    def errors_file(self) -> str:
        return errors_file(self.version)

    def recorded(self, folder: Folder, manifest: Manifest, results: Sequence[ShardResult]) -> Manifest:
        """Write this version's content keys beside its shards; ``manifest`` (of this run's shards alone) as
        dataset.json gives it: itself for a fresh dataset, else merged into the earlier one as its next version."""
        keys = content_keys(results)
        keys_name = content_keys_file(self.version) if manifest.image is not None else None
        if keys_name is not None:
            _write(folder, keys_name, content_keys_bytes(keys))
        if self.earlier is None:
            return manifest
        entry = Version(self.version, self.started, dict(manifest.rows), tuple(r.spec.filename for r in results),
                        {name: _jsonable(value) for name, value in self.options}, self.errors_file, keys_name,
                        self.identity, manifest.runner,
                        tuple(name for name in manifest.vocabulary or () if name not in self.earlier.vocabulary or ()))
        return with_versions(self._merged(manifest, results), (*self.versions, entry))

    def stale_tfds_files(self, written: Any) -> list[str]:
        """The TFDS files of the dataset appended to that this version does not write again (TFDS cannot read it:
        they would describe an earlier version as the whole)."""
        earlier = (self.earlier.tfds or {}).get("files", []) if self.earlier is not None else []
        return [name for name in earlier if name not in written]

    def _merged(self, manifest: Manifest, results: Sequence[ShardResult]) -> Manifest:
        earlier = self.earlier
        assert earlier is not None
        splits = {split: [*earlier.splits.get(split, []), *manifest.splits.get(split, [])]
                  for split in (*earlier.splits, *(s for s in manifest.splits if s not in earlier.splits))}
        image = manifest.image
        if image is not None and earlier.image is not None:
            image = {**earlier.image, **{key: sorted({*earlier.image[key], *image[key]})
                                         for key in ("channels", "formats", "orientations")},
                     "shape": image["shape"] if image["shape"] == earlier.image["shape"] else None}
        return replace(manifest, features=earlier.features, splits=splits,
                       rows=summed([earlier.rows, manifest.rows]), image=image, errors_file=earlier.errors_file,
                       leakage=self._leakage(manifest, results), extra=dict(earlier.extra))

    def _leakage(self, manifest: Manifest, results: Sequence[ShardResult]) -> dict[str, Any]:
        """The leakage report over every version: this run's same-URI leaks, then the images of any version in
        TRAIN and VALIDATION/TEST. Each entry's ``versions`` says which version's table each of its rows is of."""
        keyed = [(np.asarray(found["key"]), (np.int64(version.version) << ROW_BITS) | found["row"],
                  found["split"]) for version, found in self.keyed]
        keyed += [(keys, (np.int64(self.version) << ROW_BITS) | rows, codes)
                  for keys, rows, codes in (r.keyed_content() for r in results)]
        same_uri = [{**entry, "versions": [self.version] * len(entry["rows"])}
                    for entry in manifest.leakage.get("groups", []) if entry["kind"] == "same_uri"]
        same_bytes = [_decoded(entry) for entry in leakage.across_train(leakage.range_leaks("same_bytes", keyed))]
        leaks = [*same_uri, *same_bytes]
        return {"count": len(leaks), "groups": [leakage.bounded(e) for e in leaks[: leakage.MAX_REPORTED]]}


def _decoded(entry: dict[str, Any]) -> dict[str, Any]:
    mask = (1 << ROW_BITS) - 1
    return {**entry, "rows": [row & mask for row in entry["rows"]],
            "versions": [row >> ROW_BITS for row in entry["rows"]]}


def content_keys(results: Sequence[ShardResult]) -> np.ndarray:
    """The content keys of ``results``' images (in plan order), each with its split, shard and row."""
    parts = []
    for shard, result in enumerate(results):
        keys, rows, codes = result.keyed_content()
        part = np.zeros(len(keys), CONTENT_KEYS_DTYPE)
        part["key"], part["split"], part["shard"], part["row"] = keys, codes, shard, rows
        parts.append(part)
    keys = np.concatenate(parts) if parts else np.zeros(0, CONTENT_KEYS_DTYPE)
    return np.sort(keys, order=["shard", "row", "key"])  # the same file whatever order a runner gave them in


def _write(folder: Folder, name: str, data: bytes) -> None:
    with folder.create(name) as f:
        f.write(data)


def _jsonable(value: Any) -> Any:
    """A keyword's value as JSON keeps it: tuples as lists, anything else JSON lacks as its repr."""
    if isinstance(value, (tuple, list)):
        return [_jsonable(v) for v in value]
    return value if value is None or isinstance(value, (str, int, float, bool)) else repr(value)
