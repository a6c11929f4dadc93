"""Wire: a batch of tf.train.Example records decoded a feature at a time with numpy.

read_tfr's fast path. Parsing each record into a protobuf message and reading its values one by one
costs a few microseconds a value: a minute for a million rows of 20 columns. Here the records of a
batch are joined into one buffer and walked level by level (Example -> Features -> each map entry ->
Feature -> its list), every record at once, so the Python work is per level and per feature, not per
value. ``tf.io.parse_example`` works the same way in C++.

Only the plain layout every writer produces is decoded here: each message's fields once, in order,
lists packed (numbers) or one entry per value (bytes), each key once. A batch holding anything else
(unpacked numbers, a key twice, a feature of another kind than dataset.json says, more than one value
in a scalar feature, a damaged message) returns None, and the caller decodes it with protobuf, whose
behaviour is the definition: both give the same values for every record this module accepts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from tfrecorder.dataset import connectors
from tfrecorder.dataset.manifest import FeatureInfo

# Field 1 with wire type 2 (length-delimited): the tag of Example.features, Features.feature, a map entry's
# key, a packed list and each BytesList value. Feature's lists are its fields 1 to 3, a map entry's value 2.
_LEN1 = 0x0A
_VALUE = 0x12
_LIST_TAGS = {"bytes_list": 0x0A, "float_list": 0x12, "int64_list": 0x1A}
_PAD = 16  # zero bytes after the batch, so a varint's 10-byte window never reads past the buffer


@dataclass
class Numbers:
    """A scalar number feature over a batch: ``values`` (int64; float32 for floats), ``missing`` a mask."""

    values: np.ndarray
    missing: np.ndarray


@dataclass
class Binary:
    """A scalar bytes feature over a batch: a pyarrow array (null where missing), never a Python object a value."""

    values: pa.LargeBinaryArray


@dataclass
class Objects:
    """A list feature over a batch: one Python list a record (None where the key is missing)."""

    values: list[Any]


class _Irregular(Exception):
    """The batch is not in the plain layout: protobuf decodes it."""


def decode(records: Sequence[bytes], features: Sequence[FeatureInfo]) -> list[Numbers | Binary | Objects] | None:
    """Each of ``features`` over ``records``, or None when a record is not in the plain layout."""
    data = b"".join(records)
    buf = np.frombuffer(data + bytes(_PAD), dtype=np.uint8)
    lengths = np.fromiter((len(r) for r in records), dtype=np.int64, count=len(records))
    ends = np.cumsum(lengths)
    starts = ends - lengths
    try:
        owner, body_start, body_end = _fields(buf, starts, ends, _LEN1)  # Example.features
        if _repeats(owner):
            raise _Irregular  # Features given twice: protobuf merges them
        entry_owner, entry_start, entry_end = _fields(buf, body_start, body_end, _LEN1)  # Features.feature
        entry_owner = owner[entry_owner]
        keys, key_len, value_start, value_end = _entries(buf, entry_start, entry_end)
        names = [f.name for f in features]
        feature_of, entry = (_alike(buf, names, keys, key_len, entry_owner, len(records))
                             or _matching(buf, names, keys, key_len))
        rows = entry_owner[entry]
        if ((np.diff(feature_of) == 0) & (np.diff(rows) == 0)).any():
            raise _Irregular  # a key twice in one record: protobuf keeps the last
        bounds = np.searchsorted(feature_of, np.arange(len(features) + 1))
        found: list[Any] = [None] * len(features)
        for field in ("float_list", "int64_list"):  # scalar numbers: every feature of a kind at once
            group = [i for i, f in enumerate(features) if (c := connectors.of(f)).field == field and c.plain]
            if group:
                members = np.asarray(group)
                picked = _spans(bounds[members], bounds[members + 1])
                numbers = _scalar_numbers(buf, len(records), field, len(group),
                                          np.repeat(np.arange(len(group)), np.diff(bounds)[members]),
                                          rows[picked], value_start[entry[picked]], value_end[entry[picked]])
                for i, column in zip(group, numbers):
                    found[i] = column
        for i, f in enumerate(features):
            if found[i] is None:
                at = entry[bounds[i]:bounds[i + 1]]
                found[i] = _feature(buf, data, len(records), f, entry_owner[at], value_start[at], value_end[at])
        return found
    except _Irregular:
        return None


def _repeats(owners: np.ndarray) -> bool:
    """Whether a message appears twice in ``owners`` (sorted): a field given more than once."""
    return len(owners) > 1 and bool((np.diff(owners) == 0).any())


def _varint(buf: np.ndarray, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The varints starting at ``at``: their values (uint64) and the position after each. A byte position
    at a time, over only the varints that go on: most lengths and small numbers are one byte."""
    first = buf[at]
    value = (first & 0x7F).astype(np.uint64)
    size = np.ones(len(at), np.int64)
    going = np.flatnonzero(first & 0x80)
    for i in range(1, 10):
        if not len(going):
            return value, at + size
        byte = buf[at[going] + i]
        value[going] |= (byte & 0x7F).astype(np.uint64) << np.uint64(7 * i)
        size[going] += 1
        going = going[(byte & 0x80) != 0]
    if len(going):
        raise _Irregular  # over ten bytes: not a varint
    return value, at + size


def _length(buf: np.ndarray, at: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Length-delimited payloads whose length varint starts at ``at``: [start, stop), inside ``end``."""
    size, start = _varint(buf, at)
    if (size > np.uint64(1 << 40)).any():
        raise _Irregular
    stop = start + size.astype(np.int64)
    if (stop > end).any():
        raise _Irregular
    return start, stop


def _fields(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, tag: int):
    """Messages made of one repeated length-delimited field ``tag``: (owner index, start, stop) of each value,
    in order. A loop over the most values any message has, each step over every message at once."""
    owners, value_starts, value_stops = [], [], []
    live = np.flatnonzero(starts < ends)
    at, end = starts[live], ends[live]
    while len(live):
        if (buf[at] != tag).any():
            raise _Irregular
        start, stop = _length(buf, at + 1, end)
        owners.append(live)
        value_starts.append(start)
        value_stops.append(stop)
        more = stop < end
        live, at, end = live[more], stop[more], end[more]
    if not owners:
        empty = np.zeros(0, np.int64)
        return empty, empty, empty
    owner, start, stop = np.concatenate(owners), np.concatenate(value_starts), np.concatenate(value_stops)
    order = np.argsort(owner, kind="stable")  # by message, then in stored order
    return owner[order], start[order], stop[order]


def _entries(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray):
    """Map entries (key 1, value 2, in that order): key start and length, value start and stop."""
    if len(starts) == 0:
        empty = np.zeros(0, np.int64)
        return empty, empty, empty, empty
    if (starts >= ends).any() or (buf[starts] != _LEN1).any():
        raise _Irregular
    key_start, key_stop = _length(buf, starts + 1, ends)
    if (key_stop >= ends).any() or (buf[key_stop] != _VALUE).any():
        raise _Irregular
    value_start, value_stop = _length(buf, key_stop + 1, ends)
    if (value_stop != ends).any():
        raise _Irregular
    return key_start, key_stop - key_start, value_start, value_stop


_FNV_OFFSET, _FNV_PRIME = 0xCBF29CE484222325, 0x100000001B3


def _key_hashes(buf: np.ndarray, keys: np.ndarray, key_len: np.ndarray) -> np.ndarray:
    """A 64-bit hash (FNV-1a) of each key: a byte position at a time, over every key at once."""
    hashes = np.full(len(keys), _FNV_OFFSET, np.uint64)
    last = len(buf) - 1
    for i in range(int(key_len.max(initial=0))):
        byte = buf[np.minimum(keys + i, last)].astype(np.uint64)
        hashes = np.where(key_len > i, (hashes ^ byte) * np.uint64(_FNV_PRIME), hashes)
    return hashes


def _matching(buf: np.ndarray, names: Sequence[str], keys: np.ndarray, key_len: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray]:
    """The map entries whose key is one of ``names``: (name index, entry), by name, then in record order.

    Keys and names are matched by a hash, sorted and binary-searched, then byte by byte (a hash may collide):
    F features of records of F keys cost F log F, not F x F."""
    encoded = [name.encode("utf-8") for name in names]
    wanted = _key_hashes(*_as_buffer(encoded))
    hashes = _key_hashes(buf, keys, key_len)
    order = np.argsort(hashes, kind="stable")  # the entries of one key stay in record order
    ordered = hashes[order]
    low, high = np.searchsorted(ordered, wanted, "left"), np.searchsorted(ordered, wanted, "right")
    entry = order[_spans(low, high)]
    feature_of = np.repeat(np.arange(len(names)), high - low)
    lengths = np.fromiter(map(len, encoded), np.int64, len(encoded))
    same = key_len[entry] == lengths[feature_of]
    entry, feature_of = entry[same], feature_of[same]
    name_bytes, name_start, _ = _as_buffer(encoded)
    key_bytes = buf[_spans(keys[entry], keys[entry] + key_len[entry])]
    expected = name_bytes[_spans(name_start[feature_of], name_start[feature_of] + key_len[entry])]
    sizes = key_len[entry]
    nonempty = sizes > 0  # an empty key matches an empty name: nothing to compare
    if nonempty.any():
        keep = np.ones(len(entry), bool)
        keep[nonempty] = np.add.reduceat(key_bytes != expected, (np.cumsum(sizes) - sizes)[nonempty]) == 0
        entry, feature_of = entry[keep], feature_of[keep]
    return feature_of, entry


def _alike(buf: np.ndarray, names: Sequence[str], keys: np.ndarray, key_len: np.ndarray, owner: np.ndarray,
           records: int) -> tuple[np.ndarray, np.ndarray] | None:
    """``_matching`` for the batches tfrecorder writes: every record with the same keys in the same order (no
    value missing). Checked byte for byte against the first record, then each name is found once; None when
    the records differ (``_matching`` then finds every entry by its key)."""
    per = len(keys) // records if records else 0
    if per == 0 or per * records != len(keys) or not (owner == np.repeat(np.arange(records), per)).all():
        return None
    if not (key_len.reshape(records, per) == key_len[:per]).all():
        return None
    key_bytes = buf[_spans(keys, keys + key_len)]
    first = key_bytes[:int(key_len[:per].sum())]
    if not (key_bytes.reshape(records, len(first)) == first).all():
        return None
    starts = np.concatenate(([0], np.cumsum(key_len[:per])))
    text = first.tobytes()
    position = {text[a:b]: i for i, (a, b) in enumerate(zip(starts[:-1].tolist(), starts[1:].tolist()))}
    if len(position) < per:
        raise _Irregular  # a key twice in one record: protobuf keeps the last
    found = [(i, position[name.encode("utf-8")]) for i, name in enumerate(names) if name.encode("utf-8") in position]
    feature_of = np.repeat(np.fromiter((i for i, _ in found), np.int64, len(found)), records)
    at = np.fromiter((p for _, p in found), np.int64, len(found))
    return feature_of, (at[:, None] + np.arange(records) * per).ravel()


def _as_buffer(encoded: Sequence[bytes]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Names as one byte buffer with each one's start and length (what _key_hashes reads)."""
    lengths = np.fromiter(map(len, encoded), np.int64, len(encoded))
    starts = np.cumsum(lengths) - lengths
    return np.frombuffer(b"".join(encoded) + bytes(1), np.uint8), starts, lengths


def _scalar_numbers(buf, count: int, field: str, features: int, feature_of, rows, start, stop) -> list[Numbers]:
    """Scalar number features of one kind over the batch, all at once, from their entries (``feature_of``:
    each entry's feature among the ``features``): one Numbers each."""
    given, list_start, list_stop = _list_spans(buf, field, start, stop)
    has, counts, flat = _packed(buf, field, list_start, list_stop)
    if (counts > 1).any():
        raise _Irregular  # a scalar with more values than one: protobuf's reader takes the first
    feature_of, rows = feature_of[given][has][counts == 1], rows[given][has][counts == 1]
    values = np.zeros((features, count), dtype=np.float32 if field == "float_list" else np.int64)
    missing = np.ones((features, count), dtype=bool)
    values[feature_of, rows] = flat
    missing[feature_of, rows] = False
    return [Numbers(values[i], missing[i]) for i in range(features)]


def _feature(buf, data, count, feature: FeatureInfo, rows, start, stop) -> Binary | Objects:
    """One bytes or list feature over the batch from its entries: the Feature's list, then its values (scalar
    numbers: ``_scalar_numbers``)."""
    field = connectors.of(feature).field
    present = rows  # records that have the key: a list feature is [] there when empty, None elsewhere
    given, list_start, list_stop = _list_spans(buf, field, start, stop)
    rows = rows[given]
    if field == "bytes_list":
        return _bytes(buf, data, count, feature, present, rows, list_start, list_stop)
    has, counts, flat = _packed(buf, field, list_start, list_stop)
    return Objects(_lists(count, present, rows[has], counts, flat))


def _list_spans(buf, field: str, start, stop) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The lists of the Features [start, stop) that have one (a Feature with no list has no value, as protobuf
    reads it): which do (a mask), and each list's [start, stop)."""
    given = start != stop
    start, stop = start[given], stop[given]
    if (buf[start] != _LIST_TAGS[field]).any():
        raise _Irregular  # another kind of list: protobuf reads it (as no value of this kind)
    list_start, list_stop = _length(buf, start + 1, stop)
    if (list_stop != stop).any():
        raise _Irregular
    return given, list_start, list_stop


def _packed(buf, field: str, list_start, list_stop) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The numbers of the packed lists [list_start, list_stop): which lists hold any (a mask: an empty list has
    no value), how many each of those holds, and all the numbers in order."""
    has = list_start < list_stop
    list_start, list_stop = list_start[has], list_stop[has]
    if (buf[list_start] != _LEN1).any():
        raise _Irregular  # numbers not packed
    packed_start, packed_stop = _length(buf, list_start + 1, list_stop)
    if (packed_stop != list_stop).any():
        raise _Irregular
    if field != "float_list":
        return (has, *_packed_varints(buf, packed_start, packed_stop))
    sizes = packed_stop - packed_start
    if (sizes % 4).any():
        raise _Irregular
    return has, sizes // 4, buf[_spans(packed_start, packed_stop)].view("<f4")


def _packed_varints(buf, starts, stops) -> tuple[np.ndarray, np.ndarray]:
    """Every varint in each [start, stop): how many each span holds, and their values (int64) in order."""
    positions = _spans(starts, stops)
    raw = buf[positions]
    last = raw < 0x80  # the last byte of a varint
    if len(raw) and not last[np.cumsum(stops - starts) - 1].all():
        raise _Irregular  # a span ends inside a varint
    ends = np.flatnonzero(last)
    begins = np.concatenate(([0], ends[:-1] + 1)) if len(ends) else ends
    if len(ends) and (ends - begins >= 10).any():
        raise _Irregular
    shift = (np.arange(len(raw)) - np.repeat(begins, ends - begins + 1)).astype(np.uint64) * np.uint64(7)
    parts = (raw & 0x7F).astype(np.uint64) << shift
    values = np.add.reduceat(parts, begins).view(np.int64) if len(ends) else np.zeros(0, np.int64)
    span_of_end = np.searchsorted(np.cumsum(stops - starts), ends, side="right")
    return np.bincount(span_of_end, minlength=len(starts)), values


def _bytes(buf, data, count, feature, present, rows, starts, stops) -> Binary | Objects:
    """A bytes feature: a list of bytes a record, or for a scalar one pyarrow array of them all."""
    owner, value_start, value_stop = _fields(buf, starts, stops, _LEN1)
    if connectors.of(feature).values_per_record != 1:  # lists, and kinds of several values a record
        values: list[Any] = [None] * count
        for row in present.tolist():
            values[row] = []
        for row, a, b in zip(rows[owner].tolist(), value_start.tolist(), value_stop.tolist()):
            values[row].append(data[a:b])
        return Objects(values)
    if _repeats(owner):
        raise _Irregular  # a scalar with more values than one
    rows = rows[owner]
    sizes = np.zeros(count, np.int64)
    sizes[rows] = value_stop - value_start
    valid = np.zeros(count, bool)
    valid[rows] = True
    offsets = np.concatenate(([0], np.cumsum(sizes)))
    order = np.argsort(rows)  # values laid out in record order
    compact = _gather(buf, data, value_start[order], value_stop[order])
    array = pa.Array.from_buffers(pa.large_binary(), count, [
        pa.py_buffer(np.packbits(valid, bitorder="little")), pa.py_buffer(offsets), pa.py_buffer(compact)],
        null_count=count - len(rows))
    return Binary(array)


def _gather(buf: np.ndarray, data: bytes, starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
    """The bytes of each [start, stop), one after another: gathered by numpy for short values (text), copied
    value by value for long ones (images), where an index of every byte would be 8 times their size."""
    sizes = stops - starts
    if len(sizes) == 0 or sizes.sum() <= 64 * len(sizes):
        return buf[_spans(starts, stops)]
    out = np.empty(int(sizes.sum()), np.uint8)
    at = 0
    for start, size in zip(starts.tolist(), sizes.tolist()):
        out[at:at + size] = buf[start:start + size]
        at += size
    return out


def _spans(starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
    """The positions of every byte in each [start, stop), spans one after another."""
    sizes = stops - starts
    total = int(sizes.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    offsets = np.repeat(starts - (np.cumsum(sizes) - sizes), sizes)
    return np.arange(total) + offsets


def _lists(count: int, present: np.ndarray, rows: np.ndarray, counts: np.ndarray, flat: np.ndarray) -> list[Any]:
    """Per-record Python lists from the values of the records in ``rows``; [] for the other records in
    ``present`` (the key with an empty list), None for records without the key."""
    values: list[Any] = [None] * count
    for row in present.tolist():
        values[row] = []
    pieces = np.split(flat, np.cumsum(counts)[:-1]) if len(counts) else []
    for row, piece in zip(rows.tolist(), pieces):
        values[row] = piece.tolist()
    return values
