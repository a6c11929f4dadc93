"""Features: the one table of what tfrecorder stores - every derived feature's name, dtype, shape, default and role.

In the style of TFDS's ``FeatureConnector``: validation (which column names are taken),
the encoder (which slots each record has), dataset.json (which features it lists), the
reader (what decoding an image needs) and the inferring reader all read this module;
none keeps a list of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tfrecorder.types import Kind, Role

# The tf.train.Example list that holds each dtype's values (the Feature's oneof ``kind``). tf.train.Example
# has no float64 list: a float64 value is stored as its IEEE-754 bits in an int64 list (tf.bitcast reads it).
FIELDS: dict[Kind, str] = {Kind.INT64: "int64_list", Kind.FLOAT32: "float_list", Kind.BYTES: "bytes_list",
                           Kind.FLOAT64: "int64_list"}
# What a list read from another tool's record holds: each list's own kind (float64 is ours alone).
KINDS_BY_FIELD: dict[str, Kind] = {FIELDS[k]: k for k in (Kind.INT64, Kind.FLOAT32, Kind.BYTES)}
# The value load_dataset gives a missing nullable scalar, as dataset.json writes it ("NaN": JSON has no NaN).
MISSING_DEFAULTS: dict[Kind, Any] = {Kind.INT64: 0, Kind.FLOAT32: "NaN", Kind.BYTES: "", Kind.FLOAT64: "NaN"}
# How an image is fitted to image_size, by the writer and by load_dataset alike: ignore the aspect ratio,
# keep it and pad with black (letterbox), or keep it and crop the centre.
RESIZE_MODES = ("stretch", "pad", "crop")
DEFAULT_RESIZE_MODE = "stretch"
# A value of each dtype that stands in a slot until a row's own value is set.
PLACEHOLDERS: dict[Kind, Any] = {Kind.INT64: 0, Kind.FLOAT32: 0.0, Kind.BYTES: b"", Kind.FLOAT64: 0}


def float64_bits(value: float) -> int:
    """A float64 as the int64 its bits spell (how a float64 is stored)."""
    return int(np.float64(value).view(np.int64))


@dataclass(frozen=True)
class Feature:
    """One feature every record of a kind carries: a scalar of ``kind`` playing ``role``."""

    name: str
    kind: Kind
    role: Role
    doc: str

    @property
    def field(self) -> str:
        """The tf.train.Example list its value is stored in."""
        return FIELDS[self.kind]


IMAGE = Feature("image", Kind.BYTES, Role.IMAGE, "the image: its encoded bytes, or raw uint8 pixels")
IMAGE_HEIGHT = Feature("image_height", Kind.INT64, Role.IMAGE, "height in pixels, as displayed")
IMAGE_WIDTH = Feature("image_width", Kind.INT64, Role.IMAGE, "width in pixels, as displayed")
IMAGE_CHANNELS = Feature("image_channels", Kind.INT64, Role.IMAGE, "channels decoding gives (1, 2, 3 or 4)")
IMAGE_FORMAT = Feature("image_format", Kind.BYTES, Role.IMAGE, "jpeg, png, gif, bmp, webp or raw")
IMAGE_URI = Feature("image_uri", Kind.BYTES, Role.IMAGE, "where the image was read from, credentials redacted")
IMAGE_NAME = Feature("image_name", Kind.BYTES, Role.IMAGE, "the file name at the end of image_uri")
IMAGE_ORIENTATION = Feature("image_orientation", Kind.INT64, Role.IMAGE, "EXIF orientation (1-8) of kept bytes")
SPLIT = Feature("split", Kind.BYTES, Role.SPLIT, "TRAIN, VALIDATION or TEST")
LABEL = Feature("label", Kind.INT64, Role.LABEL, "class id (string labels: index in the vocabulary)")

# Every feature of an image row derived from its image, in the order dataset.json lists them.
IMAGE_FEATURES: tuple[Feature, ...] = (
    IMAGE, IMAGE_HEIGHT, IMAGE_WIDTH, IMAGE_CHANNELS, IMAGE_FORMAT, IMAGE_URI, IMAGE_NAME, IMAGE_ORIENTATION,
)
# What decoding ``image`` reads beside it.
DECODE_FEATURES: tuple[Feature, ...] = (IMAGE_FORMAT, IMAGE_HEIGHT, IMAGE_WIDTH, IMAGE_CHANNELS, IMAGE_ORIENTATION)
# The feature the column playing each role is stored under, whatever the column is called.
ROLE_FEATURES: dict[Role, Feature] = {Role.SPLIT: SPLIT, Role.IMAGE: IMAGE_URI, Role.LABEL: LABEL}
# Every name tfrecorder writes itself: an input column of plain features may not use one.
DERIVED: tuple[Feature, ...] = (*IMAGE_FEATURES, SPLIT, LABEL)
DERIVED_NAMES: frozenset[str] = frozenset(f.name for f in DERIVED)
