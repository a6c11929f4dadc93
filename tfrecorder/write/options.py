"""Options: convert's keywords - their choices, defaults, checks and CLI help - and ``option``, what each is for.

``Options`` is the one list of convert's keywords: convert's signature (held to it by a test), ``to_tfr``,
``WriteDataset``, the CLI's flags and a run's identity are made from its fields, so they cannot drift apart.
``Options.conversion`` checks them into the objects a conversion carries (settings.py).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import Field, dataclass, field, fields, replace
from typing import Any

from tfrecorder.arguments import (
    check_choice,
    check_count,
    check_image_size,
    check_number,
    check_optional_count,
    check_switch,
)
from tfrecorder.dataset.connectors.audio import (
    AUDIO_FORMATS,
    DEFAULT_AUDIO_FORMAT,
    DEFAULT_VALIDATE_AUDIO,
    VALIDATE_AUDIO,
)
from tfrecorder.dataset.connectors.tensors import DEFAULT_ENCODING as DEFAULT_TENSOR_ENCODING
from tfrecorder.dataset.connectors.tensors import ENCODINGS as TENSOR_ENCODINGS
from tfrecorder.dataset.features import DEFAULT_IGNORE_INDEX, DEFAULT_RESIZE_MODE, RESIZE_MODES
from tfrecorder.dataset.file_formats import ArrayRecordFormat, checked_format_name, format_names
from tfrecorder.dataset.layouts import DEFAULT_RECORD_FORMAT, RECORD_FORMATS
from tfrecorder.dataset.records import COMPRESSIONS, check_compression
from tfrecorder.dataset.store_requests import DEFAULT_STORAGE_TIMEOUT, check_storage_timeout
from tfrecorder.errors import TFRecorderError
from tfrecorder.schema import Schema
from tfrecorder.types import BEAM_RUNNER_CLASSES, BEAM_RUNNERS, LOCAL, RUNNERS, ColumnType
from tfrecorder.write import splits
from tfrecorder.write.settings import (
    BOX_ORIENTATIONS,
    BOX_UNITS,
    DEFAULT_BOX_ORIENTATION,
    DEFAULT_BOX_UNITS,
    DEFAULT_FILE_FORMAT,
    DEFAULT_FLOAT_PRECISION,
    DEFAULT_IMAGE_FORMAT,
    DEFAULT_IMAGE_TIMEOUT,
    DEFAULT_JPEG_QUALITY,
    DEFAULT_MAX_IMAGE_BYTES,
    DEFAULT_MAX_PIXELS,
    DEFAULT_MODE,
    DEFAULT_NEW_LABELS,
    DEFAULT_ON_ERROR,
    DEFAULT_RETRY,
    DEFAULT_VALIDATE,
    FLOAT_PRECISIONS,
    IMAGE_FORMATS,
    MODES,
    NEW_LABELS,
    ON_ERROR,
    VALIDATE_MODES,
    BeamOptions,
    Conversion,
    FetchLimits,
    ImageSettings,
    MaskSettings,
    RunSettings,
    WriteOptions,
)

STORAGE_TIMEOUT_HELP = ("gs://: seconds one store operation may take, retries included; then one error, and the same "
                        "command resumes")  # the flag of every command that reads or writes a store


def option(default: Any, help: str | None, *, choices: Sequence[Any] | Callable[[], Sequence[Any]] | None = None,
           check: Any = None,
           identity: bool = False, run: bool = False, other: Any = None, cli: bool = True, flag: str | None = None,
           metavar: str | None = None, cli_type: Any = None, parse: Any = None, usage: str | None = None,
           given: Any = True) -> Any:
    """A field of ``Options``: its default and what the rest of the package derives from it.

    ``help``: the CLI flag's help (its default is added by the CLI unless the text says it); ``choices``: the
    values allowed (the CLI's choices; checked by ``check_choice`` unless ``check`` is given), or a function
    giving them when asked (``choices_of``: file formats registered after import count); ``check``: the
    value -> the value checked (a TFRecorderError naming the keyword); ``identity``: it changes a byte written,
    so it is part of a run's identity (a resumed or re-run conversion with another value is refused);
    ``run``: a setting of the pipeline ``convert`` runs, not of the files (``WriteDataset`` refuses it);
    ``other``: a second valid value (for tests); ``cli``: whether the ``convert`` command has a flag for it;
    ``flag``: the flag's name when it is not ``--kebab-name``; ``cli_type``: argparse's ``type``; ``parse`` and
    ``usage``: the flag's text -> the value (a ValueError: "FLAG TEXT: write USAGE"; the flag's default is then
    None: not given); a bool, or a field with ``flag``, is a switch passing ``given``."""
    metadata = dict(help=help, choices=choices if choices is None or callable(choices) else tuple(choices),
                    check=check,
                    identity=identity, run=run, other=other, cli=cli, flag=flag, metavar=metavar,
                    cli_type=cli_type, parse=parse, usage=usage, given=given)
    return field(default=default, metadata=metadata)


def choices_of(option: Field[Any]) -> tuple[Any, ...] | None:
    """The values an ``Options`` field allows now (its ``choices``, a function's called), or None: any."""
    choices = option.metadata["choices"]
    return tuple(choices()) if callable(choices) else choices


def check_runner(runner: Any) -> str:
    """``runner`` as convert runs it: "local", one of BEAM_RUNNERS, or the dotted path of another runner class (a
    class itself is taken as its path); a path to one of BEAM_RUNNERS is its name. A path that does not import
    is a TFRecorderError (``beam_launch.runner_class`` refuses a class that is no Beam runner)."""
    if isinstance(runner, type):  # one of BEAM_RUNNERS (DirectRunner is an alias there), or its path
        home = sys.modules.get(runner.__module__)
        named = [name for name, path in BEAM_RUNNER_CLASSES.items()
                 if path.rpartition(".")[0] == runner.__module__ and getattr(home, path.rpartition(".")[2],
                                                                             None) is runner]
        runner = named[0] if named else f"{runner.__module__}.{runner.__qualname__}"
    if runner in RUNNERS:
        return runner
    known = {path: name for name, path in BEAM_RUNNER_CLASSES.items()}
    if not isinstance(runner, str) or "." not in runner:
        raise TFRecorderError(f"runner={runner!r}: use {LOCAL!r}, one of {', '.join(map(repr, BEAM_RUNNERS))}, or "
                              f"a Beam runner class's dotted path (e.g. "
                              f"'apache_beam.runners.dask.dask_runner.DaskRunner')")
    if runner in known:
        return known[runner]
    module, _, name = runner.rpartition(".")
    try:
        getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as e:
        raise TFRecorderError(f"runner={runner!r}: cannot import it ({e}); install the runner's package, or check "
                              f"the path") from None
    return runner


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

    runner: str = option(LOCAL, f"{LOCAL}: in this process; {', '.join(BEAM_RUNNERS)} or a runner class's dotted "
                                f"path: an Apache Beam pipeline on that runner",
                         check=lambda v: check_runner(v), metavar="RUNNER", run=True, other="DirectRunner")
    num_shards: int | None = option(None, "shards per split (default: ~128 MiB each)", cli_type=int,
                                    check=lambda v: check_optional_count("num_shards", v, "shards of ~128 MiB"),
                                    identity=True, other=2)
    compression: str | None = option(None, "compress the shards; readers take it from dataset.json, TFDS reads "
                                           "uncompressed shards only (default: none)",
                                     choices=[c for c in COMPRESSIONS if c], check=check_compression,
                                     identity=True, other="gzip")
    file_format: str = option(DEFAULT_FILE_FORMAT, "tfrecord: TFRecord shards, each with a .tfindex; array_record: "
                                                   "ArrayRecord files for random access (Grain, tfds.data_source)",
                              choices=format_names, check=checked_format_name, identity=True,
                              other=ArrayRecordFormat.name)
    image_format: str = option(DEFAULT_IMAGE_FORMAT,
                               "keep: the original encoded bytes; jpeg, png: re-encoded; raw: decoded uint8 pixels",
                               choices=IMAGE_FORMATS, identity=True, other="png")
    image_size: tuple[int, int] | None = option(
        None, "resize to HEIGHTxWIDTH, e.g. 224x224 (default: images stored at their size)",  # checked by checked()
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
    tensor_encoding: str = option(DEFAULT_TENSOR_ENCODING, "array columns of a fixed shape: none: their values in "
                                                           "an Example list; bytes: their bytes; zlib: them "
                                                           "compressed (TFDS reads all three)",
                                  choices=TENSOR_ENCODINGS, identity=True, other="zlib")
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
                                "tf_object_detection: the TF Object Detection API's keys and label_map.pbtxt; "
                                "sequence_example: tf.train.SequenceExamples, lists as feature lists",
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
    mask_from_instances: bool = option(False, "detection tables with instance masks: also write the semantic "
                                              "segmentation mask (each object's pixels its label id + 1, 0 "
                                              "background, crowd objects ignore_index)",
                                       check=lambda v: check_switch("mask_from_instances", v), identity=True,
                                       other=True)
    validate_images: str = option(DEFAULT_VALIDATE, "full: decode every image once, so a bad image never reaches "
                                                    "training; header: read image headers only (faster)",
                                  choices=VALIDATE_MODES, identity=True, other="header")
    validate_audio: str = option(DEFAULT_VALIDATE_AUDIO, "audio columns: full: decode every clip once; header: "
                                                         "read clip headers only (faster)",
                                 choices=VALIDATE_AUDIO, identity=True, other="header")
    sample_rate: int | None = option(None, "audio columns: resample every clip to this rate (soxr) (default: "
                                           "each as given)", cli_type=int, identity=True, other=8000,
                                     check=lambda v: check_optional_count("sample_rate", v, "each clip's own"))
    audio_channels: int | None = option(None, "audio columns: 1 downmixes every clip to mono (default: as given)",
                                        cli_type=int, identity=True, other=1,
                                        check=lambda v: check_optional_count("audio_channels", v, "as given"))
    audio_format: str = option(DEFAULT_AUDIO_FORMAT, "audio columns: keep: the original bytes; flac or wav "
                                                     "(16-bit PCM, decoded in the graph): encoded again",
                               choices=AUDIO_FORMATS, identity=True, other="wav")
    video_fps: float | None = option(None, "video columns: keep this many frames a second of each clip (default: "
                                           "every frame)", cli_type=float, identity=True, other=5.0,
                                     check=lambda v: None if v is None else check_number("video_fps", v))
    max_frames: int | None = option(None, "video columns: keep at most this many frames of each clip (default: "
                                          "all)", cli_type=int, identity=True, other=16,
                                    check=lambda v: check_optional_count("max_frames", v, "all"))
    on_error: str = option(DEFAULT_ON_ERROR, "a row that fails (missing or damaged image, unreadable URI): report: "
                                             "listed in errors.csv and the counts; raise: stop with the row, "
                                             "column, URI and cause",
                           choices=ON_ERROR, identity=True, other="raise")
    statistics: bool = option(True, "no statistics.pb (per split and feature, TFDV's format; tfrecorder report "
                                    "computes them when it is absent)",
                              flag="--no-statistics", given=False, check=lambda v: check_switch("statistics", v),
                              other=False)
    overwrite: bool = option(False, "replace an earlier conversion in OUTPUT_DIR",
                             check=lambda v: check_switch("overwrite", v), other=True)
    # not part of the run identity: an append's own identity says it is one (append.append_identity)
    mode: str = option(DEFAULT_MODE, "add the table's rows to the finished dataset in OUTPUT_DIR as a new version "
                                     "(new shards; nothing written is rewritten)",
                       choices=MODES, flag="--append", given=MODES[1], other=MODES[1])
    new_labels: str = option(DEFAULT_NEW_LABELS, "with --append: refuse: a label the dataset lacks is an error; "
                                                 "extend: add it to the vocabulary (no id changes)",
                             choices=NEW_LABELS, other=NEW_LABELS[1])
    progress: bool | None = option(None, "no progress bar", flag="--no-progress", given=False, run=True,
                                   other=False)
    num_workers: int | None = option(None, "threads fetching images (local runner; all shards written in this "
                                           "process) (default: one per core, more for remote URLs)",
                                     cli_type=int, run=True, other=2,
                                     check=lambda v: check_optional_count("num_workers", v, "one per core"))
    split_fractions: Sequence[float] = option(
        splits.DEFAULT_FRACTIONS, "TRAIN,VALIDATION,TEST fractions for rows without a split "
                                  f"(default: {','.join(map(str, splits.DEFAULT_FRACTIONS))})",
        check=splits.check_fractions, metavar="T,V,T", parse=lambda text: tuple(float(v) for v in text.split(",")),
        usage="three numbers, e.g. 0.8,0.1,0.1", identity=True, other=(0.5, 0.25, 0.25))
    project: str | None = option(None, "Google Cloud project (required with DataflowRunner; default: none)",
                                 run=True, other="p")
    region: str | None = option(None, "Google Cloud region (required with DataflowRunner; default: none)",
                                run=True, other="r")
    pipeline_options: Mapping[str, Any] | None = option(None, None, cli=False, run=True,
                                                        other={"machine_type": "n2-standard-4"})
    dataflow_options: Mapping[str, Any] | None = option(None, None, cli=False, run=True,
                                                        other={"machine_type": "n2-standard-4"})  # TFRecorder 2.0's
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
            value, check, choices = getattr(self, f.name), f.metadata["check"], choices_of(f)
            if check is not None:
                changed[f.name] = check(value)
            elif choices is not None:
                check_choice(f.name, value, choices)
        checked = replace(self, **changed)
        # image_size's bound is another keyword's value: checked once that one is
        return replace(checked, image_size=check_image_size(checked.image_size, checked.max_image_pixels,
                                                            "max_image_pixels="))

    def identity(self) -> tuple[tuple[str, Any], ...]:
        """(keyword, value) of every option marked ``identity``, in field order (call it on ``checked()``)."""
        return tuple((f.name, getattr(self, f.name)) for f in fields(self) if f.metadata["identity"])

    def conversion(self) -> Conversion:
        """The options checked, as the objects a conversion carries."""
        checked = self.checked()
        images = ImageSettings(checked.image_format, checked.image_size, checked.validate_images,
                               checked.jpeg_quality, checked.max_image_pixels, checked.resize_mode)
        fetch = FetchLimits(checked.max_image_bytes, checked.image_timeout)
        masks = MaskSettings(checked.mask_classes, checked.mask_colors, checked.ignore_index,  # type: ignore[arg-type]
                             checked.mask_from_instances)
        options = WriteOptions(images, checked.compression, checked.on_error, fetch, checked.box_units,
                               checked.box_orientation, checked.record_format, masks, identity=checked.identity(),
                               file_format=checked.file_format, tensor_encoding=checked.tensor_encoding,
                               statistics=checked.statistics)
        return Conversion(options, checked.split_fractions,  # type: ignore[arg-type]
                          checked.float_precision, checked.num_shards, checked.overwrite, checked.storage_timeout,
                          checked.mode, checked.new_labels)

    def run_settings(self, started: float) -> RunSettings:
        """How the conversion runs, checked: ``started`` is ``time.perf_counter()`` as convert was called."""
        checked = self.checked()
        return RunSettings(checked.runner, started, checked.progress, checked.num_workers,
                           checked.images_dir, self.beam())

    def beam(self) -> BeamOptions:
        """The Beam and Dataflow settings."""
        if self.pipeline_options is not None and self.dataflow_options is not None:
            raise TFRecorderError("pipeline_options= and dataflow_options= (its TFRecorder 2.0 name) are one "
                                  "setting: give one of them")
        given = self.pipeline_options if self.pipeline_options is not None else self.dataflow_options
        if given is not None and not (isinstance(given, Mapping) and all(isinstance(k, str) for k in given)):
            raise TFRecorderError(f"pipeline_options={given!r}: give a dict of Beam pipeline options, e.g. "
                                  f"{{'direct_num_workers': 2}}")
        return BeamOptions(self.project, self.region, dict(given or {}), self.job_label, self.tfrecorder_wheel,
                           self.wait)


PIPELINE_SETTINGS = tuple(f.name for f in fields(Options) if f.metadata["run"])  # convert's, not WriteDataset's


def as_schema(schema: Schema | Mapping[str, type[ColumnType]] | None) -> Schema | None:
    """A Schema from a Schema or a ``{column: type}`` dict; None stays None (inferred later)."""
    if schema is None or isinstance(schema, Schema):
        return schema
    return Schema(schema)
