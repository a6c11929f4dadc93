"""Shard: ``write_shard``, the one shard writer every runner uses (``write_spilled_shard``: a spilled shard's rows read
back and written), what it returns (ShardResult, RowFailure), and how it maps images over threads
(``ordered_map``, ``default_workers``)."""

from __future__ import annotations

import contextlib
import contextvars
from array import array
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

import numpy as np

from tfrecorder import machine
from tfrecorder.dataset.connectors.media import (
    DATA,
    LOCATION,
    LOCATIONS_SEPARATOR,
    SUMMARIZED_VALUES,
    URI,
    Media,
    packed,
)
from tfrecorder.dataset.file_formats import format_of_file
from tfrecorder.dataset.records import ChecksumFile
from tfrecorder.dataset.storage import Folder
from tfrecorder.errors import ImageError, RowError, TFRecorderError
from tfrecorder.write.record.encode import ENCODERS
from tfrecorder.write.record.fetch import fetch as fetch_file
from tfrecorder.write.record.images import StoredImage, held_image, load_image
from tfrecorder.write.record.masks import load_mask, pixel_stride
from tfrecorder.write.settings import WriteOptions
from tfrecorder.write.splits import WRITTEN_SPLITS
from tfrecorder.write.table.leakage import content_key
from tfrecorder.write.table.plan import ShardSpec
from tfrecorder.write.table.spill import SpilledShard, shard_parts
from tfrecorder.write.table.table import Column, Table

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
class ObjectStats:
    """What the records of a detection table's shard hold: rows written, objects by label id, boxes clipped, and
    the most objects one record holds (None: unknown, a shard journaled before it was counted); objects with an
    instance mask, and those whose box does not hold it (their count and first rows)."""

    rows: int = 0
    labels: tuple[tuple[int, int], ...] = ()  # (label id, objects), by label id
    clipped: int = 0
    most: int | None = 0
    masked: int = 0
    loose: int = 0
    loose_rows: tuple[int, ...] = ()  # the first LOOSE_ROWS of them, by row

    def add(self, rows: int, labels: Sequence[int], clipped: int, masked: int = 0,
            loose: Sequence[int] = ()) -> ObjectStats:
        counts = dict(self.labels)
        for label in labels:
            counts[label] = counts.get(label, 0) + 1
        most = None if self.most is None else max(self.most, len(labels))
        return ObjectStats(self.rows + rows, tuple(sorted(counts.items())), self.clipped + clipped, most,
                           self.masked + masked, self.loose + len(loose),
                           tuple(sorted((*self.loose_rows, *loose))[:LOOSE_ROWS]))

    def merge(self, other: ObjectStats) -> ObjectStats:
        counts = dict(self.labels)
        for label, n in other.labels:
            counts[label] = counts.get(label, 0) + n
        most = None if self.most is None or other.most is None else max(self.most, other.most)
        return ObjectStats(self.rows + other.rows, tuple(sorted(counts.items())), self.clipped + other.clipped, most,
                           self.masked + other.masked, self.loose + other.loose,
                           tuple(sorted((*self.loose_rows, *other.loose_rows))[:LOOSE_ROWS]))


LOOSE_ROWS = 10  # rows of objects whose box does not hold their instance mask, named in the warning


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
    objects: ObjectStats | None = None  # a detection table's: its rows written, objects by label, clipped boxes
    mask_pixels: tuple[tuple[int, int], ...] | None = None  # a segmentation table's: (class id, pixels) written
    # media columns' summarized measures: (feature/measure, its distinct values written) (``Media.summarized``)
    measured: tuple[tuple[str, tuple[Any, ...]], ...] = ()

    @property
    def rows_written(self) -> int:
        """Input rows written: one per record, or for a detection table one per box (and object-less image)."""
        return self.objects.rows if self.objects is not None else self.records

    def keyed_content(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Its written images' content keys, rows and split code (``leakage.KeyedRows``)."""
        keys = np.frombuffer(self.content_keys, np.uint64) if len(self.content_keys) else np.zeros(0, np.uint64)
        rows = np.frombuffer(self.content_key_rows, np.int64) if len(self.content_key_rows) else np.zeros(0, np.int64)
        return keys, rows, np.full(len(keys), WRITTEN_SPLITS.index(self.spec.split), np.int8)


# A function that maps row positions to (image, its content key, the values of its media columns' features) or the
# ImageError each raised, in order.
ImageOrError = tuple[StoredImage | None, int | None, dict[str, Any] | None] | tuple[ImageError, None, None]
ImageMapper = Callable[[Callable[[int], ImageOrError], Iterable[int]], Iterator[ImageOrError]]


def serial_map(fn, rows):
    """The ImageMapper that fetches one image at a time."""
    return map(fn, rows)


def _index_file(folder: Folder, spec: ShardSpec, durable: bool) -> Any:
    """The shard's .tfindex opened for writing; none for a file format that indexes itself (ArrayRecord)."""
    return contextlib.nullcontext(None) if spec.index_filename is None else folder.create(spec.index_filename, durable)


def write_shard(
    spec: ShardSpec,
    parts: Iterable[tuple[Sequence[int], Table]],
    folder: Folder,
    options: WriteOptions,
    image_map: ImageMapper = serial_map,
    on_row: Callable[[], None] | None = None,
    durable: bool = True,
) -> ShardResult:
    """Write one shard under a temporary name, then move it into place. Its rows come in ``parts`` - (row
    numbers, their validated table), in shard order - one held at a time, so a shard of a table larger
    than memory is written in the memory of a part; a runner ships row metadata to the worker that writes
    the shard, never image bytes. ``durable=False``: not flushed to the disk (a segment, joined later)."""
    failures: list[RowFailure] = []
    stats = ImageStats()
    objects: ObjectStats | None = None
    mask_pixels: np.ndarray | None = None
    content_keys, content_key_rows = array("Q"), array("q")
    measured: dict[str, set[Any]] = {}  # the distinct values of media columns' summarized measures
    stride, seen = pixel_stride(spec.split_rows), 0  # masks whose pixels are counted; ranks before this part
    with folder.create(spec.filename, durable) as raw, _index_file(folder, spec, durable) as index_raw:
        counted, index = ChecksumFile(raw), ChecksumFile(index_raw)
        writer = format_of_file(spec.filename).open_sink(counted, compression=options.compression, index=index,
                                                         local_file=raw if folder.is_local else None)
        encoders = ENCODERS[options.layout.name]
        for rows, table in parts:
            detection = table.is_detection
            if detection:  # a record per image: its box rows are together, in key order
                if encoders.objects is None:  # refused as the conversion is planned
                    raise TFRecorderError(str(options.layout.refuses_detection))
                objects = objects or ObjectStats()
                encoder: Any = encoders.objects(table, options.box_orientation, options.fetch, options.masks)
                records = image_groups(table.image_locations)
            else:
                encoder = encoders.rows(table)
                records = [[local] for local in range(table.num_rows)]
            pixels_at = range((stride - (spec.start + seen) % stride) % stride, table.num_rows, stride)
            fetched = _images(table, options, image_map, [record[0] for record in records], pixels_at)
            seen += table.num_rows
            summarized = [f"{c.feature}/{name}" for c in table.features if isinstance(c.connector, Media)
                          for name in c.connector.summarized_measures]
            for record, (image, key, files) in zip(records, fetched):
                record_rows = [rows[local] for local in record]
                if key is not None and options.known_content is not None:  # an append: its image already written
                    image = options.known_content.duplicate(key, spec.split) or image
                if not isinstance(image, ImageError) and detection:
                    try:
                        data, labels, clipped = encoder.encode(record, record_rows, image)
                        objects = objects.add(len(record), labels, clipped, encoder.masked, encoder.loose)
                        if encoder.mask_pixels is not None:  # mask_from_instances: every semantic mask counted
                            image = replace(image, mask_pixels=encoder.mask_pixels)
                    except ImageError as e:  # a box beyond the image: the image and its rows are not written
                        image = e
                elif not isinstance(image, ImageError):
                    try:
                        data = encoder.encode(record[0], image, files)
                    except ImageError as e:  # a value its kind refused as the table was checked (tensor_shape)
                        image = e
                if isinstance(image, ImageError):
                    uri = table.image_uris[record[0]] if table.image_uris is not None else None
                    if options.on_error == "raise":
                        raise RowError(record_rows[0], spec.split, str(uri), image.error, image.message)
                    failures.extend(RowFailure(row, spec.split, uri, image.error, image.message)
                                    for row in record_rows)
                else:
                    writer.write(data)
                    if image is not None and image.mask_pixels is not None:
                        mask_pixels = image.mask_pixels if mask_pixels is None else mask_pixels + image.mask_pixels
                    for name in summarized if files else ():
                        found = measured.setdefault(name, set())
                        if len(found) < SUMMARIZED_VALUES:
                            found.add(files[name])
                    if image is not None:
                        stats = stats.add(image)
                        content_keys.append(key)
                        content_key_rows.append(record_rows[0])
                if on_row is not None:
                    for _ in record:
                        on_row()
        writer.close()
    return ShardResult(spec, writer.records, counted.bytes, counted.crc32c, tuple(failures), stats, content_keys,
                       content_key_rows, index.bytes, index.crc32c, writer.first_crc, objects,
                       None if mask_pixels is None else tuple((int(i), int(n)) for i, n in enumerate(mask_pixels) if n),
                       tuple((name, tuple(sorted(values))) for name, values in sorted(measured.items())))


def merged_measures(results: Iterable[ShardResult]) -> dict[str, tuple[Any, ...]]:
    """The distinct values of each summarized measure over shards' results (``ShardResult.measured``)."""
    found: dict[str, set[Any]] = {}
    for result in results:
        for name, values in result.measured:
            found.setdefault(name, set()).update(values)
    return {name: tuple(sorted(values))[:SUMMARIZED_VALUES] for name, values in sorted(found.items())}


def image_groups(locations: Sequence[str | None]) -> list[list[int]]:
    """Positions of rows of one image, in order: a detection table's rows come grouped by image (key order)."""
    groups: list[list[int]] = []
    for position, location in enumerate(locations):
        if groups and locations[groups[-1][0]] == location:
            groups[-1].append(position)
        else:
            groups.append([position])
    return groups


def write_spilled_shard(shard: SpilledShard, folder: Folder, options: Any, image_map: ImageMapper = serial_map,
                        on_row: Any = None, durable: bool = True) -> ShardResult:
    """Write one shard of a streamed table (``write_shard`` for the rows ``shard_parts`` reads back)."""
    return write_shard(shard.spec, shard_parts(shard), folder, options, image_map, on_row, durable)


def _images(table: Table, options: WriteOptions, image_map: ImageMapper, positions: Sequence[int],
            pixels_at: range = range(0)):
    """The images at ``positions`` of ``table``, each with its mask if it has one (the pixels of each class
    counted in the masks at the ``pixels_at`` positions), and the files of its media columns each prepared by
    its kind (``connectors.media``)."""
    keywords = dict(options.identity)  # convert's keywords that set a kind's parameters (sample_rate=)
    media = [(c, kind.configured(keywords)) for c in table.features if isinstance(kind := c.connector, Media)]
    if table.image_locations is None and not media:
        return ((None, None, None) for _ in positions)
    locations, settings = table.image_locations, options.images

    masks, held = table.mask_locations, table.image_data

    def fetch(row: int) -> ImageOrError:
        """Runs on the mapper's threads: the read, the check and the content hash (hashlib lets go of the
        GIL) all happen there, leaving the writing thread only encoding and writing. A segmentation table's
        mask is read and checked with its image. An image the table holds is taken from its row, checked as a
        file's bytes are."""
        try:
            files = _media_files(media, row, options) if media else None
            if locations is None:
                return None, None, files
            if held is not None and held[row] is not None:
                image = held_image(bytes(held[row]), settings, options.fetch)  # a memoryview: its copy
            elif held is not None and locations[row] is None:  # a table of images: no URI was asked for
                raise ImageError("missing_uri", "the row has no image (an empty cell)")
            else:
                image = load_image(locations[row], settings, options.fetch)
            if masks is not None:
                mask, pixels = load_mask(masks[row], table.mask_uris[row], image, table.image_uris[row],
                                         options.masks, settings.size, settings.resize_mode, settings.validate,
                                         options.fetch, row in pixels_at)
                image = replace(image, mask=mask, mask_pixels=pixels)
        except ImageError as e:
            return e, None, None
        return image, content_key(image.data), files

    return image_map(fetch, positions)


def _media_files(columns: Sequence[tuple[Column, Media]], row: int, options: WriteOptions) -> dict[str, Any]:
    """The values of every feature of ``row``'s media columns (each with its kind): each file fetched (or taken
    from the table) and prepared by its kind; an ImageError where one is missing, cannot be read, or is not of
    its kind."""
    found: dict[str, Any] = {}
    for column, kind in columns:
        value = column.values[row]
        if value is None:
            raise ImageError("missing_uri", f"column {column.name!r}: the row has no value (an empty cell)")
        data = value[DATA] if value[DATA] is not None else _fetched(value[LOCATION], options)
        stored, measured = kind.prepare(data, value[URI] or f"row {row}'s {column.name}")
        found[column.feature] = stored
        found.update((name, connector.check(measured[name.rpartition("/")[2]], set()))  # text as its UTF-8 bytes
                     for name, connector in kind.feature_names(column.feature).items() if name != column.feature)
    return found


def _fetched(location: str, options: WriteOptions) -> bytes:
    """A media value's file, or its several files (a clip's frame images, a location a line) ``packed``."""
    if LOCATIONS_SEPARATOR not in location:
        return fetch_file(location, options.fetch)
    return packed([fetch_file(one, options.fetch) for one in location.split(LOCATIONS_SEPARATOR)])


def default_workers(remote: bool = True) -> int:
    """Threads for images: one per core for local files (decoding is the work; more threads only
    fight over the GIL), many more for remote URLs (most of each fetch is waiting on the network)."""
    cores = machine.cores()
    return min(32, 8 * cores) if remote else cores


def ordered_map(pool: ThreadPoolExecutor, window: int) -> Callable[[Callable[[T], R], Iterable[T]], Iterator[R]]:
    """An ImageMapper running ``fn`` on the pool with at most ``window`` items in flight, results in order.

    The window bounds memory: image bytes are held only for rows between being fetched and written.
    """

    def mapper(fn: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
        pending: deque = deque()
        for item in items:  # each with the caller's context: its run's store requests (store_requests.requests_of_run)
            pending.append(pool.submit(contextvars.copy_context().run, fn, item))
            if len(pending) >= window:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()

    return mapper
