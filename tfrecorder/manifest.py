"""Manifest: dataset.json <-> Manifest dataclass, the one description every reader is driven by."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from tfrecorder.errors import TFRecorderError
from tfrecorder.storage import STATE_DIR, Folder

FORMAT_NAME = "tfrecorder-dataset"
FORMAT_VERSION = 1
MANIFEST_NAME = "dataset.json"
ERRORS_NAME = "errors.csv"
ERRORS_COLUMNS = ("row", "split", "image_uri", "error", "message")
# Value a nullable scalar takes in load_dataset when it is missing (read_tfr gives NA instead).
MISSING_DEFAULTS = {"int64": 0, "float32": "NaN", "string": ""}


class MissingManifest(TFRecorderError):
    """A folder of files without dataset.json (the reader then infers one from the records)."""


@dataclass(frozen=True)
class FeatureInfo:
    """One feature of every record: its tf dtype, shape ([] scalar, [null] variable-length list)."""

    name: str
    role: str  # split, image, label, feature
    dtype: str  # int64, float32, string
    shape: list[int | None]
    nullable: bool = False
    column: str | None = None  # input column it came from (None for derived image features)
    source: str | None = None  # python type of the input values: int, bool, float, str, bytes
    type: str | None = None  # tfrecorder.types name
    default: Any = None  # value load_dataset gives a missing nullable scalar


@dataclass(frozen=True)
class ShardInfo:
    """One shard file: name relative to the dataset folder, record count, size and CRC-32C of its bytes."""

    file: str
    records: int
    bytes: int
    crc32c: str


@dataclass(frozen=True)
class RowCounts:
    """Row accounting: rows_in == written + errors + discarded."""

    rows_in: int = 0
    written: int = 0
    errors: int = 0
    discarded: int = 0


@dataclass(frozen=True)
class Manifest:
    """Everything a reader needs to know about a dataset folder."""

    tfrecorder_version: str
    features: list[FeatureInfo]
    splits: dict[str, list[ShardInfo]]
    rows: dict[str, RowCounts]
    compression: str | None = None
    label: dict[str, Any] | None = None  # column, feature, type, vocabulary, multi_label
    image: dict[str, Any] | None = None  # column, format, size, validate, channels, formats, shape
    runner: str = "local"
    leakage: dict[str, Any] = field(default_factory=lambda: {"count": 0, "groups": []})
    errors_file: str = ERRORS_NAME
    format: str = FORMAT_NAME
    format_version: int = FORMAT_VERSION
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def vocabulary(self) -> list[str] | None:
        """Label names by id, for string labels."""
        return (self.label or {}).get("vocabulary")

    def records(self, split: str) -> int:
        """Number of records in ``split``."""
        return sum(s.records for s in self.splits[split])

    def split_name(self, split: str) -> str:
        """``split`` as the manifest names it (any case, trimmed), or an error listing the splits."""
        name = str(split).strip().upper()
        if name not in self.splits:
            raise TFRecorderError(f"split={split!r}: the dataset has {', '.join(self.splits) or 'no splits'}")
        return name

    def feature(self, name: str) -> FeatureInfo:
        """The feature called ``name``."""
        for f in self.features:
            if f.name == name:
                return f
        raise TFRecorderError(f"no feature {name!r}; the dataset has {[f.name for f in self.features]}")

    def to_json(self) -> str:
        """The dataset.json text."""
        data = asdict(self)
        ordered = {k: data.pop(k) for k in ("format", "format_version", "tfrecorder_version")}
        ordered.update(data)
        return json.dumps(ordered, indent=2, ensure_ascii=False) + "\n"

    @classmethod
    def from_json(cls, text: str, where: str = MANIFEST_NAME) -> Manifest:
        """Parse dataset.json text (as data; nothing in it is executed)."""
        try:
            data = json.loads(text)
            if data.get("format") != FORMAT_NAME:
                raise TFRecorderError(f"{where}: not a tfrecorder dataset.json (format={data.get('format')!r})")
            if data.get("format_version", 0) > FORMAT_VERSION:
                raise TFRecorderError(
                    f"{where}: format version {data['format_version']} is newer than this tfrecorder "
                    f"understands ({FORMAT_VERSION}); upgrade tfrecorder"
                )
            data["features"] = [FeatureInfo(**f) for f in data["features"]]
            data["splits"] = {k: [ShardInfo(**s) for s in v] for k, v in data["splits"].items()}
            data["rows"] = {k: RowCounts(**v) for k, v in data["rows"].items()}
            return cls(**data)
        except (ValueError, TypeError, KeyError, AttributeError) as e:
            if isinstance(e, TFRecorderError):
                raise
            raise TFRecorderError(f"{where}: not a valid tfrecorder manifest: {e}") from e


def check_shards(manifest: Manifest, folder: Folder, splits: list[str]) -> None:
    """Refuse to read ``splits`` when a shard is missing or its size differs from dataset.json (one listing)."""
    try:
        listing = folder.fs.ls(folder.path, detail=True)
        sizes = {p["name"].rstrip("/").rsplit("/", 1)[-1]: p.get("size") for p in listing}
    except (FileNotFoundError, NotImplementedError):
        return
    for split in splits:
        for shard in manifest.splits[split]:
            if "/" in shard.file or not shard.crc32c:
                continue  # not a file tfrecorder wrote next to dataset.json
            size = sizes.get(shard.file)
            problem = "is missing" if size is None else (
                f"has {size} bytes, dataset.json says {shard.bytes}" if int(size) != shard.bytes else None)
            if problem:
                raise TFRecorderError(f"{folder.url_of(shard.file)} {problem}: the dataset is damaged; "
                                      f"`tfrecorder verify {folder.url}` checks every shard")


def read_manifest(tfrecord_dir: str) -> Manifest:
    """The Manifest of a dataset folder, or a TFRecorderError saying why there is none.

    Example:
        >>> manifest = tfrecorder.read_manifest(dataset_dir)
        >>> manifest.records("TRAIN"), manifest.vocabulary, manifest.rows["TEST"].written
        (6, ['cat', 'dog', 'goat'], 3)
    """
    folder = Folder.of(tfrecord_dir)
    names = folder.names()
    if MANIFEST_NAME not in names:
        if STATE_DIR in names or any(n.endswith(".partial") for n in names):
            raise TFRecorderError(
                f"{tfrecord_dir!r} holds an unfinished conversion (no {MANIFEST_NAME} yet: it is still running, "
                f"or it stopped); run the same conversion into the same output_dir again to resume it"
            )
        if not names:
            raise TFRecorderError(f"{tfrecord_dir!r} does not exist or is empty")
        raise MissingManifest(f"{tfrecord_dir!r} has no {MANIFEST_NAME}: it was not written by tfrecorder")
    return Manifest.from_json(folder.read_text(MANIFEST_NAME), where=folder.url_of(MANIFEST_NAME))
