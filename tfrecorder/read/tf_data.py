"""Reader: load_dataset / load / label_names, tf.data pipelines driven by dataset.json."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import tensorflow as tf

from tfrecorder.arguments import (
    check_choice,
    check_count,
    check_image_size,
    check_optional_count,
    check_switch,
    is_count,
)
from tfrecorder.dataset import connectors
from tfrecorder.dataset.features import (
    BOX_FORMATS,
    DECODE_FEATURES,
    DEFAULT_RESIZE_MODE,
    IMAGE,
    RESIZE_MODES,
)
from tfrecorder.dataset.layouts import feature_lists_of, first_class_id_of, layout_of
from tfrecorder.dataset.manifest import MANIFEST_NAME, FeatureInfo, Manifest
from tfrecorder.dataset.storage import Folder
from tfrecorder.dataset.store_requests import DEFAULT_STORAGE_TIMEOUT
from tfrecorder.errors import TFRecorderError
from tfrecorder.read import cache
from tfrecorder.read.cache import CachedShards
from tfrecorder.read.hosts import host_part
from tfrecorder.read.open import check_opened, open_dataset, reading
from tfrecorder.read.tf_image import (
    DEFAULT_RESIZE_METHOD,
    RESIZE_METHODS,
    check_decodable,
    image_decoder,
    uniform_shape,
)
from tfrecorder.read.tf_objects import (
    SUPERVISED_BOX_FORMAT,
    check_max_objects,
    most_objects,
    objects_gatherer,
    padder,
    supervised_objects,
)
from tfrecorder.read.tf_records import AUTOTUNE, shard_records, traced

logger = logging.getLogger(__name__)

_PARSE_BATCH = 256  # records parsed together when the caller wants single examples; a record whose image is
# decoded is parsed in the same step as its decode (benchmarks/CONSTANTS.md)


def _options() -> tf.data.Options:
    """Every op runs on one thread; parallelism comes from the pipeline's own parallel maps. With TensorFlow's
    default, an op (a resize) may also split its work over the intra-op pool, and the two pools then fight
    over the cores, and throughput swings from run to run (benchmarks/CONSTANTS.md)."""
    options = tf.data.Options()
    options.threading.max_intra_op_parallelism = 1
    return options


@dataclass(frozen=True)
class ReadOptions:
    """How ``load_dataset`` builds each split's pipeline: its keywords, checked once and passed inward whole."""

    batch_size: int | None = None
    shuffle: bool = False
    decode_images: bool = True
    image_size: tuple[int, int] | None = None
    resize_mode: str = DEFAULT_RESIZE_MODE
    resize_method: str = DEFAULT_RESIZE_METHOD
    as_supervised: bool = False
    channels: int | None = None
    features: tuple[str, ...] | None = None
    label_key: str | None = None
    seed: int | None = None
    shuffle_buffer: int = 10_000
    cache: bool = False
    drop_remainder: bool = False
    deterministic: bool | None = None
    num_shards: int = 1
    shard_index: int = 0
    max_objects: int | None = None
    bounding_box_format: str = SUPERVISED_BOX_FORMAT
    pad: bool | tuple[tuple[str, int], ...] | None = None  # True, or (feature, length) pairs
    audio_length: float | int | None = None  # seconds (a float) or samples (an int) every clip is cut or padded to
    num_frames: int | None = None  # the frames every video clip is sampled or padded to
    cardinality: bool = True  # the split's length known (False: unknown, for the tf.data service's distributed_epoch)

    def __post_init__(self) -> None:
        check_optional_count("batch_size", self.batch_size, "single examples")
        object.__setattr__(self, "image_size", check_image_size(self.image_size))
        check_choice("resize_mode", self.resize_mode, RESIZE_MODES)
        check_choice("resize_method", self.resize_method, RESIZE_METHODS)
        check_choice("bounding_box_format", self.bounding_box_format, BOX_FORMATS)
        check_optional_count("max_objects", self.max_objects, "the dataset's largest number of objects in an "
                                                              "image (ragged batches without as_supervised)")
        check_count("shuffle_buffer", self.shuffle_buffer)
        check_count("num_shards", self.num_shards)
        check_switch("cardinality", self.cardinality)
        if not is_count(self.shard_index) or not 0 <= self.shard_index < self.num_shards:
            raise TFRecorderError(f"shard_index={self.shard_index!r} with num_shards={self.num_shards}: need "
                                  f"0 <= shard_index < num_shards")


def label_names(tfrecord_dir: Any) -> list[str] | None:
    """The label vocabulary (names by id), or None when labels were integers.

    Args:
        tfrecord_dir: a dataset folder (ours or others' TFRecords), local or a URL.

    Returns:
        The names, position = label id; None for integer labels.

    Examples:
        >>> tfrecorder.label_names(dataset_dir)
        ['cat', 'dog', 'goat']
    """
    return open_dataset(tfrecord_dir)[0].vocabulary


def feature_spec(tfrecord_dir: Any, features: Sequence[str] | None = None) -> dict[str, Any]:
    """The ``tf.io.parse_example`` spec of a dataset's records (every feature, or ``features``).

    Scalars are ``FixedLenFeature`` (nullable ones with dataset.json's default), lists ``RaggedFeature``.
    A float64 feature (dtype "float64" in dataset.json, see ``float_precision``) is stored as the int64
    bits of each value: parse it as int64, then ``tf.bitcast(x, tf.float64)``. For reading the shards
    with plain ``tf.data``; ``load_dataset`` does all of this for you. Records written with
    ``record_format="sequence_example"`` (or others' SequenceExamples) get ``{"context_features": ...,
    "sequence_features": ...}``, the keywords of ``tf.io.parse_sequence_example``: each feature list a
    ``FixedLenSequenceFeature`` of one step's shape (``[T, ...]`` a record).

    Args:
        tfrecord_dir: a dataset folder (ours or others' TFRecords), local or a URL.
        features: the features to include (None: every one).

    Returns:
        ``{feature name: tf.io.FixedLenFeature | tf.io.RaggedFeature | ...}``, for ``tf.io.parse_example``
        (SequenceExamples: ``tf.io.parse_sequence_example(records, **spec)``).

    Examples:
        >>> spec = tfrecorder.feature_spec(dataset_dir)
        >>> spec["label"]
        FixedLenFeature(shape=[], dtype=tf.int64, default_value=None)
    """
    manifest = open_dataset(tfrecord_dir)[0]
    spec = _spec(manifest, features)
    if not layout_of(manifest).sequences:
        return spec
    lists = feature_lists_of(manifest)
    return {"context_features": {name: s for name, s in spec.items() if name not in lists},
            "sequence_features": {name: s for name, s in spec.items() if name in lists}}


def _spec(manifest: Manifest, names: Sequence[str] | None = None) -> dict[str, Any]:
    """The tf.io.parse_example spec for the manifest's features (all, or ``names``); a SequenceExample's feature
    lists (``layouts.feature_lists_of``) each a ``FixedLenSequenceFeature`` of its step's shape."""
    wanted = [manifest.feature(n) for n in names] if names is not None else manifest.features
    lists = feature_lists_of(manifest)
    return {f.name: _sequence_spec(f) if f.name in lists else _parse_spec(f) for f in wanted}


def _parse_spec(feature: FeatureInfo) -> Any:
    return connectors.of(feature).parse_spec(feature)


def _sequence_spec(feature: FeatureInfo) -> tf.io.FixedLenSequenceFeature:
    """A feature list's spec: a Feature a step holding ``step_shape``'s values; a record without the list has none
    (the writer leaves a missing sequence out)."""
    connector = connectors.of(feature)
    return tf.io.FixedLenSequenceFeature(connector.step_shape, tf.as_dtype(connector.tf_dtype), allow_missing=True)


def _varies(spec: Any) -> bool:
    """Whether a feature parsed with ``spec`` has a length that differs between records (batched ragged)."""
    return isinstance(spec, (tf.io.RaggedFeature, tf.io.FixedLenSequenceFeature))


def _parser(manifest: Manifest, spec: dict[str, Any], where: str, single: bool = False):
    """Serialized records (``single``: one record) -> parsed features, each decoded by its connector (float64
    from its bits); label ids checked against the vocabulary of dataset.json (``where``)."""
    decoders = {name: connectors.of(manifest.feature(name)).decode for name in spec}
    layout = layout_of(manifest)
    label = (manifest.label or {}).get("feature")
    if label in decoders and manifest.vocabulary is not None:
        named = _counted_from(decoders[label], first_class_id_of(manifest))  # an index into the names
        decoders[label] = _in_vocabulary(named, len(manifest.vocabulary), where)
    lists = [name for name in feature_lists_of(manifest) if name in spec]
    parse_records = (_sequence_parser(spec, lists, single) if layout.sequences else
                     tf.io.parse_single_example if single else tf.io.parse_example)

    def parse(records: tf.Tensor) -> dict[str, tf.Tensor]:
        parsed = parse_records(records, spec)
        return {layout.read_name(name): decoders[name](tensor) for name, tensor in parsed.items()}

    return parse


def _sequence_parser(spec: dict[str, Any], lists: list[str], single: bool):
    """``tf.io.parse_example``'s twin for SequenceExamples: the context's features and each feature list (``lists``)
    in one dict, a feature list as an Example's list of its values parses (one record: ``[T, *step]``; a batch:
    ragged, each record's values flat, as a ``RaggedFeature`` gives them), so that each connector decodes it as
    it decodes its own kind."""
    context = {name: s for name, s in spec.items() if name not in lists} or None
    sequence = {name: spec[name] for name in lists} or None

    def parse(records: tf.Tensor, _: Any) -> dict[str, tf.Tensor]:  # (records, spec): parse_example's arguments
        if single:
            found, steps = tf.io.parse_single_sequence_example(records, context, sequence)
            return {**found, **steps}
        found, steps, lengths = tf.io.parse_sequence_example(records, context, sequence)
        return {**found, **{name: _flat_ragged(value, lengths[name]) for name, value in steps.items()}}

    return parse


def _flat_ragged(steps: tf.Tensor, lengths: tf.Tensor) -> tf.RaggedTensor:
    """A batch's feature list, padded ``[B, T, *step]``, as ``[B, (T * step values)]``."""
    per_step = 1
    for size in steps.shape[2:]:
        per_step *= size
    shape = tf.shape(steps, out_type=tf.int64)
    flat = tf.reshape(steps, tf.stack([shape[0], shape[1] * per_step]))
    return tf.RaggedTensor.from_tensor(flat, lengths=lengths * per_step)


def _counted_from(decode: Any, first: int):
    """``decode`` of class ids counted from ``first`` (the Object Detection API's 1), as indices from 0."""
    if not first:
        return decode
    return lambda tensor: decode(tensor) - first


def _in_vocabulary(decode: Any, names: int, where: str):
    """``decode`` of the label ids, refusing an id beyond the vocabulary's ``names`` (a shortened dataset.json)
    with one op a parse, not a Python call: a model sized by ``label_names`` would otherwise train on labels it
    has no class for."""
    message = (f"{where}: the records hold a label id beyond the label vocabulary of {names} names: "
               f"dataset.json was edited or damaged; convert again")

    def checked(tensor: Any) -> Any:
        ids = decode(tensor)
        values = ids.flat_values if isinstance(ids, tf.RaggedTensor) else ids
        inside = tf.reduce_all((values >= 0) & (values < names))
        with tf.control_dependencies([tf.debugging.Assert(inside, [message])]):
            values = tf.identity(values)
        return ids.with_flat_values(values) if isinstance(ids, tf.RaggedTensor) else values

    return checked


@contextlib.contextmanager
def our_assertions() -> Iterator[None]:
    """A pipeline stopped by one of this module's checks (a shard or dataset.json that is not what it should be)
    as the one-line TFRecorderError it states, for callers that iterate it themselves (``info``)."""
    try:
        yield
    except tf.errors.InvalidArgumentError as e:
        found = re.search(r"assertion failed: \[(.*?dataset\.json.*?)\]", e.message, re.DOTALL)
        if found is None:
            raise
        raise TFRecorderError(found.group(1)) from None


def load_dataset(
    tfrecord_dir: str,
    split: str | None = None,
    *,
    batch_size: int | None = None,
    shuffle: bool = False,
    decode_images: bool = True,
    image_size: tuple[int, int] | int | None = None,
    resize_mode: str = DEFAULT_RESIZE_MODE,
    resize_method: str = DEFAULT_RESIZE_METHOD,
    as_supervised: bool = False,
    channels: int | None = None,
    features: Sequence[str] | None = None,
    label_key: str | None = None,
    seed: int | None = None,
    shuffle_buffer: int = 10_000,
    cache: bool = False,
    drop_remainder: bool = False,
    deterministic: bool | None = None,
    num_shards: int = 1,
    shard_index: int = 0,
    input_context: tf.distribute.InputContext | None = None,
    storage_timeout: float = DEFAULT_STORAGE_TIMEOUT,
    max_objects: int | None = None,
    bounding_box_format: str = SUPERVISED_BOX_FORMAT,
    pad: bool | Mapping[str, int] | None = None,
    audio_length: float | int | None = None,
    num_frames: int | None = None,
    version: int | None = None,
    shard: tuple[int, int] | tf.distribute.InputContext | str | None = None,
    cardinality: bool = True,
    cache_dir: str | os.PathLike | None = None,
    cache_limit: int | None = None,
) -> tf.data.Dataset | dict[str, tf.data.Dataset]:
    """A tuned ``tf.data.Dataset`` of one split, or a dict of every split, with no feature spec from you.

    Elements are dicts of features (images decoded to uint8 ``(H, W, C)``), or ``(image, label)`` /
    ``(features, label)`` with ``as_supervised=True``. Without ``shuffle`` records come in stored order.
    Missing values of nullable columns read as the manifest's default (NaN, 0, ""); ``read_tfr`` keeps NA.
    With ``image_size``, ``resize_method="auto"`` decodes each JPEG at 1/2, 1/4 or 1/8 scale when that still
    covers the target (less work, and an antialiasing filter in itself), then resizes bilinearly, antialiased
    only when it still shrinks more than 3x; ``"bilinear"`` is exactly TensorFlow's default (full decode, no
    antialiasing), ``"area"`` and ``"lanczos3"`` (antialiased, the highest quality) decode in full. A size of
    more than 178,956,970 pixels (Pillow's decompression-bomb limit) is refused before anything is read.
    With ``shuffle=True, seed=`` the order is the same on every run and another each epoch. For many hosts,
    ``shard=(index, count)``, a ``tf.distribute.InputContext`` or ``shard="jax"`` (this JAX process's part) give
    each host whole shard files when there are at least as many files as hosts, else every ``count``-th record:
    disjoint parts that together hold every record once; ``cardinality()`` is this host's count.
    The pipeline is TensorFlow ops only (no Python runs while it reads): it runs on tf.data service workers,
    in ``Dataset.save`` and its iterators checkpoint (``tf.train.Checkpoint``). The exception: audio clips
    other than WAV, decoded by libsndfile in Python (``audio_format="wav"`` at conversion keeps them in the
    graph). Every shard is checked when the dataset is opened; a shard or dataset.json replaced later is an
    error naming it. With ``cache_dir=``, remote shards are copied to a local folder first and read from
    there (shown below). ``storage_timeout`` bounds each object-store (gs://) operation of the listing and checks
    done here (TensorFlow then reads the shards).

    A detection dataset's elements hold ``objects``: ``{"bbox": [N, 4], "label": [N], ...}``, boxes as
    ``[ymin, xmin, ymax, xmax]`` fractions of the image as given - turned with its EXIF orientation and moved
    with ``image_size``/``resize_mode`` (``crop`` clips them and drops those left without area). Batches hold
    them ragged (``tf.RaggedTensor``), or padded to ``max_objects`` with -1 (more are cut off). With
    ``as_supervised=True`` elements are ``(image, {"boxes", "labels"})``, what a KerasHub detector's ``fit``
    takes as it is: padded with -1 to ``max_objects``, by default the most objects one image of the dataset
    holds (dataset.json's ``objects.max_objects``), boxes in ``bounding_box_format`` (Keras and KerasHub's
    names: "rel_yxyx", "yxyx", "rel_xyxy", "xyxy", "rel_xywh", "xywh", "rel_center_xywh", "center_xywh",
    "center_yxhw"; "rel_" ones are fractions, the others pixels), by default "yxyx", KerasHub's. Objects with
    instance masks add ``"masks"``: uint8 ``[max_objects, H, W]``, a padding object's all 0.

    Args:
        tfrecord_dir: a dataset folder (ours, or others' TFRecords: a folder, a glob or a list of files), local
            or a URL.
        split: ``"TRAIN"``, ``"VALIDATION"`` or ``"TEST"``; None: every split, as a dict.
        batch_size: elements per batch (None: unbatched).
        shuffle: shuffle the shards' order and the records (a ``shuffle_buffer`` of them).
        decode_images: decode images to uint8 tensors, audio clips to waveforms (False: their stored bytes).
        image_size: ``(height, width)`` (one number: a square) to resize every image to.
        resize_mode: with ``image_size``: ``"stretch"``, ``"pad"`` or ``"crop"``.
        resize_method: ``"auto"``, ``"bilinear"``, ``"area"`` or ``"lanczos3"`` (above).
        as_supervised: ``(inputs, label)`` pairs for ``model.fit``.
        channels: decode images to 1, 3 or 4 channels (None: as stored).
        features: the features to read (None: every one).
        label_key: with ``as_supervised``, the feature that is the label (default: the dataset's label).
        seed: the shuffle's seed (the same order on every run).
        shuffle_buffer: records held for shuffling.
        cache: cache the decoded elements in memory after the first epoch.
        drop_remainder: drop a last batch smaller than ``batch_size``.
        deterministic: tf.data's element order under parallel reads (None: its default).
        num_shards: workers reading parts of the split (with ``shard_index``; or ``shard=``).
        shard_index: this worker's part.
        input_context: a ``tf.distribute.InputContext`` giving both.
        storage_timeout: seconds one object-store operation of the listing and checks may take.
        max_objects: pad (or cut) each record's objects to this many.
        bounding_box_format: the box format of ``as_supervised`` targets.
        pad: dense tensors for what is read ragged (lists, token ids, tensors whose first dimension varies):
            ``{"feature": length}`` pads each value with 0 or cuts it to ``length`` along its first dimension
            (the same length in every batch, what Keras layers take), ``True`` pads each batch's to its longest.
        audio_length: audio clips (float32 waveforms in [-1, 1], ``[T]`` mono or ``[T, C]``) cut or zero-padded
            to this length: seconds as a float, samples as an int (None: each its own length, batched ragged).
        num_frames: video clips (uint8 ``[T, H, W, 3]``, each frame resized to ``image_size``) sampled to this
            many frames, evenly apart, or followed by frames of zeros where a clip has fewer (None: each its own
            count, batched ragged).
        shard: this host's part of the split: ``(index, count)``, a ``tf.distribute.InputContext``, or ``"jax"``
            (``jax.process_index()`` of ``jax.process_count()``).
        cardinality: the length known (``len(ds)``, Keras's steps per epoch), asserted as the split is read.
            ``False`` leaves it unknown: for the tf.data service's ``distributed_epoch``, whose workers each
            read a part of the shards (the assertion would stop them).
        version: the dataset version to read (``tfrecorder.versions``): its shards and counts; None: the latest.
        cache_dir: a local folder for copies of remote shards (gs://, http(s)://): each shard this host reads is
            copied there when the dataset is opened (in threads, its CRC-32C checked against dataset.json's as it
            is copied), and the pipeline reads the copies - the second epoch, and the next process, read local
            files. Several processes of a machine may share it. None: shards are read where they are.
        cache_limit: the most bytes ``cache_dir`` holds: least recently used copies are evicted first, never one
            a live dataset reads. A read whose shards are bigger together than the limit is refused.

    Returns:
        A ``tf.data.Dataset`` of ``split``, or ``{split: tf.data.Dataset}`` for every split when ``split`` is
        None.

    Raises:
        TFRecorderError: the folder holds no dataset, a shard is missing or not the one dataset.json describes,
            or an argument is out of range (one line naming it).

    Examples:
        >>> ds = tfrecorder.load_dataset(dataset_dir, split="TRAIN", batch_size=2, image_size=(32, 32))
        >>> batch = next(iter(ds))
        >>> batch["image"].shape, batch["image"].dtype
        (TensorShape([2, 32, 32, 3]), tf.uint8)
    """
    num_shards, shard_index = host_part(shard, num_shards, shard_index, input_context)
    options = ReadOptions(
        batch_size=batch_size, shuffle=shuffle, decode_images=decode_images,
        image_size=check_image_size(image_size),
        resize_mode=resize_mode,
        resize_method=resize_method,
        as_supervised=as_supervised, channels=channels, features=tuple(features) if features is not None else None,
        label_key=label_key, seed=seed, shuffle_buffer=shuffle_buffer, cache=cache, drop_remainder=drop_remainder,
        deterministic=deterministic, num_shards=num_shards, shard_index=shard_index,
        max_objects=max_objects, bounding_box_format=bounding_box_format,
        pad=tuple(dict(pad).items()) if isinstance(pad, Mapping) else pad, audio_length=audio_length,
        num_frames=num_frames, cardinality=cardinality,
    )
    if resize_mode != DEFAULT_RESIZE_MODE and image_size is None:  # a keyword that would do nothing: said now
        raise TFRecorderError(f"resize_mode={resize_mode!r} says how image_size= resizes: give image_size=(height, "
                              f"width) too (without it images keep their own size)")
    with reading(tfrecord_dir, storage_timeout):
        manifest, folder = open_dataset(tfrecord_dir, storage_timeout, version)
        names = list(manifest.splits) if split is None else [manifest.split_name(split)]
        if manifest.objects is None and (max_objects is not None or bounding_box_format != SUPERVISED_BOX_FORMAT):
            given = "max_objects=" if max_objects is not None else "bounding_box_format="
            raise TFRecorderError(f"{given} is for a dataset of boxes; {folder.url} holds no objects (a detection "
                                  f"table's rows are boxes: split, image_uri, label, xmin, ymin, xmax, ymax)")
        cached = _cached(manifest, folder, names, options, cache_dir, cache_limit)
        if cached is None:
            check_opened(manifest, folder, names)  # once: the pipeline itself runs no Python
    if manifest.objects is not None and as_supervised and max_objects is None:  # targets a detector's fit stacks
        options = dataclasses.replace(options, max_objects=most_objects(manifest, folder))
    if max_objects is not None:
        check_max_objects(max_objects, manifest, options.image_size or uniform_shape(manifest))
    most = (manifest.objects or {}).get("max_objects")
    if max_objects is not None and isinstance(most, int) and max_objects < most:  # cut boxes are never silent
        logger.warning("max_objects=%d: images of %s hold up to %d objects; the objects past the first %d of "
                       "each are left out", max_objects, folder.url, most, max_objects)
    local = cached.paths if cached is not None else {}
    datasets = {name: _split_dataset(manifest, folder, name, options, local) for name in names}
    for dataset in datasets.values() if cached is not None else ():
        cached.hold_while(dataset)  # its copies are not evicted while it lives
    return datasets if split is None else datasets[names[0]]


def _cached(manifest: Manifest, folder: Folder, names: list[str], options: ReadOptions,
            cache_dir: str | os.PathLike | None, cache_limit: int | None) -> CachedShards | None:
    """The local copies of the shards this host reads of ``names`` (``cache.cache_shards``), for a remote folder
    read with ``cache_dir``; None otherwise. Each copy's CRC-32C is checked in full against dataset.json's as it
    is made (a copy already there was checked when it was made, and its name holds that CRC): more than
    ``check_opened``'s checks of sizes and first records, which the reader then skips."""
    if cache_dir is None:
        if cache_limit is not None:
            raise TFRecorderError(f"cache_limit={cache_limit!r} bounds the folder of cache_dir=: give cache_dir too")
        return None
    if not cache.wants_cache(folder):
        logger.info("cache_dir=%s: %s is local, read as it is", cache_dir, folder.url)
        return None
    shards = [shard for name in names
              for shard in _worker_part(manifest.splits[name], options.num_shards, options.shard_index)[0]]
    return cache.cache_shards(folder, shards, os.fspath(cache_dir), cache_limit)


def load(tfrecord_dir: str, **kwargs: Any) -> dict[str, tf.data.Dataset]:
    """Every split as a dict ``{"TRAIN": ds, ...}`` (TFRecorder 2.0's ``tfrecorder.load``).

    Args:
        tfrecord_dir: a dataset folder, local or a URL.
        **kwargs: ``load_dataset``'s keywords.

    Returns:
        ``{split: tf.data.Dataset}`` for every split written.

    Examples:
        >>> {name: int(ds.cardinality()) for name, ds in tfrecorder.load(dataset_dir).items()}
        {'TRAIN': 6, 'VALIDATION': 3, 'TEST': 3}
    """
    return load_dataset(tfrecord_dir, split=None, **kwargs)  # type: ignore[return-value]


def _split_dataset(manifest: Manifest, folder: Folder, split: str, options: ReadOptions,
                   local: Mapping[str, str]) -> tf.data.Dataset:
    o = options
    spec = _spec(manifest, _selected(manifest, o))
    if not spec:
        raise TFRecorderError(f"split {split}: no features to read (the records have none, or none were selected)")
    shards, count, record_shard = _worker_part(manifest.splits[split], o.num_shards, o.shard_index)
    records = shard_records(manifest, folder, shards, o.shuffle, o.seed, o.deterministic, local)
    if record_shard is not None:
        records = records.shard(*record_shard)
    records = _with_length(records, count, o)
    if o.cache:
        records = records.cache()
    if o.shuffle:
        records = records.shuffle(o.shuffle_buffer, seed=o.seed, reshuffle_each_iteration=True)
    ragged = any(_varies(s) for s in spec.values())
    where = folder.url_of(MANIFEST_NAME)
    parse = _parser(manifest, spec, where)
    parse_one = _parser(manifest, spec, where, single=True)  # where images are decoded: a record parsed in that step
    layout_of(manifest).check_reader("load_dataset")
    has_image = layout_of(manifest).image.name in spec  # read as IMAGE.name (``RecordLayout.read_name``)
    if manifest.objects is not None:
        return _detection(manifest, split, records, parse_one, has_image, count, o).prefetch(AUTOTUNE).with_options(
            _options())
    steps = _record_steps(manifest, spec, o) if o.decode_images else []  # kinds decoded a record at a time (audio)
    if (has_image and o.decode_images) or steps:
        steps = ([image_decoder(manifest, o.channels, o.image_size, o.resize_mode, o.resize_method)]
                 if has_image and o.decode_images else []) + steps
        if has_image and o.decode_images:
            check_decodable(manifest, split)
            _check_batchable(manifest, o.batch_size, o.image_size)
        ragged = ragged or any(getattr(step, "varies", False) for step in steps)
        supervised = _supervised(manifest, o.label_key) if o.as_supervised else None

        def one(record: tf.Tensor) -> Any:  # parsed, decoded and split in one step: no stage between them
            example = parse_one(record)
            for step in steps:
                example = step(example)
            return supervised(example) if supervised is not None else example

        ds = records.map(traced(one), num_parallel_calls=AUTOTUNE, deterministic=o.deterministic)
        ds = _with_length(ds, count, o)
        if o.batch_size:
            batch = ds.ragged_batch if ragged else ds.batch
            ds = batch(o.batch_size, o.drop_remainder)
        if o.pad:
            ds = ds.map(traced(_padder(spec, o.pad, where)), num_parallel_calls=AUTOTUNE)
        return ds.prefetch(AUTOTUNE).with_options(_options())
    if o.batch_size:
        ds = records.batch(o.batch_size, o.drop_remainder).map(traced(parse), num_parallel_calls=AUTOTUNE,
                                                               deterministic=o.deterministic)
    else:
        ds = records.batch(_PARSE_BATCH).map(traced(parse), num_parallel_calls=AUTOTUNE)
        ds = _with_length(ds.unbatch(), count, o)
    if o.pad:
        ds = ds.map(traced(_padder(spec, o.pad, where)), num_parallel_calls=AUTOTUNE)
    if o.as_supervised:
        ds = ds.map(traced(_supervised(manifest, o.label_key)), num_parallel_calls=AUTOTUNE)
    return ds.prefetch(AUTOTUNE).with_options(_options())


def _record_steps(manifest: Manifest, spec: dict[str, Any], options: ReadOptions) -> list[Any]:
    """The steps of the features read whose kind decodes a record at a time (``Connector.record_decoder``),
    each marked ``varies`` where it leaves a length that differs between records (batched ragged)."""
    steps = []
    for name in spec:
        feature = manifest.feature(name)
        kind = connectors.of(feature)
        found = kind.record_decoder(feature, options)
        if found is None:
            continue
        if options.batch_size:
            kind.check_batchable(name)
        step, varies = found
        step.varies = varies
        steps.append(step)
    return steps


def _padder(spec: dict[str, Any], pad: bool | tuple[tuple[str, int], ...], where: str) -> Any:
    """What ``pad=`` makes of a parsed element (a batch, or one record): each ragged feature it names (``True``:
    every one) dense - padded with 0, or cut, to its length along its first dimension (each batch's longest for
    ``True``). A name that is no feature read ragged is a TFRecorderError, said before anything is read."""
    ragged = [name for name, s in spec.items() if _varies(s)]
    lengths = dict.fromkeys(ragged) if pad is True else dict(pad or ())
    wrong = [name for name in lengths if name not in ragged]
    bad = [(name, n) for name, n in lengths.items() if n is not None and not (isinstance(n, int) and n > 0)]
    if wrong or bad:
        raise TFRecorderError(f"pad={dict(lengths)!r}: " + (
            f"{wrong} are not read ragged here (the features of varying length are {ragged})" if wrong else
            f"give each a length of 1 or more, not {bad[0][1]!r}") + f" ({where})")

    def dense(value: Any, length: int | None) -> Any:
        if isinstance(value, tf.RaggedTensor):
            rank = value.shape.rank
            return value.to_tensor(shape=None if length is None else [None, length] + [None] * (rank - 2))
        if length is None:
            return value
        value = value[:length]  # one record: its own first dimension
        padding = [[0, length - tf.shape(value)[0]]] + [[0, 0]] * (value.shape.rank - 1)
        return tf.pad(value, padding)

    def padded(*element: Any) -> Any:
        example = element[0]  # a dict of features, or (features, label) with as_supervised
        if not isinstance(example, dict):
            return element if len(element) > 1 else element[0]
        example = {k: dense(v, lengths[k]) if k in lengths else v for k, v in example.items()}
        return (example, *element[1:]) if len(element) > 1 else example

    return padded


def _detection(manifest: Manifest, split: str, records: tf.data.Dataset, parse: Any, has_image: bool, count: int,
               o: ReadOptions) -> tf.data.Dataset:
    """A detection split's pipeline: per record, in one step, the record parsed (``parse`` takes one), the image
    decoded, its objects gathered under ``objects`` (turned and resized with the image:
    ``tf_image.image_decoder``), padded to ``max_objects``, put as ``as_supervised`` asks; then batched, ragged
    unless padded."""
    decode = None
    if has_image and o.decode_images:
        check_decodable(manifest, split)
        _check_batchable(manifest, o.batch_size, o.image_size)
        decode = image_decoder(manifest, o.channels, o.image_size, o.resize_mode, o.resize_method)
    gather = objects_gatherer(manifest)
    pad = padder(o.max_objects)
    supervised = supervised_objects(o.bounding_box_format) if o.as_supervised else None
    if supervised is not None and decode is None and not o.bounding_box_format.startswith("rel_"):
        default = " (the default, as KerasHub's)" if o.bounding_box_format == SUPERVISED_BOX_FORMAT else ""
        raise TFRecorderError(f"bounding_box_format={o.bounding_box_format!r}{default} counts pixels of the decoded "
                              f"image: read with decode_images=True, or pass bounding_box_format='rel_yxyx' (or "
                              f"another 'rel_' format) for fractions of the image")

    def one(record: tf.Tensor) -> Any:  # parsed, gathered, decoded, padded and split in one step
        example = gather(parse(record))
        if decode is not None:
            example = decode(example)
        if pad is not None:
            example = pad(example)
        return supervised(example) if supervised is not None else example

    ds = records.map(traced(one), num_parallel_calls=AUTOTUNE, deterministic=o.deterministic)
    ds = _with_length(ds, count, o)
    if o.batch_size:
        batch = ds.batch if o.max_objects is not None else ds.ragged_batch
        ds = batch(o.batch_size, o.drop_remainder)
    return ds


def _with_length(ds: tf.data.Dataset, count: int, options: ReadOptions) -> tf.data.Dataset:
    """``ds`` with its length known (Keras's steps per epoch, ``len(ds)``): ``count`` elements, an assertion that
    fails at the end of a read of any other number - which is what a tf.data service worker of a
    ``distributed_epoch`` reads (a part of the shards), hence ``cardinality=False`` leaves it unknown."""
    return ds.apply(tf.data.experimental.assert_cardinality(count)) if options.cardinality else ds


def _selected(manifest: Manifest, options: ReadOptions) -> list[str] | None:
    if options.features is None:
        return None
    names = list(options.features)
    label = options.label_key or (manifest.label or {}).get("feature")
    if options.as_supervised and label and label not in names:
        names.append(label)
    if IMAGE.name in names:
        stored = {f.name for f in manifest.features}
        names += [f.name for f in DECODE_FEATURES if f.name not in names and f.name in stored]
    return names


def _worker_part(shards: list, num_shards: int, index: int) -> tuple[list, int, tuple[int, int] | None]:
    """This worker's share of a split: whole files when there are enough of them, else every n-th record.

    Returns (files to read, records this worker gets, (num_shards, index) for Dataset.shard or None).
    """
    if num_shards == 1:
        return shards, sum(s.records for s in shards), None
    if len(shards) >= num_shards:
        mine = shards[index::num_shards]
        return mine, sum(s.records for s in mine), None
    total = sum(s.records for s in shards)
    return shards, total // num_shards + (1 if index < total % num_shards else 0), (num_shards, index)


def _check_batchable(manifest: Manifest, batch_size: int | None, image_size: Any) -> None:
    if batch_size and image_size is None and uniform_shape(manifest) is None:
        raise TFRecorderError(
            "images in this dataset have different sizes, so they cannot be stacked into batches: "
            "pass image_size=(height, width), or batch_size=None"
        )


def _supervised(manifest: Manifest, label_key: str | None):
    if manifest.masks is not None and label_key is None:  # a segmentation dataset: (image, mask)
        label_key = manifest.masks["feature"]
    key = label_key or (manifest.label or {}).get("feature")
    if key is None:
        raise TFRecorderError("as_supervised=True needs a label: this dataset has none; pass label_key=")
    # a dataset without an image whose input is one clip: (waveform, label), as (image, label)
    alone = {f.name for f in manifest.features if connectors.of(f).supervised_input}

    def split_label(example: dict[str, tf.Tensor]):
        if key not in example:
            raise TFRecorderError(f"label_key={key!r} is not among the features read")
        rest = {k: v for k, v in example.items() if k != key}
        inputs = [IMAGE.name] if IMAGE.name in rest else [k for k in rest if k in alone]
        return (rest[inputs[0]] if len(inputs) == 1 else rest), example[key]

    return split_label
