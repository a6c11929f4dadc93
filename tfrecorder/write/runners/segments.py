"""Segments: a large shard written by several of the local runner's writers, each a range of its rows into the
spill folder, then joined in order into the file and index one writer would have written - the same bytes."""

from __future__ import annotations

import collections
import contextlib
import os
from array import array
from collections.abc import Generator, Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass, replace
from typing import Any

from tfrecorder import machine
from tfrecorder.dataset.file_formats import format_named
from tfrecorder.dataset.records import ChecksumFile, index_max_bytes, joined_crc
from tfrecorder.dataset.storage import Folder
from tfrecorder.errors import TFRecorderError
from tfrecorder.write.record.shard import ImageStats, ShardResult, merged_measures
from tfrecorder.write.run.spill_folder import room_in
from tfrecorder.write.settings import WriteOptions
from tfrecorder.write.table.plan import TARGET_SHARD_BYTES, ShardSpec
from tfrecorder.write.table.spill import SpilledShard

# A shard of more than an even share of the rows over the cores is written in segments of at least this many rows
# (``plan_units``), so that one large TRAIN shard does not leave the other cores idle.
SEGMENT_MIN_ROWS = 250
SEGMENT_COPY_BYTES = 8 * 1024 * 1024  # joining segments: read and written this much at a time
# A shard is written in segments (by the local runner) only if the plan estimates it at most this many bytes:
# joining copies the segments, which for the default shards (plan.TARGET_SHARD_BYTES) costs a fraction of writing
# them, but would double the disk writes of one huge shard that a user asked for (num_shards=1).
SEGMENT_MAX_BYTES = 2 * TARGET_SHARD_BYTES


def segments(shard: SpilledShard, count: int) -> list[SpilledShard]:
    """``shard`` as ``count`` consecutive ranges of its rows, each with the buckets its rows are in. Written
    one after another they give the shard's records (a detection table's ranges move to whole images in
    ``shard_parts``, as the shard's own do)."""
    spec = shard.spec
    bounds = [spec.start + spec.rows * k // count for k in range(count + 1)]
    firsts = [first for _, first in shard.buckets]
    out = []
    for start, stop in zip(bounds, bounds[1:]):  # bucket b holds ranks firsts[b] up to the next bucket's first
        kept = tuple(bucket for b, bucket in enumerate(shard.buckets)
                     if firsts[b] < stop and (b + 1 == len(firsts) or firsts[b + 1] > start))
        out.append(replace(shard, spec=replace(spec, start=start, stop=stop), buckets=kept))
    return out


@dataclass(frozen=True)
class Unit:
    """A writer's piece of work: a whole shard, written in place, or segment ``segment`` of a shard (its rows
    ``shard.spec.start`` to ``stop``), written to the spill folder and joined into place by this process."""

    shard: SpilledShard
    segment: int | None = None
    last: bool = True  # the shard's last segment: once written, the shard is joined

    @property
    def spec(self) -> ShardSpec:  # what the local runner names when a writer died
        return self.shard.spec


def plan_units(shards: Sequence[SpilledShard], options: WriteOptions) -> list[Unit] | None:
    """The shards as pieces of work of near-even size when a shard holds more than an even share of the rows over
    the cores (the local runner writes them so if forked writers would write them); None to write whole shards.

    Records are self-delimiting: segments written one after another are the shard's bytes, so a shard's
    segments are written by different writers and joined in order (``_join``) into the file one writer would
    have written. Only where the file format says its segments join (``FileFormat.joinable``): not compressed
    shards (a gzip stream cannot be joined byte for byte), nor ArrayRecord files (their index is at the end)."""
    cores = machine.cores()
    joinable = format_named(options.file_format).joinable(options.compression)
    if not joinable or cores < 2 or len(shards) == 0:
        return None
    share = max(SEGMENT_MIN_ROWS, -(-sum(s.spec.rows for s in shards) // cores))
    counts = [max(1, min(s.spec.rows // SEGMENT_MIN_ROWS, -(-s.spec.rows // share)))
              if s.bytes_estimate is not None and s.bytes_estimate <= SEGMENT_MAX_BYTES else 1 for s in shards]
    if max(counts) == 1:
        return None
    return [Unit(part, k if count > 1 else None, k == count - 1) for shard, count in zip(shards, counts)
            for k, part in enumerate(segments(shard, count) if count > 1 else [shard])]


def segment_folder(segment: SpilledShard, index: int) -> Folder:
    """Where segment ``index`` of a shard is written: in the spill folder, beside the spill files."""
    return Folder.of(f"{segment.spill}/segments/{segment.spec.filename}.{index:04d}")


def joined(units: Sequence[Unit], written: Iterator[ShardResult], folder: Folder
            ) -> Generator[ShardResult, None, None]:
    """The shards' results, in plan order, from the units' (``written``, in the same order): a shard written in
    segments is joined into place once its last segment is written."""
    pending: list[tuple[Unit, ShardResult]] = []
    with closing(written):  # type: ignore[type-var]
        for unit, result in zip(units, written):
            if unit.segment is None:
                yield result
                continue
            pending.append((unit, result))
            if unit.last:
                yield _join(pending, folder)
                pending = []


def _join(segments: Sequence[tuple[Unit, ShardResult]], folder: Folder) -> ShardResult:
    """A shard's segments joined in order into its file and index in place, with one ShardResult: the bytes, the
    index (each segment's offsets moved by its start) and the checksums one writer would have written. Each
    segment is appended by the kernel where it can (``_append``); the shard's CRC is joined from its writers'
    (``joined_crc``), so its bytes are not read again."""
    spec = replace(segments[0][1].spec, stop=segments[-1][1].spec.stop)
    size, crc = 0, ""
    with folder.create(spec.filename) as raw, folder.create(spec.index_filename) as index_raw:
        index = ChecksumFile(index_raw)
        for unit, result in segments:
            part = segment_folder(unit.shard, unit.segment or 0)
            _append(part, spec.filename, raw, result.bytes, kernel=folder.is_local and part.is_local)
            crc = joined_crc(crc, result.crc32c, result.bytes) if crc else result.crc32c
            lines = part.read_text(spec.index_filename, index_max_bytes(result.records)).splitlines()
            index.write("".join(f"{int(at) + size} {length}\n" for at, length in
                                (line.split() for line in lines)).encode("ascii"))
            size += result.bytes
            part.remove("", folder=True)
    results = [result for _, result in segments]
    images, objects = ImageStats(), None
    keys, key_rows, masks = array("Q"), array("q"), collections.Counter[int]()
    for result in results:
        images = images.merge(result.images)
        if result.objects is not None:
            objects = result.objects if objects is None else objects.merge(result.objects)
        keys.extend(result.content_keys)
        key_rows.extend(result.content_key_rows)
        masks.update(dict(result.mask_pixels or ()))
    any_masks = any(result.mask_pixels is not None for result in results)
    return ShardResult(spec, sum(r.records for r in results), size, crc,
                       tuple(f for r in results for f in r.failures), images, keys, key_rows, index.bytes,
                       index.crc32c, next((r.first_crc for r in results if r.first_crc is not None), None), objects,
                       tuple(sorted(masks.items())) if any_masks else None, tuple(merged_measures(results).items()))


def _append(part: Folder, name: str, raw: Any, size: int, kernel: bool) -> None:
    """Append the segment file ``name`` of ``part`` (``size`` bytes, as its writer counted them) to ``raw``: with
    ``kernel`` (two local files) by ``os.copy_file_range``, the kernel copying the pages (``raw`` is told what was
    written behind it: ``wrote_elsewhere``), else read and written SEGMENT_COPY_BYTES at a time. A segment of
    another size than its writer counted is a TFRecorderError naming it."""
    copied = 0
    with part.open(name) as f:
        copy = getattr(os, "copy_file_range", None)  # absent from Pythons built against an old C library
        if kernel and copy is not None:
            raw.flush()
            wrote = getattr(raw, "wrote_elsewhere", None)
            try:
                while copied < size and (n := copy(f.fileno(), raw.fileno(), size - copied)):
                    copied += n
                    if wrote is not None:
                        wrote(n)
            except OSError:  # a kernel or file system without it (EXDEV, ENOSYS, EINVAL): copied by reads below
                f.seek(copied)
        while chunk := f.read(min(SEGMENT_COPY_BYTES, size - copied) if copied < size else 1):
            raw.write(chunk)
            copied += len(chunk)
    if copied != size:
        raise TFRecorderError(f"{part.url_of(name)}: {copied} bytes where its writer wrote {size}: the temporary "
                              f"folder's files were changed while the conversion ran; convert again")


@contextlib.contextmanager
def segment_room(shard: SpilledShard) -> Iterator[None]:
    """Writing a segment of ``shard`` into its spill folder (TMPDIR; the local runner's forked writers): a full disk
    there is the TFRecorderError that names the temporary folder and how to move it, not output_dir's."""
    with room_in(shard.spill, f"the segments of {shard.spec.filename}, written there by several processes and "
                               f"then joined into output_dir (up to {SEGMENT_MAX_BYTES / 2**20:.0f} MiB a shard), "
                               f"beside the spill files", resumes=True):
        yield
