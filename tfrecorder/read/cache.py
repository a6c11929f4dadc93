"""Remote shard cache (read side's IO edge): the gs:// and http(s) shards a reader opens, copied to a local folder
when the dataset is opened (each CRC-32C checked against dataset.json as it is copied), least recently used
copies evicted past a byte limit, the folder shared by the processes of one machine."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import re
import threading
import weakref
from collections import Counter
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from tfrecorder.arguments import check_count
from tfrecorder.dataset.manifest import ShardInfo
from tfrecorder.dataset.records import ChecksumFile
from tfrecorder.dataset.storage import Folder
from tfrecorder.errors import TFRecorderError

logger = logging.getLogger(__name__)

CACHED_PROTOCOLS = ("gs", "gcs", "http", "https")  # what TensorFlow may not read itself: read from local copies
_FILL_THREADS = 8  # copies made at once: a copy waits on the network, not on a core
_CHUNK = 1 << 20
_LOCK_NAME = ".lock"  # held (flock) while the cache's folder is measured and entries are evicted or reserved
_PINS_NAME = ".pins"  # a byte of it per entry, share-locked (lockf) by each process reading that entry
_PIN_SPACE = 1 << 40  # entries' bytes in .pins: 40 bits of their key's hash
# an entry: <hash of the shard's URL>-<crc32c>-<bytes>; a copy under way: .<entry>.<pid>-<thread>.partial
_ENTRY = re.compile(r"^[0-9a-f]{32}-[0-9a-f]{8}-(\d+)$")
_PARTIAL = re.compile(r"^\.([0-9a-f]{32}-[0-9a-f]{8}-(\d+))\.\d+-\d+\.partial$")


@dataclass(frozen=True)
class CacheEntry:
    """A shard's copy in the cache: keyed by its URL, CRC-32C and size, so that another dataset, or the shard
    rewritten, never finds a stale copy."""

    url: str
    shard: ShardInfo
    path: str  # the local copy's path

    @property
    def pin_offset(self) -> int:
        return int(os.path.basename(self.path)[:10], 16) % _PIN_SPACE


def entry_name(url: str, shard: ShardInfo) -> str:
    """The cache entry's file name for ``shard`` at ``url`` (see ``CacheEntry``)."""
    return f"{hashlib.sha256(url.encode()).hexdigest()[:32]}-{shard.crc32c}-{shard.bytes}"


def wants_cache(folder: Folder) -> bool:
    """Whether ``cache_dir=`` applies to ``folder``: a store or a web server; a local folder is read as it is."""
    return any(protocol in CACHED_PROTOCOLS for protocol in folder.protocols)


class CachedShards:
    """The local copies of the shards a reader opened (``paths``: shard file -> local path), in use until every
    dataset given to ``hold_while`` is gone: no process evicts them before."""

    def __init__(self, paths: dict[str, str], pins: _Pins):
        self.paths = paths
        self._pins = pins
        self._holders = 0
        self._lock = threading.Lock()

    def hold_while(self, dataset: object) -> None:
        with self._lock:
            self._holders += 1
        weakref.finalize(dataset, self._let_go)

    def _let_go(self) -> None:
        with self._lock:
            self._holders -= 1
            last = self._holders == 0
        if last:
            self._pins.release()


def cache_shards(folder: Folder, shards: Sequence[ShardInfo], cache_dir: str, cache_limit: int | None) -> CachedShards:
    """Local copies of ``shards`` of ``folder`` in ``cache_dir``. Those there already are checked (their CRC-32C,
    read in full: a damaged one is copied again, with a warning naming it) and marked as used now; the others are
    copied through fsspec in threads, each CRC-32C and size checked against dataset.json as it is copied.
    ``cache_limit``: the most bytes the folder holds; least recently used entries not in use are evicted to make
    room. Shards bigger together than the limit are refused (one line) before anything is copied: a cache that
    evicted what this read still needs would copy every shard every epoch.

    Raises:
        TFRecorderError: a copy whose CRC-32C or size is not dataset.json's (naming the shard), a shard without
            a CRC in dataset.json (another tool's files), or shards that do not fit in ``cache_limit``.
    """
    if cache_limit is not None:
        check_count("cache_limit", cache_limit)
    unchecked = next((s for s in shards if not s.crc32c), None)
    if unchecked is not None:
        raise TFRecorderError(f"cache_dir=: {folder.url_of(unchecked.file)} has no CRC-32C in a dataset.json to check "
                              f"its copy against (another tool's files): read it without cache_dir=")
    needed = sum(s.bytes for s in shards)
    if cache_limit is not None and needed > cache_limit:
        raise TFRecorderError(f"cache_limit={cache_limit} bytes is less than the {needed} bytes of the {len(shards)} "
                              f"shards read from {folder.url}: raise it, read fewer splits or a part (shard=), or "
                              f"read without cache_dir=")
    os.makedirs(cache_dir, exist_ok=True)
    entries = [CacheEntry(folder.url_of(s.file), s, os.path.join(cache_dir, entry_name(folder.url_of(s.file), s)))
               for s in shards]
    pins = _Pins(cache_dir, entries)  # before anything is looked at: no process evicts them from now on
    try:
        copies = 0
        with ThreadPoolExecutor(_FILL_THREADS) as pool:
            for copied in pool.map(lambda entry: _fill(folder, entry, cache_dir, cache_limit), entries):
                copies += copied
    except BaseException:
        pins.release()
        raise
    logger.info("cache %s: %d of %d shards of %s copied, the rest there already", cache_dir, copies, len(entries),
                folder.url)
    return CachedShards({e.shard.file: e.path for e in entries}, pins)


def _fill(folder: Folder, entry: CacheEntry, cache_dir: str, cache_limit: int | None) -> bool:
    """Make ``entry``'s copy, unless it is there (then mark it used now). One process copies an entry at a time
    (the entry's lock file); the copy appears whole, by a rename. Whether it was copied here."""
    with _locked(f"{os.path.join(cache_dir, '.' + os.path.basename(entry.path))}.lock"):
        if os.path.exists(entry.path) and _whole(entry):
            os.utime(entry.path)  # least recently used: by the time each entry was last opened
            return False
        partial = os.path.join(cache_dir, f".{os.path.basename(entry.path)}.{os.getpid()}-{threading.get_ident()}"
                                          f".partial")
        with _locked(os.path.join(cache_dir, _LOCK_NAME)):
            _make_room(cache_dir, entry.shard.bytes, cache_limit)
            descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)  # counted from now on
        try:
            with os.fdopen(descriptor, "wb") as out:
                _copy(folder, entry, out)
            os.replace(partial, entry.path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.remove(partial)
            raise
        return True


def _whole(entry: CacheEntry) -> bool:
    """Whether the copy in the cache still has its shard's CRC-32C and size, read in full (a local read, at the
    speed of the disk): TensorFlow's own record CRCs would stop a read of a damaged copy without naming it, so a
    damaged one is named here, removed and copied again."""
    with open(entry.path, "rb") as copy:
        checked = ChecksumFile(copy).drain()
    if (checked.bytes, checked.crc32c) == (entry.shard.bytes, entry.shard.crc32c):
        return True
    logger.warning("cache: %s, the copy of %s, has %d bytes and CRC-32C %s, dataset.json says %d and %s: damaged "
                   "in the cache; copied again", entry.path, entry.url, checked.bytes, checked.crc32c,
                   entry.shard.bytes, entry.shard.crc32c)
    os.remove(entry.path)
    return False


def _copy(folder: Folder, entry: CacheEntry, out: object) -> None:
    """The shard's bytes, read through fsspec, written to ``out``; their CRC-32C and size checked against
    dataset.json's."""
    shard = entry.shard
    with folder.open(shard.file) as raw:
        checked = ChecksumFile(raw)
        while data := checked.read(_CHUNK):
            out.write(data)  # type: ignore[attr-defined]
    if (checked.bytes, checked.crc32c) != (shard.bytes, shard.crc32c):
        raise TFRecorderError(f"{entry.url} as copied to the cache has {checked.bytes} bytes and CRC-32C "
                              f"{checked.crc32c}, dataset.json says {shard.bytes} and {shard.crc32c}: it was "
                              f"replaced or damaged since the dataset was written; `tfrecorder verify {folder.url}` "
                              f"checks every shard")


def _make_room(cache_dir: str, needed: int, cache_limit: int | None) -> None:
    """Evict the least recently used entries no process has in use until ``needed`` more bytes fit in
    ``cache_limit`` (with the cache's lock held); a TFRecorderError where entries in use leave no room."""
    if cache_limit is None:
        return
    entries, used = [], 0
    for item in os.scandir(cache_dir):
        entry, partial = _ENTRY.match(item.name), _PARTIAL.match(item.name)
        if entry:
            entries.append((item.stat().st_mtime, int(entry.group(1)), item.path))
        used += int(entry.group(1)) if entry else int(partial.group(2)) if partial else 0  # copies under way too
    for _, size, path in sorted(entries):
        if used + needed <= cache_limit:
            return
        if _evict(cache_dir, path):
            used -= size
    if used + needed > cache_limit:
        raise TFRecorderError(f"cache {cache_dir}: {used} of its cache_limit={cache_limit} bytes are shards in use by "
                              f"readers, no room for {needed} more: raise cache_limit, or read fewer shards at once")


def _evict(cache_dir: str, path: str) -> bool:
    """Delete the entry at ``path`` unless a reader of this process or another has it in use."""
    offset = int(os.path.basename(path)[:10], 16) % _PIN_SPACE
    if _Pins.held_here(path):
        return False
    descriptor = _pins_file(cache_dir)
    try:
        fcntl.lockf(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, offset)
    except OSError:  # another process reads it
        return False
    try:
        os.remove(path)
        with contextlib.suppress(FileNotFoundError):  # its copy lock: nobody waits on it, nobody reads the entry
            os.remove(os.path.join(cache_dir, f".{os.path.basename(path)}.lock"))
        logger.debug("cache %s: evicted %s (least recently used)", cache_dir, os.path.basename(path))
        return True
    finally:
        fcntl.lockf(descriptor, fcntl.LOCK_UN, 1, offset)


@contextlib.contextmanager
def _locked(path: str) -> Iterator[None]:
    """``path``'s exclusive flock, held by this open of it: other threads and processes wait; a process that dies
    lets go of it."""
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)


# The .pins file of each cache folder, opened once per process and never closed: closing any descriptor of a file
# lets go of every lockf lock the process holds on it.
_PINS_FILES: dict[str, int] = {}
_PINS_LOCK = threading.Lock()


def _pins_file(cache_dir: str) -> int:
    key = os.path.realpath(cache_dir)
    with _PINS_LOCK:
        if key not in _PINS_FILES:
            _PINS_FILES[key] = os.open(os.path.join(key, _PINS_NAME), os.O_RDWR | os.O_CREAT, 0o644)
        return _PINS_FILES[key]


class _Pins:
    """Entries in use by a reader of this process: counted here (lockf locks are the process's, not a thread's or
    reader's) and share-locked in .pins for the other processes' evictions."""

    _held: Counter[str] = Counter()
    _lock = threading.Lock()

    def __init__(self, cache_dir: str, entries: Sequence[CacheEntry]):
        self._descriptor = _pins_file(cache_dir)
        self._entries = list(entries)
        with _Pins._lock:
            for entry in self._entries:
                if not _Pins._held[entry.path]:
                    fcntl.lockf(self._descriptor, fcntl.LOCK_SH, 1, entry.pin_offset)  # waits out an eviction
                _Pins._held[entry.path] += 1

    @classmethod
    def held_here(cls, path: str) -> bool:
        with cls._lock:
            return cls._held[path] > 0

    def release(self) -> None:
        with _Pins._lock:
            for entry in self._entries:
                _Pins._held[entry.path] -= 1
                if not _Pins._held[entry.path]:
                    del _Pins._held[entry.path]
                    fcntl.lockf(self._descriptor, fcntl.LOCK_UN, 1, entry.pin_offset)
            self._entries = []
