"""Outputs: errors.csv, then dataset.json, from the shard results - the last step of every runner."""

from __future__ import annotations

import csv
import io
import logging
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from tfrecorder import types
from tfrecorder._version import __version__
from tfrecorder.dataset import connectors, features, layouts
from tfrecorder.dataset.connectors import (
    CLASS_LABEL,
    INT64,
    Connector,
    Media,
    list_of,
    objects_of,
    of_type,
    stored_connector,
)
from tfrecorder.dataset.manifest import (
    ERRORS_COLUMNS,
    ERRORS_NAME,
    MANIFEST_NAME,
    FeatureInfo,
    Manifest,
    RowCounts,
    ShardInfo,
)
from tfrecorder.dataset.storage import ERRORS_MAX_BYTES, Folder
from tfrecorder.dataset.tfds import name_and_version, tfds_metadata
from tfrecorder.errors import TFRecorderError
from tfrecorder.types import Role
from tfrecorder.write import splits
from tfrecorder.write.record.masks import pixel_stride
from tfrecorder.write.record.shard import LOOSE_ROWS, ImageStats, ObjectStats, RowFailure, ShardResult, merged_measures
from tfrecorder.write.run.result import ConvertResult, SplitResult
from tfrecorder.write.run.versioning import History
from tfrecorder.write.settings import WriteOptions
from tfrecorder.write.table import leakage
from tfrecorder.write.table.table import Column, Table

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Finish:
    """What the last step needs, without the table's values (small enough to ship to a Beam worker)."""

    table: Table  # table.take([]): schema and column descriptions only
    rows_in: dict[str, int]
    options: WriteOptions
    runner: str
    uri_leaks: tuple[dict[str, Any], ...] = ()
    history: History = History()  # the dataset an append adds its version to (versioning.py); none: a new one

    def leaks(self, results: Sequence[ShardResult],
              same_bytes: Sequence[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
        """Same-URI leaks, then same-bytes leaks among rows whose URIs differ. ``same_bytes``: those a pipeline
        found a range of content keys at a time (None: found here, from every result's keys at once)."""
        if same_bytes is None:
            same_bytes = leakage.range_leaks("same_bytes", [r.keyed_content() for r in results])
        seen = {tuple(e["rows"]) for e in self.uri_leaks}
        by_bytes = [e for e in same_bytes if tuple(e["rows"]) not in seen]
        return sorted([*self.uri_leaks, *by_bytes], key=lambda e: e["rows"][0])

    def write(self, folder: Folder, results: Sequence[ShardResult],
              same_bytes: Sequence[dict[str, Any]] | None = None) -> Manifest:
        """Write errors.csv, the TFDS metadata, then dataset.json (last: its presence means the dataset is
        complete). ``same_bytes``: see ``leaks``."""
        order = {name: i for i, name in enumerate(splits.WRITTEN_SPLITS)}
        results = sorted(results, key=lambda r: (order[r.spec.split], r.spec.index))
        failures = sorted((f for r in results for f in r.failures), key=lambda f: f.row)
        folder.write_text(self.history.errors_file, errors_csv(failures))
        manifest = self.history.recorded(folder, build_manifest(self, results, same_bytes), results)
        layout = self.options.layout
        side_files = layout.side_files(self.table.vocabulary) if self.table.is_detection else {}
        for name, text in side_files.items():
            folder.write_text(name, text)
        tfds = tfds_metadata(name_and_version(folder.path), manifest.features, manifest.splits,
                             compression=manifest.compression, label=manifest.label, image=manifest.image,
                             layout=layout)
        for name, text in tfds.files.items():
            folder.write_text(name, text)
        for name in self.history.stale_tfds_files(tfds.files):  # an earlier version's, TFDS cannot read this one
            folder.remove(name, folder=False)
        manifest = replace(manifest, tfds=tfds.summary())
        folder.sync()  # every shard and file it names is in place for good before dataset.json says so
        folder.write_text(MANIFEST_NAME, manifest.to_json())
        if self.options.statistics:  # from the shards written: a dataset without them is still whole
            from tfrecorder.summary.statistics import write_statistics

            write_statistics(manifest, folder)
        folder.sync()
        return manifest


def manifest_warnings(manifest: Manifest) -> tuple[str, ...]:
    """What a user of the finished dataset should know: images in TRAIN and VALIDATION/TEST, float columns
    kept as float64 (and what float32 would have done), and features TFDS will not see."""
    found = [leakage.summarize(manifest.leakage.get("groups", []))]
    wide = {f.name for f in manifest.features if f.float64_reason}
    found.extend(f"column {f.column!r} is stored as float64, not float32: {f.float64_reason}. tfrecorder's "
                 f"readers give it back as float64, plain tf.io readers need tf.bitcast (see dataset.json), and "
                 f"TFDS does not see it; float_precision='float32' or 'float64' chooses"
                 for f in manifest.features if f.name in wide)
    left_out = (manifest.tfds or {}).get("left_out") or {}
    found.extend(f"TFDS (tfds.builder_from_directory) will not see feature {name!r}: {why}"
                 for name, why in left_out.items() if name not in wide)
    clipped = (manifest.objects or {}).get("clipped", 0)
    if clipped:
        found.append(f"{clipped} boxes lay up to 1 pixel (or 0.5% of the image) outside their image and were "
                     f"clipped onto it; boxes further out are row errors (errors.csv)")
    found.extend(warning for f in manifest.features for warning in connectors.of(f).warnings(f.name))
    loose = ((manifest.objects or {}).get("instance_masks") or {})
    if loose.get("loose"):
        rows = ", ".join(str(r) for r in loose.get("loose_rows", []))
        found.append(f"{loose['loose']} objects' boxes do not hold their instance mask within 1 pixel (rows "
                     f"{rows}{', ...' if loose['loose'] > len(loose.get('loose_rows', [])) else ''}): their box or "
                     f"their mask is not the object's; fix the annotation")
    return tuple(w for w in found if w)


def errors_csv(failures: Sequence[RowFailure]) -> str:
    """errors.csv text: a header and one line per row not written."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    # a lone carriage return is no line terminator to this writer, so it would go unquoted and readers (pandas,
    # csv) would split the row there: a row holding one has every field quoted
    quoted = csv.writer(buffer, lineterminator="\n", quoting=csv.QUOTE_ALL)
    writer.writerow(ERRORS_COLUMNS)
    for f in failures:
        row = (f.row, f.split, f.image_uri or "", f.error, f.message)
        (quoted if "\r" in row[2] or "\r" in row[4] else writer).writerow(row)
    return buffer.getvalue()


def build_manifest(finish: Finish, results: Sequence[ShardResult],
                   same_bytes: Sequence[dict[str, Any]] | None = None) -> Manifest:
    """The Manifest for a finished conversion (``results`` in plan order; ``same_bytes``: ``Finish.leaks``)."""
    table, settings = finish.table, finish.options.images
    schema = table.schema
    shards: dict[str, list[ShardInfo]] = {}
    for r in results:
        shards.setdefault(r.spec.split, []).append(
            ShardInfo(r.spec.filename, r.records, r.bytes, r.crc32c, r.spec.index_filename, r.first_crc))
    stats = ImageStats()
    for r in results:
        stats = stats.merge(r.images)
    label = None
    layout = finish.options.layout
    if table.label is not None:
        feature = layout.label_key(table.label.feature)
        label = {"column": table.label.name, "feature": feature, "type": table.label.type.__name__,
                 "vocabulary": table.vocabulary, "multi_label": table.label.type.is_list}
    image = None
    if table.image_uris is not None:
        image = {"column": schema.column_for(Role.IMAGE), "format": settings.format,
                 "size": list(settings.size) if settings.size else None, "validate": settings.validate,
                 "channels": sorted(stats.channels), "formats": sorted(stats.formats),
                 "shape": list(next(iter(stats.shapes))) if len(stats.shapes) == 1 else None,
                 "orientations": sorted(stats.orientations)}
    leaks = finish.leaks(results, same_bytes)
    objects = _objects(table, results, finish.options) if table.is_detection else None
    masks = _masks(table, results, finish.options) if _semantic_masks(table, finish.options) else None
    return Manifest(
        leakage={"count": len(leaks), "groups": [leakage.bounded(e) for e in leaks[: leakage.MAX_REPORTED]]},
        tfrecorder_version=__version__,
        features=_FEATURES[finish.options.layout.name](table, _semantic_masks(table, finish.options),
                                                       _kinds_written(table, finish.options, results)),
        splits=shards,
        rows=_row_counts(finish.rows_in, results),
        compression=finish.options.compression,
        label=label,
        image=image,
        runner=finish.runner,
        objects=objects,
        masks=masks,
        sequences=layouts.sequences_entry(_feature_lists(table)) if layout.sequences else None,
    )


def _feature_lists(table: Table) -> list[str]:
    """The features a SequenceExample of ``table``'s rows keeps as feature lists (``layouts.is_feature_list``)."""
    return [c.feature for c in table.columns if layouts.is_feature_list(c.connector, c.type.role.value)]


def _kinds_written(table: Table, options: WriteOptions, results: Sequence[ShardResult]) -> dict[str, Connector]:
    """Each media column's kind as dataset.json keeps it (by feature): set by convert's keywords, told what its
    written records hold (``Media.summarized``)."""
    keywords, measured = dict(options.identity), merged_measures(results)
    kinds: dict[str, Connector] = {}
    for c in table.features:
        if isinstance(c.connector, Media):
            prefix = f"{c.feature}/"
            kinds[c.feature] = c.connector.configured(keywords).summarized(
                {name[len(prefix):]: values for name, values in measured.items() if name.startswith(prefix)})
    return kinds


def _semantic_masks(table: Table, options: WriteOptions) -> bool:
    """Whether the records hold a semantic mask: a segmentation table's, or one drawn from a detection table's
    instance masks (``mask_from_instances``)."""
    return table.mask_uris is not None or (options.masks.from_instances and _mask_column(table) is not None)


# dataset.json's ``masks.from_instances``: how a semantic mask is drawn from a record's instance masks
FROM_INSTANCES = ("each object's pixels: its label id + 1 (0: background), later objects of the record over "
                  "earlier ones; a crowd's (is_crowd) pixels, and a pad's, ignore_index")


def _masks(table: Table, results: Sequence[ShardResult], options: WriteOptions) -> dict[str, Any]:
    """dataset.json's ``masks``: the mask feature, its class names and ignore_index, and each split's pixels
    per class id, counted in the masks written of one rank in ``pixel_stride`` (1: every mask;
    ``masks.pixel_stride``). A mask drawn from instance masks: its rule, classes "background" then the labels',
    every mask counted."""
    instances = table.mask_uris is None
    pixels: dict[str, Counter] = {}
    strides: dict[str, int] = {}
    for r in results:
        pixels.setdefault(r.spec.split, Counter()).update(dict(r.mask_pixels or ()))
        strides[r.spec.split] = 1 if instances else pixel_stride(r.spec.split_rows)
    settings = options.masks
    classes = list(settings.classes) if settings.classes is not None else None
    if instances and table.vocabulary is not None:
        classes = ["background", *table.vocabulary]
    return {"record_format": options.layout.name,
            "feature": options.layout.masks[0].name,
            "column": _mask_column(table).name if instances else table.schema.column_for(Role.MASK),  # type: ignore[union-attr]
            **({"from_instances": FROM_INSTANCES} if instances else {}),
            "classes": classes,
            "ignore_index": settings.ignore_index,
            "pixels": {split: {str(k): v for k, v in sorted(found.items())} for split, found in pixels.items()},
            "pixel_stride": strides}


def _objects(table: Table, results: Sequence[ShardResult], options: WriteOptions) -> dict[str, Any]:
    """dataset.json's ``objects``: where a detection record keeps its objects, and how many of each class
    each split holds (by label name where labels are text)."""
    found: dict[str, ObjectStats] = {}
    for r in results:
        found[r.spec.split] = found.get(r.spec.split, ObjectStats()).merge(r.objects or ObjectStats())
    names = table.vocabulary

    def name(label: int) -> str:
        return names[label] if names is not None else str(label)

    layout = options.layout
    most = [stats.most for stats in found.values()]
    return {
        "record_format": layout.name,
        "bbox": layout.bbox_entry(),
        "bbox_format": "rel_yxyx", "frame": "stored",
        "label": layout.object_label.name,
        "box_units": table.box_units,
        "features": [layout.object_key(c.name) for c in _extras(table)],
        **({"keypoints": _keypoints_entry(table, options)} if _keypoint_infos(table, layout) else {}),
        **({"instance_masks": _instance_masks_entry(table, found, layout)} if _mask_infos(table, layout) else {}),
        "counts": {split: {name(label): n for label, n in stats.labels} for split, stats in found.items()},
        "clipped": sum(stats.clipped for stats in found.values()),
        # the most objects one record holds: what load_dataset(as_supervised=True) pads every image's boxes to
        **({"max_objects": max(most, default=0)} if None not in most else {}),
    }


def _detection_api_features(table: Table, semantic: bool = False,
                            kinds: Mapping[str, Connector] | None = None) -> list[FeatureInfo]:
    """The features of a record in the Object Detection API's layout (``layouts.OBJECT_DETECTION``); ``semantic``:
    with a semantic mask."""
    layout = layouts.OBJECT_DETECTION
    masks = layout.masks if semantic else ()
    infos = [FeatureInfo(f.name, f.role.value, f.kind.value, [], connector=f.connector.name,
                         source="str" if f.kind.value == "string" else None)
             for f in (*layout.image_features, *masks)]
    if not table.is_detection:  # a segmentation table: the image and its mask
        return infos
    infos += [FeatureInfo(f.name, f.role.value, f.kind.value, [None], connector=f.connector.name,
                          column=table.schema.boxes.get(f.name[-4:]), source="float" if f.role is Role.BOX else None)
              for f in layout.object_features]
    infos += [FeatureInfo(layout.object_key(c.name), c.type.role.value, c.kind.value, [None],
                          connector=_connector(table, c, per_object=True), column=c.name, source=c.source,
                          type=c.type.__name__, pandas=c.pandas)
              for c in _extras(table)]
    return infos + _keypoint_infos(table, layout) + _mask_infos(table, layout)


def _extras(table: Table) -> list[Column]:
    """A detection table's columns stored as a value per object beside its box and label (the keypoints and
    instance masks apart: stored as features of their own)."""
    return [c for c in table.features if c.type.role is not Role.BOX and not of_type(c.type).layout_keyed]


def _mask_column(table: Table) -> Column | None:
    return next((c for c in table.features if of_type(c.type).object_mask), None)


def _mask_infos(table: Table, layout: layouts.RecordLayout) -> list[FeatureInfo]:
    """The feature of a detection table's instance masks in ``layout``: a PNG per object (none without the
    column)."""
    column, feature = _mask_column(table), layout.instance_mask
    if column is None or feature is None:
        return []
    return [FeatureInfo(feature.name, feature.role.value, feature.kind.value, [None], connector=feature.connector.name,
                        column=column.name, source="str", type=column.type.__name__)]


def _instance_masks_entry(table: Table, found: dict[str, ObjectStats], layout: layouts.RecordLayout
                          ) -> dict[str, Any]:
    """dataset.json's ``objects.instance_masks``: their feature and column, the objects with a mask in each split,
    and those whose box does not hold their mask (their count and first rows)."""
    loose = sorted(row for stats in found.values() for row in stats.loose_rows)
    return {"feature": layout.instance_mask.name, "column": _mask_column(table).name,  # type: ignore[union-attr]
            "format": "png", "counts": {split: stats.masked for split, stats in found.items()},
            "loose": sum(stats.loose for stats in found.values()), "loose_rows": loose[:LOOSE_ROWS]}


def _keypoint_infos(table: Table, layout: layouts.RecordLayout) -> list[FeatureInfo]:
    """The features of a detection table's keypoints in ``layout`` (none when no object gives any): shaped
    ``[None, K, 2]`` for (y, x) pairs, ``[None, K]`` for one value a point."""
    column = next((c for c in table.features if of_type(c.type).object_points), None)
    count = table.keypoint_count
    if column is None or not count:
        return []
    return [FeatureInfo(f.name, f.role.value, f.kind.value,
                        [None, count, f.connector.values_per_point] if f.connector.values_per_point > 1
                        else [None, count],
                        connector=f.connector.name, source="float", type=column.type.__name__)
            for f in layout.keypoints]  # one input column, several features: objects.keypoints names the column


def _keypoints_entry(table: Table, options: WriteOptions) -> dict[str, Any]:
    """dataset.json's ``objects.keypoints``: their features, how many an object has, and their names and
    skeleton (pairs of indices into the names) where the annotations give them."""
    names = options.keypoints
    column = next(c.name for c in table.features if of_type(c.type).object_points)
    return {"column": column, "features": [f.name for f in options.layout.keypoints], "count": table.keypoint_count,
            "names": list(names.names) if names.names else None,
            "skeleton": [list(pair) for pair in names.skeleton] if names.skeleton else None}


def _features(table: Table, semantic: bool = False, kinds: Mapping[str, Connector] | None = None
              ) -> list[FeatureInfo]:
    """The features of a record in our layout (``layouts.DEFAULT``); ``semantic``: with a semantic mask (a
    segmentation table's column, or drawn from instance masks: no column of its own)."""
    schema = table.schema
    image_column = schema.column_for(Role.IMAGE)
    held = image_column is not None and schema[image_column] is types.ImageBytes  # the images themselves
    role_columns: dict[Any, tuple[str | None, type[types.ColumnType]]] = {  # the input column and type behind
        # the derived features that come from a column
        (features.IMAGE if held else features.IMAGE_URI): (image_column, types.ImageBytes if held
                                                            else types.ImageUri),
        features.SPLIT: (schema.column_for(Role.SPLIT), types.SplitKey),
        **({features.SEGMENTATION_MASK: (schema.column_for(Role.MASK), types.MaskUri)}
           if table.mask_uris is not None else {}),  # drawn from instance masks: from no column
    }
    derived = [*(features.IMAGE_FEATURES if table.image_uris is not None else ()),
               *((features.SEGMENTATION_MASK,) if semantic else ()), features.SPLIT]
    infos: list[FeatureInfo] = []
    for f in derived:
        column, col_type = role_columns.get(f, (None, None))
        source = ("bytes" if col_type is types.ImageBytes else "str") if col_type else None
        infos.append(FeatureInfo(f.name, f.role.value, f.kind.value, [], connector=f.connector.name, column=column,
                                 source=source, type=col_type.__name__ if col_type else None))
    if table.is_detection:
        bbox = features.OBJECT_BBOX
        infos.append(FeatureInfo(bbox.name, bbox.role.value, bbox.kind.value, [None], connector=bbox.connector.name,
                                 source="float", column=",".join(table.schema.boxes[e] for e in types.BOX_EDGES)))
        infos += _keypoint_infos(table, layouts.DEFAULT) + _mask_infos(table, layouts.DEFAULT)
    for c in table.columns:
        if c.type.role is Role.BOX or of_type(c.type).layout_keyed:
            continue
        kind = features.LABEL.kind if c.type.role is Role.LABEL else c.kind
        connector = _connector(table, c, per_object=table.is_detection)
        if table.is_detection:  # a value per object: a list, a missing value stored as the kind's (NaN, 0, "")
            infos.append(FeatureInfo(c.feature, c.type.role.value, kind.value, [None], connector=connector,
                                     column=c.name, source=c.source, type=c.type.__name__,
                                     float64_reason=c.float64_reason, pandas=c.pandas))
            continue
        nullable = c.nullable and not c.type.is_list
        if isinstance(c.type.connector, Connector):  # a kind of value of its own: as its connector describes it
            own = (kinds or {}).get(c.feature, c.type.connector)
            infos.append(FeatureInfo(c.feature, c.type.role.value, own.dtype, own.shape, connector=own.name,
                                     nullable=nullable, column=c.name, source=c.source, type=c.type.__name__,
                                     pandas=c.pandas, parameters=own.parameters() or None))
            if isinstance(own, Media):  # what it measured of each file, beside its bytes
                infos += [FeatureInfo(name, c.type.role.value, measure.dtype, measure.shape, connector=measure.name,
                                      parameters=measure.parameters() or None)
                          for name, measure in own.feature_names(c.feature).items() if name != c.feature]
            continue
        infos.append(FeatureInfo(
            c.feature, c.type.role.value, kind.value, [None] if c.type.is_list else [], connector=connector,
            nullable=nullable, column=c.name, source=c.source, type=c.type.__name__,
            default=stored_connector(kind).missing if nullable else None, float64_reason=c.float64_reason,
            pandas=c.pandas,
        ))
    return infos


def _connector(table: Table, column: Column, per_object: bool) -> str:
    """The name of the connector a column's feature is written with: the label's class ids (a ClassLabel where
    the vocabulary names them), else its stored kind; a list where it holds lists, or a value per object
    (``per_object``: a detection table's record holds all of an image's objects)."""
    scalar: Connector
    if column.type.role is Role.LABEL:
        scalar = CLASS_LABEL if table.vocabulary is not None else INT64
    else:
        scalar = stored_connector(column.kind, source=column.source)
    return (objects_of(scalar) if per_object else list_of(scalar) if column.type.is_list else scalar).name


# What dataset.json lists for each record layout's records, by the layout's name (as encode.ENCODERS).
_FEATURES: dict[str, Callable[[Table, bool, Mapping[str, Connector]], list[FeatureInfo]]] = {
    layouts.DEFAULT.name: _features, layouts.OBJECT_DETECTION.name: _detection_api_features,
    layouts.SEQUENCE_EXAMPLE.name: _features}


def _row_counts(rows_in: dict[str, int], results: Sequence[ShardResult]) -> dict[str, RowCounts]:
    rows_in = Counter(rows_in)
    written: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    for r in results:
        written[r.spec.split] += r.rows_written
        errors[r.spec.split] += len(r.failures)
    counts = {}
    for split in (*splits.WRITTEN_SPLITS, splits.DISCARD):
        if rows_in[split]:
            discarded = rows_in[split] if split == splits.DISCARD else 0
            counts[split] = RowCounts(rows_in[split], written[split], errors[split], discarded)
            if counts[split].rows_in != written[split] + errors[split] + discarded:
                raise TFRecorderError(f"internal error: split {split} lost rows ({counts[split]})")
    return counts


def convert_result(folder: Folder, manifest: Manifest, seconds: float, runner: str, resumed: int = 0) -> ConvertResult:
    """What ``convert`` returns for the dataset ``manifest`` describes in ``folder``; its warnings logged."""
    split_results = {}
    boxes = (manifest.objects or {}).get("counts", {})
    for split, counts in manifest.rows.items():
        shards = manifest.splits.get(split, [])
        # A detection table's rows are its boxes: its records (images) and boxes are counted apart.
        images = sum(s.records for s in shards) if manifest.objects is not None else None
        split_results[split] = SplitResult(
            counts.rows_in, counts.written, counts.errors, counts.discarded,
            tuple(folder.url_of(s.file) for s in shards), sum(s.bytes for s in shards),
            images, sum(boxes.get(split, {}).values()) if images is not None else None,
        )
    warnings = manifest_warnings(manifest)
    for warning in warnings:
        logger.warning("%s: %s", folder.url, warning)
    failed = any(c.errors for c in manifest.rows.values())
    return ConvertResult(folder.url, split_results, seconds, runner, folder.url_of(manifest.errors_file),
                         error_codes=error_codes(folder, manifest.errors_file) if failed else {}, warnings=warnings,
                         resumed_shards=resumed)


def error_codes(folder: Folder, name: str = ERRORS_NAME) -> dict[str, int]:
    """errors.csv's (``name``'s) error codes and how many rows each, the most frequent first (the result names
    them)."""
    rows = csv.DictReader(io.StringIO(folder.read_text(name, ERRORS_MAX_BYTES)))
    return dict(Counter(row["error"] for row in rows).most_common())
