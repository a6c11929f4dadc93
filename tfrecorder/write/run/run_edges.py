"""A started run's edges, the same whatever runner writes it: its lock released however it ends (``releasing_lock``), a
full disk named as an error that says what to do (``full_disk_as_error``), and its result completed - a finished
conversion's given back (``reused``), what reading the source said added (``add_read_notes``)."""

from __future__ import annotations

import contextlib
import errno
import logging
from collections.abc import Iterator
from dataclasses import replace

from tfrecorder.dataset.manifest import Manifest
from tfrecorder.dataset.storage import Folder
from tfrecorder.errors import TFRecorderError
from tfrecorder.schema import Schema
from tfrecorder.write.run.finish import convert_result
from tfrecorder.write.run.result import ConvertResult, reused_note
from tfrecorder.write.run.resume import Run
from tfrecorder.write.sources import ReadNotes, Source, left_out_note, plain_images_note

logger = logging.getLogger(__name__)


def reused(folder: Folder, manifest: Manifest, runner: str) -> ConvertResult:
    """The result of the same conversion, finished in ``folder`` earlier, rebuilt from its dataset.json (no
    timings: ``seconds`` 0; no Beam job or counters), and the one line that says so, logged."""
    logger.info("%s", reused_note(folder.url))
    return replace(convert_result(folder, manifest, 0.0, runner), reused=True)


def add_read_notes(result: ConvertResult, read: Source | ReadNotes,
            schema: Schema | None = None) -> ConvertResult:
    """``result`` with what its source says of how it was read (a CSV's separator, an image folder's files that
    are not rows, the columns a given ``schema`` leaves out, a DataFrame's images under another name than
    ``image``): in its warnings, and the skipped files in ``skipped``. ``read``: the local runner's source, or
    what a Beam runner's submitting process found."""
    notes = (left_out_note(read.columns, schema), plain_images_note(getattr(read, "plain_images", ()), schema))
    warnings = read.warnings + tuple(note for note in notes if note)
    for warning in warnings:
        logger.warning("%s", warning)
    return replace(result, warnings=warnings + result.warnings, skipped=read.skipped)


@contextlib.contextmanager
def releasing_lock(run: Run) -> Iterator[None]:
    """Release the run's lock on the way out, however the conversion ends."""
    try:
        yield
    finally:
        run.lock.release()


@contextlib.contextmanager
def full_disk_as_error(folder: Folder) -> Iterator[None]:
    """A full disk as an error that says what to do (a re-run keeps the shards already written)."""
    try:
        yield
    except OSError as e:
        if e.errno != errno.ENOSPC:
            raise
        raise TFRecorderError(
            f"no space left on the device writing {e.filename or folder.url}: free some space (or move "
            f"output_dir), then run the same conversion again: it keeps the shards already written") from e
