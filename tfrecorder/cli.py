"""CLI: the ``tfrecorder`` command (convert, info, create-image-csv)."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence

from tfrecorder.errors import TFRecorderError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tfrecorder", description="Tables of images and labels to TFRecords.")
    parser.add_argument("--verbose", action="store_true", help="log details and show tracebacks")
    commands = parser.add_subparsers(dest="command", required=True)

    convert = commands.add_parser("convert", help="convert a CSV, image folder or table into TFRecord shards")
    convert.add_argument("source", help="CSV path/URL (header optional) or image folder")
    convert.add_argument("output_dir", help="folder to write shards, dataset.json and errors.csv into")
    convert.add_argument("--runner", default="local", choices=("local", "DirectRunner", "DataflowRunner"))
    convert.add_argument("--num-shards", type=int, default=None, help="shards per split (default: by size)")
    convert.add_argument("--compression", default=None, choices=("gzip", "zlib"))
    convert.add_argument("--image-format", default="keep", choices=("keep", "jpeg", "png", "raw"))
    convert.add_argument("--image-size", default=None, help="HEIGHTxWIDTH to resize to, e.g. 224x224")
    convert.add_argument("--validate-images", default="full", choices=("full", "header"))
    convert.add_argument("--on-error", default="report", choices=("report", "raise"))
    convert.add_argument("--overwrite", action="store_true", help="replace an earlier conversion in OUTPUT_DIR")
    convert.add_argument("--no-progress", action="store_true", help="no progress bar")

    info = commands.add_parser("info", help="splits, counts, bytes and schema of a dataset")
    info.add_argument("tfrecord_dir")

    csv = commands.add_parser("create-image-csv", help="write the CSV table of an image folder")
    csv.add_argument("image_dir")
    csv.add_argument("output_csv")
    return parser


def _image_size(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    try:
        height, width = (int(v) for v in text.lower().split("x"))
    except ValueError as e:
        raise TFRecorderError(f"--image-size {text!r}: write HEIGHTxWIDTH, e.g. 224x224") from e
    return height, width


def _run(args: argparse.Namespace) -> int:
    if args.command == "convert":
        from tfrecorder.converter import convert

        result = convert(
            args.source, args.output_dir, runner=args.runner, num_shards=args.num_shards,
            compression=args.compression, image_format=args.image_format, image_size=_image_size(args.image_size),
            validate_images=args.validate_images, on_error=args.on_error, overwrite=args.overwrite,
            progress=False if args.no_progress else None,
        )
        print(result)
    elif args.command == "info":
        from tfrecorder.reader import read_manifest

        manifest = read_manifest(args.tfrecord_dir)
        summary = {
            "splits": {k: {"records": manifest.records(k), "shards": len(v), "bytes": sum(s.bytes for s in v)}
                       for k, v in manifest.splits.items()},
            "rows": {k: vars(v) for k, v in manifest.rows.items()},
            "features": {f.name: f"{f.dtype}{'[]' if f.shape == [None] else ''}" for f in manifest.features},
            "labels": manifest.vocabulary,
        }
        print(json.dumps(summary, indent=2))
    elif args.command == "create-image-csv":
        from tfrecorder.sources import create_image_csv

        df = create_image_csv(args.image_dir, args.output_csv)
        print(f"wrote {len(df)} rows to {args.output_csv}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``tfrecorder`` command; returns the exit status."""
    args = _parser().parse_args(argv)
    if args.verbose:
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        return _run(args)
    except (TFRecorderError, OSError) as e:
        if args.verbose:
            raise
        print(f"tfrecorder: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
