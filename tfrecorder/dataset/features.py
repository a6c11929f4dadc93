"""Features: the one table of what tfrecorder stores - every derived feature's name, connector (its kind of
value: ``connectors``) and role.

Validation (which column names are taken), the encoder (which slots each record has), dataset.json (which
features it lists), the reader (what decoding an image needs) and the inferring reader all read this module;
none keeps a list of its own.
"""

from __future__ import annotations

from dataclasses import dataclass

from tfrecorder.dataset import connectors
from tfrecorder.types import Kind, Role

# How an image is fitted to image_size, by the writer and by load_dataset alike: ignore the aspect ratio,
# keep it and pad with black (letterbox), or keep it and crop the centre.
RESIZE_MODES = ("stretch", "pad", "crop")
DEFAULT_RESIZE_MODE = "stretch"


@dataclass(frozen=True)
class Feature:
    """One feature every record of a kind carries: a scalar value of ``connector``'s kind playing ``role``."""

    name: str
    connector: connectors.Connector
    role: Role
    doc: str

    @property
    def kind(self) -> Kind:
        return self.connector.kind

    @property
    def field(self) -> str:
        """The tf.train.Example list its value is stored in."""
        return self.connector.field


IMAGE = Feature("image", connectors.IMAGE, Role.IMAGE, "the image: its encoded bytes, or raw uint8 pixels")
IMAGE_HEIGHT = Feature("image_height", connectors.INT64, Role.IMAGE, "height in pixels, as displayed")
IMAGE_WIDTH = Feature("image_width", connectors.INT64, Role.IMAGE, "width in pixels, as displayed")
IMAGE_CHANNELS = Feature("image_channels", connectors.INT64, Role.IMAGE, "channels decoding gives (1, 2, 3 or 4)")
IMAGE_FORMAT = Feature("image_format", connectors.TEXT, Role.IMAGE, "jpeg, png, gif, bmp, webp or raw")
IMAGE_URI = Feature("image_uri", connectors.TEXT, Role.IMAGE, "where the image was read from, credentials redacted")
IMAGE_NAME = Feature("image_name", connectors.TEXT, Role.IMAGE, "the file name at the end of image_uri")
IMAGE_ORIENTATION = Feature("image_orientation", connectors.INT64, Role.IMAGE, "EXIF orientation (1-8) of kept bytes")
SEGMENTATION_MASK = Feature("segmentation_mask", connectors.MASK, Role.MASK,
                            "a PNG of class ids (one channel), in the stored image's orientation and size")
SPLIT = Feature("split", connectors.TEXT, Role.SPLIT, "TRAIN, VALIDATION or TEST")
LABEL = Feature("label", connectors.CLASS_LABEL, Role.LABEL, "class id (string labels: index in the vocabulary)")

# A detection record's objects (a row per box of the table, grouped by image), stored as TFDS stores a
# ``Sequence`` of them: one list per feature, an object's values at the same place in each.
OBJECTS = "objects"
OBJECT_BBOX = Feature(f"{OBJECTS}/bbox", connectors.objects_of(connectors.BOX), Role.BOX,
                      "each object's box, 4 values: ymin, xmin, ymax, xmax, normalized, in the stored pixels' frame")
OBJECT_LABEL = Feature(f"{OBJECTS}/label", connectors.objects_of(connectors.CLASS_LABEL), Role.LABEL,
                       "each object's class id")
OBJECT_KEYPOINTS = Feature(f"{OBJECTS}/keypoints", connectors.objects_of(connectors.KEYPOINTS), Role.FEATURE,
                           "each object's K keypoints, (y, x) each, normalized, in the stored pixels' frame")
OBJECT_KEYPOINT_VISIBILITY = Feature(f"{OBJECTS}/{connectors.VISIBILITY}",
                                     connectors.objects_of(connectors.KEYPOINT_VISIBILITY), Role.FEATURE,
                                     "each object's K keypoints' visibility: 0 not labelled, 1 hidden, 2 visible")

OBJECT_MASK = Feature(f"{OBJECTS}/mask", connectors.objects_of(connectors.INSTANCE_MASK), Role.FEATURE,
                      "each object's instance mask: a PNG of one channel, 1 on the object, the stored image's size")


# The keys of the TF Object Detection API (its using_your_own_dataset.md), read by Model Garden's
# TfExampleDecoder: those of layouts.OBJECT_DETECTION (record_format="tf_object_detection").
OD_IMAGE = Feature("image/encoded", connectors.IMAGE, Role.IMAGE, "the image's encoded bytes")
OD_FORMAT = Feature("image/format", connectors.TEXT, Role.IMAGE, "jpeg, png, gif, bmp or webp")
OD_FILENAME = Feature("image/filename", connectors.TEXT, Role.IMAGE, "the file name at the end of image_uri")
OD_SOURCE_ID = Feature("image/source_id", connectors.TEXT, Role.IMAGE, "the image's file name without extension")
OD_HEIGHT = Feature("image/height", connectors.INT64, Role.IMAGE, "height of the stored pixels (before EXIF)")
OD_WIDTH = Feature("image/width", connectors.INT64, Role.IMAGE, "width of the stored pixels (before EXIF)")
OD_BOX_EDGES = {edge: Feature(f"image/object/bbox/{edge}", connectors.objects_of(connectors.FLOAT32), Role.BOX,
                              f"each object's {edge}, normalized, in the stored pixels' frame")
                for edge in ("xmin", "ymin", "xmax", "ymax")}
OD_CLASS_TEXT = Feature("image/object/class/text", connectors.objects_of(connectors.TEXT), Role.LABEL,
                        "each object's class name")
OD_CLASS_LABEL = Feature("image/object/class/label", connectors.objects_of(connectors.INT64), Role.LABEL,
                         "each object's class id, from 1 (label_map.pbtxt)")
OD_KEYPOINTS = (
    Feature("image/object/keypoint/y", connectors.objects_of(connectors.FLOAT32), Role.FEATURE,
            "each object's K keypoints' y, normalized, in the stored pixels' frame"),
    Feature("image/object/keypoint/x", connectors.objects_of(connectors.FLOAT32), Role.FEATURE,
            "each object's K keypoints' x, normalized, in the stored pixels' frame"),
    Feature("image/object/keypoint/visibility", connectors.objects_of(connectors.INT64), Role.FEATURE,
            "each object's K keypoints' visibility: 0 not labelled, 1 hidden, 2 visible"),
)
OD_OBJECT_MASK = Feature("image/object/mask", connectors.objects_of(connectors.INSTANCE_MASK), Role.FEATURE,
                         "each object's instance mask: a PNG of one channel (0/1), in the stored pixels' frame")
OD_IMAGE_FEATURES = (OD_IMAGE, OD_FORMAT, OD_FILENAME, OD_SOURCE_ID, OD_HEIGHT, OD_WIDTH)
OD_MASK = Feature("image/segmentation/class/encoded", connectors.MASK, Role.MASK,
                  "the segmentation mask: a PNG of class ids, in the stored pixels' frame")
OD_MASK_FORMAT = Feature("image/segmentation/class/format", connectors.TEXT, Role.MASK, "png")


# The box formats load_dataset(as_supervised=True) gives (KerasHub's names): "rel_" ones are fractions of the
# image's height and width, the others pixels of the image as given (after image_size). The stored one first.
BOX_FORMATS = ("rel_yxyx", "yxyx", "rel_xyxy", "xyxy", "rel_xywh", "xywh", "rel_center_xywh", "center_xywh",
               "center_yxhw")
DEFAULT_BOX_FORMAT = BOX_FORMATS[0]


def object_feature(column: str) -> str:
    """The feature an extra column of a detection table is stored under: a value per object."""
    return f"{OBJECTS}/{column}"


# Every feature of an image row derived from its image, in the order dataset.json lists them.
IMAGE_FEATURES: tuple[Feature, ...] = (
    IMAGE, IMAGE_HEIGHT, IMAGE_WIDTH, IMAGE_CHANNELS, IMAGE_FORMAT, IMAGE_URI, IMAGE_NAME, IMAGE_ORIENTATION,
)
# What decoding ``image`` reads beside it.
DECODE_FEATURES: tuple[Feature, ...] = (IMAGE_FORMAT, IMAGE_HEIGHT, IMAGE_WIDTH, IMAGE_CHANNELS, IMAGE_ORIENTATION)
# The feature the column playing each role is stored under, whatever the column is called.
ROLE_FEATURES: dict[Role, Feature] = {Role.SPLIT: SPLIT, Role.IMAGE: IMAGE_URI, Role.LABEL: LABEL}
# Every name tfrecorder writes itself: an input column of plain features may not use one.
DERIVED: tuple[Feature, ...] = (*IMAGE_FEATURES, SPLIT, LABEL)  # those of every image row
# The value mask pixels outside the picture get (a pad) when no ignore_index is set, and VOC's border class.
DEFAULT_IGNORE_INDEX = 255
DERIVED_NAMES: frozenset[str] = frozenset(f.name for f in (*DERIVED, SEGMENTATION_MASK))
