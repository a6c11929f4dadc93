"""Shards as tf.data records (TensorFlow): a split's shard files read in TensorFlow ops only - each checked, as
it opens, against the dataset.json the reader opened, and counted against it - for ``load_dataset``
(``tf_data.py``), which parses and decodes what this gives."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import tensorflow as tf

from tfrecorder.dataset.file_formats import format_of_files
from tfrecorder.dataset.manifest import MANIFEST_NAME, Manifest
from tfrecorder.dataset.storage import Folder
from tfrecorder.errors import TFRecorderError
from tfrecorder.read.open import manifest_changed, manifest_identity

AUTOTUNE = tf.data.AUTOTUNE


def traced(function: Any) -> Any:
    """``function`` for ``Dataset.map``/``interleave``, traced as it is written. Its branches on tensors are
    TensorFlow's own (``tf.cond``, ``tf.switch_case``), so AutoGraph, which would rewrite every Python
    function it calls, has nothing to convert and only slows the start of each pipeline
    (benchmarks/CONSTANTS.md)."""
    return tf.autograph.experimental.do_not_convert(function)



def shard_records(manifest: Manifest, folder: Folder, shards: list, shuffle: bool, seed: int | None,
                  deterministic: bool | None, local: Mapping[str, str]) -> tf.data.Dataset:
    """The split's serialized records, in TensorFlow ops only: no Python runs as they are read, so tf.data service
    workers in other processes, ``Dataset.save`` and iterator checkpoints run the pipeline. Every shard was checked
    when the dataset was opened (``open.check_opened``); as each is read, the graph checks that dataset.json is
    still the one opened and that the shard holds the records dataset.json counts, and TensorFlow checks each
    record's CRC: a shard replaced after opening is an error naming it, never other records. ``local``: the
    shards' copies in the cache (``cache_dir=``), read instead; each was checked whole against the dataset.json
    opened, so nothing read from them can be of another version, and the store is not asked again."""
    files = tf.constant([local.get(s.file) or folder.url_of(s.file) for s in shards])
    counts = tf.constant([s.records for s in shards], tf.int64)
    file_format = format_of_files([s.file for s in shards])
    unchanged = None if local else _manifest_guard(folder, shards)
    per_check = _records_per_count(manifest, shards)

    def open_shard(position: tf.Tensor) -> tf.data.Dataset:
        file = tf.gather(files, position)
        if unchanged is not None:
            with tf.control_dependencies([unchanged(position)]):
                file = tf.identity(file)
        records = file_format.tf_records(file, manifest.compression)
        return _counted(records, file, tf.gather(counts, position), per_check)

    positions = tf.data.Dataset.range(len(shards))
    if not shuffle or len(shards) == 1:
        return positions.interleave(traced(open_shard), cycle_length=1)  # one shard after another, in order
    positions = positions.shuffle(len(shards), seed=seed, reshuffle_each_iteration=True)
    return positions.interleave(traced(open_shard), cycle_length=min(len(shards), 8), num_parallel_calls=AUTOTUNE,
                                deterministic=deterministic)


def _manifest_guard(folder: Folder, shards: list) -> Any:
    """A function giving the op that stops the pipeline where the folder's dataset.json no longer lists every
    shard of ``shards`` (in dataset.json's order) as the reader opened them (name, records, bytes, CRC-32C):
    another conversion into the folder (its shards may keep their names, sizes, counts and first records) stops
    it; an append, which adds shards and leaves the listed ones be, does not. None for other tools' files (no
    dataset.json). It reads dataset.json as each shard is opened (TensorFlow has no op for a file's size or
    time): a few hundred bytes a shard."""
    if not folder.opened:
        return None
    if manifest_identity(folder) != folder.opened:  # read after the open: the text must be the one opened
        raise TFRecorderError(manifest_changed(folder))
    url, message = folder.url_of(MANIFEST_NAME), manifest_changed(folder)
    # every shard of the split read, in dataset.json's order, as it writes each entry (json.dumps, indented): its
    # first four fields. One pattern for all: a shard the pipeline has open is read again from its path.
    entries = [r",\s*".join(re.escape(json.dumps(key)) + r":\s*" + re.escape(json.dumps(value)) for key, value in
                            (("file", s.file), ("records", s.records), ("bytes", s.bytes), ("crc32c", s.crc32c)))
               for s in shards]
    listed = tf.constant("(?s).*" + ".*".join(entries) + ".*")

    def unchanged(position: tf.Tensor) -> tf.Operation:
        # the path made of the shard's position (joined as nothing), so that TensorFlow reads the file as each
        # shard is opened: a read of a constant path is folded into one read when the pipeline starts
        path = tf.strings.join([url, tf.strings.substr(tf.strings.as_string(position), 0, 0)])
        return tf.debugging.Assert(tf.strings.regex_full_match(tf.io.read_file(path), listed), [message])

    return unchanged


# The records of a shard are counted in groups of about this many bytes (at most _MOST_PER_COUNT records): a
# step of the graph per group, not per record, costs next to nothing, and a group is small beside the memory of
# a pipeline.
_BYTES_PER_COUNT = 1 << 20
_MOST_PER_COUNT = 4096


def _records_per_count(manifest: Manifest, shards: list) -> int:
    """Records counted together by ``_counted``: about ``_BYTES_PER_COUNT`` bytes of the split's records."""
    records, size = sum(s.records for s in shards), sum(s.bytes for s in shards)
    return max(1, min(_MOST_PER_COUNT, records * _BYTES_PER_COUNT // max(size, 1)))


def _counted(records: tf.data.Dataset, file: tf.Tensor, expected: tf.Tensor, per_check: int) -> tf.data.Dataset:
    """``records`` of the shard ``file``, stopped with an error naming it (in the graph) where it holds more or
    fewer than the ``expected`` records of dataset.json. Counted in groups of ``per_check`` records, then an
    empty group marks the end."""
    end = tf.data.Dataset.from_tensors((tf.constant([], tf.string), True))
    groups = records.batch(per_check).map(lambda group: (group, False)).concatenate(end)

    def count(seen: tf.Tensor, group: Any) -> Any:
        records_of_group, last = group
        seen += tf.size(records_of_group, out_type=tf.int64)
        right = tf.logical_and(seen <= expected, tf.logical_or(tf.logical_not(last), tf.equal(seen, expected)))
        message = tf.strings.join([file, " holds ", tf.strings.as_string(seen), " or more records, dataset.json "
                                   "says ", tf.strings.as_string(expected), ": it was replaced or damaged after the "
                                   "dataset was opened; read the dataset again"])
        message = tf.where(last, tf.strings.regex_replace(message, " or more", ""), message)
        with tf.control_dependencies([tf.debugging.Assert(right, [message])]):
            return seen, tf.identity(records_of_group)

    return groups.scan(tf.constant(0, tf.int64), traced(count)).unbatch()
