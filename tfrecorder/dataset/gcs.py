"""Cloud Storage (IO edge): gcsfs with a deadline on each operation, as Google's own storage client has.

gcsfs retries each request six times on its own schedule, with no bound on the whole, and a request that
never answers waits for ever. Here a request may be silent (to connect, or while answering) for
``REQUEST_SECONDS`` at most (or half the deadline if shorter), and the tries of one operation - one request and
its retries: a listing, one block of an upload or a read - end at the filesystem's ``storage_timeout``.
Which failures are transient is gcsfs's own judgement; a connection that fails or falls silent is transient
too. Giving up raises ``StoreUnreachable``, whose message says why in words.

Imported only when a gs:// URL is used (it imports gcsfs and aiohttp); ``storage.filesystem`` makes these.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import aiohttp
import gcsfs
import gcsfs.core
from gcsfs.retry import is_retriable
from google.api_core import exceptions as api_exceptions
from google.api_core.retry import AsyncRetry

from tfrecorder.dataset.store_requests import (
    DEFAULT_STORAGE_TIMEOUT,
    REQUEST_SECONDS,
    StoreUnreachable,
    cleanup_seconds,
    run_requests,
)

logger = logging.getLogger(__name__)

# Google's client's backoff: 1 s, doubling up to 32 s, with jitter
_BACKOFF: dict[str, Any] = {"initial": 1.0, "maximum": 32.0, "multiplier": 2.0}


class _Silent(Exception):
    """One try that had no complete answer within its time."""


class BoundedGCSFileSystem(gcsfs.GCSFileSystem):
    """``gcsfs.GCSFileSystem`` whose operations end by ``storage_timeout`` seconds (retries included).

    Instances are cached per set of arguments, as every fsspec filesystem's are, and pickle as their arguments
    (they cross to Beam workers and forked writers)."""

    def __init__(self, *args: Any, storage_timeout: float = DEFAULT_STORAGE_TIMEOUT, **kwargs: Any):
        self.storage_timeout = float(storage_timeout)
        # connecting, and any silence while answering: half the deadline at most, so that one stalled request
        # leaves time for its retry (Google's client: 60 s of 120)
        silence = min(REQUEST_SECONDS, self.storage_timeout / 2)
        kwargs.setdefault("requests_timeout", aiohttp.ClientTimeout(total=None, sock_connect=silence,
                                                                    sock_read=silence))
        super().__init__(*args, **kwargs)

    async def _request(self, *args: Any, **kwargs: Any) -> Any:
        requests, brief = run_requests(), cleanup_seconds()
        if requests is None:
            return await self._bounded(brief, *args, **kwargs)
        if requests.stopped and brief is None:
            raise StoreUnreachable("the run was stopped", 0)
        task = asyncio.current_task()
        requests.add(task, asyncio.get_running_loop())
        try:
            return await self._bounded(brief, *args, **kwargs)
        except asyncio.CancelledError:
            if not requests.stopped:
                raise
            # stopped by its run: an error for the thread waiting on it (fsspec would hand it None)
            raise StoreUnreachable("the run was stopped", 0) from None
        finally:
            requests.discard(task)

    async def _bounded(self, brief: float | None, *args: Any, **kwargs: Any) -> Any:
        budget = min(brief, self.storage_timeout) if brief is not None else self.storage_timeout
        deadline = time.monotonic() + budget
        once = gcsfs.core.GCSFileSystem._request.__wrapped__  # one try: gcsfs's own retries are replaced

        async def attempt() -> Any:
            left = deadline - time.monotonic()  # a healthy transfer (one block, 5 MiB) may take it all
            try:
                return await asyncio.wait_for(once(self, *args, **kwargs), max(left, 0.001))
            except TimeoutError as e:  # ours, or aiohttp's silence bound (a TimeoutError too)
                raise _Silent() from e

        if brief is not None:  # cleanup on the way out: one short try, never a second deadline
            try:
                return await attempt()
            except Exception as e:
                if not _transient(e):
                    raise
                raise StoreUnreachable(_cause(e, budget), budget) from e
        try:
            return await AsyncRetry(predicate=_transient, timeout=budget, **_BACKOFF)(attempt)()
        except api_exceptions.RetryError as e:
            raise StoreUnreachable(_cause(e.cause, budget), budget) from e.cause


def _transient(error: Exception) -> bool:
    return isinstance(error, (_Silent, aiohttp.ClientConnectionError, asyncio.TimeoutError)) or is_retriable(error)


def _cause(error: Exception | None, seconds: float) -> str:
    """Why the store was given up on, in words."""
    if isinstance(error, (_Silent, asyncio.TimeoutError)):  # aiohttp's silence bound is a TimeoutError too
        return f"no answer from the store for {seconds:g} s"
    if isinstance(error, aiohttp.ClientConnectorError):
        if isinstance(error.os_error, ConnectionRefusedError):
            return f"connection refused by {error.host}:{error.port}"
        return f"cannot connect to {error.host}:{error.port} ({error.os_error})"
    if isinstance(error, aiohttp.ClientConnectionError):
        return f"connections to the store kept failing ({error})"
    code = getattr(error, "code", None)
    return f"the store kept failing (last: {'HTTP ' + str(code) if code else error})"
