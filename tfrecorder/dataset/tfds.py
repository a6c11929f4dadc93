"""TFDS metadata (pure): dataset_info.json, features.json and label.labels.txt, so that
``tfds.builder_from_directory(output_dir)`` and ``tfds.load`` read the shards as they are.

Plain JSON and text in the layout TFDS writes (its ``DatasetInfo`` and ``FeaturesDict`` as JSON): no
TFDS import. TFDS reads uncompressed shards only, needs every listed feature in every record, and
decodes images with ``tf.image.decode_image``; what it cannot read is left out of features.json and
named in dataset.json's ``tfds.left_out`` with the reason.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tfrecorder.dataset.connectors import TFDS_CLASS, Objects, of
from tfrecorder.dataset.features import IMAGE, LABEL, OBJECT_LABEL, OBJECTS
from tfrecorder.dataset.file_formats import format_of_files
from tfrecorder.dataset.layouts import DEFAULT, RecordLayout, layout_of
from tfrecorder.dataset.manifest import FeatureInfo, Manifest, ShardInfo

DATASET_INFO_NAME = "dataset_info.json"
FEATURES_NAME = "features.json"
FILE_TEMPLATE = "{SPLIT}-{SHARD_X_OF_Y}.{FILEFORMAT}"  # our shard names: train-00000-of-00002.tfrecord
DEFAULT_NAME = "dataset"
DEFAULT_VERSION = "1.0.0"
_VERSION = re.compile(r"^\d+\.\d+\.\d+$")


def labels_file(feature: str) -> str:
    """The file TFDS keeps a ClassLabel's names in: ``label.labels.txt``."""
    return f"{feature}.labels.txt"


@dataclass(frozen=True)
class TfdsMetadata:
    """What tfrecorder writes for TFDS in one dataset folder, or why it writes nothing."""

    name: str | None = None
    version: str | None = None
    files: dict[str, str] = field(default_factory=dict)  # file name -> text
    left_out: dict[str, str] = field(default_factory=dict)  # feature -> why TFDS cannot read it
    not_written: str | None = None  # why there is no TFDS metadata at all

    def summary(self) -> dict[str, Any]:
        """dataset.json's ``tfds`` entry."""
        if self.not_written:
            return {"written": False, "why": self.not_written}
        return {"written": True, "name": self.name, "version": self.version, "files": sorted(self.files),
                "left_out": dict(self.left_out)}


def name_and_version(folder_path: str) -> tuple[str, str]:
    """TFDS's ``<data_dir>/<name>/<version>/`` read off the output folder: ``data/pets/1.0.0`` gives
    ("pets", "1.0.0"). Any other folder gives ("dataset", "1.0.0"), so that the same conversion writes the
    same bytes into whichever folder (tfds.builder_from_directory reads it all the same)."""
    parts = [p for p in folder_path.replace("\\", "/").split("/") if p]
    if len(parts) < 2 or not _VERSION.match(parts[-1]):
        return DEFAULT_NAME, DEFAULT_VERSION
    name = re.sub(r"[^a-z0-9_]+", "_", parts[-2].lower()).strip("_") or DEFAULT_NAME
    return (f"d_{name}" if name[0].isdigit() else name), parts[-1]


def tfds_metadata(
    name_version: tuple[str, str],
    features: Sequence[FeatureInfo],
    shards: Mapping[str, Sequence[ShardInfo]],
    *,
    compression: str | None,
    label: Mapping[str, Any] | None,
    image: Mapping[str, Any] | None,
    layout: RecordLayout = DEFAULT,
) -> TfdsMetadata:
    """The TFDS files for a dataset of this name and version (``name_and_version``) with these features and
    shards (None-compressed, our layout only)."""
    if compression is not None:
        return TfdsMetadata(not_written=f"TFDS reads uncompressed TFRecord files only (these are {compression})")
    if "tfds" in layout.not_read_by:
        return TfdsMetadata(not_written=layout.not_read_by["tfds"])
    if any(not shard.file.startswith(f"{split.lower()}-0") for split, listed in shards.items() for shard in listed):
        # an appended dataset's later shards (train-v2-00000-of-00001...) beside the first ones: TFDS names
        # a split's shards by one template, of one count
        return TfdsMetadata(not_written="TFDS names a split's shards by one template; this dataset's splits hold "
                                        "shards of several versions (appended): read it with tfrecorder, or "
                                        "convert the whole table again for TFDS")
    name, version = name_version
    connectors: dict[str, dict[str, Any]] = {}
    objects: dict[str, dict[str, Any]] = {}  # a detection record's objects: TFDS's Sequence of a FeaturesDict
    left_out: dict[str, str] = {}
    for feature in features:
        connector, why = _connector(feature, label, image)
        if connector is None:
            left_out[feature.name] = why
        elif isinstance(of(feature), Objects):
            objects[layout.member(feature.name)] = connector
        else:
            connectors[feature.name] = connector
    if objects:
        connectors[OBJECTS] = {"pythonClassName": TFDS_CLASS + "sequence_feature.Sequence", "sequence": {
            "feature": {"pythonClassName": TFDS_CLASS + "features_dict.FeaturesDict",
                        "featuresDict": {"features": objects}}, "length": "-1"}}
    files = {
        FEATURES_NAME: _json({"pythonClassName": TFDS_CLASS + "features_dict.FeaturesDict",
                              "featuresDict": {"features": connectors}}),
        DATASET_INFO_NAME: _json(_dataset_info(name, version, shards, connectors)),
    }
    vocabulary = (label or {}).get("vocabulary")
    if vocabulary is not None and LABEL.name in connectors:
        files[labels_file(LABEL.name)] = "".join(f"{v}\n" for v in vocabulary)
    label_child = layout.member(OBJECT_LABEL.name)
    if vocabulary is not None and label_child in objects:  # TFDS names a nested feature's file parent-child
        files[labels_file(f"{OBJECTS}-{label_child}")] = "".join(f"{v}\n" for v in vocabulary)
    return TfdsMetadata(name, version, files, left_out)


def described_files(manifest: Manifest) -> dict[str, str]:
    """The TFDS files (name -> text) that ``manifest`` says were written beside its shards, rebuilt from it: what
    they must hold. Empty when it wrote none (compressed shards, or a dataset.json from before TFDS files)."""
    summary = manifest.tfds or {}
    if not summary.get("written"):
        return {}
    return tfds_metadata((summary["name"], summary["version"]), manifest.features, manifest.splits,
                         compression=manifest.compression, label=manifest.label, image=manifest.image,
                         layout=layout_of(manifest)).files


def _connector(feature: FeatureInfo, label: Mapping[str, Any] | None, image: Mapping[str, Any] | None
               ) -> tuple[dict[str, Any] | None, str]:
    """The feature's features.json entry (an object's value: its entry inside the objects' Sequence), or None
    and why TFDS cannot read it."""
    if feature.nullable:
        return None, "some records lack it (missing values), and TFDS needs every feature in every record"
    return of(feature).tfds(feature, {"label": label, "image": image})


def _dataset_info(name: str, version: str, shards: Mapping[str, Sequence[ShardInfo]],
                  connectors: Mapping[str, Any]) -> dict[str, Any]:
    info: dict[str, Any] = {
        "name": name,
        "version": version,
        "fileFormat": _file_format(shards),
        "description": "Written by tfrecorder; dataset.json beside this file describes every feature.",
        "splits": [{"name": split.lower(), "filepathTemplate": FILE_TEMPLATE,
                    "shardLengths": [str(s.records) for s in infos], "numBytes": str(sum(s.bytes for s in infos))}
                   for split, infos in shards.items()],
    }
    if IMAGE.name in connectors and LABEL.name in connectors:
        info["supervisedKeys"] = {"tuple": {"items": [{"featureKey": IMAGE.name}, {"featureKey": LABEL.name}]}}
    return info


def _file_format(shards: Mapping[str, Sequence[ShardInfo]]) -> str:
    """TFDS's name of the shards' file format (``FileFormat.tfds_name``; "tfrecord" for files of mixed ones)."""
    names = [s.file for infos in shards.values() for s in infos]
    return format_of_files(names).tfds_name


def _json(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2) + "\n"
