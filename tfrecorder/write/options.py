"""Options (pure data): the choices and defaults of ``convert``/``to_tfr``, and the frozen objects carrying them.

The CLI builds its flags from these constants, so its choices and defaults cannot drift from the library's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tfrecorder.arguments import check_choice, check_image_size
from tfrecorder.dataset.features import DEFAULT_IGNORE_INDEX, DEFAULT_RESIZE_MODE, RESIZE_MODES
from tfrecorder.dataset.layouts import DEFAULT_RECORD_FORMAT, LAYOUTS, RECORD_FORMATS, RecordLayout
from tfrecorder.dataset.records import check_compression
from tfrecorder.dataset.storage import DEFAULT_STORAGE_TIMEOUT, check_storage_timeout
from tfrecorder.errors import TFRecorderError
from tfrecorder.schema import Schema
from tfrecorder.types import ColumnType
from tfrecorder.write import splits
from tfrecorder.write.fetch import DEFAULT_IMAGE_TIMEOUT, DEFAULT_MAX_IMAGE_BYTES, FetchLimits

LOCAL = "local"
BEAM_RUNNERS = ("DirectRunner", "DataflowRunner")
RUNNERS = (LOCAL, *BEAM_RUNNERS)
IMAGE_FORMATS = ("keep", "jpeg", "png", "raw")
VALIDATE_MODES = ("full", "header")
ON_ERROR = ("report", "raise")
FLOAT_PRECISIONS = ("auto", "float32", "float64")
DEFAULT_IMAGE_FORMAT = "keep"
DEFAULT_VALIDATE = "full"
DEFAULT_ON_ERROR = "report"
DEFAULT_FLOAT_PRECISION = "auto"
DEFAULT_JPEG_QUALITY = 95
# Detection tables: the units of box edges ("auto": normalized when every edge is within [0, 1]), and the
# frame pixel boxes of an EXIF-rotated photo refer to ("auto": as displayed, unless the annotation's own
# width and height are the stored pixels').
BOX_UNITS = ("auto", "pixels", "normalized")
BOX_ORIENTATIONS = ("auto", "displayed", "stored")
DEFAULT_BOX_UNITS = "auto"
DEFAULT_BOX_ORIENTATION = "auto"
DEFAULT_MAX_PIXELS = 178_956_970  # Pillow's own limit for a decompression bomb (2 x MAX_IMAGE_PIXELS)


@dataclass(frozen=True)
class ImageSettings:
    """How images are checked and stored (to_tfr's image_* arguments)."""

    format: str = DEFAULT_IMAGE_FORMAT
    size: tuple[int, int] | None = None  # (height, width)
    validate: str = DEFAULT_VALIDATE
    jpeg_quality: int = DEFAULT_JPEG_QUALITY
    max_pixels: int = DEFAULT_MAX_PIXELS
    resize_mode: str = DEFAULT_RESIZE_MODE

    def __post_init__(self) -> None:
        check_choice("image_format", self.format, IMAGE_FORMATS)
        check_choice("validate_images", self.validate, VALIDATE_MODES)
        check_choice("resize_mode", self.resize_mode, RESIZE_MODES)


@dataclass(frozen=True)
class MaskSettings:
    """A segmentation table's settings (convert's ``mask_*`` arguments): class names by id, the colours of an
    RGB mask's classes, and the id of pixels to ignore (VOC's 255 border; what a pad fills with)."""

    classes: tuple[str, ...] | None = None
    colors: tuple[tuple[tuple[int, int, int], int], ...] | None = None
    ignore_index: int = 255


@dataclass(frozen=True)
class WriteOptions:
    """Settings every shard writer needs."""

    images: ImageSettings
    compression: str | None
    on_error: str
    fetch: FetchLimits = field(default_factory=FetchLimits)  # max_image_bytes, image_timeout
    box_units: str = DEFAULT_BOX_UNITS
    box_orientation: str = DEFAULT_BOX_ORIENTATION
    record_format: str = DEFAULT_RECORD_FORMAT
    masks: MaskSettings = field(default_factory=MaskSettings)

    def __post_init__(self) -> None:
        check_choice("on_error", self.on_error, ON_ERROR)
        check_choice("record_format", self.record_format, RECORD_FORMATS)
        check_choice("box_units", self.box_units, BOX_UNITS)
        check_choice("box_orientation", self.box_orientation, BOX_ORIENTATIONS)

    @property
    def layout(self) -> RecordLayout:
        """The record layout ``record_format`` names."""
        return LAYOUTS[self.record_format]


@dataclass(frozen=True)
class BeamOptions:
    """The Beam and Dataflow settings of a conversion (TFRecorder 2.0's keyword names)."""

    project: str | None = None
    region: str | None = None
    pipeline: Mapping[str, Any] = field(default_factory=dict)  # ``dataflow_options``: any Beam pipeline option
    job_label: str | None = None
    wheel: str | None = None  # ``tfrecorder_wheel``
    wait: bool = False

    def check(self, runner: str, output_dir: str) -> None:
        """What Dataflow needs that the arguments lack, as a TFRecorderError naming the argument."""
        if runner != "DataflowRunner":
            return
        missing = [n for n, v in (("project", self.project), ("region", self.region)) if not v]
        if missing:
            raise TFRecorderError(f"runner='DataflowRunner' needs {' and '.join(missing)}: pass "
                                  f"{', '.join(f'{m}=...' for m in missing)}")
        if not output_dir.startswith("gs://"):
            raise TFRecorderError(f"runner='DataflowRunner' writes to Cloud Storage: output_dir must be a gs:// "
                                  f"URL, not {output_dir!r}")


@dataclass(frozen=True)
class Conversion:
    """What decides the files a conversion writes - convert's keywords but for the runner and how it runs -
    checked once (``conversion``): ``convert`` and the Beam transform ``tfrecorder.beam.WriteDataset`` take
    the same keywords and give the same bytes."""

    options: WriteOptions
    fractions: tuple[float, float, float]
    float_precision: str
    num_shards: int | None
    overwrite: bool
    storage_timeout: float


def conversion(
    *,
    num_shards: int | None = None,
    compression: str | None = None,
    image_format: str = DEFAULT_IMAGE_FORMAT,
    image_size: tuple[int, int] | None = None,
    validate_images: str = DEFAULT_VALIDATE,
    on_error: str = DEFAULT_ON_ERROR,
    overwrite: bool = False,
    split_fractions: Sequence[float] = splits.DEFAULT_FRACTIONS,
    jpeg_quality: int = DEFAULT_JPEG_QUALITY,
    resize_mode: str = DEFAULT_RESIZE_MODE,
    max_image_pixels: int = DEFAULT_MAX_PIXELS,
    float_precision: str = DEFAULT_FLOAT_PRECISION,
    max_image_bytes: int = DEFAULT_MAX_IMAGE_BYTES,
    image_timeout: float = DEFAULT_IMAGE_TIMEOUT,
    storage_timeout: float = DEFAULT_STORAGE_TIMEOUT,
    box_units: str = DEFAULT_BOX_UNITS,
    box_orientation: str = DEFAULT_BOX_ORIENTATION,
    record_format: str = DEFAULT_RECORD_FORMAT,
    mask_classes: Sequence[str] | None = None,
    mask_colors: Mapping[tuple[int, int, int], int] | None = None,
    ignore_index: int = DEFAULT_IGNORE_INDEX,
) -> Conversion:
    """convert's keywords (documented there) checked, each error naming its argument."""
    images = ImageSettings(image_format, check_image_size(image_size), validate_images, jpeg_quality,
                           int(max_image_pixels), resize_mode)
    options = WriteOptions(images, check_compression(compression), on_error,
                           FetchLimits(int(max_image_bytes), float(image_timeout)), box_units, box_orientation,
                           record_format, mask_settings(mask_classes, mask_colors, ignore_index))
    check_choice("float_precision", float_precision, FLOAT_PRECISIONS)
    return Conversion(options, splits.check_fractions(split_fractions), float_precision, num_shards,
                      bool(overwrite), check_storage_timeout(storage_timeout))


def mask_settings(classes: Sequence[str] | None, colors: Mapping[tuple[int, int, int], int] | None,
                  ignore_index: int) -> MaskSettings:
    """convert's ``mask_classes``, ``mask_colors`` and ``ignore_index``, checked."""
    if classes is not None and (isinstance(classes, str) or not all(isinstance(c, str) for c in classes)):
        raise TFRecorderError(f"mask_classes={classes!r}: give the class names in id order, e.g. "
                              f"['background', 'person']")
    pairs = None
    if colors is not None:
        try:
            pairs = tuple(sorted((tuple(int(v) for v in color), int(class_id))
                                 for color, class_id in dict(colors).items()))
        except (TypeError, ValueError) as e:
            raise TFRecorderError(f"mask_colors={colors!r}: give {{(r, g, b): class_id, ...}}") from e
        if not all(len(color) == 3 and all(0 <= v <= 255 for v in color) and 0 <= class_id <= 255
                   for color, class_id in pairs):
            raise TFRecorderError(f"mask_colors={colors!r}: colours are (r, g, b) of 0-255, class ids 0-255")
    if not isinstance(ignore_index, int) or not 0 <= ignore_index <= 255:
        raise TFRecorderError(f"ignore_index={ignore_index!r}: a class id of 0-255 (masks are stored as uint8)")
    return MaskSettings(tuple(classes) if classes is not None else None, pairs, ignore_index)  # type: ignore[arg-type]


def as_schema(schema: Schema | Mapping[str, type[ColumnType]] | None) -> Schema | None:
    """A Schema from a Schema or a ``{column: type}`` dict; None stays None (inferred later)."""
    if schema is None or isinstance(schema, Schema):
        return schema
    return Schema(schema)
