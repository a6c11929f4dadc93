"""Verify: read every shard of a dataset and check it against dataset.json (CRCs, counts, checksums, parsing)."""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.message import DecodeError

from tfrecorder.dataset.example_proto import Example
from tfrecorder.dataset.features import (
    IMAGE,
    IMAGE_CHANNELS,
    IMAGE_FORMAT,
    IMAGE_HEIGHT,
    IMAGE_URI,
    IMAGE_WIDTH,
    OBJECT_MASK,
    OD_FILENAME,
    OD_IMAGE,
    OD_OBJECT_MASK,
    OD_SOURCE_ID,
    SEGMENTATION_MASK,
)
from tfrecorder.dataset.file_formats import format_of_file
from tfrecorder.dataset.layouts import first_class_id_of
from tfrecorder.dataset.manifest import FeatureInfo, Manifest, ShardInfo
from tfrecorder.dataset.records import ChecksumFile, Frame, index_max_bytes
from tfrecorder.dataset.storage import METADATA_MAX_BYTES, Folder, SideFileRefused
from tfrecorder.dataset.store_requests import DEFAULT_STORAGE_TIMEOUT
from tfrecorder.dataset.tfds import DATASET_INFO_NAME, described_files
from tfrecorder.errors import TFRecorderError
from tfrecorder.read.open import read_edited, reading, record_problem


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
    checked: tuple[str, ...] = ()  # what was checked, in words: only what this dataset has
    unchecked: tuple[str, ...] = ()  # what a dataset may have and this one has not, each with why

    @property
    def ok(self) -> bool:
        return not self.problems

    def __str__(self) -> str:
        read = f"{_count(self.shards, 'shard')}, {_count(self.records, 'record')}, {self.bytes} bytes read"
        state = "OK" if self.ok else _count(len(self.problems), "problem")
        lines = [f"{self.tfrecord_dir}: {state} ({read})"]
        lines += [f"  {p}" for p in self.problems]
        lines += ["  checked: " + ", ".join(self.checked)] if self.checked else []
        lines += [f"  not checked: {what}" for what in self.unchecked]
        return "\n".join(lines)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' * (n != 1)}"


def _what_is_checked(manifest: Manifest, images: bool) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """What ``verify`` checks of this dataset, and what it has nothing to check of (with why): a report names
    only the checks that ran (no "TFDS files checked" where gzip shards have none)."""
    shards = [s for infos in manifest.splits.values() for s in infos]
    checked = ["record CRCs", "record counts"]
    checked += ["file checksums"] if shards and all(s.crc32c for s in shards) else []
    checked += ["index files"] if any(s.index for s in shards) else []
    checked += ["parsing with dataset.json's features"]
    checked += ["image decoding"] if images and manifest.image is not None else []
    checked += ["instance mask decoding"] if images and (manifest.objects or {}).get("instance_masks") else []
    unchecked = ["image pixels: images=True (--images) decodes every image"] if not images and manifest.image else []
    if described_files(manifest):
        checked.append("TFDS files")
    else:
        why = (manifest.tfds or {}).get("why") or "dataset.json lists none"
        unchecked.append(f"TFDS files, there are none: {why}")
    return tuple(checked), tuple(unchecked)


def verify(tfrecord_dir: str, images: bool = False,
           storage_timeout: float = DEFAULT_STORAGE_TIMEOUT) -> VerifyReport:
    """Read every shard and check every record's CRCs, the record counts and file checksums in
    dataset.json, that every record parses as a ``tf.train.Example`` with the manifest's features,
    each shard's index file, and the TFDS files (features.json, dataset_info.json, the label names) against
    what dataset.json describes. With ``images=True`` every image is decoded too (slower): a dataset
    written with ``validate_images="header"`` may hold a truncated image that only a decode finds.

    Reads with plain Python: TensorFlow is not imported.

    Args:
        tfrecord_dir: a dataset folder written by tfrecorder, local or a URL.
        images: decode every image too.
        storage_timeout: seconds one object-store (gs://) operation may take, its retries included.

    Returns:
        A ``VerifyReport``: ``report.ok``, and ``report.problems`` (file, record number and cause of each).

    Raises:
        TFRecorderError: only when the folder has no readable dataset.json, or an object store does not answer
            within ``storage_timeout``.

    Examples:
        >>> report = tfrecorder.verify(dataset_dir)
        >>> report.ok, report.records
        (True, 12)
    """
    with reading(tfrecord_dir, storage_timeout):
        return _verify(Folder.of(tfrecord_dir, storage_timeout), images, storage_timeout)


def _verify(folder: Folder, images: bool, storage_timeout: float) -> VerifyReport:
    manifest, edited = read_edited(folder)
    problems: list[Problem] = []
    shards = records = size = 0
    for split, infos in manifest.splits.items():
        for info in infos:
            found = _check_shard(folder, manifest, info, images)
            shards += 1
            records += found.records
            size += found.bytes
            problems += found.problems
        counts = manifest.rows.get(split)
        stored = sum(s.records for s in infos)
        if counts is None:
            continue
        if manifest.objects is not None:  # a record per image: one row per object, or one for an image without any
            objects = sum(manifest.objects.get("counts", {}).get(split, {}).values())
            if not max(stored, objects) <= counts.written <= stored + objects:
                problems.append(Problem("dataset.json", None, f"split {split}: {counts.written} rows written do not "
                                                              f"fit its {stored} records of {objects} objects"))
        elif counts.written != stored:
            problems.append(Problem("dataset.json", None, f"split {split}: {counts.written} rows written but its "
                                                          f"shards list {stored} records"))
    if edited is not None:  # after what the shards show of the edit
        problems.append(Problem("dataset.json", None, str(edited).removeprefix(f"{folder.url_of('dataset.json')}: ")))
    for split, counts in manifest.rows.items():
        if counts.rows_in != counts.written + counts.errors + counts.discarded:
            problems.append(Problem("dataset.json", None, f"split {split}: rows in ({counts.rows_in}) != written + "
                                                          f"errors + discarded ({counts})"))
    tfds_problems, alternatives = _tfds_problems(folder, manifest)
    checked, unchecked = _what_is_checked(manifest, images)
    if alternatives:
        checked += (f"TFDS's alternative file formats ({', '.join(alternatives)}, added by its convert_format): "
                    f"their shard files are listed, their records not read",)
    return VerifyReport(folder.url, shards, records, size, tuple(problems + tfds_problems), checked, unchecked)


# The field TFDS's convert_format adds to dataset_info.json when it writes the shards again in another format
# beside ours (``tfds convert_format --dataset_version_dir``): the same dataset, readable in more formats.
_ALTERNATIVES = "alternativeFileFormats"


def _tfds_problems(folder: Folder, manifest: Manifest) -> tuple[list[Problem], list[str]]:
    """Each TFDS file that is missing or says something other than dataset.json (TFDS readers would get other
    counts, miss a feature or the label names); and the alternative file formats TFDS's ``convert_format`` added
    to dataset_info.json, whose shards must be there."""
    problems, alternatives = [], []
    for name, expected in described_files(manifest).items():
        try:
            actual = folder.read_text(name, METADATA_MAX_BYTES)
        except FileNotFoundError:
            problems.append(Problem(name, None, "is missing; dataset.json lists it for TFDS readers"))
            continue
        except SideFileRefused as e:
            problems.append(Problem(name, None, f"{e.reason}: not read"))
            continue
        if actual == expected:
            continue
        added = _alternative_formats(actual, expected) if name == DATASET_INFO_NAME else None
        if added is None:
            problems.append(Problem(name, None, f"differs from what dataset.json describes "
                                                f"({_difference(actual, expected)}): TFDS readers would see another "
                                                f"dataset"))
            continue
        alternatives += added
        problems += _missing_alternatives(folder, manifest, added)
    return problems, alternatives


def _alternative_formats(actual: str, expected: str) -> list[str] | None:
    """The file formats TFDS's ``convert_format`` added to a dataset_info.json that otherwise says what
    ``expected`` does (it writes the file again with its keys sorted); None when it says something else."""
    try:
        have, want = json.loads(actual), json.loads(expected)
    except ValueError:
        return None
    added = have.pop(_ALTERNATIVES, None) if isinstance(have, dict) else None
    if not isinstance(added, list) or not added or have != want:
        return None
    return [str(f) for f in added]


def _missing_alternatives(folder: Folder, manifest: Manifest, formats: list[str]) -> list[Problem]:
    """dataset_info.json's alternative formats whose shard files are not all there (a TFDS reader asking for
    that format would fail)."""
    names = set(folder.names())
    problems = []
    for file_format in formats:
        for shards in manifest.splits.values():
            missing = [f"{s.file.rsplit('.', 1)[0]}.{file_format}" for s in shards]
            missing = [m for m in missing if m not in names]
            if missing:
                problems.append(Problem(DATASET_INFO_NAME, None, f"lists alternative file format {file_format!r} "
                                                                 f"(TFDS's convert_format), but {missing[0]} is "
                                                                 f"missing"))
    return problems


def _difference(actual: str, expected: str) -> str:
    """What differs between a TFDS file and what it should hold, in a few words."""
    try:
        have, want = json.loads(actual), json.loads(expected)
    except ValueError:
        have, want = actual.splitlines(), expected.splitlines()
        return f"{len(have)} lines, {len(want)} expected" if len(have) != len(want) else "other lines"
    have_features = (have.get("featuresDict") or {}).get("features")
    if isinstance(have_features, dict):
        want_features = want["featuresDict"]["features"]
        missing = sorted(set(want_features) - set(have_features))
        if missing:
            return f"feature{'s' * (len(missing) > 1)} {', '.join(map(repr, missing))} missing"
    keys = sorted(k for k in {*have, *want} if have.get(k) != want.get(k))
    if keys == ["splits"] and isinstance(have.get("splits"), list):
        wanted = {s["name"]: s for s in want["splits"]}
        for split in have["splits"]:
            fields = sorted(k for k in {*split, *wanted.get(split.get("name"), {})}
                            if split.get(k) != wanted.get(split.get("name"), {}).get(k))
            if fields:
                return f"split {split.get('name')!r}: {', '.join(fields)}"
    return f"{', '.join(keys)} differ{'s' * (len(keys) == 1)}" if keys else "other text"


@dataclass
class _Found:
    records: int = 0
    bytes: int = 0
    problems: list[Problem] = field(default_factory=list)


def _check_shard(folder: Folder, manifest: Manifest, info: ShardInfo, images: bool) -> _Found:
    found = _Found()
    name = info.file
    path = folder.join(name)
    elsewhere = folder.leaves(name)
    if elsewhere is not None:  # never read: a link may lead to any file of the machine
        found.problems.append(Problem(name, None, f"the shard is a link out of the dataset folder (to {elsewhere}): "
                                                  f"not read"))
        return found
    try:
        actual = int(folder.fs.info(path).get("size", -1))
    except FileNotFoundError:
        found.problems.append(Problem(name, None, "the shard is missing"))
        return found
    if actual != info.bytes:
        found.problems.append(Problem(name, None, f"{actual} bytes, dataset.json says {info.bytes}"))
    with folder.fs.open(path, "rb") as raw, contextlib.ExitStack() as stack:
        index = _IndexCheck.open(folder, info.index, info.records, stack, found)
        counted = ChecksumFile(raw)
        damaged = False
        frames = format_of_file(name).read_frames(counted, folder, path, manifest.compression)  # type: ignore[arg-type]
        for number, frame, problem in _parse_all(frames, manifest, images):
            if problem is not None:
                found.problems.append(Problem(name, number, problem))
                damaged = True
                break
            found.records += 1
            if index is not None and frame is not None:
                index.check(number, frame)
        if index is not None and not damaged:
            index.finish()
        counted.drain()
    found.bytes = counted.bytes
    if not damaged and found.records != info.records:
        found.problems.append(Problem(name, None, f"{found.records} records, dataset.json says {info.records}"))
    if counted.crc32c != info.crc32c:
        found.problems.append(Problem(name, None, f"CRC-32C of the file is {counted.crc32c}, "
                                                  f"dataset.json says {info.crc32c}"))
    return found


@dataclass
class _IndexCheck:
    """Reads a shard's .tfindex in step with its records: each line must frame the record it stands for."""

    name: str
    lines: Iterator[bytes]
    found: _Found
    wrong: bool = False

    @classmethod
    def open(cls, folder: Folder, name: str | None, records: int, stack: contextlib.ExitStack,
             found: _Found) -> _IndexCheck | None:
        if name is None:
            return None  # written before index files existed (dataset.json format version 1)
        try:
            return cls(name, iter(stack.enter_context(folder.open_side(name, index_max_bytes(records)))), found)
        except FileNotFoundError:
            found.problems.append(Problem(name, None, "the index file is missing"))
        except SideFileRefused as e:
            found.problems.append(Problem(name, None, f"the index file {e.reason}: not read"))
        return None

    def check(self, number: int, frame: Frame) -> None:
        if self.wrong:
            return
        line = next(self.lines, b"")
        if line.split() != [str(frame.offset).encode(), str(frame.length).encode()]:
            said = line.strip().decode("ascii", "replace") or "nothing"
            self._problem(number, f"says {said!r}; the record is at offset {frame.offset}, {frame.length} bytes")

    def finish(self) -> None:
        if not self.wrong and next(self.lines, None) is not None:
            self._problem(None, "lists more records than the shard holds")

    def _problem(self, number: int | None, message: str) -> None:
        self.found.problems.append(Problem(self.name, number, message))
        self.wrong = True


def _parse_all(frames: Iterator[Frame], manifest: Manifest, images: bool
               ) -> Iterator[tuple[int, Frame | None, str | None]]:
    """(record number, frame, None) per good record; (record number, None, cause) for the first bad one, then stops."""
    index = 0
    label = (manifest.label or {}).get("feature")
    first = first_class_id_of(manifest)
    labels = (label, first, len(manifest.vocabulary)) if label and manifest.vocabulary is not None else None
    while True:
        try:
            frame = next(frames)
        except StopIteration:
            return
        except TFRecorderError as e:
            message = str(e)
            yield index, None, message.split(": ", 1)[1] if message.startswith("record ") else message
            return
        problem = _parse_problem(frame.data, manifest.features, images and manifest.image is not None, labels)
        yield index, (frame if problem is None else None), problem
        index += 1


def _parse_problem(data: bytes, features: list[FeatureInfo], decode: bool = False,
                   labels: tuple[str, int, int] | None = None) -> str | None:
    """Why ``data`` does not parse with the manifest's spec (or, with ``decode``, its image does not decode;
    with ``labels``, the label feature, its first id and the vocabulary's size, a label id has no name)."""
    try:
        example = Example.FromString(data)
    except DecodeError as e:
        return f"not a tf.train.Example ({e})"
    problem = record_problem(example, features)
    if problem is not None:
        return problem
    stored = example.features.feature
    if labels is not None and labels[0] in stored:
        name, first, size = labels
        wrong = [i for i in stored[name].int64_list.value if not first <= i < first + size]
        if wrong:
            return f"label id {wrong[0]} is beyond the label vocabulary of {size} names in dataset.json"
    if not decode:
        return None
    problem = _image_problem(stored) if IMAGE.name in stored else None
    return problem or _instance_mask_problem(stored)


def _image_problem(stored: Any) -> str | None:
    """Why the record's image does not decode, naming its image_uri; None if it does."""
    from PIL import Image

    def value(feature: Any) -> Any:
        values = getattr(stored[feature.name], feature.field).value if feature.name in stored else []
        return values[0] if values else None

    data, fmt = value(IMAGE), value(IMAGE_FORMAT)
    try:
        if fmt == b"raw":
            expected = value(IMAGE_HEIGHT) * value(IMAGE_WIDTH) * value(IMAGE_CHANNELS)
            if len(data) != expected:
                raise ValueError(f"{len(data)} bytes of raw pixels, height x width x channels is {expected}")
        else:
            Image.open(io.BytesIO(data)).load()  # every pixel, as a reader will
    except Exception as e:  # noqa: BLE001 - whatever the decoder says is the problem reported
        uri = (value(IMAGE_URI) or b"").decode("utf-8", "replace")
        return f"the image of {uri!r} does not decode ({type(e).__name__}: {e})"
    mask = value(SEGMENTATION_MASK)
    if mask is not None:  # a segmentation record's mask: a one-channel PNG
        try:
            decoded = Image.open(io.BytesIO(mask))
            decoded.load()
            if decoded.mode != "L":
                raise ValueError(f"a {decoded.mode} image, not one channel of class ids")
        except Exception as e:  # noqa: BLE001 - as above
            uri = (value(IMAGE_URI) or b"").decode("utf-8", "replace")
            return f"the mask of {uri!r} does not decode ({type(e).__name__}: {e})"
    return None


def _instance_mask_problem(stored: Any) -> str | None:
    """Why an object's instance mask (our ``objects/mask`` or the Object Detection API's ``image/object/mask``)
    does not decode as readers decode it - a PNG of the stored pixels' size - naming the object (its place in
    the record, from 0) and the image; None when every one does. The size is that of the stored image as its
    header gives it (``image/height`` and ``image/width`` in the OD layout, which are the stored pixels')."""
    from PIL import Image

    key = next((f.name for f in (OBJECT_MASK, OD_OBJECT_MASK) if f.name in stored), None)
    if key is None:
        return None
    uri = _uri(stored)
    size = _stored_size(stored)
    for k, png in enumerate(stored[key].bytes_list.value):
        try:
            mask = Image.open(io.BytesIO(png))
            mask.load()
            if mask.format != "PNG":
                raise ValueError(f"a {mask.format} image, not a PNG (readers decode masks with decode_png)")
            if size is not None and mask.size != size:
                raise ValueError(f"{mask.size[0]}x{mask.size[1]} pixels, its image is {size[0]}x{size[1]}")
        except Exception as e:  # noqa: BLE001 - whatever the decoder says is the problem reported
            return f"the instance mask of object {k} of {uri!r} does not decode ({type(e).__name__}: {e})"
    return None


def _uri(stored: Any) -> str:
    """The record's image, named as a person finds it: its image_uri, or the OD layout's file name."""
    for key in (IMAGE_URI.name, OD_FILENAME.name, OD_SOURCE_ID.name):
        if key in stored and stored[key].bytes_list.value:
            return stored[key].bytes_list.value[0].decode("utf-8", "replace")
    return ""


def _stored_size(stored: Any) -> tuple[int, int] | None:
    """(width, height) of the record's stored pixels (before any EXIF turn), from the image's header; None when
    it has no image that opens (its own problem, reported apart)."""
    from PIL import Image

    for key in (IMAGE.name, OD_IMAGE.name):
        if key in stored and stored[key].bytes_list.value:
            data = stored[key].bytes_list.value[0]
            break
    else:
        return None
    if IMAGE_FORMAT.name in stored and stored[IMAGE_FORMAT.name].bytes_list.value[:1] == [b"raw"]:
        sizes = [stored[f.name].int64_list.value[:1] for f in (IMAGE_WIDTH, IMAGE_HEIGHT) if f.name in stored]
        return (int(sizes[0][0]), int(sizes[1][0])) if len(sizes) == 2 and all(sizes) else None  # no header
    try:
        return Image.open(io.BytesIO(data)).size
    except Exception:  # noqa: BLE001 - an image that does not open is its own problem
        return None
