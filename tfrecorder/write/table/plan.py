"""Plan (pure): each split's row count -> frozen ShardSpecs saying which ranks of its rows in stored order go to
which shard file, before any IO."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from tfrecorder.dataset.file_formats import DEFAULT_FILE_FORMAT, format_named, format_of_file
from tfrecorder.dataset.records import INDEX_SUFFIX
from tfrecorder.dataset.versions import version_mark
from tfrecorder.errors import TFRecorderError
from tfrecorder.write.splits import WRITTEN_SPLITS

SHARD_TEMPLATE = "{split}-{index:05d}-of-{count:05d}{suffix}"
TARGET_SHARD_BYTES = 128 * 1024 * 1024
SAMPLE_ROWS = 64  # rows of each split whose records estimate its bytes: those with the smallest content keys
MAX_SHARD_BYTES = 4 * 1024**3  # a cap on explicit num_shards: one reader per shard file, retried whole on failure


@dataclass(frozen=True)
class ShardSpec:
    """One shard file: its split and name, and the ranks of the split's rows it holds in stored order (by
    content key, then row number): ``start`` to ``stop``, of the split's ``split_rows``."""

    split: str
    index: int
    count: int
    filename: str
    start: int = 0
    stop: int = 0
    split_rows: int = 0
    version: int = 1  # the dataset version it belongs to: a later one's names say it (versions.version_mark)

    @property
    def rows(self) -> int:
        return self.stop - self.start

    @property
    def index_filename(self) -> str | None:
        """``train-00000-of-00002.tfindex``: the shard's record index, beside it (None: a file format that indexes
        its records itself, as ArrayRecord files do)."""
        if not format_of_file(self.filename).side_index:
            return None
        return SHARD_TEMPLATE.format(split=self.split.lower() + version_mark(self.version), index=self.index,
                                     count=self.count, suffix=INDEX_SUFFIX)


def shard_filename(split: str, index: int, count: int, compression: str | None,
                   file_format: str = DEFAULT_FILE_FORMAT) -> str:
    """``train-00000-of-00002.tfrecord`` (``.gz`` with gzip; ``.array_record`` for ArrayRecord files: the file
    format's suffix)."""
    suffix = format_named(file_format).file_suffix(compression)
    return SHARD_TEMPLATE.format(split=split.lower(), index=index, count=count, suffix=suffix)


def shard_count(num_rows: int, bytes_per_row: float, num_shards: int | None) -> int:
    """``num_shards`` if given, else the whole number of TARGET_SHARD_BYTES shards nearest the split's bytes (at
    least 1, at most one per row): a split needing more than one gets shards of 0.75 to 1.25 times the target
    (101 to 168 MB), never the half-empty ones rounding up would give (a split of 1.05 targets: 2 of 0.53)."""
    if num_shards:
        if num_shards < 0:
            raise TFRecorderError(f"num_shards={num_shards}: give a positive number, or None to choose by size")
        count = max(1, min(num_shards, num_rows))
        if num_rows * bytes_per_row / count > MAX_SHARD_BYTES:
            least = math.ceil(num_rows * bytes_per_row / MAX_SHARD_BYTES)
            size = num_rows * bytes_per_row / count / 1024**3
            raise TFRecorderError(
                f"num_shards={num_shards} makes shards of about {size:.1f} GiB, over the {MAX_SHARD_BYTES // 1024**3} "
                f"GiB cap; pass num_shards={least} or more, or None (~128 MiB each)"
            )
        return count
    return max(1, min(num_rows, math.floor(num_rows * bytes_per_row / TARGET_SHARD_BYTES + 0.5)))


def estimates_sizes(num_shards: int | None, images: bool, rows: int) -> bool:
    """Whether the plan needs the records' size estimate. With num_shards given, sizes only check the shard cap:
    skip the image file-size requests when shards are small."""
    return not num_shards or not images or rows / num_shards > 1000


def plan_shards(
    split_rows: Mapping[str, int],
    *,
    num_shards: int | None = None,
    bytes_per_row: Mapping[str, float] | None = None,
    compression: str | None = None,
    images: Mapping[str, np.ndarray] | None = None,
    file_format: str = DEFAULT_FILE_FORMAT,
) -> tuple[ShardSpec, ...]:
    """Divide each written split's rows (``split_rows``: how many), in stored order, into shards of near-equal
    size (``shard_count``): contiguous ranges of ranks, so that the same rows make the same shards whatever
    their input order, and a table sorted by class gives shards - and records inside them - with classes
    mixed (stored order is by content key). ``images``: a detection table's box rows of each image of a
    split, in stored order (``whole_image_shards``)."""
    specs: list[ShardSpec] = []
    for split in WRITTEN_SPLITS:
        total = int(split_rows.get(split, 0))
        if not total:
            continue
        count = shard_count(total, (bytes_per_row or {}).get(split, 0.0), num_shards)
        if images is not None and split in images:
            count = whole_image_shards(images[split], count)
        for index in range(count):
            specs.append(ShardSpec(split, index, count, shard_filename(split, index, count, compression, file_format),
                                   total * index // count, total * (index + 1) // count, total))
    return tuple(specs)


def whole_image_shards(rows_per_image: np.ndarray, count: int) -> int:
    """The most shards, up to ``count``, that a detection split divides into with none left empty: a shard holds
    the images whose first box row falls in its range of ranks (``spill.whole_groups``), so a split gets no
    more shards than images, and fewer where an image's boxes would span a whole shard's range (one image
    of 50,000 boxes among few); the ranges of a count that leaves none empty are unchanged.
    ``rows_per_image``: each image's box rows, in stored order."""
    firsts = np.concatenate([[0], np.cumsum(rows_per_image)[:-1]])  # the rank of each image's first row
    total = int(np.sum(rows_per_image))
    count = max(1, min(count, len(firsts)))
    while count > 1:
        bounds = [total * index // count for index in range(count + 1)]
        if np.all(np.diff(np.searchsorted(firsts, bounds)) > 0):  # each range holds an image's first row
            return count
        count -= 1
    return count
