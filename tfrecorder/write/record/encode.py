"""Encode (pure): one table row and its stored image -> a serialized tf.train.Example (or SequenceExample)."""

from __future__ import annotations

import math
import posixpath
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from tfrecorder.dataset import features, layouts
from tfrecorder.dataset.connectors import Connector, Media, of_type
from tfrecorder.dataset.connectors.base import refusal
from tfrecorder.dataset.example_proto import Example, Feature, SequenceExample
from tfrecorder.errors import ImageError
from tfrecorder.types import BOX_EDGES, InstanceMaskUri, Role
from tfrecorder.write.record.boxes import check_labels, long_labels, stored_boxes, stored_keypoints
from tfrecorder.write.record.images import StoredImage
from tfrecorder.write.record.instance_masks import ObjectMasks, png, semantic_mask, stored_masks
from tfrecorder.write.settings import FetchLimits, MaskSettings
from tfrecorder.write.table.table import Column, Table


def image_name(uri: str) -> str:
    """The file name at the end of a URI or path (``image_name`` feature)."""
    return posixpath.basename(uri.replace("\\", "/").split("?", 1)[0])


def image_values(image: StoredImage, uri: str) -> dict[str, Any]:
    """The value of every image feature (``features.IMAGE_FEATURES``) of a row."""
    return {
        features.IMAGE.name: image.data,
        features.IMAGE_HEIGHT.name: image.height,
        features.IMAGE_WIDTH.name: image.width,
        features.IMAGE_CHANNELS.name: image.channels,
        features.IMAGE_FORMAT.name: image.format.encode("ascii"),
        features.IMAGE_URI.name: uri.encode("utf-8"),
        features.IMAGE_NAME.name: image_name(uri).encode("utf-8"),
        features.IMAGE_ORIENTATION.name: image.orientation,
    }


class ExampleEncoder:
    """Serializes rows of one validated table; the same encoder serves every writer.

    One Example is built once with a slot for every always-present value, and each row
    only overwrites those slots (about 5x faster than building an Example per row).
    Features that may be absent (missing values) or vary in length (lists) are set per row.
    """

    # Protobuf (upb) keeps every value ever set on a message in the message's arena until the message is
    # freed: one Example reused for a whole shard would hold all of the shard's image bytes. So the
    # Example is built afresh once this many bytes have gone through it.
    REBUILD_BYTES = 8 * 1024 * 1024

    def __init__(self, table: Table):
        self._splits = [s.encode("ascii") for s in table.splits]
        self._columns = [replace(c, values=c.values.tolist()) if isinstance(c.values, np.ndarray) else c
                         for c in table.columns if self._in_features(c)]  # lists index faster than arrays
        self._uris = table.image_uris
        self._masked = table.mask_uris is not None
        self._build()

    def _in_features(self, column: Column) -> bool:
        """Whether the record's features map holds ``column``'s values (a SequenceExample's feature lists do not)."""
        return True

    def _new_record(self) -> tuple[Any, Any]:
        """A record to fill, and its features map."""
        example = Example()
        return example, example.features.feature

    def _build(self) -> None:
        self._example, self._features = self._new_record()
        self._budget = self.REBUILD_BYTES
        split = self._slot(features.SPLIT.name, features.SPLIT.connector)
        self._fixed: list[tuple[Any, Any]] = [(split, self._splits)]
        self._varying: list[tuple[str, str, Any]] = []
        self._serialized: list[tuple[str, Any]] = []
        self._media: dict[str, Any] = {}
        for c in self._columns:
            connector = features.LABEL.connector if c.type.role is Role.LABEL else c.connector
            if isinstance(connector, Media):  # its file's bytes and measures, prepared by the shard's writer
                self._media.update((name, self._slot(name, kind))
                                   for name, kind in connector.feature_names(c.feature).items())
            elif connector.feature_bytes:  # each value a serialized tf.train.Feature: parsed into its record
                self._serialized.append((c.feature, c.values))
            elif c.type.is_list or c.nullable or connector.values_per_record != 1:
                self._varying.append((c.feature, connector.field, c.values))
            else:
                self._fixed.append((self._slot(c.feature, connector), c.values))
        self._image: dict[str, Any] = {}
        if self._uris is not None:
            self._image = {f.name: self._slot(f.name, f.connector) for f in features.IMAGE_FEATURES}
        self._mask = self._slot(features.SEGMENTATION_MASK.name, features.SEGMENTATION_MASK.connector) \
            if self._masked else None

    def refusal(self, row: int) -> ImageError | None:
        """The row error a value of ``row`` is instead of a Feature (``connectors.base.refused``: a tensor of
        another shape than declared), naming its column; None for a row to store."""
        for feature, values in self._serialized:
            error = refusal(values[row])
            if error is not None:
                return ImageError(error.error, f"column {feature!r}: {error.message}")
        return None

    def _set_sequences(self, row: int) -> None:
        """Set the record's values kept outside its features map (none in a tf.train.Example)."""

    def _slot(self, feature: str, connector: Connector) -> Any:
        values = getattr(self._features[feature], connector.field).value
        values.append(connector.placeholder)
        return values

    def encode(self, row: int, image: StoredImage | None = None, media: dict[str, Any] | None = None) -> bytes:
        """The serialized Example for ``row`` (position in the table) with ``image`` if it has one, and the values
        of its media columns' features (``media``: the shard's writer prepared them). Raises the row's
        ``refusal``."""
        error = self.refusal(row)
        if error is not None:
            raise error
        for name, value in (media or {}).items():
            if isinstance(value, list):  # a media kind of several values a record (a video's frames): all of them
                self._media[name][:] = value
            else:
                self._media[name][0] = value
        if image is not None:
            for name, value in image_values(image, self._uris[row]).items():
                self._image[name][0] = value
            if self._mask is not None:
                self._mask[0] = image.mask
        for slot, values in self._fixed:
            slot[0] = values[row]
        stored = self._features
        for feature, field, values in self._varying:
            value = values[row]
            if value is None:  # missing: the feature is left out, and the manifest marks it nullable
                if feature in stored:
                    del stored[feature]
                continue
            kind_list = getattr(stored[feature], field)
            kind_list.SetInParent()  # an empty list is present, unlike a missing value
            del kind_list.value[:]
            if isinstance(value, list):
                kind_list.value.extend(value)
            else:
                kind_list.value.append(value)
        for feature, values in self._serialized:
            value = values[row]
            if value is None:
                if feature in stored:
                    del stored[feature]
            else:
                stored[feature].ParseFromString(value)
        self._set_sequences(row)
        data = self._example.SerializeToString(deterministic=True)
        self._budget -= len(data)
        if self._budget < 0:
            self._build()
        return data


class SequenceExampleEncoder(ExampleEncoder):
    """Serializes a table's rows as tf.train.SequenceExamples (``layouts.SEQUENCE_EXAMPLE``): each sequence column
    (``layouts.is_feature_list``: token ids, frames ``[T, 8]``) a feature list of one Feature a step, holding
    ``step_shape``'s values; every other value in the context, as ``ExampleEncoder`` sets an Example's features.
    A missing sequence has no feature list (read back empty); an empty one has a feature list of no steps."""

    def __init__(self, table: Table):
        self._lists = [(c.feature, c.connector, _listed(c.values)) for c in table.columns
                       if layouts.is_feature_list(c.connector, c.type.role.value)]
        super().__init__(table)

    def _in_features(self, column: Column) -> bool:
        return not layouts.is_feature_list(column.connector, column.type.role.value)

    def _new_record(self) -> tuple[Any, Any]:
        record = SequenceExample()
        return record, record.context.feature

    def refusal(self, row: int) -> ImageError | None:
        for feature, connector, values in self._lists:
            error = refusal(values[row]) if connector.feature_bytes else None
            if error is not None:
                return ImageError(error.error, f"column {feature!r}: {error.message}")
        return super().refusal(row)

    def _set_sequences(self, row: int) -> None:
        lists = self._example.feature_lists.feature_list
        lists.clear()
        for feature, connector, values in self._lists:
            value = values[row]
            if value is None:
                continue
            steps, field = lists[feature].feature, connector.field
            if connector.feature_bytes:  # a tensor's serialized Feature: its values flat, a step's one after another
                flat = getattr(Feature.FromString(value), field).value
                size = math.prod(connector.step_shape)
                for start in range(0, len(flat), size):
                    getattr(steps.add(), field).value.extend(flat[start:start + size])
            else:
                for item in value:
                    getattr(steps.add(), field).value.append(item)


class ObjectEncoder:
    """Serializes the records of a detection table in our layout: one per image, from its box rows (positions
    in the table), each box moved into the stored image's frame and checked against it (``boxes.stored_boxes``).
    Objects are stored in their rows' order in the table (an annotation file's own: COCO's annotations, a YOLO
    file's lines), whatever order the runner brings them in: a semantic mask draws later objects over earlier
    ones, as the annotation tool showed them. The keys are ``layout``'s; a layout's image keys are its
    subclass's (``_set_image``). An Example is built per record: one record per image is few, and its lists
    vary in length anyway."""

    layout = layouts.DEFAULT

    def __init__(self, table: Table, box_orientation: str, limits: FetchLimits = FetchLimits(),
                 mask_settings: MaskSettings = MaskSettings()):
        edges = {c.type.edge: c for c in table.features if c.type.role is Role.BOX}
        self._edges = np.stack([np.array([np.nan if v is None else v for v in _listed(edges[e].values)], np.float64)
                                for e in BOX_EDGES], axis=1)
        size = [edges.get("width"), edges.get("height")]
        self._annotated = (None if None in size else
                           [(None if w is None or h is None else (w, h))
                            for w, h in zip(_listed(size[0].values), _listed(size[1].values))])
        self._labels = _listed(table.label.values)
        self._long_labels = long_labels(table.vocabulary)
        self._extras = [(self.layout.object_key(c.name), c.connector.field, c.connector.object_missing,
                         _listed(c.values)) for c in table.features
                        if c.type.role is not Role.BOX and not of_type(c.type).layout_keyed]
        given = [_listed(c.values) for c in table.features if of_type(c.type).object_points]
        self._keypoints = given[0] if given and table.keypoint_count else None
        masks = [c for c in table.features if of_type(c.type).object_mask]
        self._masks = (_listed(masks[0].values), masks[0].type is InstanceMaskUri) if masks else None
        self._limits = limits
        # mask_from_instances: each record's semantic mask drawn from its instance masks (crowds: ignore_index)
        self._semantic = mask_settings if mask_settings.from_instances and self._masks is not None else None
        crowd = [c for c in table.features if c.name == CROWD_COLUMN]
        self._crowd = _listed(crowd[0].values) if crowd else None
        # Of the last record: its objects with an instance mask, the rows of those whose box does not hold it, and
        # the pixels of each class id (256 counts) of its semantic mask (None: none written)
        self.masked, self.loose = 0, list[int]()
        self.mask_pixels: np.ndarray | None = None
        self._table, self._frame = table, box_orientation
        self._split = [s.encode("ascii") for s in table.splits]

    def encode(self, positions: list[int], rows: list[int], image: StoredImage) -> tuple[bytes, list[int], int]:
        """The serialized Example of the image of the rows at ``positions`` (``rows``: their row numbers, the
        objects' order and what errors name), the label of each object written, and how many boxes were clipped
        onto the image."""
        row_of = dict(zip(positions, rows))
        objects = sorted((p for p in positions if self._labels[p] is not None), key=row_of.__getitem__)
        boxes, clipped = np.zeros((0, 4), np.float32), 0
        count = self._table.keypoint_count or 0
        points = np.zeros((0, count, 2), np.float32), np.zeros((0, count), np.int64)
        if objects:
            annotated = self._annotated[objects[0]] if self._annotated is not None else None
            if self._long_labels:
                check_labels([self._labels[p] for p in objects], [row_of[p] for p in objects], self._long_labels,
                             self._table.vocabulary, self._uris(positions[0]))
            boxes, clipped = stored_boxes(self._edges[objects], self._table.box_units, self._frame, annotated,
                                          image.geometry, [row_of[p] for p in objects])
            if self._keypoints is not None:
                points = stored_keypoints([self._keypoints[p] for p in objects], self._table.keypoint_count,
                                          self._table.box_units, self._frame, annotated, image.geometry,
                                          [row_of[p] for p in objects])
        masks: list[bytes] = []
        drawn: list[np.ndarray] = []
        self.masked, self.loose = 0, []
        if objects and self._masks is not None:
            values, located = self._masks
            drawn, self.loose = stored_masks(
                ObjectMasks([values[p] for p in objects], located, self._edges[objects], self._table.box_units,
                            [row_of[p] for p in objects]),
                self._frame, annotated, image, self._uris(positions[0]), self._limits)
            masks = [png(mask) for mask in drawn]
            self.masked = sum(values[p] is not None for p in objects)
        labels = [self._labels[p] for p in objects]
        self.mask_pixels = None
        if self._semantic is not None:
            ids = self._semantic_ids(objects, [row_of[p] for p in objects] if objects else [], positions[0])
            semantic = semantic_mask(drawn, ids, image, self._semantic.ignore_index)
            image = replace(image, mask=png(semantic))
            self.mask_pixels = np.bincount(semantic.ravel(), minlength=256)
        layout, vocabulary = self.layout, self._table.vocabulary
        example = Example()
        stored = example.features.feature
        self._set_image(stored, image, positions[0])
        for feature, values in zip(layout.box_features, layout.box_values(boxes)):
            stored[feature.name].float_list.value.extend(values)
        if layout.class_text is not None:
            texts = [(vocabulary[label] if vocabulary is not None else str(label)).encode("utf-8") for label in labels]
            stored[layout.class_text.name].bytes_list.value.extend(texts)
        stored[layout.object_label.name].int64_list.value.extend(layout.class_ids(labels, vocabulary is not None))
        if self._keypoints is not None:
            for feature, values in zip(layout.keypoints, layout.keypoint_values(*points)):
                kind_list = getattr(stored[feature.name], feature.field)
                kind_list.SetInParent()
                kind_list.value.extend(values)
        if self._masks is not None and layout.instance_mask is not None:
            kind_list = stored[layout.instance_mask.name].bytes_list
            kind_list.SetInParent()
            kind_list.value.extend(masks)
        self._set_extras(stored, objects)
        return example.SerializeToString(deterministic=True), labels, clipped

    def _set_image(self, stored: Any, image: StoredImage, position: int) -> None:
        """Set the record's image features, its semantic mask if it has one, and its split in ``stored`` (an
        Example's feature map)."""
        for feature, value in zip(features.IMAGE_FEATURES, image_values(image, self._uris(position)).values()):
            getattr(stored[feature.name], feature.field).value.append(value)
        if image.mask is not None:
            stored[features.SEGMENTATION_MASK.name].bytes_list.value.append(image.mask)
        stored[features.SPLIT.name].bytes_list.value.append(self._split[position])

    def _semantic_ids(self, objects: list[int], rows: list[int], position: int) -> list[int]:
        """Each object's value in the semantic mask: its label id + 1, or ignore_index for a crowd. A label whose
        id + 1 is no class id a mask can hold (above 255, or ignore_index: integer labels) is an ImageError."""
        ignore = self._semantic.ignore_index  # type: ignore[union-attr]
        ids = []
        for p, row in zip(objects, rows):
            if self._crowd is not None and self._crowd[p]:
                ids.append(ignore)
                continue
            value = int(self._labels[p]) + 1
            if not 0 < value <= 255 or value == ignore:
                raise ImageError("mask_class", f"row {row}: label {self._labels[p]} of image {self._uris(position)} "
                                               f"cannot be drawn in its semantic mask (mask_from_instances=True): "
                                               f"a class id there is the label + 1, one of 1-255 other than "
                                               f"ignore_index ({ignore})")
            ids.append(value)
        return ids

    def _uris(self, position: int) -> str:
        return self._table.image_uris[position]

    def _set_extras(self, stored: Any, objects: list[int]) -> None:
        """Each extra column's value for every object (a list per column; a missing value as its kind's
        stand-in)."""
        for key, field, missing, values in self._extras:
            kind_list = getattr(stored[key], field)
            kind_list.SetInParent()
            kind_list.value.extend(missing if values[p] is None else values[p] for p in objects)


class DetectionAPIObjectEncoder(ObjectEncoder):
    """Serializes a detection table's records under the Object Detection API's keys (``layouts.OBJECT_DETECTION``):
    the image's keys as ``detection_api_image`` sets them, no split."""

    layout = layouts.OBJECT_DETECTION

    def _set_image(self, stored: Any, image: StoredImage, position: int) -> None:
        detection_api_image(stored, image, self._uris(position))


def detection_api_image(stored: Any, image: StoredImage, uri: str) -> None:
    """Set the image keys of the Object Detection API's layout in ``stored`` (an Example's feature map): the
    stored pixels' size (its decoders apply no EXIF orientation), and a segmentation table's mask."""
    name = image_name(uri)
    turned = image.orientation in (5, 6, 7, 8)
    height, width = (image.width, image.height) if turned else (image.height, image.width)
    values = [(features.OD_IMAGE, image.data), (features.OD_FORMAT, image.format.encode("ascii")),
              (features.OD_FILENAME, name.encode("utf-8")),
              (features.OD_SOURCE_ID, posixpath.splitext(name)[0].encode("utf-8")),
              (features.OD_HEIGHT, height), (features.OD_WIDTH, width)]
    if image.mask is not None:
        values += [(features.OD_MASK, image.mask), (features.OD_MASK_FORMAT, b"png")]
    for feature, value in values:
        getattr(stored[feature.name], feature.field).value.append(value)


class SegmentationAPIEncoder:
    """Serializes a segmentation table's rows in the Object Detection API's layout (``layouts.OBJECT_DETECTION``):
    the image keys and ``image/segmentation/class/encoded``, as Model Garden's segmentation Decoder reads them."""

    def __init__(self, table: Table):
        self._uris = table.image_uris

    def encode(self, row: int, image: StoredImage, media: dict[str, Any] | None = None) -> bytes:
        """The record of ``row``: its image's keys alone (the layout has no place for other columns)."""
        example = Example()
        detection_api_image(example.features.feature, image, self._uris[row])
        return example.SerializeToString(deterministic=True)


@dataclass(frozen=True)
class Encoders:
    """A record layout's encoders: for a table's rows, a record each; and for a detection table's objects, a
    record per image."""

    rows: type[ExampleEncoder] | type[SegmentationAPIEncoder]
    objects: type[ObjectEncoder] | None  # None: the layout has no detection records (``refuses_detection``)


# Each record layout's encoders, by its name (dataset/ cannot import write/, so the layout names them here).
ENCODERS = {
    layouts.DEFAULT.name: Encoders(ExampleEncoder, ObjectEncoder),
    layouts.OBJECT_DETECTION.name: Encoders(SegmentationAPIEncoder, DetectionAPIObjectEncoder),
    layouts.SEQUENCE_EXAMPLE.name: Encoders(SequenceExampleEncoder, None),
}


CROWD_COLUMN = "is_crowd"  # COCO's iscrowd as read_annotations names it: a crowd's pixels are ignore_index


def _listed(values: Any) -> list[Any]:
    return values.tolist() if isinstance(values, np.ndarray) else list(values)


_DEFAULT_IMAGE_BYTES = 100_000  # an image's size when no file of the sample tells it
_RECORD_FRAMING = 16  # a TFRecord's length, its CRC and the data's CRC
_BYTES_PREFIX = 4  # the image's length prefix inside the Example (a varint: 4 bytes up to 256 MiB)


def mean_record_bytes(sample: Table, limits: Any, held_image_sizes: Sequence[int | None] | None = None) -> float:
    """The mean size of ``sample``'s records as stored: every feature and the framing, each image counted by
    its file's size (``limits``: the FetchLimits to ask for it with), or by the size of the bytes when the
    table holds its images (``held_image_sizes``: those sizes, where the sample kept them instead of the
    bytes)."""
    from tfrecorder.write.record.fetch import size_of

    if sample.is_detection:
        return _mean_detection_row_bytes(sample, limits)
    encoder = ExampleEncoder(sample)
    stored = [i for i in range(sample.num_rows) if encoder.refusal(i) is None]  # a refused row is no record
    if sample.image_locations is None:
        sizes = [len(encoder.encode(i)) for i in stored] or [0]
    else:
        # a row without an image is an error row (errors.csv), never a record: the estimate is of the others
        rows = [i for i in stored if sample.image_uris is not None and sample.image_uris[i] is not None]
        if not rows:
            return float(_DEFAULT_IMAGE_BYTES + _IMAGE_FEATURE_BYTES + _RECORD_FRAMING)
        held = sample.image_data or [None] * sample.num_rows  # an image the table holds: its bytes' size
        held_sizes = held_image_sizes if held_image_sizes is not None else [
            len(data) if data is not None else None for data in held]
        files = [held_sizes[i] if held_sizes[i] is not None else size_of(sample.image_locations[i], limits)
                 for i in rows]
        known = [size for size in files if size is not None]
        fallback = sum(known) / len(known) if known else _DEFAULT_IMAGE_BYTES
        empty = StoredImage(b"", 1, 1, 3, "jpeg", mask=b"")  # the record without its image, then the file's size
        sizes = [len(encoder.encode(i, empty)) + int(fallback if size is None else size) + _BYTES_PREFIX
                 for i, size in zip(rows, files)]
        if sample.mask_locations is not None:  # a mask is stored as a PNG about its file's size
            masks = [size_of(sample.mask_locations[i], limits) or 0 for i in rows]
            sizes = [size + mask + _BYTES_PREFIX for size, mask in zip(sizes, masks)]
    return sum(sizes) / len(sizes) + _RECORD_FRAMING


_OBJECT_BYTES = 64  # an object's box, label and a few extras as stored, about
_IMAGE_FEATURE_BYTES = 256  # a record's features beside its image bytes and objects, about


def _mean_detection_row_bytes(sample: Table, limits: Any) -> float:
    """A detection table's stored bytes per input row (a row per box): its images' files, counted once per
    image, and its objects, spread over the rows (the plan divides rows into shards)."""
    from tfrecorder.write.record.fetch import size_of

    groups: dict[str | None, int] = {}
    for location in sample.image_locations:
        groups[location] = groups.get(location, 0) + 1
    files = [size_of(location, limits) for location in groups]
    known = [size for size in files if size is not None]
    fallback = sum(known) / len(known) if known else _DEFAULT_IMAGE_BYTES
    total = sum(int(fallback if size is None else size) + _BYTES_PREFIX + _IMAGE_FEATURE_BYTES + _RECORD_FRAMING
                for size in files) + _OBJECT_BYTES * sample.num_rows
    return total / sample.num_rows
