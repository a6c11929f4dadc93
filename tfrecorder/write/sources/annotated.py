"""What an annotation file's reader found (IO edge's result): its long form and, beside it, the dataset's root,
the images a bad annotation refuses, the boxes' units, the label and keypoint names, and the notes the result
gives (``Annotations``).

Each reader returns one and ``convert`` reads its fields. ``read_annotations`` returns a DataFrame, so there the
fields are written into the frame's ``attrs`` (``Annotations.as_frame``), and a DataFrame given to ``convert`` is
read back from them (``Annotations.from_frame``): the only two places ``attrs`` are written or read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from tfrecorder.write.settings import KeypointNames

# The frame's attrs keys (``read_annotations``' frame, or one a user gives ``convert``)
ROOT_ATTR = "tfrecorder.root"  # {"root": ..., "annotations": ..., "refused": {image: why}, "listed": {image: list}}
BOX_UNITS_ATTR = "tfrecorder.box_units"  # the units its format gives boxes in ("normalized": YOLO's)
NOTES_ATTR = "tfrecorder.notes"  # what the result says of how it was read: {"warnings", "skipped", "logged"}
LABEL_NAMES_ATTR = "tfrecorder.label_names"  # its format's class names in id order (YOLO's): its vocabulary
KEYPOINTS_ATTR = "tfrecorder.keypoints"  # its keypoint names: {"names", "skeleton"}
LOGGED_NOTE = "logged"  # a notes key: its warnings were logged where the table was read (once a table)


@dataclass(frozen=True)
class Annotations:
    """An annotation file's long form (``table``) and what its reader found beside it.

    ``refused`` and ``listed`` are None where the reader says nothing of them (a COCO file refuses no image by
    its annotation), and are written into the frame's attrs only then."""

    table: pd.DataFrame
    root: str | None = None  # the dataset's root, every name must resolve inside: an absolute local path or a URL
    named_by: str | None = None  # the annotation file or folder as given
    refused: Mapping[str, str] | None = None  # image -> why a bad annotation line refuses it (``bad_annotation``)
    listed: Mapping[str, str] | None = None  # image outside the root -> the list file that names it (YOLO's .txt)
    box_units: str | None = None  # the units its format gives boxes in ("normalized": YOLO's)
    label_names: tuple[str, ...] | None = None  # its format's class names in id order (YOLO's): the vocabulary
    keypoints: KeypointNames = field(default_factory=KeypointNames)
    warnings: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()  # files under the root that are no row, each "<path> (why)"
    logged: bool = False  # its warnings were logged where it was read (``read_annotations``): not again

    def as_frame(self) -> pd.DataFrame:
        """The table, what was found written into its ``attrs`` (``read_annotations``' DataFrame)."""
        attrs = self.table.attrs
        root = {"root": self.root, "annotations": self.named_by,
                "refused": None if self.refused is None else dict(self.refused),
                "listed": None if self.listed is None else dict(self.listed)}
        if any(value is not None for value in root.values()):
            attrs[ROOT_ATTR] = {key: value for key, value in root.items() if value is not None}
        if self.box_units is not None:
            attrs[BOX_UNITS_ATTR] = self.box_units
        if self.label_names is not None:
            attrs[LABEL_NAMES_ATTR] = list(self.label_names)
        if self.keypoints != KeypointNames():
            skeleton = self.keypoints.skeleton
            attrs[KEYPOINTS_ATTR] = {"names": list(self.keypoints.names) if self.keypoints.names else None,
                                     "skeleton": [list(pair) for pair in skeleton] if skeleton else None}
        if self.warnings or self.skipped:
            attrs[NOTES_ATTR] = {"warnings": list(self.warnings), "skipped": list(self.skipped),
                                 LOGGED_NOTE: self.logged}
        return self.table

    @classmethod
    def from_frame(cls, frame: pd.DataFrame) -> Annotations:
        """What ``frame``'s ``attrs`` say was found (``as_frame``'s, or a user's), its table ``frame`` itself.

        Args:
            frame: a DataFrame given to ``convert``: ``read_annotations``' or any other.

        Returns:
            The Annotations of ``frame``; nothing found where its ``attrs`` hold none of the keys.
        """
        attrs = frame.attrs
        root = attrs.get(ROOT_ATTR) or {}
        notes = attrs.get(NOTES_ATTR) or {}
        keypoints = attrs.get(KEYPOINTS_ATTR) or {}
        names = attrs.get(LABEL_NAMES_ATTR)
        return cls(frame, root=root.get("root"), named_by=root.get("annotations"), refused=root.get("refused"),
                   listed=root.get("listed"), box_units=attrs.get(BOX_UNITS_ATTR) or None,
                   label_names=tuple(names) if names else None,
                   keypoints=keypoint_names(keypoints.get("names"), keypoints.get("skeleton")),
                   warnings=tuple(notes.get("warnings", ())), skipped=tuple(notes.get("skipped", ())),
                   logged=bool(notes.get(LOGGED_NOTE)))


def keypoint_names(names: Iterable[Any] | None, skeleton: Iterable[Any] | None) -> KeypointNames:
    """The keypoint names and skeleton pairs an annotation file gives, as dataset.json records them (none: None)."""
    named, pairs = list(names or ()), list(skeleton or ())
    return KeypointNames(tuple(str(n) for n in named) if named else None,
                         tuple((int(a), int(b)) for a, b in pairs) if pairs else None)
