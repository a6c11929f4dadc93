"""Convert (orchestration): source -> validate -> plan -> write -> errors.csv -> dataset.json -> ConvertResult.

The public entry point: its keywords checked (``Options``), the source sent down its runner's route - the local
run here, a Beam runner's in ``runners/beam_dispatch.py`` - and the result checked (no row written is an error)."""

from __future__ import annotations

import contextlib
import csv
import io
import logging
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import fields, replace
from typing import Any

import pandas as pd

from tfrecorder.dataset.connectors.audio import DEFAULT_AUDIO_FORMAT, DEFAULT_VALIDATE_AUDIO
from tfrecorder.dataset.manifest import ERRORS_NAME
from tfrecorder.dataset.storage import ERRORS_MAX_BYTES, Folder
from tfrecorder.dataset.store_requests import DEFAULT_STORAGE_TIMEOUT, StoreUnreachable, requests_of_run
from tfrecorder.dataset.versions import only_version
from tfrecorder.errors import TFRecorderError
from tfrecorder.redact import redact
from tfrecorder.schema import Schema
from tfrecorder.types import ColumnType
from tfrecorder.write import splits
from tfrecorder.write.options import (
    DEFAULT_IGNORE_INDEX,
    DEFAULT_RECORD_FORMAT,
    DEFAULT_RESIZE_MODE,
    LOCAL,
    Options,
    as_schema,
)
from tfrecorder.write.run import append, planning
from tfrecorder.write.run.finish import convert_result
from tfrecorder.write.run.result import ConvertResult
from tfrecorder.write.run.resume import finished_key, record_finished, start_run, table_run_identity
from tfrecorder.write.run.run_edges import add_read_notes, full_disk_as_error, releasing_lock, reused
from tfrecorder.write.run.spill_folder import spill_folder
from tfrecorder.write.runners.beam_dispatch import convert_beam
from tfrecorder.write.settings import (
    APPEND,
    DEFAULT_BOX_ORIENTATION,
    DEFAULT_BOX_UNITS,
    DEFAULT_FILE_FORMAT,
    DEFAULT_FLOAT_PRECISION,
    DEFAULT_IMAGE_FORMAT,
    DEFAULT_IMAGE_TIMEOUT,
    DEFAULT_JPEG_QUALITY,
    DEFAULT_MAX_IMAGE_BYTES,
    DEFAULT_MAX_PIXELS,
    DEFAULT_MODE,
    DEFAULT_NEW_LABELS,
    DEFAULT_ON_ERROR,
    DEFAULT_TENSOR_ENCODING,
    DEFAULT_VALIDATE,
    Conversion,
    KeypointNames,
    Root,
    RunDigest,
    RunSettings,
    WriteOptions,
    is_remote,
)
from tfrecorder.write.sources import Source, table_source
from tfrecorder.write.sources.annotated import Annotations
from tfrecorder.write.sources.annotations import annotation_table
from tfrecorder.write.sources.long_form import is_relative
from tfrecorder.write.sources.od_records import unpacked_records
from tfrecorder.write.table import summary_pass

logger = logging.getLogger(__name__)


def convert(
    source: Any,
    output_dir: str,
    schema: Schema | Mapping[str, type[ColumnType]] | None = None,
    runner: str = LOCAL,
    *,
    num_shards: int | None = None,
    compression: str | None = None,
    file_format: str = DEFAULT_FILE_FORMAT,
    image_format: str = DEFAULT_IMAGE_FORMAT,
    image_size: tuple[int, int] | None = None,
    resize_mode: str = DEFAULT_RESIZE_MODE,
    jpeg_quality: int = DEFAULT_JPEG_QUALITY,
    max_image_pixels: int = DEFAULT_MAX_PIXELS,
    float_precision: str = DEFAULT_FLOAT_PRECISION,
    tensor_encoding: str = DEFAULT_TENSOR_ENCODING,
    max_image_bytes: int = DEFAULT_MAX_IMAGE_BYTES,
    image_timeout: float = DEFAULT_IMAGE_TIMEOUT,
    storage_timeout: float = DEFAULT_STORAGE_TIMEOUT,
    box_units: str = DEFAULT_BOX_UNITS,
    box_orientation: str = DEFAULT_BOX_ORIENTATION,
    record_format: str = DEFAULT_RECORD_FORMAT,
    mask_classes: Sequence[str] | None = None,
    mask_colors: Mapping[tuple[int, int, int], int] | None = None,
    ignore_index: int = DEFAULT_IGNORE_INDEX,
    mask_from_instances: bool = False,
    validate_images: str = DEFAULT_VALIDATE,
    validate_audio: str = DEFAULT_VALIDATE_AUDIO,
    sample_rate: int | None = None,
    audio_channels: int | None = None,
    audio_format: str = DEFAULT_AUDIO_FORMAT,
    video_fps: float | None = None,
    max_frames: int | None = None,
    on_error: str = DEFAULT_ON_ERROR,
    statistics: bool = True,
    overwrite: bool = False,
    mode: str = DEFAULT_MODE,
    new_labels: str = DEFAULT_NEW_LABELS,
    progress: bool | None = None,
    num_workers: int | None = None,
    split_fractions: Sequence[float] = splits.DEFAULT_FRACTIONS,
    project: str | None = None,
    region: str | None = None,
    pipeline_options: Mapping[str, Any] | None = None,
    dataflow_options: Mapping[str, Any] | None = None,
    job_label: str | None = None,
    tfrecorder_wheel: str | None = None,
    wait: bool = False,
    images_dir: str | None = None,
) -> ConvertResult:
    """Convert a table of images and labels (or plain columns) into TFRecord shards and ``dataset.json``.

    Args:
        source: a DataFrame, a CSV or Parquet path/URL or a glob of them (``parts/*.csv``; CSV header optional:
            AutoML ``split,image_uri,label`` order),
            or an image folder (``<dir>/<SPLIT>/<label>/<file>`` or ``<dir>/<label>/<file>``).
        output_dir: local path or URL to write into (directly: no timestamped sub-folder).
        schema: None to infer from column names and dtypes, a ``Schema``, or ``{column: tfrecorder.types.X}``.
        runner: ``"local"`` (this machine, no Beam: shards of large tables of local files written by one process
            per core, remote images fetched by threads), or an Apache Beam runner: ``"DirectRunner"``,
            ``"DataflowRunner"``, ``"DaskRunner"``, ``"FlinkRunner"``, ``"SparkRunner"``, ``"PrismRunner"``, or
            another runner class (or its dotted path). The result and dataset.json say which ran.
        num_shards: shards per split; None chooses from the bytes (about 128 MiB a shard).
        compression: None, ``"gzip"`` or ``"zlib"``.
        file_format: ``"tfrecord"`` (TFRecord shards, each with a ``.tfindex``) or ``"array_record"`` (ArrayRecord
            files of the same records, one record a chunk, for random access: Grain, ``tfds.data_source`` and
            ``tfrecorder.data_source`` read them; needs the ``array_record`` package).
        image_format: ``"keep"`` the original bytes, ``"jpeg"``/``"png"`` re-encode, ``"raw"`` uint8 pixels.
        image_size: ``(height, width)`` to resize to (bicubic) before storing; of at most ``max_image_pixels``
            pixels (a larger size is refused before any work).
        resize_mode: with ``image_size``: ``"stretch"`` (ignore aspect ratio), ``"pad"`` (keep it, pad with
            black) or ``"crop"`` (keep it, crop the centre).
        jpeg_quality: with ``image_format="jpeg"``.
        max_image_pixels: larger images are row errors (``too_large``), a guard against decompression bombs;
            at most Pillow's own limit of 178,956,970 pixels.
        float_precision: ``"auto"`` stores a float column as float32 (the ``FloatList`` every reader expects)
            unless float32 would change what the column means, judged on the whole column: values as written
            (whole numbers, decimals of up to 6 places: ids, times) that it would make equal, values it would
            move by more than 1e-4 of the column's range (max - min), or values beyond its range. Such a column
            is stored as float64 and named in ``result.warnings`` with what float32 would have done.
            ``"float32"`` always (rounding accepted), ``"float64"`` always. A float64 feature is stored as the
            int64 bits of each value (tf.train.Example has no float64 list); ``load_dataset``, ``read_tfr`` and
            ``feature_spec`` users get float64 back (see dataset.json's dtype); TFDS does not see it.
        tensor_encoding: how array columns of a fixed shape are stored, where their ``types.Tensor`` gives no
            ``encoding``: ``"none"`` their values in an Example list (float64: its bytes, exact), ``"bytes"``
            the array's bytes, ``"zlib"`` them zlib-compressed (smaller for arrays of repeated values: masks,
            sparse or quantized data). Every reader and TFDS give the arrays back as they were.
        max_image_bytes: larger image files are row errors (``too_large``), found before they are read
            where the size is known, and as soon as the limit is passed while streaming where it is not.
        image_timeout: seconds one try at reading a remote image may take: to connect, any silence, and the
            whole answer (a server that drips its bytes); ``Retry.attempts`` tries, then a ``fetch_error`` row.
        storage_timeout: seconds one object-store operation (gs://: a listing, one 5 MiB block of an upload)
            may take, its retries included; each request may be silent for 60 s at most. A store that stops
            answering or refuses ends the run with one TFRecorderError; the same call again resumes.
        box_units: a detection table's box edges (``xmin, ymin, xmax, ymax``, a row per box): ``"pixels"``
            (counted from 0 at the image's top-left corner), ``"normalized"`` (fractions of its width and
            height), or ``"auto"``: normalized when every edge is within [0, 1].
        box_orientation: the frame pixel boxes of a photo stored rotated (an EXIF orientation) refer to:
            ``"displayed"`` (the picture as viewers and labelling tools show it), ``"stored"`` (its pixels as
            stored), or ``"auto"``: displayed, unless the table's ``width``/``height`` (the size the annotation
            tool saw: VOC's ``<size>``, COCO's) are the stored pixels'. Boxes are stored in the stored pixels'
            frame, so readers that ignore EXIF (TFDS, Model Garden) find them on the objects as ours does.
        record_format: ``"tfrecorder"`` (the default layout: ``image``, ``label``, a detection table's
            ``objects/bbox`` and ``objects/label``, read by ``load_dataset`` and TFDS) or, for a detection
            table, ``"tf_object_detection"``: the TF Object Detection API's keys (``image/encoded``,
            ``image/object/bbox/xmin``, ..., ``image/object/class/label`` from 1) and ``label_map.pbtxt``
            beside the shards, for TF Model Garden's ``TfExampleDecoder`` and the Object Detection API.
            ``"sequence_example"``: each row a ``tf.train.SequenceExample``, its lists and tensors whose first
            dimension varies as feature lists (a Feature a step), the rest as its context; every reader gives a
            sequence back ``[T, ...]`` (not for detection tables; no TFDS metadata).
        mask_classes: a segmentation table's (``mask_uri``: a one-channel PNG of class ids per image) class
            names by id, kept in dataset.json; masks holding other ids (but ``ignore_index``) are row errors.
        mask_colors: ``{(r, g, b): class_id}`` for masks saved in colour; without it an RGB mask is a row error
            (palette PNGs, VOC's ``SegmentationClass``, are read by their indices).
        ignore_index: the class id of pixels to ignore (VOC's 255 border), and what pads a mask when the
            image is padded (``resize_mode="pad"``).
        mask_from_instances: a detection table with instance masks (COCO ``segmentation``, YOLO polygons,
            ``instance_mask_uri``) also gets each record's semantic ``segmentation_mask`` (the Object Detection
            API's layout: ``image/segmentation/class/encoded``): a PNG of class ids, each object's pixels its
            label id + 1 (0 background; dataset.json's ``masks.classes`` are "background" then the labels), later
            objects of the record over earlier ones, a crowd object's (``is_crowd``, COCO's ``iscrowd``) pixels
            ``ignore_index``, as is the padding of ``resize_mode="pad"``.
        validate_images: ``"full"`` decodes every image once; ``"header"`` reads headers only.
        validate_audio: an audio column's clips: ``"full"`` decodes each once; ``"header"`` reads headers only.
        sample_rate: resample every clip of an audio column to this rate (soxr); the rate of a column of numpy
            waveforms. None: each clip as given (a table of several rates warns, naming them).
        audio_channels: 1 downmixes every clip to mono (None: as given).
        audio_format: ``"keep"`` stores each clip's bytes as they are; ``"flac"`` (lossless) or ``"wav"``
            (16-bit PCM, which ``load_dataset`` decodes in the graph) encodes every clip again.
        video_fps: a video column's clips: keep this many frames a second of each (PyAV decodes every frame; one
            every 1/video_fps seconds is stored, as a JPEG). None: every frame.
        max_frames: a video column's clips: keep at most this many frames of each (the first). None: all.
        on_error: ``"report"`` lists bad rows in errors.csv; ``"raise"`` stops at the first.
        statistics: write ``statistics.pb`` (each split's and feature's statistics in TFDV's format, computed
            from the shards once they are written; ``tfrecorder.report`` shows them). False: none (``report``
            computes them when asked).
        overwrite: replace an earlier conversion in a non-empty ``output_dir``. Without it, a folder holding
            the finished conversion of the same input and settings (and tfrecorder version and runner) gives
            its result back at once, ``reused`` (the result's table says so, and a line is logged), writing and
            reading no image: the table is read again to know it is the same (a file's rows, not its bytes or
            time, for the local runner, with the working directory of a DataFrame's relative paths; a Beam
            runner knows a CSV or Parquet file by its size and time, an image folder by its listing - not on
            Dataflow, nor after a job not waited for). It is converted again instead (a warning says why) when
            rows of it failed (a re-run retries them) or a shard it lists is missing or of another size. Images
            are known by their location: an image changed in place, or a shard's bytes damaged since, is not
            noticed (``tfrecorder.verify`` checks the shards; ``overwrite=True`` writes it again). Any other
            input or setting is an error that says what differs; an unfinished run of the same conversion
            resumes.
        mode: ``"create"`` writes a new dataset; ``"append"`` adds the table's rows to the finished dataset in
            ``output_dir`` as its next version (new shards named ``train-v2-00000-of-00001.tfrecord``, ...; no
            shard written before is rewritten or renamed). The table must have the dataset's columns, of its
            kinds (a difference is one SchemaError naming the column); its images are checked against the
            content keys kept beside the shards (``.content-keys-v1.npy``, ...): an image already in the
            dataset is the row error ``duplicate``, naming the split and shard that hold it, and the leakage
            report covers every version. dataset.json lists the versions (``tfrecorder.versions``); readers
            read the latest unless given ``version=``. The same append run again returns its result; a killed
            one leaves the previous version whole, and run again finishes it.
        new_labels: with ``mode="append"``: ``"refuse"`` a label the dataset's vocabulary lacks (a SchemaError
            naming it), or ``"extend"`` the vocabulary with it, after the existing names (no id changes).
        progress: show a progress bar (None: only in terminals and notebooks).
        num_workers: threads fetching and checking images (local runner); setting it keeps the writing in this
            process. By default: one thread per core for local files, with the shards of large tables written by
            one forked process per core on Linux; more threads for remote URLs.
        split_fractions: (TRAIN, VALIDATION, TEST) fractions for rows without a split.
        project: Google Cloud project (DataflowRunner).
        region: Google Cloud region (DataflowRunner).
        pipeline_options: any other Beam pipeline options, checked against Beam's own option classes (a
            misspelt one is an error), e.g. ``{"machine_type": "n2-standard-4", "max_num_workers": 20}`` for
            Dataflow, ``{"direct_running_mode": "multi_processing", "direct_num_workers": 2}`` for the
            DirectRunner, ``{"dask_client_address": "tcp://scheduler:8786"}`` for the DaskRunner.
        dataflow_options: TFRecorder 2.0's name of ``pipeline_options``.
        job_label: a label for the Dataflow job name (``tfrecorder-<label>-<time>-<random>``).
        tfrecorder_wheel: a tfrecorder wheel or sdist for Dataflow workers; by default one is built
            from the installed package.
        wait: with DataflowRunner, wait for the job to finish (otherwise return once it is submitted).
        images_dir: for an annotation file (a VOC folder, a COCO ``.json``, an AutoML detection CSV): the folder
            holding its images, the only one they are read from (as ``read_annotations`` takes it). By default
            where the format keeps them (VOC's ``JPEGImages/``; COCO's split folder or ``images/`` beside
            ``annotations/``; the file's folder).

    Returns:
        ConvertResult with per-split counts, shard files, bytes and seconds. A ``reused`` result is the
        earlier run's, rebuilt from its dataset.json (splits, counts, errors, errors_file, warnings), with
        ``seconds`` 0 and no Beam job or counters.

    Examples:
        >>> import pandas as pd, tfrecorder
        >>> df = pd.DataFrame({"split": ["TRAIN", "TEST"], "x": [1.5, 2.0], "label": ["a", "a"]})
        >>> result = tfrecorder.convert(df, str(tmp_path / "out"), progress=False)
        >>> result.splits["TRAIN"].written
        1
    """
    given = locals()  # the keywords as given, before any other name is bound: one Options field each
    started = time.perf_counter()
    options = Options(**{f.name: given[f.name] for f in fields(Options)})
    conversion = options.conversion()
    conversion.options.check_file_format()
    run_settings = options.run_settings(started)  # the runner: a class or the path of a known one, as its name
    run_settings.beam.check(run_settings.runner, str(output_dir))
    output = Folder.of(output_dir, conversion.storage_timeout)
    with _store_lost(output, conversion.storage_timeout), requests_of_run(conversion.storage_timeout):
        if output.is_local and output.fs.isfile(output.path):  # [Errno 20] from inside the lock, else
            raise TFRecorderError(f"output_dir {str(output_dir)!r} is a file: give a folder to write the dataset in")
        result = _dispatch(source, output, schema, conversion, run_settings)
        _check_written(result, output, from_frame=isinstance(source, pd.DataFrame))
        return result


def _check_written(result: ConvertResult, folder: Folder, *, from_frame: bool) -> None:
    """A TFRecorderError when rows came in, some failed and none was written: the run's count and its first
    causes (errors.csv's first codes, with an example each), and where relative paths of a DataFrame were
    looked for. The dataset and errors.csv stay, for inspection."""
    totals = result.rows
    if not result.splits or totals.written or not totals.errors:
        return
    codes: dict[str, tuple[int, str, str]] = {}  # code -> (rows, first image_uri, first message)
    with folder.open_side(ERRORS_NAME, ERRORS_MAX_BYTES) as f:
        for i, row in enumerate(csv.DictReader(io.TextIOWrapper(f, encoding="utf-8", newline=""))):
            count, uri, message = codes.get(row["error"], (0, row["image_uri"], row["message"]))
            codes[row["error"]] = (count + 1, uri, message)
            if i + 1 >= _CAUSE_ROWS:
                break
    sample = f" (in the first {_CAUSE_ROWS} rows)" if totals.errors > _CAUSE_ROWS else ""
    causes = "; ".join(f"{code}: {count} rows, e.g. {message}"
                       for code, (count, _, message) in sorted(codes.items(), key=lambda c: -c[1][0]))
    relative = from_frame and any(is_relative(uri) for code, (_, uri, _) in codes.items() if code == "not_found")
    where = (f". A DataFrame's relative image paths are read from the working directory, {os.getcwd()}: make them "
             f"absolute, or run from the folder they are relative to") if relative else ""
    raise TFRecorderError(f"no row was written: the {totals.errors} rows not discarded all failed, listed in "
                          f"{result.errors_file}. Causes{sample}: {causes}{where}")


_CAUSE_ROWS = 1000  # errors.csv rows read to name a failed run's first causes


@contextlib.contextmanager
def _store_lost(folder: Folder, seconds: float) -> Iterator[None]:
    """An object store given up on (storage_timeout) as one error naming the output folder and how to go on."""
    try:
        yield
    except StoreUnreachable as e:
        raise TFRecorderError(
            f"the store stopped working while converting into {folder.url}: {e} (given up at "
            f"storage_timeout={seconds:g} s). "
            f"Run the same conversion again once the store answers: it resumes, keeping the shards already "
            f"written") from e


def _dispatch(source: Any, folder: Folder, schema: Any, conversion: Conversion,
              run_settings: RunSettings) -> ConvertResult:
    """Send the conversion down the route its source and runner take."""
    given = source  # a table file read from a store or URL, annotations too, never names a local file
    with unpacked_records(source) as source:  # others' Object Detection TFRecords: their images and box rows
        annotations = _annotations(source, run_settings.images_dir)
        if annotations is not None:
            source = annotations.table
        options = _confined(conversion.options, given, annotations)
        conversion = replace(conversion, options=_given_units(annotations, _keypoint_names(annotations, options)))
        label_names = annotations.label_names if annotations is not None else None
        if conversion.mode == APPEND and run_settings.runner != LOCAL:
            raise TFRecorderError(f"mode='append' with runner={run_settings.runner!r}: appending runs on the local "
                                  f"runner only, for now; give runner='local'")
        if run_settings.runner == LOCAL:
            result = _convert_local(table_source(source, summary_pass.PART_ROWS, label_names), folder,
                                    as_schema(schema), conversion, run_settings)
        else:
            result = convert_beam(source, folder, schema, conversion, run_settings, label_names=label_names)
    return _read_notes(annotations, result)  # where COCO's images were, YOLO's label files without images, ...


def _annotations(source: Any, images_dir: str | None) -> Annotations | None:
    """What ``source`` was found to hold when it is annotations: an annotation file read (VOC, COCO, YOLO, an
    AutoML CSV: ``annotation_table``, which refuses ``images_dir`` for any other source), others' Object
    Detection TFRecords unpacked, or a DataFrame (``read_annotations``' or another: what its ``attrs`` say);
    None for any other source."""
    found = annotation_table(source, images_dir)
    if found is None and isinstance(source, Annotations):
        return source
    if found is None and isinstance(source, pd.DataFrame):
        return Annotations.from_frame(source)
    return found


def _convert_local(files: Source, folder: Folder, schema: Schema | None, conversion: Conversion,
                   run_settings: RunSettings) -> ConvertResult:
    """The local runner: the table read a part at a time (``summary_pass.summarize`` - every part validated, its
    rows spilled by split and key range - then plan, then write each shard from its spilled rows), so only the
    spill's small tables are held whole, in memory (``summary_pass.MEMORY_SPILL_BYTES``)."""
    from tfrecorder.write.runners.local import write_shards
    from tfrecorder.write.runners.segments import SEGMENT_MAX_BYTES

    options = conversion.options
    appending = append.prepare(folder, conversion, schema, files.columns) if conversion.mode == APPEND else None
    if appending is not None:  # the new table is held to the dataset's schema; its images to its content keys
        schema, options = appending.schema, replace(options, known_content=appending.known)
    with spill_folder(folder.url, files, SEGMENT_MAX_BYTES) as rows:
        summary = summary_pass.summarize(files, schema, rows, fractions=conversion.fractions,
                                         tensor_encoding=options.tensor_encoding,
                                         run_digest=lambda template: RunDigest(template.schema, options),
                                         vocabulary=appending.vocabulary if appending is not None else None)
        try:
            shards, finish = planning.plan_table(summary, rows, options, LOCAL, num_shards=conversion.num_shards,
                                                 float_precision=conversion.float_precision)
            if appending is not None:
                summary.run_digest.add("append", conversion.new_labels)
            identity = table_run_identity(summary.run_digest, shards, finish.table)
            key = finished_key(identity, options, schema, runner=LOCAL)
            if appending is not None:
                shards = [replace(s, spec=append.versioned(s.spec, appending.version)) for s in shards]
                done = append.appended_already(appending, identity)
                if done is not None:  # the same append, finished: its result
                    return reused(folder, only_version(appending.earlier, done.version), LOCAL)
            plan = [s.spec for s in shards]
            run = (start_run(folder, identity, plan, overwrite=conversion.overwrite, runner=LOCAL, key=key)
                   if appending is None else append.start_append(folder, identity, plan, LOCAL))
            with full_disk_as_error(folder), releasing_lock(run):
                if run.reused is not None:
                    return add_read_notes(reused(folder, run.reused, LOCAL), files, schema)
                if appending is not None:
                    finish = replace(finish, history=appending.history(identity, run, options))
                remaining = [s for s in shards if s.spec.filename not in run.resumed]
                written = write_shards(remaining, folder, options, progress=run_settings.progress,
                                       workers=run_settings.num_workers, journal=run.journal, remote=summary.remote)
                manifest = finish.write(folder, [*run.resumed.values(), *written])
                if appending is None:
                    record_finished(folder, key)
                run.journal.complete()
                described = manifest if appending is None else only_version(manifest, appending.version)
                result = convert_result(folder, described, time.perf_counter() - run_settings.started, LOCAL,
                                        resumed=len(run.resumed))
                return add_read_notes(result, files, schema)
        finally:  # an error kept (a notebook keeps the last one) keeps its frames, and this summary's images
            summary.held.release()


def _confined(options: WriteOptions, given: Any, annotations: Annotations | None) -> WriteOptions:
    """``options`` reading only inside the dataset's root when the source is an annotation file's table
    (``annotations.root``): its names cannot reach other files; and never a file of this machine when what the
    user ``given`` is a file read from a store or URL."""
    named = [given] if isinstance(given, str) else list(given) if isinstance(given, (list, tuple)) else []
    remote = next((u for u in named if isinstance(u, str) and is_remote(u)), None)
    if remote is not None:
        options = replace(options, fetch=replace(options.fetch, remote_table=redact(remote)))
    if annotations is None or annotations.root is None:
        return options
    refused = tuple(sorted((str(image), str(why)) for image, why in (annotations.refused or {}).items()))
    listed = tuple(sorted((str(image), str(by)) for image, by in (annotations.listed or {}).items()))
    root = Root(str(annotations.root), str(annotations.named_by), refused, listed)
    return replace(options, fetch=replace(options.fetch, root=root))


def _given_units(annotations: Annotations | None, options: WriteOptions) -> WriteOptions:
    """``options`` with the box units an annotation file's format gives (YOLO's are normalized): "auto" would
    judge them by their range, and a box a hair beyond 1 would turn every box into pixels."""
    units = annotations.box_units if annotations is not None else None
    if not units or options.box_units == units:
        return options
    if options.box_units != DEFAULT_BOX_UNITS:
        named = annotations.named_by if annotations is not None and annotations.named_by else "the annotation file"
        raise TFRecorderError(f"box_units={options.box_units!r}: {named} gives its boxes {units}; leave "
                              f"box_units out (or give {units!r})")
    return replace(options, box_units=units)


def _read_notes(annotations: Annotations | None, result: ConvertResult) -> ConvertResult:
    """``result`` with what an annotation file's reader says of how it was read: its warnings, and the files
    under its root that are no row in ``skipped``."""
    if annotations is None or not (annotations.warnings or annotations.skipped):
        return result
    if not annotations.logged:  # read_annotations said them already
        for warning in annotations.warnings:
            logger.warning("%s", warning)
    return replace(result, warnings=annotations.warnings + result.warnings,
                   skipped=annotations.skipped + result.skipped)


def _keypoint_names(annotations: Annotations | None, options: WriteOptions) -> WriteOptions:
    """``options`` with the keypoint names and skeleton an annotation file gives (a COCO person keypoints
    file's), for dataset.json."""
    if annotations is None or annotations.keypoints == KeypointNames():
        return options
    return replace(options, keypoints=annotations.keypoints)


def convert_and_load(source: Any, output_dir: str, **kwargs: Any) -> dict[str, Any]:
    """Convert, then load every split (TFRecorder 2.0's ``convert_and_load``): ``{"TRAIN": ds, ...}``.

    Args:
        source: what ``convert`` takes: a DataFrame, a CSV or Parquet path or glob, a folder of images or
            annotations.
        output_dir: the dataset folder to write (local path or URL).
        **kwargs: ``convert``'s keywords.

    Returns:
        Each written split's ``tf.data.Dataset``, as ``load_dataset(output_dir)`` gives them.

    Examples:
        >>> splits = tfrecorder.convert_and_load(df, str(tmp_path / "both"), progress=False)
        >>> sorted(splits), int(splits["TRAIN"].cardinality())
        (['TEST', 'TRAIN', 'VALIDATION'], 6)
    """
    from tfrecorder.read.tf_data import load  # the one arrow from write to read: convert, then load

    result = convert(source, output_dir, **kwargs)
    return load(result.tfrecord_dir)
