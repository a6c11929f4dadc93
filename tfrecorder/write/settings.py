"""The frozen objects a conversion carries - image, mask, fetch, write and Beam settings, ``Conversion``,
``RunSettings``, the run's digest - and the choices and defaults they are checked against.

``Options.conversion`` (options.py) makes them from convert's keywords; every stage reads them, none changes them.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import marshal
import os
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tfrecorder._version import __version__
from tfrecorder.arguments import DEFAULT_MAX_PIXELS, check_choice
from tfrecorder.dataset.connectors.tensors import DEFAULT_ENCODING as DEFAULT_TENSOR_ENCODING
from tfrecorder.dataset.features import DEFAULT_IGNORE_INDEX, DEFAULT_RESIZE_MODE, RESIZE_MODES
from tfrecorder.dataset.file_formats import DEFAULT_FILE_FORMAT, checked_format_name, format_named
from tfrecorder.dataset.layouts import DEFAULT_RECORD_FORMAT, LAYOUTS, RECORD_FORMATS, RecordLayout
from tfrecorder.errors import ImageError, TFRecorderError

IMAGE_FORMATS = ("keep", "jpeg", "png", "raw")
VALIDATE_MODES = ("full", "header")
ON_ERROR = ("report", "raise")
# convert's mode: write a new dataset, or add the table's rows to the finished one in output_dir as a new version
# (write/run/append.py); new_labels: what an append does with a label the dataset's vocabulary lacks
MODES = ("create", "append")
NEW_LABELS = ("refuse", "extend")
FLOAT_PRECISIONS = ("auto", "float32", "float64")
DEFAULT_IMAGE_FORMAT = "keep"
DEFAULT_VALIDATE = "full"
DEFAULT_ON_ERROR = "report"
DEFAULT_MODE, APPEND = MODES
DEFAULT_NEW_LABELS, EXTEND_LABELS = NEW_LABELS
DEFAULT_FLOAT_PRECISION = "auto"
DEFAULT_JPEG_QUALITY = 95
# Detection tables: the units of box edges ("auto": normalized when every edge is within [0, 1]), and the
# frame pixel boxes of an EXIF-rotated photo refer to ("auto": as displayed, unless the annotation's own
# width and height are the stored pixels').
BOX_UNITS = ("auto", "pixels", "normalized")
BOX_ORIENTATIONS = ("auto", "displayed", "stored")
DEFAULT_BOX_UNITS = "auto"
DEFAULT_BOX_ORIENTATION = "auto"


# What one image read may cost, and where an annotation file's names may reach (``FetchLimits``).
DEFAULT_MAX_IMAGE_BYTES = 256 * 1024**2  # far above any photo
MAX_IMAGE_BYTES = 1024**3  # the most max_image_bytes may be: one record must stay under protobuf's 2 GiB
DEFAULT_IMAGE_TIMEOUT = 60.0  # seconds a remote image's read may take, each try (and any silence in it)


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
    files, symlinks followed - to a place out of ``url``.

    ``refused``: (image, what is wrong) for each image whose annotation has a bad line (a YOLO label file's class
    outside ``names``, say): the reader keeps the image's rows and names the line here, so the image is a row
    error (``bad_annotation``) where it is fetched, its rows counted in errors.csv, never written without a box."""

    url: str
    named_by: str
    refused: tuple[tuple[str, str], ...] = ()
    listed: tuple[tuple[str, str], ...] = ()  # (image, the list file that names it: a YOLO .txt list)

    def check(self, location: str) -> None:
        """An ImageError ``outside_folder`` naming the location, the annotation file (or list) that names it and
        how to name the root, when ``location`` is outside; ``bad_annotation`` naming the line when its
        annotation is refused."""
        if not self.holds(location):
            named_by = dict(self.listed).get(location, self.named_by)
            raise ImageError("outside_folder", f"{location} is named by {named_by}, outside the dataset's root "
                                               f"{self.url}: give images_dir= the folder that holds the images to "
                                               f"read files from there")
        problem = self._refused.get(location)
        if problem is not None:
            raise ImageError("bad_annotation", problem)

    @functools.cached_property
    def _refused(self) -> dict[str, str]:
        return dict(self.refused)

    @functools.cached_property
    def _real_root(self) -> str:  # once per conversion, not once per image
        return os.path.realpath(local_path(self.url))

    @functools.cached_property
    def _real_folders(self) -> dict[str, str]:
        return {}

    def _real_path(self, path: str) -> str:
        """Where ``path`` really is, links followed: its folder's real path found once a folder (thousands of
        images share a few folders; following every part of every path cost 28 us an image), then the file
        itself followed where it is a link."""
        folder, name = os.path.split(os.path.abspath(path))
        if not name or ".." in path.split(os.sep) or os.path.islink(path):  # a link's ".." is where it leads
            return os.path.realpath(path)
        real = self._real_folders.get(folder)
        if real is None:
            real = self._real_folders.setdefault(folder, os.path.realpath(folder))
        return os.path.join(real, name)

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
        top, real = self._real_root, self._real_path(local_path(location))
        return real == top or real.startswith(top if top.endswith(os.sep) else top + os.sep)  # both normalized


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
    # the table read from a store or URL that names the files (None: a local table, a DataFrame): a remote
    # table never names a file of this machine, as a remote annotation file never does (``Root``)
    remote_table: str | None = None

    def check(self, location: str) -> None:
        """An ImageError ``outside_folder`` where ``location`` is a file ``root`` or ``remote_table`` rules out
        (``bad_annotation`` where its annotation is refused: ``Root.check``)."""
        if self._names_this_machine(location):
            raise ImageError("outside_folder", f"{location} is a file of this machine named by {self.remote_table}, "
                                               f"a table read from a store or URL, which never names one: copy the "
                                               f"table beside its images, or read it into a DataFrame to convert")
        if self.root is not None:
            self.root.check(location)

    def allows(self, location: str) -> bool:
        """Whether ``check`` lets ``location`` be read (without reading it)."""
        return not self._names_this_machine(location) and (self.root is None or self.root.holds(location))

    def _names_this_machine(self, location: str) -> bool:
        """A remote table naming a file of this machine: never read."""
        return self.remote_table is not None and reads_this_machine(location)

    def __post_init__(self) -> None:
        if not 0 < self.max_bytes <= MAX_IMAGE_BYTES:
            raise TFRecorderError(f"max_image_bytes={self.max_bytes}: give a size from 1 to {MAX_IMAGE_BYTES} "
                                  f"(1 GiB: a record must stay under protobuf's 2 GiB)")
        if not self.timeout > 0:
            raise TFRecorderError(f"image_timeout={self.timeout}: give a number of seconds above 0")


def is_remote(location: str | None) -> bool:
    """True for URLs fetched through fsspec (gs://, http(s)://, ...); False for local paths and file://."""
    return location is not None and "://" in location and not location.startswith("file://")


_LOCAL_PROTOCOLS = frozenset({"file", "local"})  # fsspec's names of this machine's file system


def reads_this_machine(location: str) -> bool:
    """Whether fsspec may read ``location`` from this machine's files: a path, ``file://`` or ``local://`` in any
    case, or a chain (``simplecache::file://...``, ``zip://a.png::/x.zip``: a cache or an archive may wrap any
    file system, this machine's too)."""
    if "::" in location or "://" not in location:
        return True
    return location.split("://", 1)[0].lower() in _LOCAL_PROTOCOLS


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
    RGB mask's classes, and the id of pixels to ignore (VOC's 255 border; what a pad fills with); and whether a
    detection table's instance masks also make each record's semantic mask (``mask_from_instances``)."""

    classes: tuple[str, ...] | None = None
    colors: tuple[tuple[tuple[int, int, int], int], ...] | None = None
    ignore_index: int = DEFAULT_IGNORE_INDEX
    from_instances: bool = False


@dataclass(frozen=True)
class KeypointNames:
    """What an annotation file says of a detection table's keypoints (COCO's category ``keypoints`` and
    ``skeleton``): their names in order, and the pairs of them (indices) a skeleton joins. Recorded in
    dataset.json; a table of a number of keypoints other than its names' is refused."""

    names: tuple[str, ...] | None = None
    skeleton: tuple[tuple[int, int], ...] | None = None


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
    keypoints: KeypointNames = field(default_factory=KeypointNames)  # from the annotation file (Annotations)
    # convert's keywords that change a byte written, checked, by name (``Options.identity``): a run's identity
    identity: tuple[tuple[str, Any], ...] = ()
    file_format: str = DEFAULT_FILE_FORMAT  # the shards' files' format (dataset/file_formats): TFRecord, ArrayRecord
    tensor_encoding: str = DEFAULT_TENSOR_ENCODING  # of tensor columns whose type gives none (connectors/tensors)
    statistics: bool = True  # write statistics.pb once dataset.json is written (summary/statistics.py)
    # an append's: the dataset's images by content key (append.KnownContent); a new row holding one is a duplicate
    known_content: Any = field(default=None, compare=False)

    def __post_init__(self) -> None:
        checked_format_name(self.file_format)
        check_choice("on_error", self.on_error, ON_ERROR)
        check_choice("record_format", self.record_format, RECORD_FORMATS)
        check_choice("box_units", self.box_units, BOX_UNITS)
        check_choice("box_orientation", self.box_orientation, BOX_ORIENTATIONS)

    def check_file_format(self) -> None:
        """Refuse a compression the file format cannot be written with (ArrayRecord files: any), checked as a
        conversion starts: each keyword alone is fine."""
        format_named(self.file_format).check_compression(self.compression)

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
    mode: str = DEFAULT_MODE  # MODES: "append" adds a version to the dataset in the output folder
    new_labels: str = DEFAULT_NEW_LABELS  # NEW_LABELS: an append's labels the dataset's vocabulary lacks


@dataclass(frozen=True)
class RunSettings:
    """How one conversion runs rather than what it writes (``Options.run_settings``): the runner's name, when the
    run started (``time.perf_counter()``: the result's seconds count from it), the progress bar, the local runner's
    threads, an annotation file's images folder, and the Beam and Dataflow settings."""

    runner: str
    started: float
    progress: bool | None = None
    num_workers: int | None = None
    images_dir: str | None = None
    beam: BeamOptions = field(default_factory=BeamOptions)


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
