"""Run state (IO edge): the lock, input fingerprint and finished-shard records that make a conversion resumable.

While a conversion runs, ``output_dir/.tfrecorder/`` holds:

- ``lock.json``: who is converting (host, pid, user, start time); a second conversion into
  the folder is refused while it is held; a lock left by a dead process on this machine is
  stale and broken (with a warning).
- ``run.json``: the fingerprint of the validated input table, the settings and the shard plan.
- ``done/<shard>.json``: per finished shard, its record count, size and CRC-32C, and the rows
  it could not write (errors.csv lines) - everything the last step needs, so a re-run can
  skip the shard after checking the file still has that size and checksum.

The folder is removed once ``dataset.json`` is written. Nothing here is pickled or
evaluated: the files are JSON, read as data.
"""

from __future__ import annotations

import dataclasses
import getpass
import hashlib
import json
import logging
import marshal
import os
import socket
import time
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import google_crc32c
import numpy as np

from tfrecorder import __version__
from tfrecorder.errors import TFRecorderError
from tfrecorder.manifest import MANIFEST_NAME
from tfrecorder.plan import ShardSpec
from tfrecorder.storage import STATE_DIR, Folder
from tfrecorder.validate import Table
from tfrecorder.writers import ImageStats, RowFailure, ShardResult, WriteOptions

logger = logging.getLogger(__name__)

LOCK_NAME = f"{STATE_DIR}/lock.json"
RUN_NAME = f"{STATE_DIR}/run.json"
DONE_DIR = f"{STATE_DIR}/done"
_CHUNK = 1 << 22


class OutputLocked(TFRecorderError):
    """Another conversion is writing into the same output_dir."""


def fingerprint(table: Table, plan: Sequence[ShardSpec], options: WriteOptions) -> str:
    """SHA-256 of everything that decides the bytes written: the validated table, settings, plan, version.

    Image files are named by their URIs, not hashed: a file changed between a crash and the
    re-run is not noticed (its shard is rewritten only if it was not finished).
    """
    digest = hashlib.sha256()

    def add(tag: str, value: Any) -> None:
        digest.update(tag.encode("utf-8"))
        if isinstance(value, np.ndarray):
            digest.update(value.dtype.str.encode("ascii") + len(value).to_bytes(8, "little"))
            digest.update(np.ascontiguousarray(value).data)
            return
        parts = [value[i:i + 4096] for i in range(0, len(value), 4096)] if isinstance(value, list) else [value]
        for part in parts:  # in slices: a few MiB at a time whatever the table size
            try:
                data = marshal.dumps(part, 4)  # C speed for lists of int/float/bytes/None; parsed by no one
            except ValueError:
                data = repr(part).encode("utf-8")
            digest.update(len(data).to_bytes(8, "little") + data)

    add("version", __version__)
    add("schema", [(name, t.__name__) for name, t in table.schema.items()])
    add("options", (dataclasses.astuple(options.images), options.compression, options.on_error))
    add("plan", [(s.filename, s.rows) for s in plan])
    add("splits", table.splits)
    add("image_uris", table.image_uris)
    add("image_locations", table.image_locations)
    add("vocabulary", table.vocabulary)
    for column in table.columns:
        add("column", (column.name, column.feature, column.type.__name__, column.nullable, column.source))
        add("values", column.values)
    return digest.hexdigest()


# ---------------------------------------------------------------------------------------------- lock


@dataclass(frozen=True)
class LockInfo:
    """The owner of a lock, as written in lock.json."""

    host: str
    pid: int
    user: str
    started: str
    runner: str
    process_start: str | None = None  # /proc start time, to tell a reused pid from the owner
    job: str | None = None

    @classmethod
    def mine(cls, runner: str) -> LockInfo:
        return cls(socket.gethostname(), os.getpid(), _user(), time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                   runner, _process_start(os.getpid()))

    def describe(self) -> str:
        job = f", Dataflow job {self.job}" if self.job else ""
        return f"{self.user} on {self.host} (pid {self.pid}, {self.runner}{job}) since {self.started}"

    def is_stale(self) -> bool:
        """True when the owner was a process on this machine that no longer runs."""
        if self.job or self.host != socket.gethostname():
            return False  # a Dataflow job, or another machine: only a person can tell
        if not _alive(self.pid):
            return True
        return self.process_start is not None and _process_start(self.pid) not in (None, self.process_start)


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _process_start(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode("ascii", "replace")
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else None


class Lock:
    """The output folder's lock: taken before anything is written, released when the run ends."""

    def __init__(self, folder: Folder, info: LockInfo):
        self.folder = folder
        self.info = info
        self.held = True

    @classmethod
    def acquire(cls, folder: Folder, runner: str) -> Lock:
        """Take the lock, breaking a stale one; OutputLocked if a live conversion holds it."""
        info = LockInfo.mine(runner)
        folder.fs.makedirs(folder.join(STATE_DIR), exist_ok=True)
        for _ in range(2):
            if _create_exclusive(folder, LOCK_NAME, json.dumps(dataclasses.asdict(info), indent=2)):
                return cls(folder, info)
            owner = read_lock(folder)
            if owner is None or owner.is_stale():
                logger.warning("%s: breaking a stale lock left by %s", folder.url,
                               owner.describe() if owner else "an unreadable lock file")
                folder.fs.rm(folder.join(LOCK_NAME))
                continue
            raise OutputLocked(
                f"output_dir {folder.url!r} is being written by another conversion: {owner.describe()}. "
                f"Wait for it to finish; if it is no longer running, delete {folder.url_of(LOCK_NAME)}"
            )
        raise OutputLocked(f"output_dir {folder.url!r}: could not take the lock {folder.url_of(LOCK_NAME)}")

    def hand_to_job(self, job: str) -> None:
        """The lock now belongs to a pipeline that outlives this process; its last step removes it."""
        self.info = dataclasses.replace(self.info, job=job)
        self.folder.write_text(LOCK_NAME, json.dumps(dataclasses.asdict(self.info), indent=2))
        self.held = False

    def release(self) -> None:
        if not self.held:
            return
        self.held = False
        _remove(self.folder, LOCK_NAME)
        _remove_state_dir(self.folder)


def read_lock(folder: Folder) -> LockInfo | None:
    """The lock's owner, or None when there is no readable lock."""
    try:
        data = json.loads(folder.read_text(LOCK_NAME))
        return LockInfo(**{k: data.get(k) for k in ("host", "pid", "user", "started", "runner",
                                                      "process_start", "job")})
    except (OSError, ValueError, TypeError):
        return None


def _create_exclusive(folder: Folder, name: str, text: str) -> bool:
    """Create ``name`` only if it does not exist. Atomic on local disks; on object stores a check then a write."""
    path = folder.join(name)
    if folder.is_local:
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        return True
    if folder.fs.exists(path):
        return False
    with folder.fs.open(path, "wb") as f:
        f.write(text.encode("utf-8"))
    return True


def _remove(folder: Folder, name: str) -> None:
    try:
        folder.fs.rm(folder.join(name), recursive=True)
    except FileNotFoundError:
        pass
    except OSError as e:
        logger.debug("could not remove %s: %s", folder.url_of(name), e)


def _remove_state_dir(folder: Folder) -> None:
    if folder.is_local:
        try:
            os.rmdir(folder.join(STATE_DIR))
        except OSError:
            pass  # not empty: another step still uses it


# ---------------------------------------------------------------------------------------------- journal


@dataclass(frozen=True)
class Journal:
    """Records of finished shards (small and picklable: Beam workers write them too)."""

    folder: Folder
    release_lock: bool = False  # the pipeline's last step removes the lock (a Dataflow job not waited for)

    def record(self, result: ShardResult) -> None:
        """Note that ``result``'s shard is complete (after its file is in place)."""
        self.folder.write_text(f"{DONE_DIR}/{result.spec.filename}.json", json.dumps(_to_json(result)))

    def finished(self, plan: Sequence[ShardSpec]) -> dict[str, ShardResult]:
        """Shards of ``plan`` finished by an earlier run whose files still have the recorded size and CRC-32C."""
        found: dict[str, ShardResult] = {}
        for spec in plan:
            try:
                data = json.loads(self.folder.read_text(f"{DONE_DIR}/{spec.filename}.json"))
                result = _from_json(spec, data)
            except FileNotFoundError:
                continue
            except (OSError, ValueError, TypeError, KeyError) as e:
                logger.warning("%s: rewriting %s: its record is unreadable (%s)", self.folder.url, spec.filename, e)
                continue
            problem = _check_file(self.folder, spec.filename, result.bytes, result.crc32c)
            if problem:
                logger.warning("%s: rewriting %s: %s", self.folder.url, spec.filename, problem)
                continue
            found[spec.filename] = result
        return found

    def complete(self) -> None:
        """The dataset is complete (dataset.json written): remove the run's records."""
        _remove(self.folder, DONE_DIR)
        _remove(self.folder, RUN_NAME)
        if self.release_lock:
            _remove(self.folder, LOCK_NAME)
        _remove_state_dir(self.folder)


def _to_json(result: ShardResult) -> dict[str, Any]:
    images = result.images
    return {
        "file": result.spec.filename, "records": result.records, "bytes": result.bytes, "crc32c": result.crc32c,
        "failures": [[f.row, f.split, f.image_uri, f.error, f.message] for f in result.failures],
        "images": {"channels": sorted(images.channels), "formats": sorted(images.formats),
                   "shapes": sorted(images.shapes), "orientations": sorted(images.orientations)},
        "fingerprints": result.fingerprints.tolist(), "fingerprint_rows": result.fingerprint_rows.tolist(),
    }


def _from_json(spec: ShardSpec, data: dict[str, Any]) -> ShardResult:
    if data["file"] != spec.filename:
        raise ValueError(f"it describes {data['file']!r}")
    images = data["images"]
    stats = ImageStats(frozenset(images["channels"]), frozenset(images["formats"]),
                       frozenset(tuple(s) for s in images["shapes"]), frozenset(images["orientations"]))
    failures = tuple(RowFailure(int(r), str(s), u, str(e), str(m)) for r, s, u, e, m in data["failures"])
    return ShardResult(spec, int(data["records"]), int(data["bytes"]), str(data["crc32c"]), failures, stats,
                       array("Q", data["fingerprints"]), array("q", data["fingerprint_rows"]))


def _check_file(folder: Folder, name: str, size: int, crc32c: str) -> str | None:
    """None if the file has ``size`` bytes and CRC-32C ``crc32c``, else what is wrong."""
    path = folder.join(name)
    try:
        info = folder.fs.info(path)
    except FileNotFoundError:
        return "the file is missing"
    if int(info.get("size", -1)) != size:
        return f"it has {info.get('size')} bytes, not the {size} recorded"
    checksum = google_crc32c.Checksum()
    with folder.fs.open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            checksum.update(chunk)
    if checksum.digest().hex() != crc32c:
        return "its CRC-32C differs from the one recorded"
    return None


# ---------------------------------------------------------------------------------------------- a run


@dataclass
class Run:
    """A conversion holding the output folder: its lock, journal and the shards an earlier run finished."""

    lock: Lock
    journal: Journal
    resumed: dict[str, ShardResult]

    def remaining(self, plan: Sequence[ShardSpec]) -> list[ShardSpec]:
        return [s for s in plan if s.filename not in self.resumed]


def start_run(folder: Folder, fingerprint: str, plan: Sequence[ShardSpec], *, overwrite: bool,
              runner: str) -> Run:
    """Lock ``folder`` and decide: a fresh run, a resumed one, or an error (before any shard is written)."""
    lock = Lock.acquire(folder, runner)
    try:
        journal = Journal(folder)
        names = [n for n in folder.names() if n != STATE_DIR]
        earlier = _read_run(folder)
        resumed: dict[str, ShardResult] = {}
        if overwrite and (names or earlier is not None):
            removed = folder.remove_outputs()
            _remove(folder, DONE_DIR)
            _remove(folder, RUN_NAME)
            logger.info("overwrite: removed %s", removed)
        elif earlier is not None and MANIFEST_NAME not in names:
            if earlier.get("fingerprint") != fingerprint:
                raise TFRecorderError(
                    f"output_dir {folder.url!r} holds an unfinished conversion of a different table or "
                    f"settings (started {earlier.get('started', '?')}); run that conversion again to finish it, "
                    f"or pass overwrite=True to replace it"
                )
            resumed = journal.finished(plan)
            logger.info("%s: resuming an unfinished conversion: %d of %d shards already written",
                        folder.url, len(resumed), len(plan))
        elif names:
            shown = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
            complete = ": it holds a finished conversion" if MANIFEST_NAME in names else ""
            raise TFRecorderError(
                f"output_dir {folder.url!r} is not empty ({shown}){complete}; choose an empty folder or pass "
                f"overwrite=True"
            )
        if earlier is None or overwrite:
            folder.write_text(RUN_NAME, json.dumps({
                "fingerprint": fingerprint, "tfrecorder_version": __version__, "shards": len(plan),
                "started": lock.info.started}, indent=2))
        return Run(lock, journal, resumed)
    except BaseException:
        lock.release()
        raise


def _read_run(folder: Folder) -> dict[str, Any] | None:
    try:
        data = json.loads(folder.read_text(RUN_NAME))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        logger.warning("%s: ignoring an unreadable %s (%s)", folder.url, RUN_NAME, e)
        return {}
    return data if isinstance(data, dict) else {}
