"""Verify: read every shard of a dataset and check it against dataset.json (CRCs, counts, checksums, parsing)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.message import DecodeError

from tfrecorder.dataset.example_proto import Example
from tfrecorder.dataset.features import FIELDS
from tfrecorder.dataset.manifest import FeatureInfo, Manifest
from tfrecorder.dataset.records import ChecksumFile, read_records
from tfrecorder.dataset.storage import Folder
from tfrecorder.errors import TFRecorderError
from tfrecorder.read.open import read_manifest


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a dataset: the file, the record number (None: the whole file) and what."""

    file: str
    record: int | None
    message: str

    def __str__(self) -> str:
        where = f"{self.file}: record {self.record}" if self.record is not None else self.file
        return f"{where}: {self.message}"


@dataclass(frozen=True)
class VerifyReport:
    """What ``verify`` found: ``ok`` when there is no problem."""

    tfrecord_dir: str
    shards: int
    records: int
    bytes: int
    problems: tuple[Problem, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        return not self.problems

    def __str__(self) -> str:
        checked = f"{self.shards} shards, {self.records} records, {self.bytes} bytes read"
        if self.ok:
            return f"{self.tfrecord_dir}: OK ({checked}; CRCs, counts, checksums and parsing checked)"
        lines = [f"{self.tfrecord_dir}: {len(self.problems)} problem{'s' * (len(self.problems) > 1)} ({checked})"]
        lines += [f"  {p}" for p in self.problems]
        return "\n".join(lines)


def verify(tfrecord_dir: str) -> VerifyReport:
    """Read every shard and check every record's CRCs, the record counts and file checksums in
    dataset.json, and that every record parses as a ``tf.train.Example`` with the manifest's features.

    Returns a report (``report.ok``, ``report.problems``: file, record number and cause); it raises
    only when the folder has no readable dataset.json. Reads with plain Python: TensorFlow is not imported.

    Example:
        >>> report = tfrecorder.verify(dataset_dir)
        >>> report.ok, report.records
        (True, 12)
    """
    manifest = read_manifest(tfrecord_dir)
    folder = Folder.of(tfrecord_dir)
    problems: list[Problem] = []
    shards = records = size = 0
    for split, infos in manifest.splits.items():
        for info in infos:
            found = _check_shard(folder, manifest, info.file, info.records, info.bytes, info.crc32c)
            shards += 1
            records += found.records
            size += found.bytes
            problems += found.problems
        counts = manifest.rows.get(split)
        stored = sum(s.records for s in infos)
        if counts is not None and counts.written != stored:
            problems.append(Problem("dataset.json", None, f"split {split}: {counts.written} rows written but its "
                                                          f"shards list {stored} records"))
    for split, counts in manifest.rows.items():
        if counts.rows_in != counts.written + counts.errors + counts.discarded:
            problems.append(Problem("dataset.json", None, f"split {split}: rows in ({counts.rows_in}) != written + "
                                                          f"errors + discarded ({counts})"))
    return VerifyReport(folder.url, shards, records, size, tuple(problems))


@dataclass
class _Found:
    records: int = 0
    bytes: int = 0
    problems: list[Problem] = field(default_factory=list)


def _check_shard(folder: Folder, manifest: Manifest, name: str, expected_records: int, expected_bytes: int,
                 crc32c: str) -> _Found:
    found = _Found()
    path = folder.join(name)
    try:
        actual = int(folder.fs.info(path).get("size", -1))
    except FileNotFoundError:
        found.problems.append(Problem(name, None, "the shard is missing"))
        return found
    if actual != expected_bytes:
        found.problems.append(Problem(name, None, f"{actual} bytes, dataset.json says {expected_bytes}"))
    with folder.fs.open(path, "rb") as raw:
        counted = ChecksumFile(raw)
        damaged = False
        for index, problem in _parse_all(counted, manifest):
            if problem is None:
                found.records += 1
                continue
            found.problems.append(Problem(name, index, problem))
            damaged = True
            break
        counted.drain()
    found.bytes = counted.bytes
    if not damaged and found.records != expected_records:
        found.problems.append(Problem(name, None, f"{found.records} records, dataset.json says {expected_records}"))
    if counted.crc32c != crc32c:
        found.problems.append(Problem(name, None, f"CRC-32C of the file is {counted.crc32c}, "
                                                  f"dataset.json says {crc32c}"))
    return found


def _parse_all(raw: Any, manifest: Manifest) -> Iterator[tuple[int, str | None]]:
    """(record number, None) per good record; (record number, cause) for the first bad one, then stops."""
    index = 0
    records = read_records(raw, manifest.compression)
    while True:
        try:
            data = next(records)
        except StopIteration:
            return
        except TFRecorderError as e:
            message = str(e)
            yield index, message.split(": ", 1)[1] if message.startswith("record ") else message
            return
        yield index, _parse_problem(data, manifest.features)
        index += 1


def _parse_problem(data: bytes, features: list[FeatureInfo]) -> str | None:
    """Why ``data`` does not parse with the manifest's spec, or None."""
    try:
        example = Example.FromString(data)
    except DecodeError as e:
        return f"not a tf.train.Example ({e})"
    stored = example.features.feature
    for f in features:
        if f.name not in stored:
            if not (f.nullable or f.shape == [None]):
                return f"feature {f.name!r} is missing"
            continue
        kind = stored[f.name].WhichOneof("kind")
        if kind is not None and kind != FIELDS[f.dtype]:
            return f"feature {f.name!r} is a {kind}, dataset.json says {f.dtype}"
        count = len(getattr(stored[f.name], kind).value) if kind else 0
        if f.shape == [] and count != 1 and not (f.nullable and count == 0):
            return f"feature {f.name!r} has {count} values, dataset.json says it is a scalar"
    return None
