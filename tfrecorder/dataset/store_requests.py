"""Store requests (IO edge): the object-store requests of one run - their deadlines, the run's stop, cleanup's
one brief try - shared by the folders (``storage``) and the bounded GCS filesystem (``gcs``)."""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Iterator
from typing import Any

from tfrecorder.errors import TFRecorderError

# Object stores (gs://): each request may take REQUEST_SECONDS (to connect, and any silence while it is
# answered); the tries of one operation end at the storage deadline, ``storage_timeout`` (Google's storage
# client's figures). Cleanup on the way out makes one try of at most CLEANUP_SECONDS.
REQUEST_SECONDS = 60.0
DEFAULT_STORAGE_TIMEOUT = 120.0
CLEANUP_SECONDS = 5.0
_CLEANUP: contextvars.ContextVar[float | None] = contextvars.ContextVar("tfrecorder_cleanup", default=None)


class Requests:
    """The object-store requests of one run in flight (each an asyncio task on fsspec's event loop), so that a
    run that is stopped (Ctrl-C, an error in another shard) ends them at once instead of waiting for their
    timeouts: threads blocked on them would keep the process alive."""

    def __init__(self, storage_timeout: float = DEFAULT_STORAGE_TIMEOUT) -> None:
        self.storage_timeout = storage_timeout  # the run's deadline, for the stores it opens without one
        self.stopped = False
        self._tasks: dict[Any, Any] = {}  # task -> its event loop
        self._lock = threading.Lock()

    def add(self, task: Any, loop: Any) -> None:
        with self._lock:
            self._tasks[task] = loop

    def discard(self, task: Any) -> None:
        with self._lock:
            self._tasks.pop(task, None)

    def stop(self) -> None:
        """Cancel the requests in flight; later ones (but cleanup's) fail at once."""
        with self._lock:
            self.stopped = True
            tasks = list(self._tasks.items())
        for task, loop in tasks:
            with contextlib.suppress(RuntimeError):  # the loop has closed: nothing left to cancel
                loop.call_soon_threadsafe(task.cancel)


_REQUESTS: contextvars.ContextVar[Requests | None] = contextvars.ContextVar("tfrecorder_requests", default=None)
class StoreUnreachable(Exception):
    """An object store that did not complete one operation by the storage deadline (refused, silent, or
    failing each try); the message says which, in words. Not an OSError on purpose: code that reads past an
    unreadable file (``except OSError``) must not mistake a lost store for one."""

    def __init__(self, cause: str, seconds: float):
        super().__init__(cause)
        self.cause, self.seconds = cause, seconds

    def __str__(self) -> str:
        return self.cause

    def __reduce__(self):  # picklable: it crosses from Beam workers
        return (StoreUnreachable, (self.cause, self.seconds))


def check_storage_timeout(seconds: Any) -> float:
    """``storage_timeout`` as a number of seconds, or a TFRecorderError naming it."""
    try:
        value = float(seconds)
    except (TypeError, ValueError):
        value = float("nan")
    if not value > 0:
        raise TFRecorderError(f"storage_timeout={seconds!r}: give a number of seconds above 0 (the default, "
                              f"{DEFAULT_STORAGE_TIMEOUT:g}, is Google's storage client's deadline)")
    return value


def run_requests() -> Requests | None:
    """The requests of the run this thread works for (see ``requests_of_run``)."""
    return _REQUESTS.get()


@contextlib.contextmanager
def requests_of_run(storage_timeout: float = DEFAULT_STORAGE_TIMEOUT) -> Iterator[Requests]:
    """Object-store requests made from here on, by this thread and the threads it hands work to with its
    context (``contextvars.copy_context``), belong to one run: ``stop_requests()`` ends them, and stores
    opened without a deadline of their own (the input files) get the run's."""
    token = _REQUESTS.set(Requests(storage_timeout))
    try:
        yield _REQUESTS.get()  # type: ignore[misc]
    finally:
        _REQUESTS.reset(token)


def stop_requests() -> None:
    """End the object-store requests of this thread's run now (the run is being stopped)."""
    requests = _REQUESTS.get()
    if requests is not None:
        requests.stop()


def cleanup_seconds() -> float | None:
    """While ``briefly()`` is in force (in this thread), the one short try that store requests get."""
    return _CLEANUP.get()


@contextlib.contextmanager
def briefly(seconds: float = CLEANUP_SECONDS) -> Iterator[None]:
    """Cleanup on the way out of a run (lock release, removing a partial upload): object-store requests made
    by this thread get one try of at most ``seconds``, so a lost store never adds a second deadline. A failure
    is left to the caller (who logs it: the next run breaks a stale lock)."""
    token = _CLEANUP.set(seconds)
    try:
        yield
    finally:
        _CLEANUP.reset(token)
