"""COCO annotations as columns (IO edge): each entry of a COCO file's ``annotations`` checked and held as typed
columns as it is parsed - ids in int64, box edges in float64, segmentations and keypoints only where given - and
then, its images and categories known, their boxes: a row per box in the images' order (``AnnotationColumns``).

What needs the images or the categories is checked once the file is read; a check of an entry's own values that
fails as it is parsed is made again then, to name the annotation's image.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from tfrecorder.errors import SchemaError, TFRecorderError
from tfrecorder.write.sources.coco_json import SEGMENTATION
from tfrecorder.write.sources.long_form import finite_number, quoted

_MISSING = object()  # an annotation without an "id"
_INT64 = (-(2**63), 2**63)


class _Ids:
    """A column of JSON ids: whole numbers in an int64 array, any other value (text, a float, None) beside it
    by position."""

    def __init__(self) -> None:
        self.numbers = array("q")
        self.others: dict[int, Any] = {}

    def append(self, value: Any) -> None:
        if type(value) is int and _INT64[0] <= value < _INT64[1]:  # not bool, an int subclass
            self.numbers.append(value)
        else:
            self.others[len(self.numbers)] = value
            self.numbers.append(0)

    def __getitem__(self, index: int) -> Any:
        return self.others[index] if index in self.others else self.numbers[index]

    def __iter__(self) -> Iterator[Any]:
        if not self.others:
            return iter(self.numbers)
        return (self.others.get(i, number) for i, number in enumerate(self.numbers))


@dataclass(frozen=True)
class Boxes:
    """The checked annotations: each one's image (its index in the file's images), label (its index in
    ``names``) and whether it has a box (a width and height), the annotations of no box and of no segmentation
    (where others have one)."""

    images: np.ndarray
    labels: np.ndarray
    names: list[str]
    kept: np.ndarray
    no_area: list[Any]
    no_mask: list[str]


class AnnotationColumns:
    """A COCO file's annotations, each added as it is parsed (``add``), checked against its images and
    categories once they are read (``boxes``)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.ids, self.image_ids, self.category_ids = _Ids(), _Ids(), _Ids()
        self.edges = array("d")  # x, y, width, height of each
        self.crowds = array("b")
        self.areas = array("d")  # NaN: none given
        self.keypoints: dict[int, Any] = {}  # by index: as given, where given
        self.masks: dict[int, str | bytes] = {}  # by index: segmentation JSON, where given
        self.keypointed = False  # any annotation gives keypoints
        # The first annotation that is not an object with an image_id, and the first whose values failed a check:
        # said once the file is read (a file that is not JSON is said first), the second naming its image.
        self.malformed: tuple[int, Any] | None = None
        self.failed: tuple[int, Mapping[str, Any]] | None = None

    def __len__(self) -> int:
        return len(self.crowds)

    def add(self, index: int, entry: Any) -> None:
        try:
            self.image_ids.append(self._image_id(index, entry))
        except TFRecorderError:
            self.malformed = self.malformed or (index, entry)
            entry = {}
            self.image_ids.append(None)
        self.ids.append(entry.get("id", _MISSING))
        self.category_ids.append(entry.get("category_id"))
        try:
            x, y, width, height, crowd, area = _values(entry, self.url)
        except TFRecorderError:  # checked again in ``boxes``, to name the annotation's image
            x = y = width = height = area = math.nan
            crowd = 0
            self.failed = self.failed or (index, entry)
        self.edges.extend((x, y, width, height))
        self.crowds.append(crowd)
        self.areas.append(area)
        keypoints = entry.get("keypoints")
        if keypoints is not None and keypoints != []:
            self.keypoints[index] = keypoints
            self.keypointed = self.keypointed or bool(keypoints)
        if entry.get(SEGMENTATION):
            self.masks[index] = entry[SEGMENTATION]

    def where(self, index: int, files: list[str], images: np.ndarray) -> str:
        """An annotation as a message names it: the file, its id and its image's file name."""
        found = self.ids[index]
        return (f"{self.url}: annotation {'?' if found is _MISSING else found} of image "
                f"{files[images[index]]!r}")

    def boxes(self, files: Mapping[Any, str], labels: Mapping[Any, str]) -> Boxes:
        """Each annotation's image and label, checked: its image_id one of ``files``' (image id -> file
        name), its category_id one of ``labels``' (category id -> name), its own values (``add``) sound."""
        if self.malformed is not None:
            self._image_id(*self.malformed)
        images = self._images(files)
        names = list(files.values())
        if self.failed is not None:
            index, entry = self.failed
            where = self.where(index, names, images)
            _category(entry.get("category_id"), labels, where)
            _values(entry, where)
        label_ids = {category: i for i, category in enumerate(labels)}
        found = np.fromiter((label_ids.get(c, -1) if is_id(c) else -1 for c in self.category_ids), np.int64,
                            len(self))
        for index in np.flatnonzero(found < 0)[:1]:
            _category(self.category_ids[int(index)], labels, self.where(int(index), names, images))
        edges = np.frombuffer(self.edges, np.float64).reshape(-1, 4)
        kept = (edges[:, 2] > 0) & (edges[:, 3] > 0)
        in_order = np.argsort(images, kind="stable")  # as the images are listed, each one's in the file's order
        no_area = [self._id(i, "?") for i in in_order[~kept[in_order]]]
        no_mask = [f"{quoted(self._id(i, '?'))} ({names[images[i]]})" for i in in_order[kept[in_order]]
                   if self.masks and int(i) not in self.masks]
        return Boxes(images, found, list(labels.values()), kept, no_area, no_mask)

    def checked_keypoints(self, rows: np.ndarray, images: np.ndarray, files: list[str],
                          names: list[str] | None) -> list[list[float] | None]:
        """The keypoints of the annotations at ``rows`` (-1: an image's row of no box) as numbers; ``images``:
        each annotation's image, its index in ``files`` (file names)."""
        return [None if i < 0 or int(i) not in self.keypoints else
                _keypoints(self.keypoints[int(i)], names, self.where(int(i), files, images)) for i in rows]

    def _image_id(self, index: int, entry: Any) -> Any:
        where = f"COCO annotations {self.url!r}: annotations[{index}]"
        return coco_id(entry_of(entry, where), "image_id", f"{where} (id {quoted(entry.get('id'))})")

    def _images(self, files: Mapping[Any, str]) -> np.ndarray:
        """Each annotation's image, as its index in ``files``; annotations whose image_id no image has, refused."""
        positions = {image_id: i for i, image_id in enumerate(files)}
        images = np.fromiter((positions.get(image_id, -1) for image_id in self.image_ids), np.int64, len(self))
        dangling = [f"{quoted(self._id(i, f'[{i}]'))} (image_id {self.image_ids[int(i)]!r})"
                    for i in np.flatnonzero(images < 0)[:6]]
        if dangling:  # their boxes would be lost without a word
            count = int((images < 0).sum())
            raise SchemaError(f"COCO annotations {self.url!r}: {count} annotations name an image_id that no entry "
                              f"of 'images' has: {', '.join(dangling[:5])}{', ...' if count > 5 else ''}; add "
                              f"their images to 'images', or remove them")
        return images

    def _id(self, index: Any, missing: str) -> Any:
        found = self.ids[int(index)]
        return missing if found is _MISSING else found


def _values(entry: Mapping[str, Any], where: str) -> tuple[float, float, float, float, int, float]:
    """An annotation's bbox (x, y, width, height), iscrowd and area (NaN: none) checked; a bbox of no width or
    height has no box, nor its other values checked (as ``create_coco_tf_record.py`` skips it)."""
    x, y, width, height = (finite_number(v, where, "bbox") for v in _four(entry.get("bbox"), where))
    if width <= 0 or height <= 0:
        return x, y, width, height, 0, math.nan
    area = entry.get("area")
    return (x, y, width, height, _flag(entry.get("iscrowd", 0), where, "iscrowd"),
            math.nan if area is None else finite_number(area, where, "area"))


def _category(category: Any, labels: Mapping[Any, str], where: str) -> None:
    if not is_id(category) or category not in labels:
        raise TFRecorderError(f"{where}: category_id {quoted(category)} is not in 'categories'")


def _keypoints(value: Any, names: list[str] | None, where: str) -> list[float] | None:
    """An annotation's ``keypoints``: ``[x, y, v] * K`` (K: its category's names), as numbers; None for an
    annotation without them (COCO writes ``num_keypoints`` 0 and zeros; a category without keypoints none)."""
    if value is None or value == []:
        return None
    count = len(names) if names is not None else None
    if not isinstance(value, list) or len(value) % 3 or (count is not None and len(value) != 3 * count):
        wanted = f"[x, y, v] for each of its category's {count} keypoints" if count else "[x, y, v] for each keypoint"
        raise TFRecorderError(f"{where}: keypoints {quoted(value)} are not {wanted}")
    numbers = [finite_number(v, where, "keypoints") for v in value]
    for i, visibility in enumerate(numbers[2::3]):  # checked here too, where the annotation's id is known
        if visibility not in (0, 1, 2):
            raise SchemaError(f"{where}: keypoint {i + 1}'s visibility {value[3 * i + 2]!r} is not 0 (not "
                              f"labelled), 1 (labelled, hidden) or 2 (visible)")
    return numbers


def coco_id(entry: Mapping[str, Any], key: str, where: str) -> Any:
    if key not in entry:
        raise TFRecorderError(f"{where} has no '{key}'")
    if not is_id(entry[key]):
        raise TFRecorderError(f"{where}: {key} {quoted(entry[key])} is not an id (a number or text)")
    return entry[key]


def is_id(value: Any) -> bool:
    """A JSON id: a number or text - not true/false, which Python's bool makes the ints 1 and 0."""
    return not isinstance(value, bool) and (isinstance(value, (int, str)) or isinstance(value, float)
                                            and math.isfinite(value))


def entry_of(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise TFRecorderError(f"{where} is {json_kind(value)} ({quoted(value)}), not an object")
    return value


def _flag(value: Any, where: str, name: str) -> int:
    """COCO's 0 or 1 (``iscrowd``): any other value is a TFRecorderError (a 2 was stored as 2)."""
    if value in (0, 1) and not isinstance(value, str):  # 0, 1, 0.0, 1.0, false, true
        return int(value)
    raise TFRecorderError(f"{where}: {name} {quoted(value)} is not 0 or 1")


def _four(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list) or len(value) != 4:
        raise TFRecorderError(f"{where}: bbox {quoted(value)} is not [x, y, width, height]")
    return value


def json_kind(value: Any) -> str:
    kinds = {dict: "an object", list: "a list", str: "text", bool: "true/false", type(None): "null"}
    return kinds.get(type(value), "a number" if isinstance(value, (int, float)) else type(value).__name__)
