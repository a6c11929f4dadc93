"""CLI: the ``tfrecorder`` command (convert, info, inspect, verify, create-image-csv)."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import re
import signal
import sys
from collections.abc import Iterator, Sequence
from dataclasses import Field, fields
from typing import Any

from tfrecorder._version import __version__
from tfrecorder.dataset.store_requests import StoreUnreachable
from tfrecorder.errors import TFRecorderError
from tfrecorder.types import LOCAL, TRAIN
from tfrecorder.write.options import Options, choices_of

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
    for option in fields(Options):  # every keyword of convert that has a flag, in the list's order
        if option.metadata["cli"]:
            _add_flag(convert, option)

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

    report = commands.add_parser(
        "report", help="write report.html: statistics, samples, errors and leakage of a dataset on one page",
        description="Write one self-contained HTML page (no network) that shows TFRECORD_DIR: its splits, each "
                    "feature's statistics (statistics.pb, or computed in one pass over the shards), a sample of "
                    "pictures per split, errors.csv by code, the leakage report and TRAIN against the others.")
    report.add_argument("tfrecord_dir", help="a dataset folder (ours or others' TFRecords; local path or gs:// URL)")
    report.add_argument("--output", default=None, help="the file to write (default: TFRECORD_DIR/report.html)")
    _storage_timeout(report)

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
    for command in commands.choices.values():  # --verbose after the command too (it was read as a Beam option)
        command.add_argument("--verbose", action="store_true", default=argparse.SUPPRESS,
                             help="log details and show tracebacks on errors")
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


def _flag(option: Field[Any]) -> str:
    return option.metadata["flag"] or "--" + option.name.replace("_", "-")


def as_flags(text: str) -> str:
    """``text`` (a message of the library, which names convert's keywords) as the command's user reads it: a
    switch's ``overwrite=True`` is ``--overwrite``, another keyword's ``num_shards=2`` is ``--num-shards 2``."""
    for option in fields(Options):
        if not option.metadata["cli"] or option.metadata["flag"]:
            continue
        if option.default is False:
            text = re.sub(rf"\b{option.name}=True\b", _flag(option), text)
        else:
            text = re.sub(rf"\b{option.name}=(?=\S)", _flag(option) + " ", text)
            text = re.sub(rf"\b{option.name}=", _flag(option), text)  # "give images_dir= the folder"
    return text


def _add_flag(command: argparse.ArgumentParser, option: Field[Any]) -> None:
    """The flag of one ``Options`` field: its help, choices and default from the field. A switch (a bool, or
    a flag named otherwise, ``--no-progress``) passes the field's ``given``; a flag with a ``parse`` is read
    as text (default None: not given) and parsed by ``_convert``."""
    meta, flag = option.metadata, _flag(option)
    if option.default is False or meta["flag"]:
        command.add_argument(flag, action="store_true", help=meta["help"])
        return
    command.add_argument(flag, default=None if meta["parse"] else option.default, help=meta["help"],
                         choices=choices_of(option), type=meta["cli_type"], metavar=meta["metavar"])


def _storage_timeout(command: argparse.ArgumentParser) -> None:
    _add_flag(command, next(f for f in fields(Options) if f.name == "storage_timeout"))


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


def _option_value(args: argparse.Namespace, option: Field[Any]) -> Any:
    """The value of ``option``'s flag as convert takes it; ``_NOT_GIVEN`` where its default stands."""
    meta = option.metadata
    value = getattr(args, _flag(option)[2:].replace("-", "_"))
    if option.default is False or meta["flag"]:
        return meta["given"] if value else _NOT_GIVEN
    if meta["parse"] is None:
        return value
    if value is None:
        return _NOT_GIVEN
    try:
        return meta["parse"](value)
    except ValueError as e:
        raise TFRecorderError(f"{_flag(option)} {value!r}: write {meta['usage']}") from e


_NOT_GIVEN = object()


def _convert(args: argparse.Namespace, extra: Sequence[str]) -> None:
    from tfrecorder.write.convert import convert

    beam_options = pipeline_flags(extra)
    if beam_options and args.runner == LOCAL:
        raise TFRecorderError(f"unrecognized arguments {' '.join(extra)} (pipeline options need a Beam --runner)")
    given = {option.name: _option_value(args, option) for option in fields(Options) if option.metadata["cli"]}
    result = convert(args.source, args.output_dir, pipeline_options=beam_options or None,
                     **{name: value for name, value in given.items() if value is not _NOT_GIVEN})
    print(as_flags(str(result)))  # a reused conversion's table says so above it


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
    elif args.command == "report":
        from tfrecorder.summary.page import report as write_report

        print(f"wrote {write_report(args.tfrecord_dir, args.output, args.storage_timeout)}")
    elif args.command == "verify":
        from tfrecorder.read.verify import verify

        report = verify(args.tfrecord_dir, images=args.images, storage_timeout=args.storage_timeout)
        print(report)
        return 0 if report.ok else 1
    elif args.command == "create-image-csv":
        from tfrecorder.write.sources import create_image_csv, skipped_files, skipped_note

        df = create_image_csv(args.image_dir, args.output_csv)
        print(f"wrote {len(df)} rows to {args.output_csv}")
        skipped = skipped_files(args.image_dir)  # every file of the folder a row or named, as convert names them
        if skipped:
            print(f"warning: {skipped_note(args.image_dir, skipped)}", file=sys.stderr)
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
    except BrokenPipeError:  # the reader went away (`tfrecorder info out/ | head`): stop quietly, as cat does
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit's flush
        return 128 + signal.SIGPIPE
    except (TFRecorderError, OSError, StoreUnreachable) as e:
        if args.verbose:
            raise
        stopped = _interruption(e)
        if stopped is not None:  # an error of the clean-up after Ctrl-C or SIGTERM (a call it interrupted)
            logger.debug("while stopping: %s", e)
            return _stopped(args, stopped)
        message = as_flags(" ".join(str(e).split())) or type(e).__name__
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
