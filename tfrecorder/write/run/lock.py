"""Lock (IO edge): one conversion at a time per output folder; a lock left by a dead process is broken.

``output_dir/.tfrecorder/lock.json`` names the owner (host, pid, user, start time, runner). A lock
whose owner was a process on this machine that no longer runs is stale and broken with a warning;
one from another machine or handed to a Dataflow job only a person can judge.
"""

from __future__ import annotations

import dataclasses
import getpass
import json
import logging
import os
import socket
import threading
import time
from dataclasses import dataclass

from tfrecorder.dataset.storage import STATE_DIR, Folder
from tfrecorder.dataset.store_requests import briefly
from tfrecorder.errors import TFRecorderError

logger = logging.getLogger(__name__)

LOCK_NAME = f"{STATE_DIR}/lock.json"
# Output folders whose lock a run in this process holds now. A lock of this process's own that is not here was
# left by a run that ended without removing it (the store was lost as it ended): the next run in this process (a
# notebook) breaks it as it would a dead process's.
# Taking a lock holds _HELD_LOCK from the first look to the registration, so that another thread of this process
# never finds the lock file before its owner is in _HELD and breaks it as a run that has ended.
_HELD: set[str] = set()
_HELD_LOCK = threading.RLock()


class OutputLocked(TFRecorderError):
    """Another conversion is writing into the same output_dir."""



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

    def is_stale(self, url: str) -> bool:
        """True when the owner was a process on this machine that no longer runs, or a run of this process
        that has ended (the lock of output folder ``url``)."""
        if self.job or self.host != socket.gethostname():
            return False  # a Dataflow job, or another machine: only a person can tell
        if not process_alive(self.pid):
            return True
        if self.pid == os.getpid() and self.process_start == _process_start(self.pid):
            with _HELD_LOCK:
                return url not in _HELD
        return self.process_start is not None and _process_start(self.pid) not in (None, self.process_start)


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` runs on this machine (one of another user's counts as running)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
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
        """Take the lock, breaking a stale one; OutputLocked if a live conversion holds it. The first write of
        a conversion: an object store's missing bucket or refused permission is one error here, before any
        work."""
        try:
            with _HELD_LOCK:
                return cls._acquire(folder, runner)
        except FileNotFoundError as e:
            if folder.is_local:
                raise
            bucket = "/".join(folder.url.split("/")[:3])
            raise TFRecorderError(f"{bucket} does not exist: create it, or check the bucket's name in "
                                  f"output_dir={folder.url!r}") from e
        except PermissionError as e:
            raise TFRecorderError(f"no permission to write {folder.url}: {e}") from e
        except OSError as e:
            if folder.is_local or not str(e).startswith("Forbidden"):  # gcsfs's words for HTTP 403
                raise
            raise TFRecorderError(f"no permission to write {folder.url} (403 Forbidden: "
                                  f"{str(e).splitlines()[-1].strip() or 'the store refused'})") from e

    @classmethod
    def _acquire(cls, folder: Folder, runner: str) -> Lock:
        info = LockInfo.mine(runner)
        folder.fs.makedirs(folder.join(STATE_DIR), exist_ok=True)
        for _ in range(3):
            if _create_exclusive(folder, LOCK_NAME, json.dumps(dataclasses.asdict(info), indent=2)):
                with _HELD_LOCK:
                    _HELD.add(folder.url)
                return cls(folder, info)
            try:
                owner = _read_owner(folder)
            except FileNotFoundError:
                continue  # released between our try and our look: try again
            if owner is None or owner.is_stale(folder.url):
                logger.warning("%s: breaking a stale lock left by %s", folder.url,
                               owner.describe() if owner else "an unreadable lock file")
                _break(folder, owner)
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

    def hand_to_pipeline(self) -> None:
        """The lock now belongs to the pipeline whose step took it (``tfrecorder.beam.WriteDataset``): its last
        step, or the step that refuses the table, removes it. A pipeline of this process that failed otherwise
        leaves it stale: no longer held here, so the next run breaks it."""
        self.held = False
        with _HELD_LOCK:
            _HELD.discard(self.folder.url)

    def release(self) -> None:
        if not self.held:
            return
        self.held = False
        with _HELD_LOCK:
            _HELD.discard(self.folder.url)
        with briefly():  # one short try: a lock the store did not let go of is stale, and the next run breaks it
            self.folder.remove(LOCK_NAME, folder=False)
        self.folder.remove_empty_dir(STATE_DIR)


def read_lock(folder: Folder) -> LockInfo | None:
    """The lock's owner, or None when there is no readable lock."""
    try:
        return _read_owner(folder)
    except FileNotFoundError:
        return None


def _read_owner(folder: Folder) -> LockInfo | None:
    """The lock's owner; None if the file cannot be understood; FileNotFoundError if there is none."""
    try:
        data = json.loads(folder.read_text(LOCK_NAME))
        return LockInfo(**{k: data.get(k) for k in ("host", "pid", "user", "started", "runner",
                                                      "process_start", "job")})
    except FileNotFoundError:
        raise
    except (OSError, ValueError, TypeError, AttributeError):
        return None


def _break(folder: Folder, stale: LockInfo | None) -> None:
    """Remove a stale lock - unless another conversion replaced it meanwhile (then the next try meets that one)."""
    try:
        if _read_owner(folder) == stale:
            folder.fs.rm(folder.join(LOCK_NAME))
    except FileNotFoundError:
        pass


def _create_exclusive(folder: Folder, name: str, text: str) -> bool:
    """Create ``name`` with ``text`` only if it does not exist.

    Locally the content is written to a file of this process's own first, then hard-linked to ``name``:
    linking is atomic and fails if ``name`` exists, so the lock is never visible empty or half written.
    On object stores it is a check, then a write (not atomic: see the README).
    """
    path = folder.join(name)
    if folder.is_local:
        own = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
        with open(own, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(own, path)
        except FileExistsError:
            return False
        finally:
            os.unlink(own)
        return True
    if folder.fs.exists(path):
        return False
    with folder.fs.open(path, "wb") as f:
        f.write(text.encode("utf-8"))
    return True
