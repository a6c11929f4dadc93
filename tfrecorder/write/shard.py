"""Shard: ``write_shard``, the one shard writer every runner uses, what it returns (ShardResult, RowFailure), and
how it maps images over threads (``ordered_map``, ``default_workers``)."""

from __future__ import annotations

import contextvars
import os
from array import array
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np

from tfrecorder.dataset.records import ChecksumFile, RecordWriter
from tfrecorder.dataset.storage import Folder
from tfrecorder.errors import RowError
from tfrecorder.write.encode import ExampleEncoder
from tfrecorder.write.fetch import ImageError
from tfrecorder.write.images import StoredImage, load_image
from tfrecorder.write.leakage import content_key
from tfrecorder.write.options import WriteOptions
from tfrecorder.write.plan import ShardSpec
from tfrecorder.write.splits import WRITTEN_SPLITS
from tfrecorder.write.table import Table

T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True)
class RowFailure:
    """A row that was not written, and why (one line of errors.csv)."""

    row: int
    split: str
    image_uri: str | None
    error: str
    message: str


@dataclass(frozen=True)
class ImageStats:
    """What the stored images of some records hold: channel counts, formats, and one (h, w) if all share it."""

    channels: frozenset[int] = frozenset()
    formats: frozenset[str] = frozenset()
    shapes: frozenset[tuple[int, int]] = frozenset()  # at most two kept: enough to know "all the same"
    orientations: frozenset[int] = frozenset()

    def add(self, image: StoredImage) -> ImageStats:
        shape = (image.height, image.width)
        if image.channels in self.channels and image.format in self.formats and (
                shape in self.shapes or len(self.shapes) > 1) and image.orientation in self.orientations:
            return self
        shapes = self.shapes if len(self.shapes) > 1 else self.shapes | {shape}
        return ImageStats(self.channels | {image.channels}, self.formats | {image.format}, shapes,
                          self.orientations | {image.orientation})

    def merge(self, other: ImageStats) -> ImageStats:
        shapes = self.shapes | other.shapes
        return ImageStats(self.channels | other.channels, self.formats | other.formats,
                          shapes if len(shapes) < 2 else frozenset(sorted(shapes)[:2]),
                          self.orientations | other.orientations)


@dataclass(frozen=True)
class ShardResult:
    """What writing one ShardSpec produced."""

    spec: ShardSpec
    records: int
    bytes: int
    crc32c: str
    failures: tuple[RowFailure, ...]
    images: ImageStats = ImageStats()
    content_keys: array = field(default_factory=lambda: array("Q"))  # content key of each written image
    content_key_rows: array = field(default_factory=lambda: array("q"))  # ... and its row
    index_bytes: int = 0  # the .tfindex file beside the shard: its size and CRC-32C
    index_crc32c: str = ""
    first_crc: int | None = None  # masked CRC of the first record (None: no record)

    def keyed_content(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Its written images' content keys, rows and split code (``leakage.KeyedRows``)."""
        keys = np.frombuffer(self.content_keys, np.uint64) if len(self.content_keys) else np.zeros(0, np.uint64)
        rows = np.frombuffer(self.content_key_rows, np.int64) if len(self.content_key_rows) else np.zeros(0, np.int64)
        return keys, rows, np.full(len(keys), WRITTEN_SPLITS.index(self.spec.split), np.int8)


# A function that maps row positions to (image and its content key) or the ImageError each raised, in order.
ImageOrError = tuple[StoredImage, int] | tuple[ImageError, None]
ImageMapper = Callable[[Callable[[int], ImageOrError], Iterable[int]], Iterator[ImageOrError]]


def serial_map(fn, rows):
    """The ImageMapper that fetches one image at a time."""
    return map(fn, rows)


def write_shard(
    spec: ShardSpec,
    parts: Iterable[tuple[Sequence[int], Table]],
    folder: Folder,
    options: WriteOptions,
    image_map: ImageMapper = serial_map,
    on_row: Callable[[], None] | None = None,
) -> ShardResult:
    """Write one shard under a temporary name, then move it into place. Its rows come in ``parts`` - (row
    numbers, their validated table), in shard order - one held at a time, so a shard of a table larger
    than memory is written in the memory of a part; a runner ships row metadata to the worker that writes
    the shard, never image bytes."""
    failures: list[RowFailure] = []
    stats = ImageStats()
    content_keys, content_key_rows = array("Q"), array("q")
    with folder.create(spec.filename) as raw, folder.create(spec.index_filename) as index_raw:
        counted, index = ChecksumFile(raw), ChecksumFile(index_raw)
        writer = RecordWriter(counted, options.compression, index)  # type: ignore[arg-type]
        for rows, table in parts:
            encoder = ExampleEncoder(table)
            for local, (image, key) in enumerate(_images(table, options, image_map)):
                if isinstance(image, ImageError):
                    uri = table.image_uris[local] if table.image_uris is not None else None
                    failure = RowFailure(rows[local], spec.split, uri, image.error, image.message)
                    if options.on_error == "raise":
                        raise RowError(failure.row, failure.split, str(failure.image_uri), image.error,
                                       image.message)
                    failures.append(failure)
                else:
                    writer.write(encoder.encode(local, image))
                    if image is not None:
                        stats = stats.add(image)
                        content_keys.append(key)
                        content_key_rows.append(rows[local])
                if on_row is not None:
                    on_row()
        writer.close()
    return ShardResult(spec, writer.records, counted.bytes, counted.crc32c, tuple(failures), stats, content_keys,
                       content_key_rows, index.bytes, index.crc32c, writer.first_crc)


def _images(table: Table, options: WriteOptions, image_map: ImageMapper):
    if table.image_locations is None:
        return ((None, None) for _ in range(table.num_rows))
    locations, settings = table.image_locations, options.images

    def fetch(row: int) -> ImageOrError:
        """Runs on the mapper's threads: the read, the check and the content hash (hashlib lets go of the
        GIL) all happen there, leaving the writing thread only encoding and writing."""
        try:
            image = load_image(locations[row], settings, options.fetch)
        except ImageError as e:
            return e, None
        return image, content_key(image.data)

    return image_map(fetch, range(table.num_rows))


def default_workers(remote: bool = True) -> int:
    """Threads for images: one per core for local files (decoding is the work; more threads only
    fight over the GIL), many more for remote URLs (most of each fetch is waiting on the network)."""
    cores = os.cpu_count() or 1
    return min(32, 8 * cores) if remote else cores


def ordered_map(pool: ThreadPoolExecutor, window: int) -> Callable[[Callable[[T], R], Iterable[T]], Iterator[R]]:
    """An ImageMapper running ``fn`` on the pool with at most ``window`` items in flight, results in order.

    The window bounds memory: image bytes are held only for rows between being fetched and written.
    """

    def mapper(fn: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
        pending: deque = deque()
        for item in items:  # each with the caller's context: its run's store requests (storage.requests_of_run)
            pending.append(pool.submit(contextvars.copy_context().run, fn, item))
            if len(pending) >= window:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()

    return mapper
