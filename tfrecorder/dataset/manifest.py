"""Manifest: dataset.json <-> Manifest dataclass, the one description every reader is driven by."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from tfrecorder.dataset import connectors
from tfrecorder.dataset.feature_info import FeatureInfo
from tfrecorder.dataset.features import IMAGE, OD_IMAGE
from tfrecorder.dataset.records import TF_COMPRESSION_TYPES
from tfrecorder.errors import TFRecorderError
from tfrecorder.types import Kind

FORMAT_NAME = "tfrecorder-dataset"
_DTYPES = tuple(kind.value for kind in Kind)  # the dtypes a record's features have
FORMAT_VERSION = 5  # 2: shard index files, tf_compression_type, tfds; 3: float64_reason, pandas; 4: objects;
# 5: digests (a section edited after the shards were written is named), objects.max_objects, each feature's
# connector (a dataset.json without them has them guessed as it is read: named_connectors)
# 6: sequences (SequenceExample records), written only by a dataset.json that has them, so that a reader knowing 5
# reads every other one and asks for an upgrade for these (it would read their records as tf.train.Examples)
SEQUENCES_FORMAT_VERSION = 6
NEWEST_FORMAT_VERSION = SEQUENCES_FORMAT_VERSION  # the newest this tfrecorder reads
MANIFEST_NAME = "dataset.json"
ERRORS_NAME = "errors.csv"
STATISTICS_NAME = "statistics.pb"  # each split's and feature's statistics, TFDV's format (summary/statistics.py)
REPORT_NAME = "report.html"  # the page tfrecorder.report writes beside dataset.json unless told where (summary/page.py)
ERRORS_COLUMNS = ("row", "split", "image_uri", "error", "message")


@dataclass(frozen=True)
class ShardInfo:
    """One shard file: name relative to the dataset folder, record count, size and CRC-32C of its bytes."""

    file: str
    records: int
    bytes: int
    crc32c: str
    index: str | None = None  # its .tfindex file (offset length per record), beside it
    first_crc: int | None = None  # masked CRC of its first record: readers check it when they open the file


def records_problem(split: str, shard: ShardInfo, held: int) -> str:
    """The words for a shard that holds ``held`` records where dataset.json says otherwise."""
    return f"dataset.json says {shard.records} records in {split} ({shard.file}), the shard holds {held}"


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
    tf_compression_type: str = ""  # TensorFlow's spelling of compression: "", "GZIP" or "ZLIB"
    label: dict[str, Any] | None = None  # column, feature, type, vocabulary, multi_label
    image: dict[str, Any] | None = None  # column, format, size, validate, channels, formats, shape
    runner: str = "local"
    leakage: dict[str, Any] = field(default_factory=lambda: {"count": 0, "groups": []})
    tfds: dict[str, Any] | None = None  # the TFDS metadata beside the shards, or why there is none
    objects: dict[str, Any] | None = None  # a detection dataset's: box format and features, objects per class
    masks: dict[str, Any] | None = None  # a segmentation dataset's: mask feature, classes, pixels per class
    # records that are tf.train.SequenceExamples: record_format and the features kept as feature lists
    sequences: dict[str, Any] | None = None
    errors_file: str = ERRORS_NAME
    format: str = FORMAT_NAME
    format_version: int = FORMAT_VERSION
    extra: dict[str, Any] = field(default_factory=dict)
    digests: dict[str, str] = field(default_factory=dict)  # of the sections readers rely on (SECTIONS), as written

    def __post_init__(self) -> None:
        # Written for readers without tfrecorder; always what ``compression`` says, whatever the file held.
        object.__setattr__(self, "tf_compression_type", TF_COMPRESSION_TYPES.get(self.compression, ""))
        if self.sequences is not None:
            object.__setattr__(self, "format_version", max(self.format_version, SEQUENCES_FORMAT_VERSION))

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
        for feature in data["features"]:  # listed only for a connector that takes them (as 0.4 wrote the rest)
            if feature["parameters"] is None:
                del feature["parameters"]
        if data["sequences"] is None:  # listed only for SequenceExample records (dataset.json is as 0.4 wrote it)
            del data["sequences"]
        ordered = {k: data.pop(k) for k in ("format", "format_version", "tfrecorder_version")}
        ordered.update(data)
        ordered["digests"] = section_digests(json.loads(json.dumps(ordered)))  # of what a reader parses back
        return json.dumps(ordered, indent=2, ensure_ascii=False) + "\n"

    @classmethod
    def from_json(cls, text: str, where: str = MANIFEST_NAME) -> Manifest:
        """Parse dataset.json text (as data; nothing in it is executed)."""
        try:
            data = json.loads(text)
            if data.get("format") != FORMAT_NAME:
                raise TFRecorderError(f"{where}: not a tfrecorder dataset.json (format={data.get('format')!r})")
            if data.get("format_version", 0) > NEWEST_FORMAT_VERSION:
                raise TFRecorderError(
                    f"{where}: format version {data['format_version']} is newer than this tfrecorder "
                    f"understands ({NEWEST_FORMAT_VERSION}); upgrade tfrecorder"
                )
            edited = _edited_sections(where, data)
            data["features"] = [FeatureInfo(**f) for f in data["features"]]
            data["splits"] = {k: [ShardInfo(**s) for s in v] for k, v in data["splits"].items()}
            for split, shards in data["splits"].items():
                for shard in shards:
                    _check_name(where, f"split {split}: shard", shard.file)
                    if shard.index is not None:
                        _check_name(where, f"split {split}: index", shard.index)
            _check_name(where, "errors_file", data.get("errors_file", ERRORS_NAME))
            data["features"] = named_connectors(data["features"], data.get("label"), where, data.get("objects"))
            channels = (data.get("image") or {}).get("channels") or []
            if not all(isinstance(c, int) and 1 <= c <= 4 for c in channels):
                raise TFRecorderError(f"{where}: image channels {channels!r} are not among 1, 2, 3, 4; dataset.json "
                                      f"is damaged or was edited")
            data["rows"] = {k: RowCounts(**v) for k, v in data["rows"].items()}
            manifest = cls(**data)
            _check_vocabulary(where, manifest)
            _check_counts(where, manifest)
            if edited:
                raise EditedManifest(where, manifest, edited)
            return manifest
        except (ValueError, TypeError, KeyError, AttributeError) as e:
            if isinstance(e, TFRecorderError):
                raise
            raise TFRecorderError(f"{where}: not a valid tfrecorder manifest: {e}") from e


# The sections of dataset.json a reader relies on, and each one's words: dataset.json records a digest of each as
# written, so that an edit which still looks plausible (a reordered or shortened vocabulary, counts edited together,
# a scalar made a list) is named when the dataset is opened, not met as a TensorFlow error or a wrong label.
SECTIONS: dict[str, tuple[str, Callable[[dict[str, Any]], Any]]] = {
    "features": ("features", lambda d: d.get("features")),
    "label": ("label (its vocabulary, feature and type)", lambda d: d.get("label")),
    "records": ("record and row counts", lambda d: {
        "records": {split: [shard.get("records") for shard in shards] for split, shards in d["splits"].items()},
        "rows": d.get("rows")}),
    "image": ("image description", lambda d: d.get("image")),
    "objects": ("objects description", lambda d: d.get("objects")),
    "masks": ("masks description", lambda d: d.get("masks")),
    "sequences": ("sequences description", lambda d: d.get("sequences")),
    "versions": ("versions", lambda d: (d.get("extra") or {}).get("versions")),  # an appended dataset's
}


def section_digests(data: dict[str, Any]) -> dict[str, str]:
    """The digest of each of ``SECTIONS`` in parsed dataset.json ``data``: SHA-256 of its canonical JSON (keys
    sorted), the same for every runner and whatever the file's layout."""
    def digest(value: Any) -> str:
        text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]

    return {name: digest(section(data)) for name, (_, section) in SECTIONS.items()}


class EditedManifest(TFRecorderError):
    """A dataset.json whose ``sections`` no longer match the digests it was written with: edited by hand."""

    def __init__(self, where: str, manifest: Manifest, sections: list[str]):
        self.manifest, self.sections = manifest, sections
        words = " and ".join(f"the {SECTIONS[name][0]}" for name in sections)
        super().__init__(f"{where}: edited after the shards were written: {words} changed (its digests no longer "
                         f"match); restore dataset.json from a copy, or convert again")


def _edited_sections(where: str, data: dict[str, Any]) -> list[str]:
    """The sections of parsed dataset.json ``data`` whose digest differs from the one recorded; none for a
    dataset.json written before digests were (nothing to compare with)."""
    recorded = data.get("digests")
    if recorded is None:
        return []
    if not isinstance(recorded, dict) or not all(isinstance(v, str) for v in recorded.values()):
        raise _edited(where, f"digests {recorded!r} are not a mapping of section to digest")
    now = section_digests(data)
    return [name for name in SECTIONS if name in recorded and recorded[name] != now[name]]


def is_plain_name(name: object) -> bool:
    """A file name inside the folder: no folder part, no URL, not "." or ".." (what dataset.json may name)."""
    return (isinstance(name, str) and name not in ("", ".", "..") and "/" not in name and "\\" not in name
            and ":" not in name and "\x00" not in name)


def _check_name(where: str, what: str, name: object) -> None:
    if not is_plain_name(name):
        raise TFRecorderError(f"{where}: {what} {name!r} is not a plain file name inside the dataset folder; "
                              f"dataset.json is damaged or was edited, so nothing was read")


def _check_feature(where: str, feature: FeatureInfo) -> None:
    shape = feature.shape
    per_object = (isinstance(shape, list) and len(shape) > 1 and shape[0] is None
                  and all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in shape[1:]))
    if feature.dtype not in _DTYPES or (shape not in ([], [None]) and not per_object):
        raise TFRecorderError(
            f"{where}: feature {feature.name!r} has dtype {feature.dtype!r} and shape {feature.shape!r}; "
            f"dataset.json stores {', '.join(_DTYPES)} scalars ([]), lists ([null]) or a shaped value an object "
            f"([null, K, ...]): it is damaged or was edited")


def named_connectors(features: list[FeatureInfo], label: dict[str, Any] | None, where: str = MANIFEST_NAME,
                     objects: dict[str, Any] | None = None) -> list[FeatureInfo]:
    """``features`` each naming its connector: the one dataset.json names, or where it names none (a dataset.json
    of tfrecorder 0.3 or older, or one inferred from another tool's records) the one readers guessed before
    names were written, from dtype, role and name (``label``: dataset.json's label entry; ``objects``: its objects
entry, a detection dataset's)."""
    named = []
    for feature in features:
        if feature.connector is None:
            _check_feature(where, feature)
            image = OD_IMAGE.name if feature.name == OD_IMAGE.name and feature.role == "image" else IMAGE.name
            # a detection dataset's lists are its objects' values (its records hold no other lists)
            per_object = objects is not None and feature.shape == [None]
            feature = replace(feature, connector=connectors.connector_of(feature, image, label, per_object).name)
        elif (feature.dtype, feature.shape) != _described(where, feature):  # else as its connector describes it
            _check_feature(where, feature)
        named.append(feature)
    return named


def _described(where: str, feature: FeatureInfo) -> tuple[str, list[Any]]:
    """The dtype and shape the connector dataset.json names for ``feature`` gives it; a TFRecorderError where no
    connector of that name is defined here, or it refuses the parameters listed."""
    if not isinstance(feature.parameters, (dict, type(None))):
        raise _edited(where, f"feature {feature.name!r} has parameters {feature.parameters!r}, not a mapping")
    try:
        if not isinstance(feature.connector, str):
            raise KeyError(feature.connector)
        connector = connectors.of(feature)
    except KeyError:
        raise TFRecorderError(f"{where}: feature {feature.name!r} has connector {feature.connector!r}, which this "
                              f"tfrecorder does not know: import the module that defines it (a connector of your "
                              f"own), or upgrade tfrecorder (a newer one wrote it)") from None
    except (TypeError, ValueError) as error:
        raise _edited(where, f"feature {feature.name!r}: connector {feature.connector!r} refuses parameters "
                             f"{feature.parameters!r} ({error})") from None
    return connector.dtype, connector.shape


def _edited(where: str, problem: str) -> TFRecorderError:
    return TFRecorderError(f"{where}: {problem}: dataset.json is damaged or was edited, so nothing was read; convert "
                           f"again")


def _check_vocabulary(where: str, manifest: Manifest) -> None:
    """The label names: text, each once (a name twice would give two classes one name, and every reader would
    label both as the first), and every class dataset.json counts objects of among them."""
    vocabulary = manifest.vocabulary
    if vocabulary is None:
        return
    if not isinstance(vocabulary, list) or not all(isinstance(name, str) for name in vocabulary):
        raise _edited(where, f"the label vocabulary {vocabulary!r} is not a list of names")
    first: dict[str, int] = {}
    for i, name in enumerate(vocabulary):
        if name in first:
            raise _edited(where, f"the label vocabulary names {name!r} twice (ids {first[name]} and {i})")
        first[name] = i
    for split, counts in ((manifest.objects or {}).get("counts") or {}).items():
        unknown = [name for name in counts if name not in first]
        if unknown:
            raise _edited(where, f"objects.counts.{split} counts class {unknown[0]!r}, which the label vocabulary "
                                 f"of {len(vocabulary)} names does not hold")


def _check_counts(where: str, manifest: Manifest) -> None:
    """Each split's records against its rows written (a record a row; a detection record an image, holding one
    row per object): a ``records`` count edited on its own is named here, before a reader meets it."""
    for split, shards in manifest.splits.items():
        rows = manifest.rows.get(split)
        if rows is None:
            continue
        stored = sum(shard.records for shard in shards)
        if manifest.objects is None:
            if stored != rows.written:
                raise _edited(where, f"dataset.json says {stored} records in {split}, its rows say {rows.written} "
                                     f"written")
            continue
        objects = sum(((manifest.objects.get("counts") or {}).get(split) or {}).values())
        if not max(stored, objects) <= rows.written <= stored + objects:
            raise _edited(where, f"dataset.json says {stored} records in {split} holding {objects} objects, its rows "
                                 f"say {rows.written} written")
