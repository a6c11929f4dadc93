"""Connectors of values with a place in the picture: an object's box, keypoints and instance mask. Stored
(normalized) in the stored pixels' frame (before EXIF orientation), as TFDS and Model Garden expect; ``follow``
moves them where load_dataset shows the picture."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tfrecorder.dataset.connectors.base import TFDS_CLASS, FloatValues, IntValues
from tfrecorder.dataset.connectors.images import Mask
from tfrecorder.dataset.feature_info import FeatureInfo


class BoundingBoxes(FloatValues):
    """An object's box: 4 float32 values (``[ymin, xmin, ymax, xmax]``, normalized), a TFDS ``BBoxFeature``.
    A record holds its objects' boxes one after another (``Objects(BoundingBoxes)``)."""

    in_picture = True

    def object_shape(self, feature: FeatureInfo) -> list[int]:
        return [4]

    def follow(self, values: dict[str, Any], name: str, frame: Any) -> tuple[dict[str, Any], Any]:
        boxes, kept = frame.boxes(values[name])
        return {**values, name: boxes}, kept

    def follow_array(self, values: dict[str, Any], name: str, frame: Any) -> tuple[dict[str, Any], Any]:
        return self.follow(values, name, frame)  # frame.boxes is the rule, in either frame

    def tfds(self, feature: FeatureInfo, context: Mapping[str, Any]) -> tuple[dict[str, Any] | None, str]:
        return {"pythonClassName": TFDS_CLASS + "bounding_boxes.BBoxFeature",
                "boundingBox": {"shape": {"dimensions": ["4"]}, "dtype": "float32", "bboxFormat": "REL_YXYX"}}, ""


VISIBILITY = "keypoint_visibility"  # the member name of each object's keypoints' visibility, beside "keypoints"


class Keypoints(FloatValues):
    """An object's keypoints: ``K`` points of 2 float32 values each, normalized ``(y, x)``, the ``K`` of the
    dataset (dataset.json's shape ``[None, K, 2]``). An input row gives COCO's ``[x, y, v] * K`` in the box
    columns' units and frame; ``v`` (0 not labelled, 1 labelled but hidden, 2 visible) is stored beside them as
    ``KeypointVisibility``. ``follow`` moves the points with the picture and gives the points a crop cuts off
    visibility 0."""

    in_picture = True
    object_points = True
    layout_keyed = True  # layout.keypoints: ours (y, x) pairs and their visibility, the Object Detection API's apart
    values_per_point = 2

    def point_counts(self, values: Sequence[Any] | np.ndarray
                     ) -> tuple[dict[int, list[int]], list[tuple[int, str]]]:
        """The positions of the objects that give each number of keypoints (K), and of those whose list is not
        ``[x, y, v] * K`` with ``v`` one of 0, 1, 2 (each with the reason); missing lists in neither."""
        counts: dict[int, list[int]] = {}
        bad: list[tuple[int, str]] = []
        for position, value in enumerate(values):
            if value is None:
                continue
            if len(value) % 3:
                bad.append((position, f"{len(value)} numbers, not [x, y, v] for each keypoint"))
            elif any(v not in (0.0, 1.0, 2.0) for v in value[2::3]):
                bad.append((position, "a visibility v that is not 0, 1 or 2"))
            else:
                counts.setdefault(len(value) // 3, []).append(position)
        return counts, bad

    def object_shape(self, feature: FeatureInfo) -> list[int]:
        return [int(d) for d in feature.shape[1:]]

    def follow(self, values: dict[str, Any], name: str, frame: Any) -> tuple[dict[str, Any], Any]:
        import tensorflow as tf

        points, inside = frame.points(values[name])
        out = {**values, name: points}
        if VISIBILITY in values:
            visibility = values[VISIBILITY]
            out[VISIBILITY] = tf.where(inside, visibility, tf.zeros_like(visibility))
        return out, None

    def follow_array(self, values: dict[str, Any], name: str, frame: Any) -> tuple[dict[str, Any], Any]:
        points, inside = frame.points(values[name])
        out = {**values, name: points}
        if VISIBILITY in values:
            out[VISIBILITY] = np.where(inside, values[VISIBILITY], 0)
        return out, None

    def tfds(self, feature: FeatureInfo, context: Mapping[str, Any]) -> tuple[dict[str, Any] | None, str]:
        return _tfds_tensor(feature, "float32"), ""


class KeypointVisibility(IntValues):
    """Each keypoint's COCO visibility of an object: ``K`` int64 values (0 not labelled or cut off, 1 labelled
    but hidden, 2 visible), dataset.json's shape ``[None, K]``."""

    def object_shape(self, feature: FeatureInfo) -> list[int]:
        return [int(d) for d in feature.shape[1:]]

    def tfds(self, feature: FeatureInfo, context: Mapping[str, Any]) -> tuple[dict[str, Any] | None, str]:
        return _tfds_tensor(feature, "int64"), ""


class InstanceMask(Mask):
    """An object's instance mask: a PNG of one channel, 1 on the object and 0 elsewhere, in the stored picture's
    orientation and size (as its box). A record holds one per object (``Objects(InstanceMask)``: a list of PNGs,
    TFDS's ``Sequence`` of one-channel ``Image``s; the Object Detection API's ``image/object/mask``). An input
    row gives COCO's segmentation (polygons or RLE) or a PNG's location (``types.InstanceMask``,
    ``types.InstanceMaskUri``): the writer draws it. ``follow`` decodes a record's masks to uint8 ``[N, H, W]``
    and turns and resizes them with the picture (``Frame.instance_masks``: the semantic mask's rules)."""

    object_missing = b""
    object_mask = True
    layout_keyed = True  # layout.instance_mask

    def object_shape(self, feature: FeatureInfo) -> list[int]:
        return []  # a PNG an object; decoded to [H, W] by ``follow``

    def follow(self, values: dict[str, Any], name: str, frame: Any) -> tuple[dict[str, Any], Any]:
        return {**values, name: frame.instance_masks(values[name])}, None

    def follow_array(self, values: dict[str, Any], name: str, frame: Any) -> tuple[dict[str, Any], Any]:
        return {**values, name: frame.instance_masks(values[name])}, None


def _tfds_tensor(feature: FeatureInfo, dtype: str) -> dict[str, Any]:
    """A TFDS ``Tensor`` entry of one object's value (the feature's shape after its objects' axis)."""
    return {"pythonClassName": TFDS_CLASS + "tensor_feature.Tensor",
            "tensor": {"shape": {"dimensions": [str(d) for d in feature.shape[1:]]}, "dtype": dtype,
                       "encoding": "none"}}
