"""Fetch (IO edge): one image's bytes from a local path or any fsspec URL - bounded in size and time, retried.

Every way a read can go wrong becomes an ``ImageError`` naming the URI: a missing or unreadable file,
something that is not a regular file (a FIFO, a device such as /dev/zero), more bytes than
``max_bytes`` (checked before reading where the size is known, and while streaming where it is not),
a server that does not answer within ``timeout`` seconds, or one that keeps failing after retries.
"""

from __future__ import annotations

import logging
import os
import stat
import time
from collections.abc import Callable
from typing import Any

import fsspec

from tfrecorder.errors import ImageError
from tfrecorder.redact import redact
from tfrecorder.write.settings import FetchLimits, is_remote, local_path

logger = logging.getLogger(__name__)

_CHUNK = 1 << 20


def fetch(location: str | None, limits: FetchLimits = FetchLimits()) -> bytes:
    """The bytes at ``location`` (local path, file://, or any fsspec URL), within ``limits``."""
    if location is None:
        raise ImageError("missing_uri", "the row has no image URI")
    limits.check(location)
    try:
        data = _fetch_remote(location, limits) if is_remote(location) else _read_local(location, limits.max_bytes)
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
    return data


def size_of(location: str | None, limits: FetchLimits = FetchLimits()) -> int | None:
    """The size of the file at ``location`` without reading it; None when it cannot be known (no answer within
    the timeout, no such file, a server that does not say)."""
    if location is None or not limits.allows(location):
        return None
    try:
        if not is_remote(location):
            return os.stat(local_path(location)).st_size
        fs, path = _filesystem(location, limits.timeout)
        size = fs.size(path)
    except Exception as e:  # noqa: BLE001 - an estimate only: any failure means "unknown"
        logger.debug("no size for %s: %s", redact(location), redact(str(e)))
        return None
    return size if isinstance(size, int) else None


def _read_local(location: str, max_bytes: int) -> bytes:
    path = local_path(location)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO opens without waiting for a writer
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(path)
        if not stat.S_ISREG(info.st_mode):
            raise ImageError("not_a_file", f"not a regular file ({_kind(info.st_mode)}): {location}")
        if info.st_size > max_bytes:
            raise _too_large(info.st_size, max_bytes, location)
        return _read_capped(lambda n: os.read(fd, n), max_bytes, location)  # the file may grow meanwhile
    finally:
        os.close(fd)


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a file"


def _too_large(size: int | str, max_bytes: int, location: str) -> ImageError:
    return ImageError("too_large", f"{size} bytes is over max_image_bytes={max_bytes}: {location}")


class _Deadline(TimeoutError):
    """A remote read that did not complete within image_timeout (a server that drips its answer)."""


def _read_capped(read: Callable[[int], bytes], max_bytes: int, location: str, timeout: float | None = None) -> bytes:
    """Read to the end, or fail as soon as more than ``max_bytes`` came (an endless stream stops here), or, with
    ``timeout``, once the whole read has taken longer (each silence is bounded by the backend's own timeout)."""
    chunks: list[bytes] = []
    total = 0
    deadline = None if timeout is None else time.monotonic() + timeout
    while chunk := read(min(_CHUNK, max_bytes + 1 - total)):
        chunks.append(chunk)
        total += len(chunk)
        if total > max_bytes:
            raise _too_large(f"more than {max_bytes}", max_bytes, location)
        if deadline is not None and time.monotonic() > deadline:
            raise _Deadline(f"no complete answer within {timeout:g} s")
    return b"".join(chunks)


def _fetch_remote(location: str, limits: FetchLimits) -> bytes:
    """One object through fsspec (gs://, http(s)://, ...); transient failures are retried with backoff."""
    fs, path = _filesystem(location, limits.timeout)
    retry = limits.retry
    for attempt in range(retry.attempts):
        try:
            return _read_remote(fs, path, limits, location)
        except (FileNotFoundError, PermissionError, IsADirectoryError, ImageError):
            raise
        except Exception as e:  # noqa: BLE001 - every other failure is classified below, none is swallowed
            status = _http_status(e)
            if status == 404:
                raise FileNotFoundError(location) from e
            if status in (401, 403):
                raise ImageError("permission_denied", f"HTTP {status} for {location}") from e
            transient = status is None or status >= 500 or status in (408, 429)
            if not transient or attempt == retry.attempts - 1:
                detail = f"HTTP {status}" if status else _describe(e, limits.timeout)
                raise ImageError("fetch_error", f"{detail} for {location} after {attempt + 1} tries: {e}" + (
                    f" (image_timeout={limits.timeout:g}: raise it, --image-timeout in the command, for slow "
                    f"servers)" if isinstance(e, TimeoutError) or "Timeout" in type(e).__name__ else "")) from e
            logger.debug("retrying %s after %s", redact(location), redact(str(e)))
            time.sleep(retry.delay(attempt))
    raise AssertionError("unreachable")


def _filesystem(location: str, timeout: float) -> tuple[Any, str]:
    """fsspec's filesystem for ``location``; a scheme fsspec does not know, or whose backend is not installed
    (``s3://`` without s3fs), is the row's error ``unsupported_uri``, not the end of the run."""
    try:
        return fsspec.core.url_to_fs(location, **_timeouts(location, timeout))
    except ImportError as e:
        raise ImageError("unsupported_uri", f"no fsspec backend for {_protocol(location)}:// is installed "
                                            f"({e}): {location}") from e
    except ValueError as e:
        if "protocol" not in str(e).lower():
            raise
        raise ImageError("unsupported_uri", f"fsspec knows no {_protocol(location)}:// storage: {location}") from e


def _read_remote(fs: Any, path: str, limits: FetchLimits, location: str) -> bytes:
    # HTTP: one streaming GET, read as it comes (block_size=0); fsspec's HEAD request for the size is skipped
    # (a size given to a streaming file is not used), so servers that answer GET only are read as before.
    streaming = {"block_size": 0, "size": 1} if _protocol(location) in ("http", "https") else {}
    with fs.open(path, "rb", **streaming) as f:
        size = getattr(f, "size", None)
        if isinstance(size, int) and size > limits.max_bytes:
            raise _too_large(size, limits.max_bytes, location)
        return _read_capped(f.read, limits.max_bytes, location, limits.timeout)


def _timeouts(location: str, seconds: float) -> dict[str, Any]:
    """Storage options that bound how long a silent server can hold a read, for the backends we know."""
    protocol = _protocol(location)
    if protocol in ("http", "https"):
        import aiohttp

        return {"client_kwargs": {"timeout": aiohttp.ClientTimeout(total=None, sock_connect=seconds,
                                                                  sock_read=seconds)}}
    if protocol in ("gs", "gcs"):
        return {"requests_timeout": seconds}
    return {}


def _protocol(location: str) -> str:
    return location.split("://", 1)[0].lower()


def _describe(error: Exception, timeout: float) -> str:
    if isinstance(error, _Deadline):
        return str(error)
    if isinstance(error, TimeoutError) or "Timeout" in type(error).__name__:
        return f"no answer within {timeout:g} s"
    return type(error).__name__


def _http_status(error: Exception) -> int | None:
    for name in ("status", "code", "status_code"):
        value = getattr(error, name, None)
        if isinstance(value, int):
            return value
    return None
