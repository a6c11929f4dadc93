"""Storage (IO edge): folders and files on any fsspec filesystem (local, gs://, ...), and image fetches with retries."""

from __future__ import annotations

import contextlib
import fnmatch
import logging
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

import fsspec

from tfrecorder.dataset.redact import redact

logger = logging.getLogger(__name__)

STATE_DIR = ".tfrecorder"  # a conversion's lock and progress records (see runstate)
OUTPUT_PATTERNS = ("*.tfrecord", "*.tfrecord.gz", "*.tfrecord.zlib", "*.tfindex", "dataset.json", "errors.csv",
                   "dataset_info.json", "features.json", "*.labels.txt", ".*.partial")


@dataclass(frozen=True)
class Folder:
    """A folder on a filesystem: ``fs`` and the path of the folder within it."""

    fs: Any
    path: str
    url: str

    @classmethod
    def of(cls, url: str) -> Folder:
        """The folder at ``url`` (a local path or any fsspec URL)."""
        fs, path = fsspec.core.url_to_fs(str(url))
        return cls(fs, path.rstrip("/") or "/", str(url))

    def join(self, name: str) -> str:
        """Path of ``name`` inside the folder, for ``self.fs``."""
        return f"{self.path}/{name}"

    def url_of(self, name: str) -> str:
        """URL of ``name`` inside the folder, for users and tf.data (a full URL or absolute path stays)."""
        if "://" in name or name.startswith("/"):
            return name
        return f"{self.url.rstrip('/')}/{name}"

    def names(self) -> list[str]:
        """Names of the entries in the folder ([] if it does not exist)."""
        try:
            return sorted(p.rstrip("/").rsplit("/", 1)[-1] for p in self.fs.ls(self.path, detail=False))
        except FileNotFoundError:
            return []

    def read_text(self, name: str) -> str:
        with self.fs.open(self.join(name), "rb") as f:
            return f.read().decode("utf-8")

    @property
    def is_local(self) -> bool:
        return "file" in _protocols(self.fs)

    @contextlib.contextmanager
    def create(self, name: str) -> Iterator[BinaryIO]:
        """Open ``name`` for writing so that it appears only when complete.

        Local files are written under ``.<name>.partial`` and renamed; an object store
        (gs://, s3://) shows an object only once its upload finishes, so it is written
        in place. On error nothing is left under ``name``.
        """
        target = self.join(name)
        if self.is_local:
            parent, _, base = name.rpartition("/")
            path = self.join(f"{parent}/.{base}.partial" if parent else f".{base}.partial")
            if parent:
                self.fs.makedirs(self.join(parent), exist_ok=True)
        else:
            path = target
        try:
            with self.fs.open(path, "wb") as f:
                yield f
            if path != target:
                self.fs.mv(path, target)
        except BaseException:
            self._remove_quietly(path)
            raise

    def write_text(self, name: str, text: str) -> None:
        """Write ``name`` whole (see ``create``)."""
        with self.create(name) as f:
            f.write(text.encode("utf-8"))

    def _remove_quietly(self, path: str) -> None:
        try:
            self.fs.rm(path)
        except OSError:
            logger.debug("could not remove %s", path)

    def remove(self, name: str) -> None:
        """Delete ``name`` (a file, or a folder and what it holds) if it is there."""
        try:
            self.fs.rm(self.join(name), recursive=True)
        except FileNotFoundError:
            pass
        except OSError as e:
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

    def remove_outputs(self) -> list[str]:
        """Delete what an earlier conversion wrote here (shards, manifest, errors); leave anything else."""
        removed = [n for n in self.names() if any(fnmatch.fnmatch(n, p) for p in OUTPUT_PATTERNS)]
        for name in removed:
            self.fs.rm(self.join(name))
        return removed


def _protocols(fs: Any) -> tuple[str, ...]:
    protocol = fs.protocol
    return (protocol,) if isinstance(protocol, str) else tuple(protocol)


MAX_IMAGE_BYTES = 1024**3  # one record must stay well under protobuf's 2 GiB message limit


@dataclass(frozen=True)
class Retry:
    """How transient remote failures (5xx, 429, timeouts, dropped connections) are retried."""

    attempts: int = 4
    backoff_seconds: float = 0.1  # waits 0.1, 0.4, 1.6 s between the four tries

    def delay(self, attempt: int) -> float:
        """Seconds to wait after failed try number ``attempt`` (0-based)."""
        return self.backoff_seconds * 4**attempt


DEFAULT_RETRY = Retry()


class ImageError(Exception):
    """A row's image cannot be read or stored; ``error`` is a short class for errors.csv (not_found, ...)."""

    def __init__(self, error: str, message: str):
        message = redact(message)  # it may quote a URL with a token in it
        super().__init__(f"{error}: {message}")
        self.error = error
        self.message = message


def is_remote(location: str | None) -> bool:
    """True for URLs fetched through fsspec (gs://, http(s)://, ...); False for local paths and file://."""
    return location is not None and "://" in location and not location.startswith("file://")


def fetch(location: str | None, retry: Retry = DEFAULT_RETRY) -> bytes:
    """The bytes at ``location`` (local path, file://, or any fsspec URL); remote reads retried as ``retry`` says."""
    if location is None:
        raise ImageError("missing_uri", "the row has no image URI")
    try:
        if is_remote(location):
            data = _fetch_remote(location, retry)
        else:
            path = location[len("file://"):] if location.startswith("file://") else location
            with open(path, "rb") as f:
                data = f.read()
    except FileNotFoundError as e:
        raise ImageError("not_found", f"not found: {location}") from e
    except IsADirectoryError as e:
        raise ImageError("is_directory", f"a directory, not an image file: {location}") from e
    except PermissionError as e:
        raise ImageError("permission_denied", f"permission denied: {location}") from e
    except OSError as e:
        raise ImageError("fetch_error", f"cannot read {location}: {e}") from e
    if not data:
        raise ImageError("empty_file", f"zero-byte file: {location}")
    if len(data) > MAX_IMAGE_BYTES:
        raise ImageError("too_large", f"{len(data)} bytes is over the limit of {MAX_IMAGE_BYTES} for one record")
    return data


def _fetch_remote(location: str, retry: Retry) -> bytes:
    """One object through fsspec (gs://, http(s)://, ...); transient failures are retried with backoff."""
    fs, path = fsspec.core.url_to_fs(location)
    for attempt in range(retry.attempts):
        try:
            return fs.cat_file(path)
        except (FileNotFoundError, PermissionError, IsADirectoryError):
            raise
        except Exception as e:  # noqa: BLE001 - every other failure is classified below, none is swallowed
            status = _http_status(e)
            if status == 404:
                raise FileNotFoundError(location) from e
            if status in (401, 403):
                raise ImageError("permission_denied", f"HTTP {status} for {location}") from e
            transient = status is None or status >= 500 or status in (408, 429)
            if not transient or attempt == retry.attempts - 1:
                detail = f"HTTP {status}" if status else type(e).__name__
                raise ImageError("fetch_error", f"{detail} for {location} after {attempt + 1} tries: {e}") from e
            logger.debug("retrying %s after %s", redact(location), redact(str(e)))
            time.sleep(retry.delay(attempt))
    raise AssertionError("unreachable")


def _http_status(error: Exception) -> int | None:
    for name in ("status", "code", "status_code"):
        value = getattr(error, name, None)
        if isinstance(value, int):
            return value
    return None
