"""CLI: the ``tfrecorder`` command (convert, info, inspect, verify, create-image-csv)."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import signal
import sys
from collections.abc import Iterator, Sequence
from typing import Any

from tfrecorder._version import __version__
from tfrecorder.dataset.features import DEFAULT_RECORD_FORMAT, DEFAULT_RESIZE_MODE, RECORD_FORMATS, RESIZE_MODES
from tfrecorder.dataset.records import COMPRESSIONS
from tfrecorder.dataset.storage import DEFAULT_STORAGE_TIMEOUT, StoreUnreachable
from tfrecorder.errors import TFRecorderError
from tfrecorder.types import TRAIN
from tfrecorder.write.options import (
    BEAM_RUNNERS,
    BOX_ORIENTATIONS,
    BOX_UNITS,
    DEFAULT_BOX_ORIENTATION,
    DEFAULT_BOX_UNITS,
    DEFAULT_FLOAT_PRECISION,
    DEFAULT_IGNORE_INDEX,
    DEFAULT_IMAGE_FORMAT,
    DEFAULT_IMAGE_TIMEOUT,
    DEFAULT_JPEG_QUALITY,
    DEFAULT_MAX_IMAGE_BYTES,
    DEFAULT_MAX_PIXELS,
    DEFAULT_ON_ERROR,
    DEFAULT_VALIDATE,
    FLOAT_PRECISIONS,
    IMAGE_FORMATS,
    LOCAL,
    ON_ERROR,
    RUNNERS,
    VALIDATE_MODES,
)
from tfrecorder.write.splits import DEFAULT_FRACTIONS

logger = logging.getLogger(__name__)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tfrecorder", description="Tables of images and labels to TFRecord shards, and back.",
        formatter_class=DefaultsShown)
    parser.add_argument("--verbose", action="store_true", help="log details and show tracebacks on errors")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)

    convert = commands.add_parser(
        "convert", help="convert a CSV, Parquet, image folder or table into TFRecord shards",
        description="Convert SOURCE into TFRecord shards, dataset.json and errors.csv in OUTPUT_DIR. "
                    "Any other --flag=value is passed to Apache Beam as a pipeline option.")
    convert.add_argument("source", help="CSV or Parquet path/URL, a glob of them (quote it), or an image folder")
    convert.add_argument("output_dir", help="folder to write into (local path or gs:// URL)")
    convert.add_argument("--runner", default=LOCAL, choices=RUNNERS,
                         help=f"{LOCAL}: in this process; {' or '.join(BEAM_RUNNERS)}: an Apache Beam pipeline")
    convert.add_argument("--num-shards", type=int, default=None, help="shards per split (default: ~128 MiB each)")
    convert.add_argument("--compression", default=None, choices=[c for c in COMPRESSIONS if c],
                         help="compress the shards; readers take it from dataset.json, TFDS reads uncompressed "
                              "shards only (default: none)")
    convert.add_argument("--image-format", default=DEFAULT_IMAGE_FORMAT, choices=IMAGE_FORMATS,
                         help="keep: the original encoded bytes; jpeg, png: re-encoded; raw: decoded uint8 pixels")
    convert.add_argument("--image-size", default=None, metavar="HxW",
                         help="resize to HEIGHTxWIDTH, e.g. 224x224 (default: images stored at their size)")
    convert.add_argument("--jpeg-quality", type=int, default=DEFAULT_JPEG_QUALITY, help="with --image-format jpeg")
    convert.add_argument("--resize-mode", default=DEFAULT_RESIZE_MODE, choices=RESIZE_MODES,
                         help="with --image-size: stretch, pad (letterbox) or crop (centre)")
    convert.add_argument("--max-image-pixels", type=int, default=DEFAULT_MAX_PIXELS,
                         help="larger images are row errors (decompression-bomb guard)")
    convert.add_argument("--float-precision", default=DEFAULT_FLOAT_PRECISION, choices=FLOAT_PRECISIONS,
                         help="auto: float64 only for columns float32 would change; float32 or float64 always")
    convert.add_argument("--max-image-bytes", type=int, default=DEFAULT_MAX_IMAGE_BYTES,
                         help="larger image files are row errors, found without reading them whole")
    convert.add_argument("--image-timeout", type=float, default=DEFAULT_IMAGE_TIMEOUT,
                         help="seconds one try at reading a remote image may take, whole (4 tries, then a row error)")
    _storage_timeout(convert)
    convert.add_argument("--box-units", default=DEFAULT_BOX_UNITS, choices=BOX_UNITS,
                         help="detection tables: box edges in pixels, normalized, or auto "
                              "(normalized if all are within [0, 1])")
    convert.add_argument("--box-orientation", default=DEFAULT_BOX_ORIENTATION, choices=BOX_ORIENTATIONS,
                         help="detection tables: pixel boxes of EXIF-rotated photos refer to the picture displayed "
                              "or stored (auto: displayed unless width/height columns are the stored size)")
    convert.add_argument("--record-format", default=DEFAULT_RECORD_FORMAT, choices=RECORD_FORMATS,
                         help="tf_object_detection: the TF Object Detection API's keys and label_map.pbtxt")
    convert.add_argument("--mask-classes", default=None, type=lambda text: text.split(","), metavar="NAMES",
                         help="segmentation tables: class names by id, comma-separated (background,person,...) "
                              "(default: the ids)")
    convert.add_argument("--ignore-index", type=int, default=DEFAULT_IGNORE_INDEX,
                         help="segmentation tables: the class id of pixels to ignore, and of a mask's padding")
    convert.add_argument("--validate-images", default=DEFAULT_VALIDATE, choices=VALIDATE_MODES,
                         help="full: decode every image once, so a bad image never reaches training; "
                              "header: read image headers only (faster)")
    convert.add_argument("--on-error", default=DEFAULT_ON_ERROR, choices=ON_ERROR,
                         help="a row that fails (missing or damaged image, unreadable URI): report: listed in "
                              "errors.csv and the counts; raise: stop with the row, column, URI and cause")
    convert.add_argument("--split-fractions", default=None, metavar="T,V,T",
                         help="TRAIN,VALIDATION,TEST fractions for rows without a split "
                              f"(default: {','.join(map(str, DEFAULT_FRACTIONS))})")
    convert.add_argument("--overwrite", action="store_true", help="replace an earlier conversion in OUTPUT_DIR")
    convert.add_argument("--num-workers", type=int, default=None,
                         help="threads fetching images (local runner; all shards written in this process) "
                              "(default: one per core, more for remote URLs)")
    convert.add_argument("--no-progress", action="store_true", help="no progress bar")
    convert.add_argument("--project", help="Google Cloud project (required with DataflowRunner; default: none)")
    convert.add_argument("--region", help="Google Cloud region (required with DataflowRunner; default: none)")
    convert.add_argument("--job-label", help="label in the Dataflow job name (default: none)")
    convert.add_argument("--tfrecorder-wheel", help="tfrecorder package for Dataflow workers (default: built)")
    convert.add_argument("--wait", action="store_true", help="wait for a Dataflow job to finish")

    info = commands.add_parser("info", help="splits, counts, bytes, schema and labels of a dataset")
    info.add_argument("tfrecord_dir", help="a folder tfrecorder wrote (local path or gs:// URL)")
    _storage_timeout(info)

    inspect = commands.add_parser("inspect", help="write sample images and a CSV of records to look at")
    inspect.add_argument("tfrecord_dir", help="a folder tfrecorder wrote (local path or gs:// URL)")
    inspect.add_argument("--split", default=TRAIN, help="the split to look at")
    inspect.add_argument("--num-records", type=int, default=1, help="its first records written out")
    inspect.add_argument("--output-dir", default=None,
                         help="the folder to write (an earlier inspect's files in it are replaced, nothing else) "
                              "(default: ./inspect-<dataset folder>-<split>)")
    _storage_timeout(inspect)

    verify = commands.add_parser(
        "verify", help="check every record's CRCs, the counts and checksums against dataset.json",
        description="Read every shard of TFRECORD_DIR and check record CRCs, record counts, file checksums and "
                    "that every record parses with the dataset.json spec. Exit status 1 on any problem.")
    verify.add_argument("tfrecord_dir", help="a folder tfrecorder wrote (local path or gs:// URL)")
    verify.add_argument("--images", action="store_true",
                        help="also decode every image (slower; finds images damaged since, or only header-checked)")
    _storage_timeout(verify)

    csv = commands.add_parser("create-image-csv", help="write the CSV table of an image folder")
    csv.add_argument("image_dir", help="<dir>/<SPLIT>/<label>/<file> or <dir>/<label>/<file>")
    csv.add_argument("output_csv", help="the CSV file to write: split,image_uri,label")
    return parser


class DefaultsShown(argparse.HelpFormatter):
    """Each flag's help ends with its default, read from the flag (the library's constant, never retyped), unless
    it says its default in words; a switch (off unless given) shows none."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if not action.option_strings or "default" in text or action.default in (None, False, argparse.SUPPRESS):
            return text
        return f"{text} (default: %(default)s)"


class _Parser(argparse.ArgumentParser):
    """A command's parser: its flags' help shows their defaults, as the top parser's does."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", DefaultsShown)
        super().__init__(*args, **kwargs)


def _storage_timeout(command: argparse.ArgumentParser) -> None:
    command.add_argument("--storage-timeout", type=float, default=DEFAULT_STORAGE_TIMEOUT, metavar="SECONDS",
                         help="gs://: seconds one store operation may take, retries included; then one error, "
                              "and the same command resumes")


# Libraries whose own logs (retries, tracebacks of requests given up on, a Beam worker's failure) would bury the
# one line the command prints about the error; shown with --verbose.
_CHATTY_LOGGERS = ("gcsfs", "aiohttp", "fsspec", "asyncio", "google", "apache_beam")


def pipeline_flags(flags: Sequence[str]) -> dict[str, Any]:
    """``--max_num_workers=20 --use-public-ips=false --flag`` -> Beam pipeline options by name."""
    options: dict[str, Any] = {}
    items = list(flags)
    while items:
        flag = items.pop(0)
        if not flag.startswith("--") or len(flag) < 3:
            raise TFRecorderError(f"unexpected argument {flag!r}")
        name, sep, value = flag[2:].partition("=")
        if not sep:
            value = items.pop(0) if items and not items[0].startswith("--") else "true"
        options[name.replace("-", "_")] = _value(value)
    return options


def _value(text: str) -> Any:
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    try:
        return int(text)
    except ValueError:
        return text


def _image_size(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    try:
        height, width = (int(v) for v in text.lower().split("x"))
    except ValueError as e:
        raise TFRecorderError(f"--image-size {text!r}: write HEIGHTxWIDTH, e.g. 224x224") from e
    return height, width


def _fractions(text: str | None) -> tuple[float, ...] | None:
    if text is None:
        return None
    try:
        return tuple(float(v) for v in text.split(","))
    except ValueError as e:
        raise TFRecorderError(f"--split-fractions {text!r}: write three numbers, e.g. 0.8,0.1,0.1") from e


def _convert(args: argparse.Namespace, extra: Sequence[str]) -> None:
    from tfrecorder.write.convert import convert

    beam_options = pipeline_flags(extra)
    if beam_options and args.runner not in BEAM_RUNNERS:
        raise TFRecorderError(f"unrecognized arguments {' '.join(extra)} (pipeline options need a Beam --runner)")
    fractions = _fractions(args.split_fractions)
    result = convert(
        args.source, args.output_dir, runner=args.runner, num_shards=args.num_shards, compression=args.compression,
        image_format=args.image_format, image_size=_image_size(args.image_size), jpeg_quality=args.jpeg_quality,
        resize_mode=args.resize_mode, max_image_pixels=args.max_image_pixels,
        max_image_bytes=args.max_image_bytes, image_timeout=args.image_timeout, float_precision=args.float_precision,
        storage_timeout=args.storage_timeout, box_units=args.box_units, box_orientation=args.box_orientation,
        record_format=args.record_format, mask_classes=args.mask_classes, ignore_index=args.ignore_index,
        validate_images=args.validate_images, on_error=args.on_error,
        overwrite=args.overwrite,
        progress=False if args.no_progress else None, num_workers=args.num_workers,
        project=args.project, region=args.region, job_label=args.job_label, tfrecorder_wheel=args.tfrecorder_wheel,
        wait=args.wait, dataflow_options=beam_options or None,
        **({"split_fractions": fractions} if fractions else {}),  # type: ignore[arg-type]
    )
    print(result)  # a reused conversion's table says so above it


def _info(args: argparse.Namespace) -> None:
    from tfrecorder.read.info import info

    print(json.dumps(info(args.tfrecord_dir, storage_timeout=args.storage_timeout).summary(), indent=2))


def _inspect(args: argparse.Namespace) -> None:
    from tfrecorder.read.inspect import default_folder, write_samples

    folder = args.output_dir or default_folder(args.tfrecord_dir, args.split)
    folder, written = write_samples(args.tfrecord_dir, args.split, args.num_records, folder, args.storage_timeout)
    print(f"wrote {written} record(s) of {args.split.strip().upper()} to {os.path.abspath(folder)}"
          f"{os.sep} (images and data.csv)")


def _run(args: argparse.Namespace, extra: Sequence[str]) -> int:
    if args.command != "convert" and extra:
        raise TFRecorderError(f"unrecognized arguments: {' '.join(extra)}")
    if args.command == "convert":
        _convert(args, extra)
    elif args.command == "info":
        _info(args)
    elif args.command == "inspect":
        _inspect(args)
    elif args.command == "verify":
        from tfrecorder.read.verify import verify

        report = verify(args.tfrecord_dir, images=args.images, storage_timeout=args.storage_timeout)
        print(report)
        return 0 if report.ok else 1
    elif args.command == "create-image-csv":
        from tfrecorder.write.sources import create_image_csv

        df = create_image_csv(args.image_dir, args.output_csv)
        print(f"wrote {len(df)} rows to {args.output_csv}")
    return 0


@contextlib.contextmanager
def native_stderr_silenced() -> Iterator[None]:
    """Send what C and C++ libraries write to file descriptor 2 - TensorFlow's start-up lines (CUDA stubs,
    cuInit, CPU features) - to /dev/null, while Python's ``sys.stderr`` (our messages, progress bars,
    warnings, logging) still reaches the terminal.

    For programs of ours (the command, the demo): the library never redirects a user's process.
    """
    sys.stderr.flush()
    real = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    os.close(devnull)
    python_stderr = sys.stderr
    sys.stderr = os.fdopen(os.dup(real), "w", buffering=1, encoding=python_stderr.encoding or "utf-8",
                           errors="backslashreplace")
    try:
        yield
    finally:
        sys.stderr.flush()
        sys.stderr.close()
        sys.stderr = python_stderr
        os.dup2(real, 2)
        os.close(real)


class Terminated(KeyboardInterrupt):
    """SIGTERM (kill, systemd, Kubernetes, batch schedulers), stopping the command as Ctrl-C does: the same
    clean-up (spill files, forked writers, the lock) and one line saying how to resume."""


def _terminate(signum: int, frame: Any) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # one stop: a second SIGTERM does not cut the clean-up short
    raise Terminated


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """While the command runs, SIGTERM raises Terminated (unless this process was started with it ignored)."""
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return
    signal.signal(signal.SIGTERM, _terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``tfrecorder`` command; returns the exit status."""
    args, extra = _parser().parse_known_args(argv)
    with sigterm_as_interrupt():
        if args.verbose:  # everything, TensorFlow's own lines included
            logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
            return _main(args, extra)
        for name in _CHATTY_LOGGERS:
            logging.getLogger(name).setLevel(logging.CRITICAL)
        with native_stderr_silenced():
            return _main(args, extra)


def _main(args: argparse.Namespace, extra: Sequence[str]) -> int:
    try:
        return _run(args, extra)
    except (TFRecorderError, OSError, StoreUnreachable) as e:
        if args.verbose:
            raise
        stopped = _interruption(e)
        if stopped is not None:  # an error of the clean-up after Ctrl-C or SIGTERM (a call it interrupted)
            logger.debug("while stopping: %s", e)
            return _stopped(args, stopped)
        message = " ".join(str(e).split()) or type(e).__name__
        print(f"tfrecorder: error: {message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as e:
        if args.verbose:
            raise
        return _stopped(args, e)


def _interruption(error: BaseException) -> KeyboardInterrupt | None:
    """The Ctrl-C or SIGTERM that ``error`` was raised while handling, if any."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, KeyboardInterrupt):
            return seen
        seen = seen.__context__
    return None


def _stopped(args: argparse.Namespace, e: KeyboardInterrupt) -> int:
    again = ": run the same command again to resume where it stopped" if args.command == "convert" else ""
    terminated = isinstance(e, Terminated)
    print(f"tfrecorder: {'stopped by SIGTERM' if terminated else 'interrupted'}{again}", file=sys.stderr)
    return 143 if terminated else 130  # the shell's codes for SIGTERM and Ctrl-C


if __name__ == "__main__":
    sys.exit(main())
