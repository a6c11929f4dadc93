"""Column types: what each input column is (TFRecorder 2.0 names) and how it is stored.

A type is a class, used as a value: ``Schema({"age": types.IntegerInput})``.
Each type knows its role in the dataset and the tf.train.Example feature kind
that stores it; nothing else in the package decides that from class names.
"""

from __future__ import annotations

import copyreg
import enum
from typing import Any, ClassVar


class Role(enum.StrEnum):
    """What a column is for."""

    SPLIT = "split"
    IMAGE = "image"
    LABEL = "label"
    FEATURE = "feature"
    BOX = "box"  # an edge of an object's box (detection tables: a row per box), or the size it was drawn on
    MASK = "mask"  # where an image's segmentation mask (class ids) is


class Kind(enum.StrEnum):
    """The tf.train.Example list a value is stored in (names are tf.dtypes names)."""

    INT64 = "int64"
    FLOAT32 = "float32"
    BYTES = "string"
    FLOAT64 = "float64"  # storage only (see float_precision): a float column float32 would change


# Split values: the three a dataset is written in, DISCARD (counted, not written) and UNASSIGNED (assigned by hash).
TRAIN, VALIDATION, TEST, DISCARD, UNASSIGNED = "TRAIN", "VALIDATION", "TEST", "DISCARD", "UNASSIGNED"

# Runner names (convert's runner=): here, beside the split names, because the DataFrame accessor names the default
# at `import tfrecorder` time, before the write side (and fsspec behind it) is imported.
LOCAL = "local"
# Beam's runners by the names runner= takes, each with its class (Beam itself knows DaskRunner by its path only).
# Any other runner class is given by its dotted path.
BEAM_RUNNER_CLASSES = {
    "DirectRunner": "apache_beam.runners.direct.direct_runner.DirectRunner",
    "DataflowRunner": "apache_beam.runners.dataflow.dataflow_runner.DataflowRunner",
    "DaskRunner": "apache_beam.runners.dask.dask_runner.DaskRunner",
    "FlinkRunner": "apache_beam.runners.portability.flink_runner.FlinkRunner",
    "SparkRunner": "apache_beam.runners.portability.spark_runner.SparkRunner",
    "PrismRunner": "apache_beam.runners.portability.prism_runner.PrismRunner",
}
BEAM_RUNNERS = tuple(BEAM_RUNNER_CLASSES)
RUNNERS = (LOCAL, *BEAM_RUNNERS)


class ColumnType:
    """Base of every column type. Subclasses set ``role``, ``kind`` and ``is_list``."""

    role: ClassVar[Role] = Role.FEATURE
    kind: ClassVar[Kind] = Kind.BYTES
    is_list: ClassVar[bool] = False
    allowed_values: ClassVar[tuple[str, ...]] = ()  # TFRecorder 2.0's name: the values a column may take, if fixed
    edge: ClassVar[str] = ""  # Role.BOX types: the box edge (or annotated size) the column holds
    # The connector (dataset/connectors: its name) a type's values are stored with when its kind and shape alone
    # do not say it (keypoints: a list of floats that follows the picture); "": the kind's own. A type made for a
    # connector (``column_type``) holds the connector itself, with its parameters.
    connector: ClassVar[Any] = ""

    def __init__(self) -> None:  # pragma: no cover - types are used as classes
        raise TypeError(f"{type(self).__name__} is a column type: use the class itself")


class SplitKey(ColumnType):
    """TRAIN / VALIDATION / TEST / DISCARD / UNASSIGNED, any case."""

    role = Role.SPLIT
    kind = Kind.BYTES
    allowed_values = (TRAIN, VALIDATION, TEST, DISCARD, UNASSIGNED)


class ImageUri(ColumnType):
    """Where an image is: local path, file://, gs://, http(s):// or any fsspec URL."""

    role = Role.IMAGE
    kind = Kind.BYTES


class ImageBytes(ColumnType):
    """The image itself, held in the table: encoded bytes (JPEG, PNG, GIF, BMP, WebP, TIFF, told by content), a
    ``{"bytes", "path"}`` struct (Hugging Face ``datasets``' ``Image``), a uint8 numpy array (HxW, HxWx1/3/4) or a
    PIL image. Stored as an image file's bytes are; arrays and PIL images are encoded once (PNG: lossless)."""

    role = Role.IMAGE
    kind = Kind.BYTES


class MaskUri(ColumnType):
    """Where an image's segmentation mask is: a one-channel image of class ids (PNG or another lossless format;
    palette PNGs by their indices), as any image URI."""

    role = Role.MASK
    kind = Kind.BYTES


class IntegerLabel(ColumnType):
    """An integer class id, stored as is."""

    role = Role.LABEL
    kind = Kind.INT64


class StringLabel(ColumnType):
    """A class name, stored as its index in the sorted vocabulary of TRAIN labels."""

    role = Role.LABEL
    kind = Kind.BYTES


class IntegerListLabel(ColumnType):
    """Several integer class ids per row (multi-label)."""

    role = Role.LABEL
    kind = Kind.INT64
    is_list = True


class StringListLabel(ColumnType):
    """Several class names per row (multi-label), stored as vocabulary indices."""

    role = Role.LABEL
    kind = Kind.BYTES
    is_list = True


class IntegerInput(ColumnType):
    """Integers and booleans, stored as int64."""

    kind = Kind.INT64


class FloatInput(ColumnType):
    """Floating-point numbers, stored as float32."""

    kind = Kind.FLOAT32


class StringInput(ColumnType):
    """Text (stored UTF-8) or bytes, stored as a bytes feature."""

    kind = Kind.BYTES


class IntegerListInput(ColumnType):
    """Variable-length lists of integers."""

    kind = Kind.INT64
    is_list = True


class FloatListInput(ColumnType):
    """Variable-length lists of floats."""

    kind = Kind.FLOAT32
    is_list = True


class StringListInput(ColumnType):
    """Variable-length lists of strings or bytes."""

    kind = Kind.BYTES
    is_list = True


class BoxXMin(ColumnType):
    """A box's left edge: pixels from 0, or normalized to [0, 1] (``box_units``)."""

    role = Role.BOX
    kind = Kind.FLOAT32
    edge = "xmin"


class BoxYMin(ColumnType):
    """A box's top edge: pixels from 0, or normalized to [0, 1]."""

    role = Role.BOX
    kind = Kind.FLOAT32
    edge = "ymin"


class BoxXMax(ColumnType):
    """A box's right edge (greater than xmin)."""

    role = Role.BOX
    kind = Kind.FLOAT32
    edge = "xmax"


class BoxYMax(ColumnType):
    """A box's bottom edge (greater than ymin)."""

    role = Role.BOX
    kind = Kind.FLOAT32
    edge = "ymax"


class AnnotatedWidth(ColumnType):
    """The width of the image as the annotation tool saw it (VOC ``<size>``, COCO ``width``): it tells whether
    pixel boxes of an EXIF-rotated photo refer to the stored pixels or to the picture as displayed."""

    role = Role.BOX
    kind = Kind.FLOAT32
    edge = "width"


class AnnotatedHeight(ColumnType):
    """The height of the image as the annotation tool saw it."""

    role = Role.BOX
    kind = Kind.FLOAT32
    edge = "height"


class Keypoints(ColumnType):
    """An object's keypoints in a detection table (a row per box): COCO's ``[x, y, v] * K``, x and y in the box
    columns' units and frame, ``v`` 0 (not labelled), 1 (labelled, hidden) or 2 (visible); every object the same
    ``K`` (or none: missing). Stored as ``objects/keypoints`` and ``objects/keypoint_visibility``."""

    role = Role.FEATURE
    kind = Kind.FLOAT32
    is_list = True
    connector = "Keypoints"


class InstanceMask(ColumnType):
    """An object's instance mask in a detection table (a row per box), kept compact as text: COCO's
    ``segmentation`` as JSON - polygons ``[[x1, y1, x2, y2, ...], ...]`` in the box columns' units and frame, or
    RLE ``{"size": [height, width], "counts": ...}`` (compressed text or a list of runs) of the annotated
    picture. Drawn when written: stored as ``objects/mask``, one PNG (0/1) per object."""

    role = Role.FEATURE
    kind = Kind.BYTES
    connector = "InstanceMask"


class InstanceMaskUri(ColumnType):
    """Where an object's instance mask is, in a detection table (a row per box): a one-channel image (PNG) of its
    picture's size, nonzero on the object. Stored as ``objects/mask``, one PNG (0/1) per object."""

    role = Role.FEATURE
    kind = Kind.BYTES
    connector = "InstanceMask"


ALL_TYPES: tuple[type[ColumnType], ...] = (
    SplitKey, ImageUri, MaskUri, IntegerLabel, StringLabel, IntegerListLabel, StringListLabel,
    IntegerInput, FloatInput, StringInput, IntegerListInput, FloatListInput, StringListInput,
    BoxXMin, BoxYMin, BoxXMax, BoxYMax, AnnotatedWidth, AnnotatedHeight, Keypoints, ImageBytes, InstanceMask,
    InstanceMaskUri,
)
class _MadeType(type):
    """The metaclass of the types ``column_type`` makes: no module holds them, so they are pickled as the call that
    makes them again, from their connector (its class, by reference, and its parameters) - Beam ships them."""


def _made_again(made: Any) -> Any:
    return column_type, (made.connector,)


copyreg.pickle(_MadeType, _made_again)
_MADE: dict[Any, type[ColumnType]] = {}


def column_type(connector: Any) -> type[ColumnType]:
    """The column type of a feature column stored with ``connector`` (a ``tfrecorder.Connector``, with its
    parameters): what ``schema=`` makes of a connector given for a column, and what a column a connector claims
    is typed as.

    Args:
        connector: an instance of a ``tfrecorder.Connector`` subclass.

    Returns:
        A ``ColumnType`` subclass named after the connector, the same one each time for the same connector.
    """
    if connector not in _MADE:
        _MADE[connector] = _MadeType(connector.name, (ColumnType,), {  # type: ignore[assignment]
            "role": Role.FEATURE, "kind": connector.kind, "connector": connector,
            "__doc__": f"A column stored with the connector {connector.name} {connector.parameters() or ''}"})
    return _MADE[connector]


def Tensor(shape: tuple[int | None, ...] | list[int | None], dtype: str,  # noqa: N802 - a type's name
           encoding: str | None = None) -> type[ColumnType]:
    """The column type of an array column of ``shape`` and ``dtype`` a row (``schema={"x": types.Tensor(...)}``):
    stored as TFDS's ``tfds.features.Tensor``, read back as arrays of that shape and dtype.

    Args:
        shape: the size of each dimension (1 to 5 of them), None for the first where rows differ.
        dtype: bool, int8-int64, uint8-uint32, float16, float32 or float64.
        encoding: "none" (the values in an Example list), "bytes" or "zlib" (the array's bytes; a fixed shape);
            None: "bytes" for float64 of a fixed shape (exact, and TFDS reads it), else "none".

    Returns:
        The column type (the same one for the same arguments).
    """
    from tfrecorder.dataset.connectors.tensors import Tensor as TensorConnector  # the connectors import this module

    return column_type(TensorConnector(shape, dtype, encoding))


# A detection table's box columns by the edge each holds: the four edges are all given or none is.
BOX_TYPES: dict[str, type[ColumnType]] = {t.edge: t for t in ALL_TYPES if t.role is Role.BOX}
BOX_EDGES: tuple[str, ...] = ("xmin", "ymin", "xmax", "ymax")

FEATURE_TYPES: dict[tuple[Kind, bool], type[ColumnType]] = {
    (t.kind, t.is_list): t for t in ALL_TYPES if t.role is Role.FEATURE and not t.connector
}
KEYPOINTS_COLUMN = "keypoints"  # a detection table's column of this name is inferred as Keypoints
# A detection table's columns of these names are inferred as InstanceMask (COCO segmentation text) and
# InstanceMaskUri (a PNG per object)
INSTANCE_MASK_COLUMN, INSTANCE_MASK_URI_COLUMN = "instance_mask", "instance_mask_uri"
INSTANCE_MASK_TYPES = (InstanceMask, InstanceMaskUri)
LABEL_TYPES: dict[tuple[Kind, bool], type[ColumnType]] = {
    (t.kind, t.is_list): t for t in ALL_TYPES if t.role is Role.LABEL
}


# Column types of kinds defined with the connectors (which import this module): made when first asked for.
_KIND_TYPES = {"AudioUri": ("tfrecorder.dataset.connectors.audio", "Audio"),  # paths or URLs of audio files
               "AudioBytes": ("tfrecorder.dataset.connectors.audio", "Audio"),  # their encoded bytes
               "VideoUri": ("tfrecorder.dataset.connectors.video", "Video")}  # paths or URLs of video files


def __getattr__(name: str) -> Any:
    """``types.AudioUri`` and ``types.AudioBytes``: an audio column's type (its paths, URLs or bytes are one kind,
    ``connectors.audio.Audio``); ``types.VideoUri``: a video column's (``connectors.video.Video``)."""
    if name not in _KIND_TYPES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    module, kind = _KIND_TYPES[name]
    return column_type(getattr(importlib.import_module(module), kind)())
