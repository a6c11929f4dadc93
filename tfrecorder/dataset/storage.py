"""Storage (IO edge): dataset folders and the files in them, on any fsspec filesystem (local, gs://, ...)."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import stat
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import fsspec

from tfrecorder.dataset.store_requests import (
    DEFAULT_STORAGE_TIMEOUT,
    StoreUnreachable,
    briefly,
    run_requests,
)
from tfrecorder.errors import TFRecorderError

logger = logging.getLogger(__name__)

STATE_DIR = ".tfrecorder"  # a conversion's lock and progress records (see write/journal, write/lock)
# A durable file being written is flushed to the disk in the background this often: small enough that most
# shards are flushed before their final fsync (figures: benchmarks/CONSTANTS.md).
WRITEBACK_BYTES = 8 * 1024**2


# The most a file beside the shards may hold before it is read (one fact each; the index's bound follows from its
# shard's record count). A hostile folder's file of any size, or one that never ends (/dev/zero), is never read
# without bound; these are far above what a real dataset writes (a million shards' dataset.json is ~300 MB).
MANIFEST_MAX_BYTES = 1 << 30  # dataset.json, and the run's own JSON records under .tfrecorder/
ERRORS_MAX_BYTES = 4 << 30  # errors.csv: a line per failed row
METADATA_MAX_BYTES = 256 << 20  # the TFDS files, a label map, a vocabulary file


class SideFileRefused(TFRecorderError):
    """A file beside the shards that is not read: a link out of the dataset folder, not a regular file (a FIFO, a
    device, a folder), or larger than the bound for its kind. ``reason`` says which, without the file's content."""

    def __init__(self, url: str, reason: str):
        super().__init__(f"{url} {reason}: not read (a dataset's files are regular files inside its folder)")
        self.url, self.reason = url, reason

    def __reduce__(self):
        return (SideFileRefused, (self.url, self.reason))


def open_side_file(fs: Any, path: str, root: str, max_bytes: int, url: str | None = None) -> BinaryIO:
    """``path`` (a file beside the shards in the folder ``root``) opened for reading as the shards are: only a
    regular file inside ``root`` (a link out of it, a FIFO or a device is a SideFileRefused, before anything is
    read), of at most ``max_bytes`` (and a read past that bound, should it grow, is refused too). A missing file
    is FileNotFoundError, as ``open``'s.

    One function for every such file (index, label map, dataset.json, errors.csv, the TFDS files): their text is
    never quoted in a message, since a link could make it any file of the machine. ``url``: how messages name
    the file (its fsspec URL by default)."""
    url = url or fs.unstrip_protocol(path)
    if "file" not in _protocols(fs):
        size = fs.info(path).get("size")
        if size is not None and int(size) > max_bytes:
            raise SideFileRefused(url, f"has {int(size)} bytes, more than such a file may ({max_bytes})")
        return io.BufferedReader(_Bounded(fs.open(path, "rb"), url, max_bytes))
    real, top = os.path.realpath(path), os.path.realpath(root)
    if not real.startswith(top.rstrip(os.sep) + os.sep):
        raise SideFileRefused(url, "is a link out of the dataset folder")
    # O_NONBLOCK: opening a FIFO must not wait for a writer; the checks below refuse it at once
    fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise SideFileRefused(url, "is not a regular file (a FIFO, a device or a folder)")
        if info.st_size > max_bytes:
            raise SideFileRefused(url, f"has {info.st_size} bytes, more than such a file may ({max_bytes})")
        os.set_blocking(fd, True)
        return io.BufferedReader(_Bounded(os.fdopen(fd, "rb", buffering=0), url, max_bytes))
    except BaseException:
        os.close(fd)
        raise


def read_side_file(fs: Any, path: str, root: str, max_bytes: int, url: str | None = None) -> bytes:
    """The bytes of a file beside the shards (see ``open_side_file``)."""
    with open_side_file(fs, path, root, max_bytes, url) as f:
        return f.read()


class _Bounded(io.RawIOBase):
    """A file read to at most ``max_bytes``: one that grows past its bound while it is read is refused."""

    def __init__(self, raw: Any, url: str, max_bytes: int):
        super().__init__()
        self._raw, self._url, self._left = raw, url, max_bytes

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        if self._left <= 0:  # at the bound: one byte more is past it
            if self._raw.read(1):
                raise SideFileRefused(self._url, "grew past the bound for such a file while it was read")
            return 0
        data = self._raw.read(min(len(view), self._left))
        view[:len(data)] = data
        self._left -= len(data)
        return len(data)

    def close(self) -> None:
        try:
            self._raw.close()
        finally:
            super().close()


def filesystem(url: str, storage_timeout: float | None = None) -> tuple[Any, str]:
    """The fsspec filesystem of ``url`` and the path within it; a gs:// one obeys ``storage_timeout`` (by
    default the deadline of the run this thread works for, else DEFAULT_STORAGE_TIMEOUT)."""
    url = str(url)
    if storage_timeout is None:
        run = run_requests()
        storage_timeout = run.storage_timeout if run is not None else DEFAULT_STORAGE_TIMEOUT
    protocol = url.split("://", 1)[0].lower() if "://" in url else "file"
    if protocol in ("gs", "gcs"):
        from tfrecorder.dataset.gcs import BoundedGCSFileSystem

        options = BoundedGCSFileSystem._get_kwargs_from_urls(url)
        return (BoundedGCSFileSystem(storage_timeout=storage_timeout, **options),
                BoundedGCSFileSystem._strip_protocol(url))
    return fsspec.core.url_to_fs(url)


def open_url(url: str) -> Any:
    """``url`` opened for reading, through ``filesystem`` (a context manager, as ``fsspec.open`` gives)."""
    fs, path = filesystem(url)
    return fs.open(path, "rb")


class _WritebackFile:
    """A local file being written whose bytes are sent to the disk as they come, by a background
    ``fdatasync`` every WRITEBACK_BYTES: the fsync before the rename then waits for the last part only."""

    def __init__(self, raw: BinaryIO):
        self._raw = raw
        self.name = raw.name  # the partial file's path, as a plain file's
        self._unsynced = 0
        self._sync: threading.Thread | None = None

    def write(self, data: Any) -> int:
        written = self._raw.write(data)
        self.wrote_elsewhere(written)
        return written

    def wrote_elsewhere(self, size: int) -> None:
        """Count ``size`` bytes written to the file (by this object, or by a writer that opened it by ``name``):
        every WRITEBACK_BYTES a background flush starts."""
        self._unsynced += size
        if self._unsynced >= WRITEBACK_BYTES and (self._sync is None or not self._sync.is_alive()):
            self._raw.flush()
            self._sync = threading.Thread(target=_datasync, args=(self._raw.fileno(),), daemon=True)
            self._sync.start()
            self._unsynced = 0

    def flush(self) -> None:
        self._raw.flush()

    def fileno(self) -> int:
        return self._raw.fileno()

    def wait(self) -> None:
        """Wait for the background flush (before the file is closed)."""
        if self._sync is not None:
            self._sync.join()

    def finish(self) -> None:
        """Wait for the background flush, then make the whole file durable."""
        self.wait()
        self._raw.flush()
        os.fsync(self._raw.fileno())


def _datasync(fd: int) -> None:
    try:
        os.fdatasync(fd)
    except OSError:  # the final fsync reports any real failure
        pass


@dataclass(frozen=True)
class Folder:
    """A folder on a filesystem: ``fs`` and the path of the folder within it; ``opened``: what its dataset.json
    was when a reader read it (``read.open.manifest_identity``; () when none was read)."""

    fs: Any
    path: str
    url: str
    opened: tuple = field(default=(), compare=False)

    @classmethod
    def of(cls, url: str, storage_timeout: float | None = None) -> Folder:
        """The folder at ``url`` (a local path or any fsspec URL; see ``filesystem``)."""
        fs, path = filesystem(url, storage_timeout)
        return cls(fs, path.rstrip("/") or "/", str(url))

    def join(self, name: str) -> str:
        """Path of ``name`` inside the folder, for ``self.fs``."""
        return f"{self.path}/{name}"

    def leaves(self, name: str) -> str | None:
        """Where the local file ``name`` of the folder really is when a link takes it out of the folder (a shard
        replaced by a link to another file of the machine); None inside it, or on a store (no links there)."""
        if not self.is_local:
            return None
        real, root = os.path.realpath(self.join(name)), os.path.realpath(self.path)
        return None if real.startswith(root.rstrip(os.sep) + os.sep) else real

    def url_of(self, name: str) -> str:
        """URL of ``name`` inside the folder, for users and tf.data (a full URL or absolute path stays)."""
        if "://" in name or name.startswith("/"):
            return name
        return f"{self.url.rstrip('/')}/{name}"

    def open(self, name: str) -> BinaryIO:
        """``name`` opened for reading: a name in the folder, or a full URL or absolute path (as ``url_of``)."""
        if "://" in name or name.startswith("/"):
            return open_url(name)
        return self.fs.open(self.join(name), "rb")

    def names(self) -> list[str]:
        """Names of the entries in the folder ([] if it does not exist)."""
        try:
            return sorted(p.rstrip("/").rsplit("/", 1)[-1] for p in self.fs.ls(self.path, detail=False))
        except FileNotFoundError:
            return []

    def open_side(self, name: str, max_bytes: int) -> BinaryIO:
        """``name``, a file beside the shards, opened as ``open_side_file`` opens one: a regular file inside the
        folder of at most ``max_bytes``, else a SideFileRefused saying why."""
        return open_side_file(self.fs, self.join(name), self.path, max_bytes, self.url_of(name))

    def read_text(self, name: str, max_bytes: int = MANIFEST_MAX_BYTES) -> str:
        """The text of ``name``, a file beside the shards (see ``open_side``)."""
        with self.open_side(name, max_bytes) as f:
            return f.read().decode("utf-8")

    @property
    def is_local(self) -> bool:
        return "file" in self.protocols

    @property
    def protocols(self) -> tuple[str, ...]:
        """The fsspec protocols of the folder's filesystem (``("gs", "gcs")``, ``("file", "local")``)."""
        return _protocols(self.fs)

    @contextlib.contextmanager
    def create(self, name: str, durable: bool = True) -> Iterator[BinaryIO]:
        """Open ``name`` for writing so that it appears only when complete.

        Local files are written under ``.<name>.partial``, flushed to the disk (fsync; unless not
        ``durable``: a record that may be lost, such as the resume journal's), then renamed. Renames
        are made durable by ``sync()``, once for many files: after a power loss a file is whole or
        absent, and everything before a ``sync()`` is there.
        The file object's ``name`` is that path, for a writer that opens the file itself (the fsync covers what
        it wrote; a durable file's ``wrote_elsewhere`` sends it to the disk as it comes).
        An object store (gs://, s3://) shows an object only once its upload finishes, so it is written
        in place. On error nothing is left under ``name``; an OSError names the file.
        """
        target = self.join(name)
        if not self.is_local:
            f = self.fs.open(target, "wb")
            try:
                yield f
                f.close()  # the upload's last request: only now does the object appear
            except BaseException as e:
                # never closed on an error: closing would publish what was written so far. Nothing new is under
                # ``name`` then; the store is told to drop the upload unless it is lost or the run is stopped
                # (an upload left open expires on its own)
                _abandon(f, tell_store=not isinstance(e, (StoreUnreachable, KeyboardInterrupt)))
                _name_file(e, self.url_of(name))
                raise
            return
        parent, _, base = name.rpartition("/")
        path = self.join(f"{parent}/.{base}.partial" if parent else f".{base}.partial")
        if parent:
            self.fs.makedirs(self.join(parent), exist_ok=True)
        try:
            with open(path, "wb") as f:
                if not durable:
                    yield f
                else:
                    writer = _WritebackFile(f)
                    try:
                        yield writer  # type: ignore[misc]
                    except BaseException:
                        writer.wait()
                        raise
                    writer.finish()
            os.replace(path, target)
        except BaseException as e:
            self._remove_quietly(path)
            _name_file(e, target)
            raise

    def write_text(self, name: str, text: str, durable: bool = True) -> None:
        """Write ``name`` whole (see ``create``)."""
        with self.create(name, durable) as f:
            f.write(text.encode("utf-8"))

    def sync(self) -> None:
        """Make the files renamed into this local folder so far durable (one fsync of the folder, not one per
        file: benchmarks/CONSTANTS.md); object stores need none."""
        if self.is_local:
            _fsync_dir(self.path)

    def _remove_quietly(self, path: str) -> None:
        try:
            self.fs.rm(path)
        except OSError as e:
            logger.debug("could not remove %s: %s", path, e)

    def remove(self, name: str, folder: bool = True) -> None:
        """Delete ``name`` (a file, or with ``folder`` a folder and what it holds) if it is there."""
        try:
            if folder:
                self.fs.rm(self.join(name), recursive=True)
            else:
                self.fs.rm_file(self.join(name))  # one request
        except FileNotFoundError:
            pass
        except (OSError, StoreUnreachable) as e:
            logger.debug("could not remove %s: %s", self.url_of(name), e)

    def remove_empty_dir(self, name: str) -> None:
        """Delete the local folder ``name`` if it is empty (object stores have no empty folders)."""
        if self.is_local:
            try:
                os.rmdir(self.join(name))
            except OSError:
                pass  # not empty: another step still uses it

    def makedirs(self) -> None:
        self.fs.makedirs(self.path, exist_ok=True)


def _abandon(file: Any, tell_store: bool) -> None:
    """Give up an object-store upload without publishing it: mark the file closed so that nothing commits it,
    and (``tell_store``) cancel the upload where the store has begun one, in one brief try."""
    try:
        if tell_store:
            with briefly():
                file.discard()
    except Exception as e:  # noqa: BLE001 - cleanup on the way out of an error: the first error is the one told
        logger.debug("could not cancel the upload of %s: %s", getattr(file, "path", "?"), e)
    finally:
        file.closed = True


def _name_file(error: BaseException, filename: str) -> None:
    """Let ``error`` say which file it was about when it does not (ENOSPC from a write names none)."""
    if isinstance(error, OSError) and not error.filename:
        error.filename = filename


def _fsync_dir(path: str) -> None:
    """Make a rename in ``path`` durable (where the platform lets a folder be opened)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems (and platforms) cannot sync a folder
    finally:
        os.close(fd)


def _protocols(fs: Any) -> tuple[str, ...]:
    protocol = fs.protocol
    return (protocol,) if isinstance(protocol, str) else tuple(protocol)
