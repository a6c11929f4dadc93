"""Foreign datasets: a Manifest inferred from TFRecord files other tools wrote (TFRecorder 2.0 included).

Files are found in a folder, a glob or a list; their compression is told from their first
bytes; they are grouped into splits by name (``foreign.split_of``: train, val, test and their kin, else
one TRAIN split); the feature spec comes from parsing a sample of records; records are counted by
reading each file once, so ``cardinality()`` is known.
"""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Sequence
from typing import Any

from tfrecorder.dataset.connectors import BY_KIND, KINDS_BY_FIELD, Tensor
from tfrecorder.dataset.example_proto import flattened, parse_sequence_example
from tfrecorder.dataset.foreign import (
    deeper_files_error,
    deeper_record_folders,
    label_map,
    sniff_compression,
    split_folder_files,
    split_of,
)
from tfrecorder.dataset.layouts import sequences_entry
from tfrecorder.dataset.manifest import FeatureInfo, Manifest, RowCounts, ShardInfo, named_connectors
from tfrecorder.dataset.records import INDEX_SUFFIX, read_records
from tfrecorder.dataset.storage import METADATA_MAX_BYTES, filesystem, read_side_file
from tfrecorder.dataset.store_requests import DEFAULT_STORAGE_TIMEOUT
from tfrecorder.errors import TFRecorderError
from tfrecorder.read.infer_od import (
    ObjectTally,
    class_ids,
    detection_entries,
    first_class_id,
    is_object_detection,
    od_warnings,
)
from tfrecorder.types import TEST, TRAIN, VALIDATION, Kind

__all__ = ["TFRECORDER2_FORMAT", "find_files", "infer_manifest", "is_glob", "sniff_compression", "split_of"]

logger = logging.getLogger(__name__)

SAMPLE_RECORDS = 256
_SKIP = (".json", ".csv", ".pbtxt", ".txt", ".pb", ".md", INDEX_SUFFIX)
_IMAGE_MAGIC = (b"\xff\xd8\xff", b"\x89PNG", b"GIF8", b"BM", b"RIFF")

TFRECORDER2_FORMAT = "tfrecorder2-base64"  # TFRecorder 2.0: URL-safe base64 of raw uint8 pixels


def is_glob(source: str, storage_timeout: float = DEFAULT_STORAGE_TIMEOUT) -> bool:
    """A pattern to expand: it has * ? or [ and names nothing that exists (a folder called exp[1] is a path)."""
    if not any(c in source for c in "*?["):
        return False
    fs, path = filesystem(source, storage_timeout)
    return not fs.exists(path)


def find_files(source: str | Sequence[str],
               storage_timeout: float = DEFAULT_STORAGE_TIMEOUT) -> tuple[Any, list[str]]:
    """(filesystem, paths) for a folder, a glob or a list of files."""
    if isinstance(source, (list, tuple)):
        fs, _ = filesystem(str(source[0]), storage_timeout)
        return fs, [filesystem(str(s), storage_timeout)[1] for s in source]
    fs, path = filesystem(str(source), storage_timeout)
    if is_glob(str(source), storage_timeout):
        paths = sorted(fs.glob(path))
    elif fs.isdir(path):
        paths = sorted(p for p in fs.find(path, maxdepth=1) if not posixpath.basename(p).startswith((".", "_")))
        split_files = split_folder_files(fs, path)  # and Roboflow's train/, valid/, test/
        if split_files and (deeper := deeper_record_folders(fs, path)):
            raise deeper_files_error(fs, deeper)
        paths = [*paths, *split_files]
    else:
        paths = [path]
    paths = _records(fs, paths)
    if not paths:
        raise TFRecorderError(f"{source!r} has no dataset.json and no TFRecord files")
    return fs, paths


def _records(fs: Any, paths: list[str]) -> list[str]:
    """The paths that may be TFRecord files: not empty, not a side file (JSON, label map, index...)."""
    return [p for p in paths if not p.lower().endswith(_SKIP) and fs.size(p) > 0]


def infer_manifest(source: str | Sequence[str], storage_timeout: float = DEFAULT_STORAGE_TIMEOUT) -> Manifest:
    """A Manifest for TFRecord files of tf.train.Example (or SequenceExample) written by any tool."""
    fs, paths = find_files(source, storage_timeout)
    splits: dict[str, list[ShardInfo]] = {}
    compression = None
    samples: list[Any] = []
    tally = ObjectTally()  # what the Object Detection API's layout holds, should the records be in it
    for path in paths:
        url, split = fs.unstrip_protocol(path), split_of(path)
        with fs.open(path, "rb") as f:
            compression = sniff_compression(f.read(64))
            f.seek(0)
            count = 0
            try:
                for record in read_records(f, compression):
                    if len(samples) < SAMPLE_RECORDS:  # a tf.train.Example is a SequenceExample of no lists
                        samples.append(parse_sequence_example(record, url, count))
                    tally.add(split, record, url, count)
                    count += 1
            except TFRecorderError as e:
                raise TFRecorderError(f"{url} is not a readable TFRecord file: {e}") from e
        shard = ShardInfo(url, count, fs.size(path), "")
        splits.setdefault(split, []).append(shard)
    features, image, label = _infer_features([flattened(sample) for sample in samples], fs, paths)
    lists = _feature_lists(samples)
    sequences = sequences_entry(list(lists)) if lists else None
    left_out = _listed(samples) - set(lists)
    features = [lists.get(f.name, f) for f in features if f.name not in left_out]
    splits = {name: splits[name] for name in (TRAIN, VALIDATION, TEST) if name in splits}
    rows = {k: RowCounts(sum(s.records for s in v), sum(s.records for s in v)) for k, v in splits.items()}
    objects = None
    detection = _detection(features, tally, fs, paths) if is_object_detection(f.name for f in features) else None
    if detection is not None:  # a detection dataset: a row per object, or one for an image without any
        features, label, objects = detection
        image = {"format": "keep", "formats": [], "channels": [], "shape": None,
                 "undecodable": {split: {"records": count, "first": first}
                                 for split, (count, first) in tally.undecodable.items()}}
        rows = {k: RowCounts(n, n) for k in splits
                for n in [sum(tally.ids.get(k, {}).values()) + tally.empty[k]]}
    return Manifest(  # connectors guessed from what the records hold, as for a dataset.json naming none
        tfrecorder_version="foreign", features=named_connectors(features, label), splits=splits,
        rows=rows, compression=compression, label=label, image=image, runner="foreign", objects=objects,
        sequences=sequences,
    )


def _listed(samples: list[Any]) -> set[str]:
    """The names of the feature lists the sampled SequenceExamples hold."""
    return {name for sample in samples for name in sample.feature_lists.feature_list}


def _feature_lists(samples: list[Any]) -> dict[str, FeatureInfo]:
    """The feature lists of sampled SequenceExamples (none for tf.train.Examples), each as a feature read back
    ``[T, ...]``: a list of its kind where every step holds one value (token ids), a tensor ``(None, k)`` where
    every step holds k (frames). Others are left out, said in the log: ``tf.io.parse_sequence_example`` reads a
    feature list whose steps are of one kind and length."""
    steps: dict[str, tuple[set[str], set[int]]] = {}
    for sample in samples:
        for name, feature_list in sample.feature_lists.feature_list.items():
            kinds, lengths = steps.setdefault(name, (set(), set()))
            for step in feature_list.feature:
                kind = step.WhichOneof("kind")
                if kind is not None:
                    kinds.add(kind)
                    lengths.add(len(getattr(step, kind).value))
    found = {}
    for name, (kinds, lengths) in sorted(steps.items()):
        kind = KINDS_BY_FIELD[next(iter(kinds))] if len(kinds) == 1 else Kind.INT64  # no steps: any kind
        if len(kinds) > 1 or len(lengths) > 1 or (kind is Kind.BYTES and lengths - {1}):
            logger.warning("feature list %r is left out: its steps hold %s, which tf.io.parse_sequence_example "
                           "cannot read with one spec", name,
                           " and ".join(sorted(kinds)) if len(kinds) > 1 else
                           f"{' and '.join(map(str, sorted(lengths)))} values")
            continue
        width = lengths.pop() if lengths else 1
        if width == 1:  # its connector guessed as a list's (named_connectors)
            found[name] = FeatureInfo(name, "feature", kind.value, [None])
        else:
            tensor = Tensor((None, width), kind.value)
            found[name] = FeatureInfo(name, "feature", tensor.dtype, tensor.shape, connector=tensor.name,
                                      parameters=tensor.parameters())
    return found


def _detection(features: list[FeatureInfo], tally: ObjectTally, fs: Any, paths: list[str]):
    """``infer_od.detection_entries`` for records in the Object Detection API's layout, the names from a label
    map beside the files (said in the log) or the records' class text."""
    names, where = label_map(fs, paths)
    if where is not None:
        logger.info("label names from %s", where)
    found = detection_entries(features, tally, names)
    if found is None:
        logger.warning("%s holds the Object Detection API's keys, but class ids from %d to %d (its records' and "
                       "label map's), more than any label set's: read as plain records", fs.unstrip_protocol(paths[0]),
                       first_class_id(tally), max([*class_ids(tally), *names]))
        return None
    for line in od_warnings(tally, names, where, found[1]["vocabulary"]):
        logger.warning("%s", line)
    return found


def _infer_features(samples: list[Any], fs: Any, paths: list[str]):
    seen: dict[str, dict[str, Any]] = {}
    for example in samples:
        for name, feature in example.features.feature.items():
            kind = feature.WhichOneof("kind")
            if kind is None:
                continue
            values = getattr(feature, kind).value
            info = seen.setdefault(name, {"kind": kind, "lengths": set(), "present": 0, "first": None, "kinds": set()})
            info["kinds"].add(kind)
            info["lengths"].add(len(values))
            info["present"] += 1
            if info["first"] is None and len(values):
                info["first"] = values[0]
    features: list[FeatureInfo] = []
    image: dict[str, Any] | None = None
    label = None
    for name, info in sorted(seen.items()):
        if len(info["kinds"]) > 1:
            logger.warning("feature %r is left out: it is %s in different records, which tf.io.parse_example "
                           "cannot read with one spec", name, " and ".join(sorted(info["kinds"])))
            continue
        dtype = KINDS_BY_FIELD[info["kind"]].value
        scalar = info["lengths"] == {1}
        nullable = scalar and info["present"] < len(samples)
        role = "feature"
        if dtype == "string" and scalar and image is None and _looks_like_image(info["first"]):
            role, image = "image", {"format": "keep", "formats": [], "channels": [], "shape": None}
        features.append(FeatureInfo(name, role, dtype, [] if scalar else [None], nullable=nullable,
                                    default=BY_KIND[Kind(dtype)].missing if nullable else None))
    names = {f.name for f in features}
    # TFRecorder 2.0's own feature names (its format, not ours: they stay as 2.0 wrote them)
    if image is None and {"image", "image_height", "image_width", "image_channels"} <= names:
        image = {"format": TFRECORDER2_FORMAT, "formats": [], "channels": [], "shape": None}
        features = [FeatureInfo(f.name, "image", f.dtype, f.shape) if f.name == "image" else f for f in features]
    if "label" in names and next(f for f in features if f.name == "label").dtype == "int64":
        label = {"column": "label", "feature": "label", "type": "IntegerLabel",
                 "vocabulary": _tfrecorder2_vocabulary(fs, paths), "multi_label": False}
    return features, image, label


def _looks_like_image(value: Any) -> bool:
    return isinstance(value, bytes) and value.startswith(_IMAGE_MAGIC)


def _tfrecorder2_vocabulary(fs: Any, paths: list[str]) -> list[str] | None:
    """TFRecorder 2.0 kept its label vocabulary (by frequency) under transform_fn/assets."""
    folder = posixpath.dirname(paths[0])
    for candidate in fs.glob(f"{folder}/transform_fn/assets/*vocab*"):
        text = read_side_file(fs, candidate, folder, METADATA_MAX_BYTES).decode("utf-8")
        return [line for line in text.splitlines() if line]
    return None
