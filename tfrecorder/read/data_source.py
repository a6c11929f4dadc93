"""Random access (read side, no TensorFlow): ``data_source``, a sequence of one split's records for Grain, JAX and
PyTorch map-style datasets. Each record is read by itself - its offset and length from its shard's ``.tfindex``, a
ranged read, its CRCs checked - and decoded by ``np_example`` as ``load_dataset`` decodes it.

It is thread-safe (reads at offsets share no file position) and picklable: a pickle holds the arguments, never an
open file, so a Grain or DataLoader worker opens the dataset again."""

from __future__ import annotations

import bisect
import logging
import threading
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from tfrecorder.arguments import check_choice, check_image_size, check_switch, is_count
from tfrecorder.dataset.features import DEFAULT_RESIZE_MODE, RESIZE_MODES
from tfrecorder.dataset.file_formats import ShardRecords, format_of_file
from tfrecorder.dataset.layouts import layout_of
from tfrecorder.dataset.manifest import Manifest
from tfrecorder.dataset.storage import Folder
from tfrecorder.dataset.store_requests import DEFAULT_STORAGE_TIMEOUT, check_storage_timeout
from tfrecorder.errors import TFRecorderError
from tfrecorder.read.np_example import ExampleDecoder
from tfrecorder.read.open import check_shard, check_shards, open_dataset, reading

logger = logging.getLogger(__name__)


def data_source(tfrecord_dir: str, split: str, *, decode: bool = True, image_size: tuple[int, int] | int | None = None,
                resize_mode: str = DEFAULT_RESIZE_MODE, storage_timeout: float = DEFAULT_STORAGE_TIMEOUT,
                version: int | None = None) -> DataSource:
    """One split's records as a sequence: ``len(source)``, ``source[i]`` (negative ``i`` too), ``source[a:b]`` and
    ``source[[i, j, ...]]`` (lists). What Grain's ``MapDataset.source`` and a PyTorch map-style ``Dataset`` need.

    With ``decode`` (the default) a record is a dict of numpy values as ``load_dataset`` gives it: the image uint8
    ``(H, W, C)``, turned by its EXIF orientation and, with ``image_size``, resized by ``resize_mode`` as
    ``load_dataset(..., image_size=, resize_mode=)`` resizes (a JPEG decoded at 1/2, 1/4 or 1/8 scale where
    that still covers the target); a detection record's ``objects`` (``bbox`` ``[N, 4]``, ``label`` ``[N]``,
    ...) moved with it; labels as ids (``label_names`` names them). Without ``decode``, the serialized
    ``tf.train.Example``. Reads uncompressed TFRecord shards (gs:// and other fsspec stores by ranges), each
    record's CRCs checked, and ArrayRecord shards (``file_format="array_record"``) from local disk.
    Thread-safe and picklable: workers open the files again.

    Args:
        tfrecord_dir: a dataset folder written by tfrecorder (uncompressed TFRecord, or ArrayRecord shards).
        split: ``"TRAIN"``, ``"VALIDATION"`` or ``"TEST"``.
        decode: records as dicts of numpy values (False: the serialized Examples).
        image_size: ``(height, width)`` (one number: a square) to resize every image to.
        resize_mode: with ``image_size``: ``"stretch"``, ``"pad"`` or ``"crop"``.
        storage_timeout: seconds one object-store operation may take, its retries included.
        version: the dataset version to read (``tfrecorder.versions``): its shards and counts; None: the latest.

    Returns:
        A ``DataSource``: ``len``, ``[i]``, slices and lists of indices.

    Examples:
        >>> source = tfrecorder.data_source(dataset_dir, "TRAIN", image_size=(32, 32))
        >>> len(source), source[0]["image"].shape, source[-1]["label"].dtype
        (6, (32, 32, 3), dtype('int64'))
    """
    return DataSource(tfrecord_dir, split, decode=decode, image_size=image_size, resize_mode=resize_mode,
                      storage_timeout=storage_timeout, version=version)


class DataSource(Sequence):
    """A split's records by position (see ``data_source``)."""

    def __init__(self, tfrecord_dir: str, split: str, *, decode: bool = True, image_size: Any = None,
                 resize_mode: str = DEFAULT_RESIZE_MODE, storage_timeout: float = DEFAULT_STORAGE_TIMEOUT,
                 version: int | None = None):
        self._args = dict(tfrecord_dir=tfrecord_dir, split=split, decode=decode, image_size=image_size,
                          resize_mode=resize_mode, storage_timeout=storage_timeout, version=version)
        check_switch("decode", decode)
        size = check_image_size(image_size)
        check_choice("resize_mode", resize_mode, RESIZE_MODES)
        if resize_mode != DEFAULT_RESIZE_MODE and size is None:
            raise TFRecorderError(f"resize_mode={resize_mode!r} says how image_size= resizes: give image_size="
                                  f"(height, width) too (without it images keep their own size)")
        storage_timeout = check_storage_timeout(storage_timeout)
        with reading(tfrecord_dir, storage_timeout):
            manifest, folder = open_dataset(tfrecord_dir, storage_timeout, version)
            self.split = manifest.split_name(split)
            _refuse_unreadable(manifest, folder, self.split, decode)
            check_shards(manifest, folder, [self.split])
        self.manifest, self._folder = manifest, folder
        self._shards = [s for s in manifest.splits[self.split] if s.records]
        self._starts = [0, *np.cumsum([s.records for s in self._shards]).tolist()]
        self._readers: dict[int, ShardRecords] = {}  # each shard's records by number, opened when first read
        weakref.finalize(self, _close, self._readers)  # closed with the source (or at exit)
        self._lock = threading.Lock()
        self._decode = ExampleDecoder(manifest, size, resize_mode) if decode else None

    def __len__(self) -> int:
        return self._starts[-1]

    def __repr__(self) -> str:
        return f"data_source({self._folder.url!r}, {self.split!r}: {len(self)} records)"

    def __getitem__(self, key: Any) -> Any:
        if is_count(key):
            return self._record(self._position(int(key)))
        if isinstance(key, slice):
            return [self._record(i) for i in range(*key.indices(len(self)))]
        if isinstance(key, (list, tuple, range, np.ndarray)):
            wrong = next((k for k in key if not is_count(k)), None)
            if wrong is None:
                return [self._record(self._position(int(k))) for k in key]
            raise TypeError(f"data_source indices are ints, slices or lists of ints; this {type(key).__name__} holds "
                            f"a {type(wrong).__name__} ({wrong!r:.40})")
        raise TypeError(f"data_source indices are ints, slices or lists of ints, not {type(key).__name__}")

    def __getitems__(self, keys: Sequence[int]) -> list[Any]:
        """Many records at once (PyTorch's DataLoader asks for a batch's indices together)."""
        return self[list(keys)]

    def __getstate__(self) -> dict[str, Any]:
        return self._args  # the arguments, never an open file: a worker opens the dataset again

    def __setstate__(self, args: dict[str, Any]) -> None:
        args = dict(args)
        self.__init__(args.pop("tfrecord_dir"), args.pop("split"), **args)  # type: ignore[misc]

    def _position(self, index: int) -> int:
        position = index + len(self) if index < 0 else index
        if not 0 <= position < len(self):
            raise IndexError(f"index {index} is out of range for {len(self)} records of {self.split}")
        return position

    def _record(self, position: int) -> Any:
        shard = bisect.bisect_right(self._starts, position) - 1
        number = position - self._starts[shard]
        where = self._folder.url_of(self._shards[shard].file)
        records = self._open(shard)
        try:
            if self._folder.is_local:
                record = records.read(number)
            else:
                with reading(self._folder.url, self._args["storage_timeout"]):
                    record = records.read(number)
        except TFRecorderError as e:
            raise TFRecorderError(f"{where}: record {number} (item {position} of {self.split}) is damaged: {e}; "
                                  f"`tfrecorder verify {self._folder.url}` checks every shard") from None
        return record if self._decode is None else self._decode(record, where, number)

    def _open(self, shard: int) -> ShardRecords:
        """The shard's records by number, opened by its file format (and the shard checked) when first read."""
        records = self._readers.get(shard)
        if records is None:
            with self._lock:
                records = self._readers.get(shard)
                if records is None:
                    info = self._shards[shard]
                    with reading(self._folder.url, self._args["storage_timeout"]):
                        check_shard(self._folder, self.manifest, self.split, info)  # the file dataset.json describes
                        records = format_of_file(info.file).open_records(self._folder, info, self.split)
                    self._readers[shard] = records
        return records


def _close(readers: dict[int, ShardRecords]) -> None:
    for records in readers.values():
        records.close()


def _refuse_unreadable(manifest: Manifest, folder: Folder, split: str, decode: bool) -> None:
    """A dataset data_source cannot read by offsets, in one line saying why and what to do."""
    if manifest.compression is not None:
        raise TFRecorderError(f"{folder.url} is {manifest.compression}-compressed: data_source reads each record "
                              f"at its offset, and a compressed stream can only be read from its start; convert "
                              f"again with compression=None (or read it with load_dataset)")
    for shard in (s for s in manifest.splits[split] if s.records):
        problem = format_of_file(shard.file).random_access_problem(folder, shard)
        if problem is not None:
            raise TFRecorderError(problem)
    if decode:
        layout_of(manifest).check_reader("data_source")
