"""The spill folder's life: a folder in the system's temporary folder (TMPDIR) for one conversion's spill files,
removed on the way out and, after a conversion that was killed, by the next one into the same output folder; a full
disk there named as the temporary folder's."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator

from tfrecorder.dataset.storage import Folder
from tfrecorder.errors import TFRecorderError
from tfrecorder.write.run.lock import process_alive
from tfrecorder.write.sources import Source, TableFiles

logger = logging.getLogger(__name__)

SPILL_PREFIX = "tfrecorder-spill-"
# Spill bytes per source byte (the rows compressed with LZ4): for the messages that say how much room it needs.
SPILL_PER_CSV_BYTE, SPILL_PER_PARQUET_BYTE = 0.5, 2.0


@contextlib.contextmanager
def spill_folder(output_url: str, files: Source, segment_bytes: int = 0) -> Iterator[Folder]:
    """A folder in the system's temporary folder (TMPDIR) for the spill files of the conversion of ``files``
    into ``output_url``, removed on the way out. Its name holds a digest of ``output_url`` and this process's
    id, so the next conversion into the same folder removes what a killed one (SIGKILL, the OOM killer) left.
    A full temporary folder is a TFRecorderError that says how much room the spill needs and how to move it
    (``segment_bytes``: what the local runner may write there beside it, the segments of one shard)."""
    stem = f"{SPILL_PREFIX}{hashlib.sha256(output_url.encode()).hexdigest()[:12]}-"
    _remove_orphans(stem)
    needed = files.bytes * (SPILL_PER_PARQUET_BYTE if files.parquet else SPILL_PER_CSV_BYTE)
    what = "Parquet" if files.parquet else "CSV" if isinstance(files, TableFiles) else "a DataFrame"
    need = (f"the spill files of this conversion: this table ({files.bytes / 2**20:.0f} MiB of {what}) needs about "
            f"{needed / 2**20:.0f} MiB there while it is converted")
    if segment_bytes:
        need += f" (up to {segment_bytes / 2**20:.0f} MiB more for a shard written in segments)"
    with room_in(tempfile.gettempdir(), need):  # a full one may not take even the folder
        path = tempfile.mkdtemp(prefix=f"{stem}{os.getpid()}-")
    folder = Folder.of(path)
    try:
        with room_in(path, need):
            yield folder
    finally:
        shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def room_in(path: str, need: str, resumes: bool = False) -> Iterator[None]:
    """A full disk while writing under ``path`` (in the temporary folder) as a TFRecorderError that names the
    temporary folder, what ``need``s room there, and how to move it: TMPDIR, read once by Python's tempfile
    (or ``tempfile.tempdir``, which a program may set at any time). ``resumes``: shards are being written,
    and a re-run keeps those already in place."""
    try:
        yield
    except OSError as e:
        if e.errno != errno.ENOSPC or (e.filename and not str(e.filename).startswith(path)):
            raise
        kept = ": it keeps the shards already written" if resumes else ""
        raise TFRecorderError(
            f"no space left in the temporary folder {tempfile.gettempdir()} for {need}; set TMPDIR to a folder with "
            f"more room (TMPDIR=/bigger/disk tfrecorder convert ..., or in Python tempfile.tempdir = "
            f"'/bigger/disk' before converting), then run the same conversion again{kept}") from e


def _remove_orphans(stem: str) -> None:
    """Remove the spill folders of earlier conversions into the same output folder whose process is gone."""
    root = tempfile.gettempdir()
    for name in os.listdir(root):
        if not name.startswith(stem):
            continue
        pid = name[len(stem):].split("-", 1)[0]
        if pid.isdigit() and not process_alive(int(pid)):
            logger.info("removing %s, the spill of a conversion that was killed", os.path.join(root, name))
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)
