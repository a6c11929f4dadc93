"""Versions (the on-disk contract of datasets that grow): dataset.json's list of versions - each conversion or
append's shards, row counts, options and time - a Manifest as of one version, and the names of the files a
version adds beside its shards.

Version 1 is the first conversion; each ``convert(..., mode="append")`` adds the next. dataset.json's ``splits``
and ``rows`` describe the latest version (every shard so far), so a reader that knows nothing of versions reads
the latest; the list is kept under ``extra`` (``VERSIONS_KEY``), which such a reader (format version 5) accepts,
so no format version is bumped. A dataset.json without it reads as version 1 of everything it lists.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from tfrecorder.dataset.manifest import ERRORS_NAME, Manifest, RowCounts, is_plain_name
from tfrecorder.errors import TFRecorderError

VERSIONS_KEY = "versions"  # dataset.json's extra.versions
FIRST_VERSION = 1
# The mark in the names of a later version's shards (``train-v2-00000-of-00001.tfrecord``): no name of another
# version's shards, which keep theirs (version 1's have none: as every dataset before versions named them).
VERSION_MARK = "-v{version}"
# Beside the shards, a version's content keys: what an append checks its rows against, without reading a shard.
CONTENT_KEYS_TEMPLATE = ".content-keys-v{version}.npy"
# One entry a written image: its content key (leakage.content_key), split code (splits.WRITTEN_SPLITS), the
# index of its shard among the version's shards (Version.shards), and its row in that version's table.
CONTENT_KEYS_DTYPE = np.dtype([("key", "<u8"), ("split", "i1"), ("shard", "<i4"), ("row", "<i8")])
CONTENT_KEYS_MAX_BYTES = 1 << 32  # 4 GiB: 200 million images' keys


@dataclass(frozen=True)
class Version:
    """One version of a dataset: what its conversion (version 1) or append added.

    ``rows``: that run's row counts by split; ``shards``: the shard files it added; ``options``: the
    conversion's keywords that change a byte written, as given to it; ``time``: when its run started (UTC);
    ``identity``: its run identity (the same append run again is known by it); ``content_keys``: the file of
    its images' content keys (None: written before versions were, or a table without images);
    ``labels_added``: the label names it added to the vocabulary (``new_labels="extend"``)."""

    version: int
    time: str | None
    rows: dict[str, RowCounts]
    shards: tuple[str, ...]
    options: dict[str, Any]
    errors_file: str = ERRORS_NAME
    content_keys: str | None = None
    identity: str | None = None
    runner: str | None = None
    labels_added: tuple[str, ...] = ()

    @property
    def rows_added(self) -> int:
        """The rows this version wrote, over every split."""
        return sum(counts.written for counts in self.rows.values())

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["shards"], data["labels_added"] = list(self.shards), list(self.labels_added)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any], where: str) -> Version:
        try:
            version = cls(**{**data, "rows": {k: RowCounts(**v) for k, v in data["rows"].items()},
                             "shards": tuple(data["shards"]), "labels_added": tuple(data.get("labels_added", ()))})
        except (TypeError, KeyError, AttributeError) as e:
            raise TFRecorderError(f"{where}: versions: {data!r} is not a version entry ({e}); dataset.json is "
                                  f"damaged or was edited") from None
        names = [*version.shards, version.errors_file, *([version.content_keys] if version.content_keys else [])]
        if not all(is_plain_name(name) for name in names):
            raise TFRecorderError(f"{where}: version {version.version} names a file that is not a plain file name "
                                  f"inside the dataset folder; dataset.json is damaged or was edited")
        return version


def versions_of(manifest: Manifest, where: str = "dataset.json") -> list[Version]:
    """The versions dataset.json lists, oldest first; a dataset.json written before versions: one, version 1,
    of every shard it lists."""
    listed = manifest.extra.get(VERSIONS_KEY)
    if listed is None:
        shards = tuple(shard.file for shards in manifest.splits.values() for shard in shards)
        # its images' keys, where a conversion that kept them wrote them (append.earlier_keys: an older one did not)
        keys = content_keys_file(FIRST_VERSION) if manifest.image is not None else None
        return [Version(FIRST_VERSION, None, dict(manifest.rows), shards, {}, manifest.errors_file, keys)]
    versions = [Version.from_json(entry, where) for entry in listed]
    if [v.version for v in versions] != list(range(FIRST_VERSION, FIRST_VERSION + len(versions))):
        raise TFRecorderError(f"{where}: versions {[v.version for v in versions]} are not 1, 2, ...; dataset.json "
                              f"is damaged or was edited")
    return versions


def latest_version(manifest: Manifest) -> int:
    return versions_of(manifest)[-1].version


def with_versions(manifest: Manifest, versions: Sequence[Version]) -> Manifest:
    """``manifest`` listing ``versions``."""
    return replace(manifest, extra={**manifest.extra, VERSIONS_KEY: [v.to_json() for v in versions]})


def summed(counts: Sequence[dict[str, RowCounts]]) -> dict[str, RowCounts]:
    """Row counts of several versions added up by split."""
    total: dict[str, RowCounts] = {}
    for by_split in counts:
        for split, c in by_split.items():
            t = total.get(split, RowCounts())
            total[split] = RowCounts(t.rows_in + c.rows_in, t.written + c.written, t.errors + c.errors,
                                     t.discarded + c.discarded)
    return total


def at_version(manifest: Manifest, version: int | None, where: str = "dataset.json") -> Manifest:
    """``manifest`` as of ``version`` (None: the latest): the shards of versions up to it, its counts. The rest
    (features, vocabulary, leakage) describe the latest: labels added later have ids after the earlier ones',
    so an earlier version's ids mean the same."""
    if version is None:
        return manifest
    versions = versions_of(manifest, where)
    if isinstance(version, bool) or not isinstance(version, int) or not 1 <= version <= versions[-1].version:
        raise TFRecorderError(f"version={version!r}: {where} has versions 1 to {versions[-1].version}"
                              if len(versions) > 1 else f"version={version!r}: {where} has one version, 1")
    if version == versions[-1].version:
        return manifest
    kept = versions[:version]
    files = {name for v in kept for name in v.shards}
    splits = {split: [s for s in shards if s.file in files] for split, shards in manifest.splits.items()}
    rows = summed([v.rows for v in kept])
    return replace(manifest, splits={k: v for k, v in splits.items() if v or k in rows},
                   rows={k: v for k, v in rows.items()})


def only_version(manifest: Manifest, version: int) -> Manifest:
    """``manifest`` as what ``version`` alone added: its shards, counts and errors file (what an append's
    ConvertResult describes)."""
    entry = versions_of(manifest)[version - FIRST_VERSION]
    files = set(entry.shards)
    splits = {split: [s for s in shards if s.file in files] for split, shards in manifest.splits.items()}
    return replace(manifest, splits={k: v for k, v in splits.items() if v or k in entry.rows}, rows=dict(entry.rows),
                   errors_file=entry.errors_file)


def version_mark(version: int) -> str:
    """What a shard name of ``version`` holds after its split: nothing for version 1, ``-v2`` and so on after."""
    return "" if version == FIRST_VERSION else VERSION_MARK.format(version=version)


def errors_file(version: int) -> str:
    """The errors.csv of ``version``'s rows: ``errors.csv``, then ``errors-v2.csv``, ..."""
    return ERRORS_NAME if version == FIRST_VERSION else ERRORS_NAME.replace(".csv", f"{version_mark(version)}.csv")


def content_keys_file(version: int) -> str:
    return CONTENT_KEYS_TEMPLATE.format(version=version)


def side_files(manifest: Manifest) -> set[str]:
    """The files dataset.json's versions name beside the shards: errors files and content keys."""
    found = set()
    for v in versions_of(manifest):
        found |= {v.errors_file, *([v.content_keys] if v.content_keys else [])}
    return found


def content_keys_bytes(keys: np.ndarray) -> bytes:
    """A CONTENT_KEYS_DTYPE array as its .npy file's bytes (no pickle)."""
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(keys, CONTENT_KEYS_DTYPE), allow_pickle=False)
    return buffer.getvalue()


def content_keys_of(data: bytes, where: str) -> np.ndarray:
    """A content keys file's array; a TFRecorderError naming the file where it is not one."""
    try:
        keys = np.load(io.BytesIO(data), allow_pickle=False)
    except (ValueError, OSError, EOFError) as e:
        raise TFRecorderError(f"{where} is damaged ({e}): convert the dataset again") from None
    if keys.dtype != CONTENT_KEYS_DTYPE or keys.ndim != 1:
        raise TFRecorderError(f"{where} holds {keys.dtype} {keys.shape}, not content keys: convert the dataset again")
    return keys
