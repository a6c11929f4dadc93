"""Statistics: a dataset's statistics per split and feature, in TFDV's format (``statistics.pb``, a
``DatasetFeatureStatisticsList``), from one pass over its shards.

Every feature gets TFDV's common statistics (records with and without it, values per record) and the statistics of
its kind: numbers their min, max, mean, standard deviation, zeros, quantiles and a histogram; text and class labels
their counts (labels by the vocabulary's names); bytes their sizes. What a kind means beyond its values is in
``custom_stats`` under the names below (``CUSTOM``): an image's aspect, boxes per image and box sizes, keypoint
visibility, mask class shares, a tensor's shape, a list's length, an audio clip's duration and rate.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from tensorflow_metadata.proto.v0 import statistics_pb2 as tfdv

from tfrecorder.dataset import connectors
from tfrecorder.dataset.features import IMAGE_HEIGHT, IMAGE_WIDTH, OD_HEIGHT, OD_WIDTH
from tfrecorder.dataset.manifest import STATISTICS_NAME, FeatureInfo, Manifest
from tfrecorder.dataset.storage import Folder
from tfrecorder.dataset.store_requests import DEFAULT_STORAGE_TIMEOUT
from tfrecorder.read import wire
from tfrecorder.read.open import open_dataset, reading
from tfrecorder.read.pandas import decoded_batches

logger = logging.getLogger(__name__)

STATISTICS_MAX_BYTES = 256 * 2**20  # a larger file beside the shards is refused, not read (it is untrusted)
HISTOGRAM_BUCKETS = 10  # a standard histogram's equal-width buckets
QUANTILE_BUCKETS = 10  # TFDV's default: deciles
TOP_VALUES = 20  # text and labels: the most frequent values listed (a rank histogram holds them all, up to ...)
RANKED_VALUES = 1000  # ... this many
# Values kept per feature for its quantiles: past it every other one is let go (and then every other of those),
# so memory stays bounded and the values kept stay spread over the whole split.
SAMPLE_LIMIT = 1 << 20
DISTINCT_LIMIT = 50_000  # distinct text values counted per feature (URIs are distinct): past it, new ones are not

# custom_stats' names: one place for the writer and the report page
ASPECT = "aspect (width / height)"
BOXES_PER_IMAGE = "boxes per image"
BOX_WIDTH = "box width (fraction of the image)"
BOX_HEIGHT = "box height (fraction of the image)"
BOX_AREA = "box area (fraction of the image)"
VISIBILITY = "keypoint visibility"
MASK_PIXELS = "mask pixels per class"
SHAPE = "shape"
DTYPE = "dtype"
LENGTH = "values per record"
DURATION = "duration (seconds)"
SAMPLE_RATE = "sample rate (Hz)"
CUSTOM = (ASPECT, BOXES_PER_IMAGE, BOX_WIDTH, BOX_HEIGHT, BOX_AREA, VISIBILITY, MASK_PIXELS, SHAPE, DTYPE, LENGTH,
          DURATION, SAMPLE_RATE)
VISIBILITY_NAMES = {0: "not labelled", 1: "hidden", 2: "visible"}  # COCO's keypoint visibility flags


def statistics(tfrecord_dir: str,
               storage_timeout: float = DEFAULT_STORAGE_TIMEOUT) -> tfdv.DatasetFeatureStatisticsList:
    """The statistics of every split and feature of a dataset, computed in one pass over its shards (any folder:
    ours of any version, or others' TFRecords). ``convert`` writes them as ``statistics.pb``; this computes them.

    Args:
        tfrecord_dir: a dataset folder (ours or others' TFRecords: a folder, a glob or a list of files).
        storage_timeout: seconds one object-store operation may take, its retries included.

    Returns:
        A TFDV ``DatasetFeatureStatisticsList``: one ``DatasetFeatureStatistics`` per split, named by it.

    Examples:
        >>> stats = tfrecorder.statistics(dataset_dir)
        >>> [split.name for split in stats.datasets]
        ['TRAIN', 'VALIDATION', 'TEST']
    """
    with reading(tfrecord_dir, storage_timeout):
        manifest, folder = open_dataset(tfrecord_dir, storage_timeout)[:2]
        return compute(manifest, folder)


def compute(manifest: Manifest, folder: Folder) -> tfdv.DatasetFeatureStatisticsList:
    """The statistics of ``manifest``'s dataset in ``folder``: each split read once, a batch at a time."""
    found = tfdv.DatasetFeatureStatisticsList()
    for split in manifest.splits:
        features = [_Feature.of(f, manifest) for f in manifest.features]
        records = 0
        for batch in decoded_batches(manifest, folder, split, manifest.features):
            records += batch.records
            columns = dict(zip((f.name for f in manifest.features), batch.columns))
            for feature in features:
                feature.add(columns[feature.info.name], columns)
        dataset = found.datasets.add(name=split, num_examples=records)
        for feature in features:
            feature.fill(dataset.features.add(), manifest, split)
    return found


def write_statistics(manifest: Manifest, folder: Folder) -> tfdv.DatasetFeatureStatisticsList:
    """Compute the statistics of the dataset ``manifest`` describes and write them as ``statistics.pb``."""
    found = compute(manifest, folder)
    with folder.create(STATISTICS_NAME) as f:
        f.write(found.SerializeToString())
    return found


def read_statistics(folder: Folder, manifest: Manifest) -> tfdv.DatasetFeatureStatisticsList:
    """The dataset's ``statistics.pb`` where it has one that covers its splits, else computed now (an older
    dataset, others' TFRecords, a conversion with ``statistics=False``)."""
    if STATISTICS_NAME in folder.names():
        with folder.open_side(STATISTICS_NAME, STATISTICS_MAX_BYTES) as f:  # a regular file inside the folder
            found = tfdv.DatasetFeatureStatisticsList.FromString(f.read())
        if {d.name: d.num_examples for d in found.datasets} == {s: manifest.records(s) for s in manifest.splits}:
            return found
        logger.info("%s: its splits' counts differ from dataset.json's: computed again",
                    folder.url_of(STATISTICS_NAME))
    return compute(manifest, folder)


def custom(feature: tfdv.FeatureNameStatistics, name: str) -> tfdv.CustomStatistic | None:
    """``feature``'s custom statistic called ``name`` (one of ``CUSTOM``), or None."""
    return next((c for c in feature.custom_stats if c.name == name), None)


def feature_path(feature: tfdv.FeatureNameStatistics) -> str:
    """A feature's name as written: ``objects/bbox``."""
    return "/".join(feature.path.step) or feature.name


class _Sample:
    """Numbers seen, their exact min, max, mean and deviation; a spread sample of them (all, up to
    ``SAMPLE_LIMIT``) for quantiles and histograms."""

    def __init__(self) -> None:
        self.count = self.nan = self.zeros = 0
        self.total = self.squares = 0.0
        self.low, self.high = math.inf, -math.inf
        self._kept: list[np.ndarray] = []
        self._held = 0
        self._stride = 1  # one value kept of every ``_stride`` seen
        self._seen = 0

    def add(self, values: np.ndarray) -> None:
        values = np.asarray(values, np.float64).ravel()
        finite = values[np.isfinite(values)]
        self.nan += int(np.isnan(values).sum())
        if not len(finite):
            return
        self.count += len(finite)
        self.zeros += int((finite == 0).sum())
        self.total += float(finite.sum())
        self.squares += float(np.square(finite).sum())
        self.low, self.high = min(self.low, float(finite.min())), max(self.high, float(finite.max()))
        kept = finite[(-self._seen) % self._stride::self._stride]
        self._seen += len(finite)
        self._kept.append(kept)
        self._held += len(kept)
        while self._held > SAMPLE_LIMIT:
            joined = np.concatenate(self._kept)[::2]
            self._kept, self._held, self._stride = [joined], len(joined), self._stride * 2

    def values(self) -> np.ndarray:
        self._kept = [np.concatenate(self._kept)] if self._kept else []
        return self._kept[0] if self._kept else np.zeros(0)

    def fill(self, num: tfdv.NumericStatistics) -> None:
        if not self.count:
            return
        mean = self.total / self.count
        num.mean, num.min, num.max, num.num_zeros = mean, self.low, self.high, self.zeros
        num.std_dev = math.sqrt(max(0.0, self.squares / self.count - mean * mean))
        values = self.values()
        num.median = float(np.median(values))
        num.histograms.append(self.histogram())
        num.histograms.append(self.quantiles())

    def histogram(self, name: str = "") -> tfdv.Histogram:
        """Equal-width buckets from min to max; counts scaled to every value seen (the sample is spread)."""
        values, found = self.values(), tfdv.Histogram(type=tfdv.Histogram.STANDARD, num_nan=self.nan, name=name)
        if not self.count:
            return found
        edges = np.linspace(self.low, self.high, HISTOGRAM_BUCKETS + 1)
        if np.all(np.diff(edges) > 0):
            counts, _ = np.histogram(values, bins=edges)
        else:  # one value, or a range too narrow for floats to split into buckets: one bucket holds them all
            edges, counts = np.array([self.low, self.high]), np.array([len(values)])
        scale = self.count / max(1, len(values))
        for low, high, count in zip(edges[:-1], edges[1:], counts):
            found.buckets.add(low_value=float(low), high_value=float(high), sample_count=float(count * scale))
        return found

    def quantiles(self) -> tfdv.Histogram:
        """TFDV's quantiles histogram: ``QUANTILE_BUCKETS`` buckets of equal counts, their edges the quantiles."""
        found = tfdv.Histogram(type=tfdv.Histogram.QUANTILES, num_nan=self.nan)
        edges = np.quantile(self.values(), np.linspace(0, 1, QUANTILE_BUCKETS + 1))
        for low, high in zip(edges[:-1], edges[1:]):
            found.buckets.add(low_value=float(low), high_value=float(high), sample_count=self.count / QUANTILE_BUCKETS)
        return found


class _Counts:
    """Values counted (text, or class ids by their names), up to ``DISTINCT_LIMIT`` distinct ones."""

    def __init__(self, names: Sequence[str] | None = None) -> None:
        self.counter: Counter = Counter()
        self.names = names
        self.lengths = 0  # characters of every text value, for the average length
        self.full = False

    def add_ids(self, ids: np.ndarray) -> None:
        ids = np.asarray(ids, np.int64).ravel()
        if len(ids):
            low = int(ids.min())
            for value, count in enumerate(np.bincount(ids - low), start=low):
                if count:
                    self.counter[self._name(value)] += int(count)

    def add_texts(self, values: pa.Array) -> None:
        counted = pc.value_counts(values.drop_null() if values.null_count else values)
        self.lengths += int(pc.sum(pc.binary_length(values)).as_py() or 0)
        for value, count in zip(counted.field(0).to_pylist(), counted.field(1).to_pylist()):
            self._add(value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value), count)

    def add_items(self, values: Sequence[Any]) -> None:
        texts = [v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v) for v in values]
        self.lengths += sum(map(len, texts))
        for value, count in Counter(texts).items():
            self._add(value, count)

    def _add(self, value: str, count: int) -> None:
        if value in self.counter or len(self.counter) < DISTINCT_LIMIT:
            self.counter[value] += count
        else:
            self.full = True

    def _name(self, value: int) -> str:
        return self.names[value] if self.names is not None and 0 <= value < len(self.names) else str(value)

    def ranks(self, name: str = "") -> tfdv.RankHistogram:
        found = tfdv.RankHistogram(name=name)
        for rank, (value, count) in enumerate(self.counter.most_common(RANKED_VALUES)):
            found.buckets.add(low_rank=rank, high_rank=rank, label=value, sample_count=count)
        return found

    def fill(self, string: tfdv.StringStatistics) -> None:
        string.unique = len(self.counter)
        total = sum(self.counter.values())
        string.avg_length = self.lengths / total if total and self.lengths else 0.0
        for value, count in self.counter.most_common(TOP_VALUES):
            string.top_values.add(value=value, frequency=count)
        string.rank_histogram.CopyFrom(self.ranks())


@dataclass
class _Feature:
    """One feature's statistics over a split, as its batches come: ``values`` by its kind, ``custom`` by what
    it means (``CUSTOM``)."""

    info: FeatureInfo
    kind: Any  # tfdv.FeatureNameStatistics.Type
    values: _Sample | _Counts | None  # None: bytes, their sizes counted in ``sizes``
    listed: bool  # a list a record (the values per record counted)
    present: int = 0
    missing: int = 0
    per_record: _Sample = field(default_factory=_Sample)
    sizes: _Sample = field(default_factory=_Sample)
    custom: dict[str, Any] = field(default_factory=dict)  # _Sample or _Counts, by name (CUSTOM)

    @classmethod
    def of(cls, info: FeatureInfo, manifest: Manifest) -> _Feature:
        kind = connectors.of(info)
        item = getattr(kind, "item", kind)
        listed = not kind.plain
        label = isinstance(item, connectors.ClassLabel)
        if label:
            names = manifest.vocabulary if info.name == (manifest.label or {}).get("feature") else None
            values: _Sample | _Counts | None = _Counts(names)
            stat_type = tfdv.FeatureNameStatistics.INT
        elif kind.field == "bytes_list":
            values = _Counts() if kind.text(info) else None
            stat_type = tfdv.FeatureNameStatistics.STRING if values is not None else tfdv.FeatureNameStatistics.BYTES
        else:
            values = _Sample()
            stat_type = (tfdv.FeatureNameStatistics.INT if kind.field == "int64_list"
                         else tfdv.FeatureNameStatistics.FLOAT)
        found = cls(info, stat_type, values, listed)
        found.custom = _custom_of(info, item, kind)
        return found

    def add(self, column: wire.Numbers | wire.Binary | wire.Objects, batch: dict[str, Any]) -> None:
        if isinstance(column, wire.Numbers):
            present = column.values[~column.missing]
            self.present += len(present)
            self.missing += int(column.missing.sum())
            self._add_values(present)
        elif isinstance(column, wire.Binary):
            values = column.values
            self.present += len(values) - values.null_count
            self.missing += values.null_count
            self.sizes.add(pc.binary_length(values).drop_null().to_numpy(zero_copy_only=False))
            if isinstance(self.values, _Counts):
                self.values.add_texts(values)
        else:
            lists = [v for v in column.values if v is not None]
            self.present += len(lists)
            self.missing += len(column.values) - len(lists)
            self.per_record.add(np.fromiter(map(len, lists), np.float64, len(lists)))
            flat = [v for items in lists for v in items]
            if flat and isinstance(flat[0], bytes):
                self.sizes.add(np.fromiter(map(len, flat), np.float64, len(flat)))
                if isinstance(self.values, _Counts):
                    self.values.add_items(flat)
            elif flat:
                self._add_values(np.asarray(flat))
            self._add_lists(lists)
        self._add_derived(batch)

    def _add_values(self, values: np.ndarray) -> None:
        if isinstance(self.values, _Counts):
            self.values.add_ids(values)
        elif isinstance(self.values, _Sample):
            self.values.add(values)

    def _add_lists(self, lists: list[Any]) -> None:
        """What a list a record means beyond its values: its length, a record's boxes and their sizes, keypoints'
        visibility."""
        lengths = np.fromiter(map(len, lists), np.float64, len(lists))
        if LENGTH in self.custom:
            self.custom[LENGTH].add(lengths)
        if BOXES_PER_IMAGE in self.custom:
            self.custom[BOXES_PER_IMAGE].add(lengths / 4)
            boxes = np.asarray([v for items in lists for v in items], np.float64).reshape(-1, 4)  # ymin xmin ymax xmax
            heights, widths = boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1]
            self.custom[BOX_WIDTH].add(widths)
            self.custom[BOX_HEIGHT].add(heights)
            self.custom[BOX_AREA].add(widths * heights)
        if VISIBILITY in self.custom:
            self.custom[VISIBILITY].add_ids(np.asarray([v for items in lists for v in items], np.int64))

    def _add_derived(self, batch: dict[str, Any]) -> None:
        """What needs another feature of the same records: an image's aspect, an audio clip's duration."""
        if ASPECT in self.custom:
            sizes = [batch.get(name) for name in (IMAGE_WIDTH.name, IMAGE_HEIGHT.name)]
            if None in sizes:
                sizes = [batch.get(name) for name in (OD_WIDTH.name, OD_HEIGHT.name)]
            if None not in sizes and all(isinstance(s, wire.Numbers) for s in sizes):
                width, height = sizes
                shown = ~(width.missing | height.missing) & (height.values > 0)
                self.custom[ASPECT].add(width.values[shown] / height.values[shown])
        if DURATION in self.custom:
            samples, rate = batch.get(f"{self.info.name}/num_samples"), batch.get(f"{self.info.name}/sample_rate")
            if isinstance(samples, wire.Numbers) and isinstance(rate, wire.Numbers):
                shown = ~(samples.missing | rate.missing) & (rate.values > 0)
                self.custom[DURATION].add(samples.values[shown] / rate.values[shown])
                self.custom[SAMPLE_RATE].add_items(rate.values[shown].tolist())

    def fill(self, stats: tfdv.FeatureNameStatistics, manifest: Manifest, split: str) -> None:
        stats.path.step.extend(self.info.name.split("/"))
        stats.type = self.kind
        if isinstance(self.values, _Counts):
            self.values.fill(stats.string_stats)
            common = stats.string_stats.common_stats
        elif isinstance(self.values, _Sample):
            self.values.fill(stats.num_stats)
            common = stats.num_stats.common_stats
        else:
            common = stats.bytes_stats.common_stats
            if self.sizes.count:
                stats.bytes_stats.avg_num_bytes = self.sizes.total / self.sizes.count
                stats.bytes_stats.min_num_bytes, stats.bytes_stats.max_num_bytes = self.sizes.low, self.sizes.high
        self._fill_common(common)
        for name, found in self.custom.items():
            if isinstance(found, _Counts):
                stats.custom_stats.add(name=name, rank_histogram=found.ranks(name))
            elif found.count:
                stats.custom_stats.add(name=name, histogram=found.histogram(name))
        if connectors.of(self.info).name == connectors.MASK.name and manifest.masks:
            stats.custom_stats.add(name=MASK_PIXELS, rank_histogram=_mask_pixels(manifest.masks, split))
        if isinstance(connectors.of(self.info), connectors.Tensor):
            stats.custom_stats.add(name=SHAPE, str=str(list(self.info.shape)).replace("None", "?"))
            stats.custom_stats.add(name=DTYPE, str=self.info.dtype)

    def _fill_common(self, common: tfdv.CommonStatistics) -> None:
        common.num_non_missing, common.num_missing = self.present, self.missing
        if not self.listed:
            common.min_num_values = common.max_num_values = 1 if self.present else 0
            common.avg_num_values, common.tot_num_values = (1.0 if self.present else 0.0), self.present
            return
        counts = self.per_record
        if counts.count:
            common.min_num_values, common.max_num_values = int(counts.low), int(counts.high)
            common.avg_num_values, common.tot_num_values = counts.total / counts.count, int(counts.total)
            common.num_values_histogram.CopyFrom(counts.quantiles())


def _custom_of(info: FeatureInfo, item: Any, kind: Any) -> dict[str, _Sample | _Counts]:
    """The custom statistics a feature of ``kind`` (holding ``item``s) gets, empty, to be filled as batches come."""
    if item.name == connectors.IMAGE.name:  # not a mask (a kind of image): its pixels are classes
        return {ASPECT: _Sample()}
    if isinstance(item, connectors.BoundingBoxes):
        return {BOXES_PER_IMAGE: _Sample(), BOX_WIDTH: _Sample(), BOX_HEIGHT: _Sample(), BOX_AREA: _Sample()}
    if isinstance(item, connectors.KeypointVisibility) or info.name.endswith("keypoint/visibility"):
        return {VISIBILITY: _Counts([VISIBILITY_NAMES.get(i, str(i)) for i in range(3)])}
    if isinstance(item, connectors.Audio):
        return {DURATION: _Sample(), SAMPLE_RATE: _Counts()}
    if isinstance(kind, connectors.ListOf):
        return {LENGTH: _Sample()}
    return {}


def _mask_pixels(masks: dict[str, Any], split: str) -> tfdv.RankHistogram:
    """A segmentation split's mask pixels per class, as dataset.json counted them when they were written."""
    from tfrecorder.read.info import mask_class_name

    found = tfdv.RankHistogram(name=MASK_PIXELS)
    pixels = sorted(((int(k), v) for k, v in (masks.get("pixels") or {}).get(split, {}).items()), key=lambda p: -p[1])
    for rank, (class_id, count) in enumerate(pixels):
        found.buckets.add(low_rank=rank, high_rank=rank, label=mask_class_name(masks, class_id), sample_count=count)
    return found
