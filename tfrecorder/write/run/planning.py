"""Planning: a summarized table (``spill.Summary``) divided into shards - each split's rows in key order, as
``plan.plan_shards`` cuts them by the size estimate from its sample - and what its last step needs (``Finish``),
after the checks only the whole table allows (one image named two ways, an image's boxes in two splits)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from tfrecorder.dataset.connectors import of_type
from tfrecorder.dataset.storage import Folder
from tfrecorder.errors import SchemaError, TFRecorderError
from tfrecorder.types import Role
from tfrecorder.write.record.encode import mean_record_bytes
from tfrecorder.write.run.finish import Finish
from tfrecorder.write.settings import DEFAULT_FILE_FORMAT, FetchLimits
from tfrecorder.write.splits import WRITTEN_SPLITS
from tfrecorder.write.table import leakage, spill, summary_pass
from tfrecorder.write.table.facts import Facts
from tfrecorder.write.table.plan import SAMPLE_ROWS, estimates_sizes, plan_shards
from tfrecorder.write.table.spill import HELD_SIZES, SpilledShard, Summary
from tfrecorder.write.table.table import Table
from tfrecorder.write.table.validate import finalize


def slim(facts: Facts) -> Facts:
    """``facts`` as the shard writers need them (finalize): without the problems, the labels' rows and the
    float columns' distinct values."""
    return replace(facts, problems={}, other_labels={}, spellings=None,
                   columns={name: column.settled() for name, column in facts.columns.items()})


def bytes_per_row(summary: Summary, float_precision: str, limits: FetchLimits) -> dict[str, float]:
    """Each split's mean record size from its SAMPLE_ROWS rows of smallest keys: ``convert``'s estimate."""
    import pyarrow.compute as pc

    estimate = {}
    held = summary.held.part
    if held is not None:  # the SAMPLE_ROWS rows of smallest keys of each split, straight from the held part
        for code, split in enumerate(WRITTEN_SPLITS):
            sample = np.sort(held.order(code)[:SAMPLE_ROWS])
            if len(sample):
                rows = finalize(held.part.take(sample.tolist()), summary.facts, float_precision)
                estimate[split] = mean_record_bytes(rows, limits)
        return estimate
    for split, sample in summary.sample.items():
        by_row = sample.take(pc.sort_indices(sample, [("row", "ascending")]))
        rows = finalize(summary.template.with_values(by_row), summary.facts, float_precision)
        held = by_row[HELD_SIZES].to_pylist() if HELD_SIZES in by_row.column_names else None
        estimate[split] = mean_record_bytes(rows, limits, held)
    return estimate


def spilled_shards(summary: Summary, *, num_shards: int | None, compression: str | None,
                   bytes_per_row: dict[str, float], folder: Folder, float_precision: str,
                   file_format: str = DEFAULT_FILE_FORMAT) -> list[SpilledShard]:
    """The shards of every written split, as ``plan_shards`` divides them: near-equal ranges of its rows in
    key order."""
    facts = slim(summary.facts)
    rows = {split: int(summary.counts[:, code].sum()) for code, split in enumerate(WRITTEN_SPLITS)}
    images = {WRITTEN_SPLITS[code]: boxes for code, (_, boxes) in summary.images.items()}
    shards = []
    for spec in plan_shards(rows, num_shards=num_shards, bytes_per_row=bytes_per_row, compression=compression,
                            images=images, file_format=file_format):
        code = WRITTEN_SPLITS.index(spec.split)
        counts = summary.counts[:, code]
        first_ranks = np.concatenate([[0], np.cumsum(counts)])
        buckets = [(summary.files[(code, b)], int(first_ranks[b])) for b in range(summary.buckets)
                   if counts[b] and first_ranks[b] < spec.stop and first_ranks[b + 1] > spec.start]
        estimate = bytes_per_row[spec.split] * spec.rows if spec.split in bytes_per_row else None
        shards.append(SpilledShard(spec, tuple(buckets), folder.url, summary.template, facts, float_precision,
                                   estimate, summary.held))
    return shards


def plan_table(summary: Summary, folder: Folder, options: Any, runner: str, *, num_shards: int | None,
               float_precision: str, same_uri: Sequence[dict[str, Any]] | None = None
               ) -> tuple[list[SpilledShard], Finish]:
    """The shards of a summarized table (``spilled_shards``, with its size estimate) and what its last step needs.
    ``same_uri``: the same-URI leaks a pipeline found a range of URI hashes at a time (``range_leaks``);
    None: found here, from the summary's URI hashes."""
    summary.facts = replace(summary.facts, box_units=options.box_units)  # what finalize decides "auto" by
    _check_spellings(summary, folder)
    images = summary.template is not None and summary.template.image_locations is not None
    estimate = estimates_sizes(num_shards, images, summary.facts.rows)
    shards = spilled_shards(summary, num_shards=num_shards, compression=options.compression, folder=folder,
                  bytes_per_row=bytes_per_row(summary, float_precision, options.fetch) if estimate else {},
                  float_precision=float_precision, file_format=options.file_format)
    template = finalize(summary.template, summary.facts, float_precision)
    leaks = uri_leaks(summary, folder) if same_uri is None else name_leaks(same_uri, summary, folder)
    _check_detection_options(template, options)
    if template.is_detection and leaks:
        raise SchemaError(image_splits_message(template.schema.column_for(Role.IMAGE), leaks))
    finish = Finish(template, dict(summary.facts.split_counts), options, runner, tuple(leakage.across_train(leaks)))
    return shards, finish


def _check_spellings(summary: Summary, folder: Folder) -> None:
    """A SchemaError when parts summarized on their own (by a Beam runner's workers: ``summarize`` makes them
    one) name one local image file in several ways: its boxes would make a record for each name."""
    aliased = summary.facts.spellings.aliased() if summary.facts.spellings else {}
    if not aliased:
        return
    rows = min(aliased.values())
    uris = spill.image_uris(summary, folder, set(rows))
    names = " and ".join(f"{uris[row]!r} (row {row})" for row in rows)
    more = f"; {len(aliased)} files in all" if len(aliased) > 1 else ""
    raise SchemaError(f"column {summary.schema.column_for(Role.IMAGE)!r}: {names} are one image file{more}, named "
                      f"in parts of the table that were read apart (a Beam runner reads each file, and each "
                      f"{summary_pass.PART_ROWS:,} rows, on its own), so its boxes would make a record for each name: "
                      f"name each image one way, or convert with runner='local', which makes them one image")


def _check_detection_options(table: Table, options: Any) -> None:
    """Settings that only a detection table can take, or that would cut its boxes."""
    if table.is_detection and options.layout.refuses_detection is not None:
        raise TFRecorderError(options.layout.refuses_detection)
    if not options.layout.plain_tables and not table.is_detection and table.mask_uris is None:
        raise TFRecorderError(f"record_format={options.record_format!r} writes detection and segmentation records: "
                              f"the table needs box columns (xmin, ymin, xmax, ymax: a row per box) or a mask "
                              f"column (mask_uri)")
    if table.is_detection and options.images.size is not None and options.images.resize_mode == "crop":
        raise TFRecorderError("resize_mode='crop' with image_size would cut boxes off when writing: store with "
                              "'pad' or 'stretch' (boxes move with the picture), or crop when reading "
                              "(load_dataset(image_size=..., resize_mode='crop') clips boxes and drops those cut off)")
    names = options.keypoints.names
    if names and table.keypoint_count and len(names) != table.keypoint_count:
        raise SchemaError(f"keypoints: the table's objects give {table.keypoint_count} keypoints each, and their "
                          f"names are {len(names)} ({', '.join(names[:5])}{', ...' if len(names) > 5 else ''}): "
                          f"give one name for each keypoint")
    if options.masks.from_instances:
        _check_mask_from_instances(table, options.masks)


def _check_mask_from_instances(table: Table, masks: Any) -> None:
    """``mask_from_instances`` needs instance masks to draw from and class ids a PNG holds: the labels' ids + 1
    (0 is background) below ``ignore_index``; given names, they would be another table's."""
    if not any(of_type(c.type).object_mask for c in table.features):
        raise TFRecorderError("mask_from_instances=True draws each record's semantic mask from its objects' "
                              "instance masks, and this table has none: give a detection table an instance_mask "
                              "column (COCO segmentation, YOLO polygons) or instance_mask_uri (a PNG per object)")
    if masks.classes is not None:
        raise TFRecorderError(f"mask_classes={list(masks.classes)!r} with mask_from_instances=True: the semantic "
                              f"mask's classes are the labels' (background, then the vocabulary), named in "
                              f"dataset.json; leave mask_classes out")
    count = len(table.vocabulary) if table.vocabulary is not None else 0
    if count >= masks.ignore_index:
        raise TFRecorderError(f"ignore_index={masks.ignore_index} with mask_from_instances=True: the semantic mask's "
                              f"class ids are 1-{count} (each label's id + 1; 0 is background), so ignore_index "
                              f"must be above {count}" + (" (at most 255)" if count < 255 else
                                                          f": {count} labels do not fit a PNG of 256 ids"))


def image_splits_message(column: str | None, leaks: Sequence[dict[str, Any]]) -> str:
    """The error for a detection table that puts boxes of one image in two splits (``leaks``: each image's
    rows, in row order)."""
    first = leaks[0]
    rows = ", ".join(map(str, first["rows"][:6])) + (", ..." if len(first["rows"]) > 6 else "")
    more = f"; {len(leaks)} images in all" if len(leaks) > 1 else ""
    return (f"column {column!r}: image {first['image_uri']!r} has boxes in {' and '.join(first['splits'])} "
            f"(rows {rows}){more}. All boxes of one image go in one split: give its rows one split value, "
            f"or leave them UNASSIGNED to split by image")


def uri_leaks(summary: Summary, folder: Folder) -> tuple[dict[str, Any], ...]:
    """Rows of one image URI in TRAIN and in VALIDATION/TEST (``Finish``'s same-URI leaks), found from the
    URIs' 64-bit hashes; the URI of each leak read back from the spill."""
    return name_leaks(leakage.range_leaks("same_uri", summary.uri_keys), summary, folder)


def name_leaks(leaks: Sequence[dict[str, Any]], summary: Summary, folder: Folder) -> tuple[dict[str, Any], ...]:
    """The same-URI ``leaks`` (of any ranges), in row order, each with its URI read back from the spill files."""
    if not leaks:
        return ()
    leaks = sorted(leaks, key=lambda entry: entry["rows"][0])
    uris = spill.image_uris(summary, folder, {entry["rows"][0] for entry in leaks})
    return tuple({**entry, "image_uri": uris[entry["rows"][0]]} for entry in leaks)
