"""Options: the choices, defaults and limits of ``convert``/``to_tfr``, and the frozen objects carrying them.

``Options`` is the one list of convert's keywords: convert's signature (held to it by a test), ``to_tfr``,
``WriteDataset``, the CLI's flags and a run's identity are made from its fields, so they cannot drift apart.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import marshal
import os
import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np

from tfrecorder._version import __version__
from tfrecorder.arguments import (
    check_choice,
    check_count,
    check_image_size,
    check_number,
    check_optional_count,
    check_switch,
)
from tfrecorder.dataset.features import DEFAULT_IGNORE_INDEX, DEFAULT_RESIZE_MODE, RESIZE_MODES
from tfrecorder.dataset.layouts import DEFAULT_RECORD_FORMAT, LAYOUTS, RECORD_FORMATS, RecordLayout
from tfrecorder.dataset.records import COMPRESSIONS, check_compression
from tfrecorder.dataset.storage import DEFAULT_STORAGE_TIMEOUT, check_storage_timeout
from tfrecorder.errors import ImageError, TFRecorderError
from tfrecorder.schema import Schema
from tfrecorder.types import ColumnType
from tfrecorder.write import splits

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


# What one image read may cost, and where an annotation file's names may reach (``FetchLimits``).
DEFAULT_MAX_IMAGE_BYTES = 256 * 1024**2  # far above any photo
MAX_IMAGE_BYTES = 1024**3  # the most max_image_bytes may be: one record must stay under protobuf's 2 GiB
DEFAULT_IMAGE_TIMEOUT = 60.0  # seconds a remote image's read may take, each try (and any silence in it)
ROOT_ATTR = "tfrecorder.root"  # DataFrame.attrs key of an annotation file's table: {"root": ..., "annotations": ...}


@dataclass(frozen=True)
class Retry:
    """How transient remote failures (5xx, 429, timeouts, dropped connections) are retried."""

    attempts: int = 4
    backoff_seconds: float = 0.1  # waits 0.1, 0.4, 1.6 s between four tries

    def delay(self, attempt: int) -> float:
        """Seconds to wait after failed try number ``attempt`` (0-based)."""
        return self.backoff_seconds * 4**attempt


DEFAULT_RETRY = Retry()


@dataclass(frozen=True)
class Root:
    """The folder every file an annotation file names must stay inside (the dataset's root): ``url`` an absolute
    local path or a URL, ``named_by`` the annotation file or folder that names the files.

    A name is outside when it is a URL under a local root (or a local path under a remote one: a remote
    annotation file never names a local file), on another host or bucket, or resolves - ``..`` and, for local
    files, symlinks followed - to a place out of ``url``."""

    url: str
    named_by: str

    def check(self, location: str) -> None:
        """An ImageError ``outside_folder`` naming the location, the annotation file and how to name the root,
        when ``location`` is outside."""
        if not self.holds(location):
            raise ImageError("outside_folder", f"{location} is named by {self.named_by}, outside the dataset's root "
                                               f"{self.url}: give images_dir= the folder that holds the images to "
                                               f"read files from there")

    @functools.cached_property
    def _real_root(self) -> str:  # once per conversion, not once per image
        return os.path.realpath(local_path(self.url))

    def holds(self, location: str) -> bool:
        if is_remote(self.url):
            if not is_remote(location):
                return False
            (scheme, rest), (root_scheme, root_rest) = _split_url(location), _split_url(self.url)
            inside = posixpath.normpath("/" + rest)
            top = posixpath.normpath("/" + root_rest)
            return scheme == root_scheme and (inside + "/").startswith(top.rstrip("/") + "/")
        if is_remote(location):
            return False
        top = self._real_root
        path = local_path(location)
        return os.path.commonpath([os.path.realpath(path), top]) == top  # links followed: where it really is


def local_path(location: str) -> str:
    """A local path or file:// URL as a path."""
    return location[len("file://"):] if location.startswith("file://") else location


def _split_url(url: str) -> tuple[str, str]:
    scheme, rest = url.split("://", 1)
    return scheme.lower(), rest


@dataclass(frozen=True)
class FetchLimits:
    """What one image read may cost - bytes, seconds of silence from a server, and retries - and, for the files
    an annotation file names, where it may read (``root``)."""

    max_bytes: int = DEFAULT_MAX_IMAGE_BYTES
    timeout: float = DEFAULT_IMAGE_TIMEOUT
    retry: Retry = field(default_factory=Retry)
    root: Root | None = None

    def __post_init__(self) -> None:
        if not 0 < self.max_bytes <= MAX_IMAGE_BYTES:
            raise TFRecorderError(f"max_image_bytes={self.max_bytes}: give a size from 1 to {MAX_IMAGE_BYTES} "
                                  f"(1 GiB: a record must stay under protobuf's 2 GiB)")
        if not self.timeout > 0:
            raise TFRecorderError(f"image_timeout={self.timeout}: give a number of seconds above 0")


def is_remote(location: str | None) -> bool:
    """True for URLs fetched through fsspec (gs://, http(s)://, ...); False for local paths and file://."""
    return location is not None and "://" in location and not location.startswith("file://")


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
    ignore_index: int = DEFAULT_IGNORE_INDEX


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
    # convert's keywords that change a byte written, checked, by name (``Options.identity``): a run's identity
    identity: tuple[tuple[str, Any], ...] = ()

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
    checked once (``Options.conversion``): ``convert`` and the Beam transform ``tfrecorder.beam.WriteDataset`` take
    the same keywords and give the same bytes."""

    options: WriteOptions
    fractions: tuple[float, float, float]
    float_precision: str
    num_shards: int | None
    overwrite: bool
    storage_timeout: float


STORAGE_TIMEOUT_HELP = ("gs://: seconds one store operation may take, retries included; then one error, and the same "
                        "command resumes")  # the flag of every command that reads or writes a store


def option(default: Any, help: str | None, *, choices: Sequence[Any] | None = None, check: Any = None,
           identity: bool = False, run: bool = False, other: Any = None, cli: bool = True, flag: str | None = None,
           metavar: str | None = None, cli_type: Any = None, parse: Any = None, usage: str | None = None,
           given: Any = True) -> Any:
    """A field of ``Options``: its default and what the rest of the package derives from it.

    ``help``: the CLI flag's help (its default is added by the CLI unless the text says it); ``choices``: the
    values allowed (the CLI's choices; checked by ``check_choice`` unless ``check`` is given); ``check``: the
    value -> the value checked (a TFRecorderError naming the keyword); ``identity``: it changes a byte written,
    so it is part of a run's identity (a resumed or re-run conversion with another value is refused);
    ``run``: a setting of the pipeline ``convert`` runs, not of the files (``WriteDataset`` refuses it);
    ``other``: a second valid value (for tests); ``cli``: whether the ``convert`` command has a flag for it;
    ``flag``: the flag's name when it is not ``--kebab-name``; ``cli_type``: argparse's ``type``; ``parse`` and
    ``usage``: the flag's text -> the value (a ValueError: "FLAG TEXT: write USAGE"; the flag's default is then
    None: not given); a bool, or a field with ``flag``, is a switch passing ``given``."""
    metadata = dict(help=help, choices=tuple(choices) if choices is not None else None, check=check,
                    identity=identity, run=run, other=other, cli=cli, flag=flag, metavar=metavar,
                    cli_type=cli_type, parse=parse, usage=usage, given=given)
    return field(default=default, metadata=metadata)


def _check_mask_classes(classes: Sequence[str] | None) -> tuple[str, ...] | None:
    if classes is not None and (isinstance(classes, str) or not all(isinstance(c, str) for c in classes)):
        raise TFRecorderError(f"mask_classes={classes!r}: give the class names in id order, e.g. "
                              f"['background', 'person']")
    return tuple(classes) if classes is not None else None


def _check_mask_colors(colors: Mapping[tuple[int, int, int], int] | None) -> tuple[Any, ...] | None:
    if colors is None:
        return None
    try:
        pairs = tuple(sorted((tuple(int(v) for v in color), int(class_id)) for color, class_id in dict(colors).items()))
    except (TypeError, ValueError) as e:
        raise TFRecorderError(f"mask_colors={colors!r}: give {{(r, g, b): class_id, ...}}") from e
    if not all(len(color) == 3 and all(0 <= v <= 255 for v in color) and 0 <= class_id <= 255
               for color, class_id in pairs):
        raise TFRecorderError(f"mask_colors={colors!r}: colours are (r, g, b) of 0-255, class ids 0-255")
    return pairs


def _check_ignore_index(ignore_index: Any) -> int:
    if not isinstance(ignore_index, int) or not 0 <= ignore_index <= 255:
        raise TFRecorderError(f"ignore_index={ignore_index!r}: a class id of 0-255 (masks are stored as uint8)")
    return ignore_index


def _check_quality(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 100:
        raise TFRecorderError(f"jpeg_quality={value!r}: give a whole number from 1 to 100")
    return value


def _image_size_text(text: str) -> tuple[int, int]:
    """``224x160`` as (224, 160); ``224`` as a square, as ``image_size=224`` is."""
    if "x" not in text.lower():
        return int(text), int(text)
    height, width = (int(v) for v in text.lower().split("x"))
    return height, width


@dataclass(frozen=True)
class Options:
    """convert's keywords after ``schema`` - the one list of them: ``convert`` (whose signature and docstring a
    test holds to these fields), ``to_tfr``, ``tfrecorder.beam.WriteDataset`` (all but the ``run`` ones), the
    ``convert`` command's flags (in this order, help from here) and the run identity (the ``identity`` ones)
    are made from it. A new keyword is a new field here (``option`` says what each part of it is for)."""

    runner: str = option(LOCAL, f"{LOCAL}: in this process; {' or '.join(BEAM_RUNNERS)}: an Apache Beam pipeline",
                         choices=RUNNERS, run=True, other="DirectRunner")
    num_shards: int | None = option(None, "shards per split (default: ~128 MiB each)", cli_type=int,
                                    check=lambda v: check_optional_count("num_shards", v, "shards of ~128 MiB"),
                                    identity=True, other=2)
    compression: str | None = option(None, "compress the shards; readers take it from dataset.json, TFDS reads "
                                           "uncompressed shards only (default: none)",
                                     choices=[c for c in COMPRESSIONS if c], check=check_compression,
                                     identity=True, other="gzip")
    image_format: str = option(DEFAULT_IMAGE_FORMAT,
                               "keep: the original encoded bytes; jpeg, png: re-encoded; raw: decoded uint8 pixels",
                               choices=IMAGE_FORMATS, identity=True, other="png")
    image_size: tuple[int, int] | None = option(
        None, "resize to HEIGHTxWIDTH, e.g. 224x224 (default: images stored at their size)", check=check_image_size,
        metavar="HxW", parse=_image_size_text, usage="HEIGHTxWIDTH, e.g. 224x160, or one number for a square",
        identity=True, other=(8, 8))
    resize_mode: str = option(DEFAULT_RESIZE_MODE, "with --image-size: stretch, pad (letterbox) or crop (centre)",
                              choices=RESIZE_MODES, identity=True, other="pad")
    jpeg_quality: int = option(DEFAULT_JPEG_QUALITY, "with --image-format jpeg", cli_type=int, identity=True,
                               check=lambda v: _check_quality(v),
                               other=90)
    max_image_pixels: int = option(DEFAULT_MAX_PIXELS, "larger images are row errors (decompression-bomb guard)",
                                   cli_type=int, check=lambda v: check_count("max_image_pixels", v),
                                   identity=True, other=1_000_000)
    float_precision: str = option(DEFAULT_FLOAT_PRECISION, "auto: float64 only for columns float32 would change; "
                                                           "float32 or float64 always",
                                  choices=FLOAT_PRECISIONS, identity=True, other="float64")
    max_image_bytes: int = option(DEFAULT_MAX_IMAGE_BYTES,
                                  "larger image files are row errors, found without reading them whole",
                                  cli_type=int, check=lambda v: check_count("max_image_bytes", v),
                                  identity=True, other=1_000_000)
    image_timeout: float = option(DEFAULT_IMAGE_TIMEOUT, "seconds one try at reading a remote image may take, "
                                                         f"whole ({DEFAULT_RETRY.attempts} tries, then a row error)",
                                  cli_type=float, check=lambda v: check_number("image_timeout", v, "seconds above 0"),
                                  other=5.0)
    storage_timeout: float = option(DEFAULT_STORAGE_TIMEOUT, STORAGE_TIMEOUT_HELP, cli_type=float,
                                    metavar="SECONDS", check=check_storage_timeout, other=60.0)
    box_units: str = option(DEFAULT_BOX_UNITS, "detection tables: box edges in pixels, normalized, or auto "
                                               "(normalized if all are within [0, 1])",
                            choices=BOX_UNITS, identity=True, other="pixels")
    box_orientation: str = option(DEFAULT_BOX_ORIENTATION, "detection tables: pixel boxes of EXIF-rotated photos "
                                  "refer to the picture displayed or stored (auto: displayed unless width/height "
                                  "columns are the stored size)",
                                  choices=BOX_ORIENTATIONS, identity=True, other="stored")
    record_format: str = option(DEFAULT_RECORD_FORMAT,
                                "tf_object_detection: the TF Object Detection API's keys and label_map.pbtxt",
                                choices=RECORD_FORMATS, identity=True, other="tf_object_detection")
    mask_classes: Sequence[str] | None = option(
        None, "segmentation tables: class names by id, comma-separated (background,person,...) (default: the ids)",
        check=_check_mask_classes, metavar="NAMES", parse=lambda text: text.split(","), identity=True,
        other=("background", "thing"))
    mask_colors: Mapping[tuple[int, int, int], int] | None = option(
        None, None, check=_check_mask_colors, cli=False, identity=True, other={(255, 0, 0): 1})
    ignore_index: int = option(DEFAULT_IGNORE_INDEX, "segmentation tables: the class id of pixels to ignore, and "
                                                     "of a mask's padding",
                               cli_type=int, check=_check_ignore_index, identity=True, other=0)
    validate_images: str = option(DEFAULT_VALIDATE, "full: decode every image once, so a bad image never reaches "
                                                    "training; header: read image headers only (faster)",
                                  choices=VALIDATE_MODES, identity=True, other="header")
    on_error: str = option(DEFAULT_ON_ERROR, "a row that fails (missing or damaged image, unreadable URI): report: "
                                             "listed in errors.csv and the counts; raise: stop with the row, "
                                             "column, URI and cause",
                           choices=ON_ERROR, identity=True, other="raise")
    overwrite: bool = option(False, "replace an earlier conversion in OUTPUT_DIR",
                             check=lambda v: check_switch("overwrite", v), other=True)
    progress: bool | None = option(None, "no progress bar", flag="--no-progress", given=False, run=True,
                                   other=False)
    num_workers: int | None = option(None, "threads fetching images (local runner; all shards written in this "
                                           "process) (default: one per core, more for remote URLs)",
                                     cli_type=int, run=True, other=2)
    split_fractions: Sequence[float] = option(
        splits.DEFAULT_FRACTIONS, "TRAIN,VALIDATION,TEST fractions for rows without a split "
                                  f"(default: {','.join(map(str, splits.DEFAULT_FRACTIONS))})",
        check=splits.check_fractions, metavar="T,V,T", parse=lambda text: tuple(float(v) for v in text.split(",")),
        usage="three numbers, e.g. 0.8,0.1,0.1", identity=True, other=(0.5, 0.25, 0.25))
    project: str | None = option(None, "Google Cloud project (required with DataflowRunner; default: none)",
                                 run=True, other="p")
    region: str | None = option(None, "Google Cloud region (required with DataflowRunner; default: none)",
                                run=True, other="r")
    dataflow_options: Mapping[str, Any] | None = option(None, None, cli=False, run=True,
                                                        other={"machine_type": "n2-standard-4"})
    job_label: str | None = option(None, "label in the Dataflow job name (default: none)", run=True, other="l")
    tfrecorder_wheel: str | None = option(None, "tfrecorder package for Dataflow workers (default: built)",
                                          run=True, other="w.whl")
    wait: bool = option(False, "wait for a Dataflow job to finish", run=True, other=True)
    images_dir: str | None = option(None, "a VOC folder's, COCO file's or AutoML CSV's images: the folder they are "
                                          "in, the only one read from (default: where the format keeps them)",
                                    run=True, other="images")

    def checked(self) -> Options:
        """These options, each checked (a TFRecorderError naming its keyword) and in its one form (tuples,
        numbers): what the run identity is made of."""
        changed = {}
        for f in fields(self):
            value, check, choices = getattr(self, f.name), f.metadata["check"], f.metadata["choices"]
            if check is not None:
                changed[f.name] = check(value)
            elif choices is not None:
                check_choice(f.name, value, choices)
        return replace(self, **changed)

    def identity(self) -> tuple[tuple[str, Any], ...]:
        """(keyword, value) of every option marked ``identity``, in field order (call it on ``checked()``)."""
        return tuple((f.name, getattr(self, f.name)) for f in fields(self) if f.metadata["identity"])

    def conversion(self) -> Conversion:
        """The options checked, as the objects a conversion carries."""
        o = self.checked()
        images = ImageSettings(o.image_format, o.image_size, o.validate_images, o.jpeg_quality, o.max_image_pixels,
                               o.resize_mode)
        options = WriteOptions(images, o.compression, o.on_error, FetchLimits(o.max_image_bytes, o.image_timeout),
                               o.box_units, o.box_orientation, o.record_format,
                               MaskSettings(o.mask_classes, o.mask_colors, o.ignore_index),  # type: ignore[arg-type]
                               identity=o.identity())
        return Conversion(options, o.split_fractions, o.float_precision, o.num_shards,  # type: ignore[arg-type]
                          o.overwrite, o.storage_timeout)

    def beam(self) -> BeamOptions:
        """The Beam and Dataflow settings."""
        return BeamOptions(self.project, self.region, dict(self.dataflow_options or {}), self.job_label,
                           self.tfrecorder_wheel, self.wait)


PIPELINE_SETTINGS = tuple(f.name for f in fields(Options) if f.metadata["run"])  # convert's, not WriteDataset's


def as_schema(schema: Schema | Mapping[str, type[ColumnType]] | None) -> Schema | None:
    """A Schema from a Schema or a ``{column: type}`` dict; None stays None (inferred later)."""
    if schema is None or isinstance(schema, Schema):
        return schema
    return Schema(schema)


class RunDigest:
    """A SHA-256 of tagged values - numpy arrays by their bytes, lists a slice at a time - that starts with the
    version, the table's schema (None: to be inferred) and the options that change a byte written: every field
    of ``Options`` marked ``identity`` (``options.identity``), so a new option is part of it by being one."""

    def __init__(self, schema: Mapping[str, type] | None, options: WriteOptions):
        self._digest = hashlib.sha256()
        self.add("version", __version__)
        self.add("schema", [(name, t.__name__) for name, t in schema.items()] if schema is not None else None)
        self.add("options", options.identity)  # the fetch timeout, runner, progress...: a re-run may use others
        if options.fetch.root is not None:  # which files an annotation file's names may reach
            self.add("root", dataclasses.astuple(options.fetch.root))

    def add(self, tag: str, value: Any) -> None:
        self._digest.update(tag.encode("utf-8"))
        if isinstance(value, np.ndarray):
            self._digest.update(value.dtype.str.encode("ascii") + len(value).to_bytes(8, "little"))
            self._digest.update(np.ascontiguousarray(value).data)
            return
        parts = [value[i:i + 4096] for i in range(0, len(value), 4096)] if isinstance(value, list) else [value]
        for part in parts:  # in slices: a few MiB at a time whatever the table size
            try:
                data = marshal.dumps(part, 4)  # C speed for lists of int/float/bytes/None; parsed by no one
            except ValueError:
                data = repr(part).encode("utf-8")
            self._digest.update(len(data).to_bytes(8, "little") + data)

    def hexdigest(self) -> str:
        return self._digest.hexdigest()
