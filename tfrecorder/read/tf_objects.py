"""A detection dataset's targets: a record's ``objects/`` lists gathered under ``objects``, padded to
``max_objects``, split into ``(image, {"boxes", "labels"})`` (and ``"masks"`` where objects have instance masks)
with boxes in the format a detector asks for, and the most objects one record holds (what ``as_supervised=True``
pads to). ``tf_data.load_dataset`` chains them."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, cast

import tensorflow as tf

from tfrecorder.arguments import DEFAULT_MAX_PIXELS
from tfrecorder.dataset import connectors
from tfrecorder.dataset.features import DEFAULT_BOX_FORMAT, IMAGE, OBJECT_KEYPOINTS, OBJECT_LABEL, OBJECTS
from tfrecorder.dataset.layouts import RecordLayout, layout_of
from tfrecorder.dataset.manifest import MANIFEST_NAME, Manifest
from tfrecorder.dataset.storage import Folder
from tfrecorder.errors import TFRecorderError

logger = logging.getLogger(__name__)

# KerasHub's detectors' own default (RetinaNetObjectDetector(bounding_box_format="yxyx")): pixels of the image as
# given, which their fit turns into its anchors' format without being told the image's height and width.
SUPERVISED_BOX_FORMAT = "yxyx"
_COUNT_BATCH = 256  # records whose label lists are counted in one step: the per-step cost spread over many


def most_objects(manifest: Manifest, folder: Folder) -> int:
    """The most objects one record of the dataset holds (at least 1): what dataset.json records, or, for a
    dataset written before it did, counted from the records' labels (read once, images not decoded)."""
    recorded = manifest.objects.get("max_objects") if manifest.objects else None
    if recorded is not None:
        return max(int(recorded), 1)
    label = (manifest.objects or {}).get("label", OBJECT_LABEL.name)
    files = [folder.url_of(s.file) for shards in manifest.splits.values() for s in shards if s.records]
    most = 0
    if files:
        spec = {label: tf.io.RaggedFeature(tf.int64)}
        records = tf.data.TFRecordDataset(files, compression_type=manifest.tf_compression_type)
        counts = records.batch(_COUNT_BATCH).map(
            lambda r: tf.cast(tf.io.parse_example(r, spec)[label].row_lengths(), tf.int64))
        most = int(counts.reduce(tf.constant(0, tf.int64), lambda m, c: tf.maximum(m, tf.reduce_max(c))))
    logger.warning("%s does not record the most objects in an image (written before tfrecorder recorded it): "
                   "counted %d in the records, which as_supervised=True pads boxes to; pass max_objects= to "
                   "choose, or convert again to record it", folder.url_of(MANIFEST_NAME), most)
    return max(most, 1)


def objects_gatherer(manifest: Manifest):
    """A function from a parsed detection record to the same with its objects' features (those of an ``Objects``
    connector) gathered under ``objects``, each by its member name, a value per object (``{"bbox": [N, 4],
    "label": [N], ...}``), in whichever layout the records are (``layouts``): a box kept as four edges becomes
    one ``bbox`` (``[ymin, xmin, ymax, xmax]``), keypoints kept as their y, x and visibility apart one
    ``keypoints`` (``[N, K, 2]``) and ``keypoint_visibility``; the label is ``label`` in every layout."""
    layout = layout_of(manifest)
    per_object = {f.name: f for f in manifest.features if isinstance(connectors.of(f), connectors.Objects)}
    boxes = [f.name for f in layout.box_features]
    composed = len(boxes) > 1 and all(name in per_object for name in boxes)  # edges apart: one bbox from them
    edges = [edge for held in layout.box_edges for edge in held]
    box_order = [edges.index(edge) for edge in _YXYX]
    points = [f.name for f in layout.keypoints]
    count = int(((manifest.objects or {}).get("keypoints") or {}).get("count") or 0)
    split_points = len(points) == 3 and count > 0 and all(name in per_object for name in points)
    members = {name: (_member(layout, name), cast(connectors.Objects, connectors.of(f)), f)
               for name, f in per_object.items()
               if not (composed and name in boxes) and not (split_points and name in points)}

    def gather(example: dict[str, tf.Tensor]) -> dict[str, Any]:
        out = {k: v for k, v in example.items() if k not in per_object}
        found = {members[k][0]: members[k][1].gathered(v, members[k][2]) for k, v in example.items() if k in members}
        if composed:
            held = tf.concat([tf.reshape(example[name], [-1, len(e)]) for name, e in zip(boxes, layout.box_edges)], 1)
            found[_BBOX] = tf.gather(held, box_order, axis=1)
        if split_points:
            y, x, visibility = (tf.reshape(example[name], [-1, count]) for name in points)
            found[_KEYPOINTS], found[connectors.VISIBILITY] = tf.stack([y, x], axis=-1), visibility
        out[OBJECTS] = found
        return out

    return gather


def placed_members(manifest: Manifest) -> dict[str, connectors.Connector]:
    """The members of ``objects`` (as ``objects_gatherer`` names them) that have a place in the picture, each with
    the connector that moves it there: the box and the keypoints, whatever features a layout keeps them in."""
    layout = layout_of(manifest)
    placed: dict[str, connectors.Connector] = {_member(layout, f.name): c for f in manifest.features
              if isinstance(c := connectors.of(f), connectors.Objects) and c.in_picture}
    names = {f.name for f in manifest.features}
    if len(layout.box_features) > 1 and all(f.name in names for f in layout.box_features):
        placed[_BBOX] = connectors.BOX
    if len(layout.keypoints) == 3 and all(f.name in names for f in layout.keypoints):
        placed[_KEYPOINTS] = OBJECT_KEYPOINTS.connector  # gathered as our layout keeps them
    return placed


_BBOX, _KEYPOINTS, _LABEL = "bbox", "keypoints", "label"  # the members every layout's objects give
_MASK = "mask"  # each object's instance mask, in every layout (``objects/mask``, ``image/object/mask``)
_YXYX = ("ymin", "xmin", "ymax", "xmax")


def _member(layout: RecordLayout, name: str) -> str:
    """An object feature's member name: its class id is ``label`` in every layout, the others their layout's."""
    return _LABEL if name == layout.object_label.name else layout.member(name)


def check_max_objects(max_objects: int, manifest: Manifest, image_size: Sequence[int] | None) -> None:
    """A TFRecorderError when one record's objects padded to ``max_objects`` would hold more values than an image
    may have pixels (``max_objects=2**31`` was TensorFlow's ResourceExhaustedError mid-run). An object is its
    box's 4 edges, or its instance mask's pixels where the masks' size is known up front (``image_size``: the
    one asked for, or the one every image of the dataset shares)."""
    masked = bool((manifest.objects or {}).get("instance_masks"))
    height, width = image_size if masked and image_size else (1, 4)
    what = f"a {height}x{width} mask" if masked and image_size else "a box's 4 edges"
    if max_objects * height * width > DEFAULT_MAX_PIXELS:
        most = (manifest.objects or {}).get("max_objects")
        raise TFRecorderError(f"max_objects={max_objects} pads each record's objects to "
                              f"{max_objects * height * width:,} values ({what} each), more than the "
                              f"{DEFAULT_MAX_PIXELS:,} pixels an image may have: give at most "
                              f"{DEFAULT_MAX_PIXELS // (height * width):,}"
                              f"{f' (an image of this dataset holds up to {most})' if most is not None else ''}")


def padder(max_objects: int | None):
    """Pads (or cuts) each record's objects to ``max_objects``, with -1 (text: empty; an instance mask, uint8: 0,
    no pixel): batches then stack."""
    if max_objects is None:
        return None

    def pad_one(values: tf.Tensor) -> tf.Tensor:
        values = values[:max_objects]
        fill = (tf.constant("", values.dtype) if values.dtype == tf.string else
                tf.constant(0, values.dtype) if values.dtype.is_unsigned else tf.constant(-1, values.dtype))
        padding = [[0, max_objects - tf.shape(values)[0]]] + [[0, 0]] * (values.shape.rank - 1)
        padded = tf.pad(values, padding, constant_values=fill)
        return tf.ensure_shape(padded, [max_objects, *values.shape[1:]])

    def pad(example: dict[str, Any]) -> dict[str, Any]:
        return {**example, OBJECTS: {k: pad_one(v) for k, v in example[OBJECTS].items()}}

    return pad


def supervised_objects(box_format: str):
    """(image, {"boxes", "labels"}) from a detection example, boxes in ``box_format`` (padding stays -1); with
    instance masks, (image, {"boxes", "labels", "masks"}), what Keras and KerasHub instance segmentation models
    take: uint8 ``[max_objects, H, W]``, a padding object's mask 0."""

    def split(example: dict[str, Any]) -> Any:
        objects = example[OBJECTS]
        boxes, labels = objects[_BBOX], objects[_LABEL]
        if box_format != DEFAULT_BOX_FORMAT:  # the stored one
            size = tf.cast(tf.shape(example[IMAGE.name])[:2], tf.float32) if IMAGE.name in example else None
            padding = tf.reduce_all(tf.equal(boxes, -1.0), axis=-1, keepdims=True)
            boxes = tf.where(padding, -1.0, box_format_of(boxes, box_format, size))
        targets = {"boxes": boxes, "labels": labels}
        if _MASK in objects:
            targets["masks"] = objects[_MASK]
        return example.get(IMAGE.name, example), targets

    return split


def box_format_of(boxes: tf.Tensor, box_format: str, size: tf.Tensor | None) -> tf.Tensor:
    """Normalized ``[ymin, xmin, ymax, xmax]`` boxes in ``box_format`` (``BOX_FORMATS``); ``size``: the
    image's (height, width), for the pixel formats."""
    y0, x0, y1, x1 = tf.unstack(boxes, 4, axis=-1)
    if not box_format.startswith("rel_"):
        assert size is not None, "a pixel box format needs the image's size"
        height, width = size[0], size[1]
        y0, y1, x0, x1 = y0 * height, y1 * height, x0 * width, x1 * width
    name = box_format.removeprefix("rel_")
    parts = {"yxyx": (y0, x0, y1, x1), "xyxy": (x0, y0, x1, y1), "xywh": (x0, y0, x1 - x0, y1 - y0),
             "center_xywh": ((x0 + x1) / 2, (y0 + y1) / 2, x1 - x0, y1 - y0),
             "center_yxhw": ((y0 + y1) / 2, (x0 + x1) / 2, y1 - y0, x1 - x0)}[name]
    return tf.stack(parts, axis=-1)
