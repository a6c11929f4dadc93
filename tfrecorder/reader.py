"""Reader: load_dataset / load / label_names, tf.data pipelines driven by dataset.json."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import tensorflow as tf

from tfrecorder.errors import TFRecorderError
from tfrecorder.foreign import TFRECORDER2_FORMAT, open_dataset
from tfrecorder.manifest import FeatureInfo, Manifest, check_shards
from tfrecorder.storage import Folder

logger = logging.getLogger(__name__)

AUTOTUNE = tf.data.AUTOTUNE
_DTYPES = {"int64": tf.int64, "float32": tf.float32, "string": tf.string}
_PARSE_BATCH = 256  # records parsed together when the caller wants single examples


def label_names(tfrecord_dir: Any) -> list[str] | None:
    """The label vocabulary (names by id), or None when labels were integers.

    Example:
        >>> tfrecorder.label_names(dataset_dir)
        ['cat', 'dog', 'goat']
    """
    return open_dataset(tfrecord_dir)[0].vocabulary


def feature_spec(manifest: Manifest, names: Sequence[str] | None = None) -> dict[str, Any]:
    """The tf.io.parse_example spec for the manifest's features (all, or ``names``)."""
    wanted = [manifest.feature(n) for n in names] if names is not None else manifest.features
    return {f.name: _parse_spec(f) for f in wanted}


def _parse_spec(feature: FeatureInfo) -> Any:
    dtype = _DTYPES[feature.dtype]
    if feature.shape == [None]:
        return tf.io.RaggedFeature(dtype)
    if feature.nullable:
        default = float(feature.default) if feature.dtype == "float32" else feature.default
        return tf.io.FixedLenFeature([], dtype, default_value=default)
    return tf.io.FixedLenFeature([], dtype)


def load_dataset(
    tfrecord_dir: str,
    split: str | None = None,
    *,
    batch_size: int | None = None,
    shuffle: bool = False,
    decode_images: bool = True,
    image_size: tuple[int, int] | None = None,
    resize_mode: str = "stretch",
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
) -> tf.data.Dataset | dict[str, tf.data.Dataset]:
    """A tuned ``tf.data.Dataset`` of one split, or a dict of every split, with no feature spec from you.

    Elements are dicts of features (images decoded to uint8 ``(H, W, C)``), or ``(image, label)`` /
    ``(features, label)`` with ``as_supervised=True``. Without ``shuffle`` records come in stored order.
    Missing values of nullable columns read as the manifest's default (NaN, 0, ""); ``read_tfr`` keeps NA.
    For multi-worker training, ``num_shards``/``shard_index`` (or a ``tf.distribute.InputContext``) give
    each worker whole shard files when there are at least as many files as workers, else every
    ``num_shards``-th record; ``cardinality()`` is this worker's count.

    Example:
        >>> ds = tfrecorder.load_dataset(dataset_dir, split="TRAIN", batch_size=2, image_size=(32, 32))
        >>> batch = next(iter(ds))
        >>> batch["image"].shape, batch["image"].dtype
        (TensorShape([2, 32, 32, 3]), tf.uint8)
    """
    if resize_mode not in ("stretch", "pad", "crop"):
        raise TFRecorderError(f"resize_mode={resize_mode!r}: use 'stretch', 'pad' or 'crop'")
    manifest, folder = open_dataset(tfrecord_dir)
    if input_context is not None:
        num_shards, shard_index = input_context.num_input_pipelines, input_context.input_pipeline_id
    if not 0 <= shard_index < num_shards:
        raise TFRecorderError(f"shard_index={shard_index} with num_shards={num_shards}: need 0 <= shard_index < "
                              f"num_shards")
    options = dict(worker=(num_shards, shard_index), batch_size=batch_size, shuffle=shuffle,
                   decode_images=decode_images, image_size=image_size, resize_mode=resize_mode,
                   as_supervised=as_supervised, channels=channels, features=features, label_key=label_key,
                   seed=seed, shuffle_buffer=shuffle_buffer, cache=cache, drop_remainder=drop_remainder,
                   deterministic=deterministic)
    names = list(manifest.splits) if split is None else [manifest.split_name(split)]
    check_shards(manifest, folder, names)
    if split is None:
        return {name: _split_dataset(manifest, folder, name, **options) for name in names}
    return _split_dataset(manifest, folder, names[0], **options)


def load(tfrecord_dir: str, **kwargs: Any) -> dict[str, tf.data.Dataset]:
    """Every split as a dict ``{"TRAIN": ds, ...}`` (TFRecorder 2.0's ``tfrecorder.load``).

    Example:
        >>> {name: int(ds.cardinality()) for name, ds in tfrecorder.load(dataset_dir).items()}
        {'TRAIN': 6, 'VALIDATION': 3, 'TEST': 3}
    """
    return load_dataset(tfrecord_dir, split=None, **kwargs)  # type: ignore[return-value]


def _split_dataset(manifest: Manifest, folder: Folder, split: str, *, worker, batch_size, shuffle, decode_images,
                   image_size, resize_mode, as_supervised, channels, features, label_key, seed, shuffle_buffer, cache,
                   drop_remainder, deterministic) -> tf.data.Dataset:
    names = _selected(manifest, features, as_supervised, label_key)
    spec = feature_spec(manifest, names)
    if not spec:
        raise TFRecorderError(f"split {split}: no features to read (the records have none, or none were selected)")
    shards, count, record_shard = _worker_part(manifest.splits[split], *worker)
    records = _records(manifest, folder, shards, shuffle, seed, deterministic)
    if record_shard is not None:
        records = records.shard(*record_shard)
    records = records.apply(tf.data.experimental.assert_cardinality(count))
    if cache:
        records = records.cache()
    if shuffle:
        records = records.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    ragged = any(isinstance(s, tf.io.RaggedFeature) for s in spec.values())
    has_image = "image" in spec and decode_images
    if has_image:
        _check_batchable(manifest, batch_size, image_size)
        decode = _image_decoder(manifest, channels, image_size, resize_mode)
        ds = records.batch(_PARSE_BATCH).map(lambda r: tf.io.parse_example(r, spec), num_parallel_calls=AUTOTUNE)
        ds = ds.unbatch().map(decode, num_parallel_calls=AUTOTUNE, deterministic=deterministic)
        ds = ds.apply(tf.data.experimental.assert_cardinality(count))
        if batch_size:
            ds = ds.ragged_batch(batch_size, drop_remainder) if ragged else ds.batch(batch_size, drop_remainder)
    elif batch_size:
        ds = records.batch(batch_size, drop_remainder).map(lambda r: tf.io.parse_example(r, spec),
                                                         num_parallel_calls=AUTOTUNE, deterministic=deterministic)
    else:
        ds = records.batch(_PARSE_BATCH).map(lambda r: tf.io.parse_example(r, spec), num_parallel_calls=AUTOTUNE)
        ds = ds.unbatch().apply(tf.data.experimental.assert_cardinality(count))
    if as_supervised:
        ds = ds.map(_supervised(manifest, label_key), num_parallel_calls=AUTOTUNE)
    return ds.prefetch(AUTOTUNE)


def _selected(manifest: Manifest, features: Sequence[str] | None, as_supervised: bool,
              label_key: str | None) -> list[str] | None:
    if features is None:
        return None
    names = list(features)
    label = label_key or (manifest.label or {}).get("feature")
    if as_supervised and label and label not in names:
        names.append(label)
    if "image" in names:
        names += [n for n in ("image_format", "image_height", "image_width", "image_channels", "image_orientation")
                  if n not in names and any(f.name == n for f in manifest.features)]
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


def _records(manifest: Manifest, folder: Folder, shards: list, shuffle: bool, seed: int | None,
             deterministic: bool | None) -> tf.data.Dataset:
    files = [folder.url_of(s.file) for s in shards]
    compression = (manifest.compression or "").upper()
    if not shuffle or len(files) == 1:
        return tf.data.TFRecordDataset(files, compression_type=compression)
    file_ds = tf.data.Dataset.from_tensor_slices(files).shuffle(len(files), seed=seed, reshuffle_each_iteration=True)
    return file_ds.interleave(
        lambda f: tf.data.TFRecordDataset(f, compression_type=compression),
        cycle_length=min(len(files), 8), num_parallel_calls=AUTOTUNE, deterministic=deterministic,
    )


def _check_batchable(manifest: Manifest, batch_size: int | None, image_size: Any) -> None:
    if batch_size and image_size is None and (manifest.image or {}).get("shape") is None:
        raise TFRecorderError(
            "images in this dataset have different sizes, so they cannot be stacked into batches: "
            "pass image_size=(height, width), or batch_size=None"
        )


def _image_decoder(manifest: Manifest, channels: int | None, image_size: Any, resize_mode: str = "stretch"):
    info = manifest.image or {}
    stored = info.get("channels") or [3]
    want = int(channels) if channels else (stored[0] if len(stored) == 1 else 3)
    if want not in (1, 2, 3, 4):
        raise TFRecorderError(f"channels={channels!r}: use 1, 2, 3 or 4")
    base64_pixels = info.get("format") == TFRECORDER2_FORMAT
    raw = info.get("format") == "raw" or base64_pixels
    formats = info.get("formats") or []
    direct = stored == [want] and want != 2  # every image has the channels asked for: decode straight to them
    uniform = info.get("shape")  # every stored image has this (height, width): batches get a static shape
    turned = any(o != 1 for o in info.get("orientations") or [1])

    def decode(example: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        out = dict(example)
        if raw:
            shape = tf.stack([example["image_height"], example["image_width"], example["image_channels"]])
            data = tf.io.decode_base64(example["image"]) if base64_pixels else example["image"]
            image = tf.reshape(tf.io.decode_raw(data, tf.uint8), tf.cast(shape, tf.int32))
        else:
            image = decode_bytes(example["image"], example.get("image_format"), formats, want if direct else 0)
        if raw or not direct:
            image = to_channels(image, want)
        if turned:
            image = apply_orientation(image, example["image_orientation"])
        if image_size is not None:
            image = resize(image, image_size, resize_mode)
        elif uniform:
            image = tf.ensure_shape(image, [*uniform, want])
        out["image"] = image
        return out

    return decode


def apply_orientation(image: tf.Tensor, orientation: tf.Tensor) -> tf.Tensor:
    """Turn decoded pixels as EXIF ``orientation`` (1-8) says, as viewers and ``ImageOps.exif_transpose`` do."""
    transposed = lambda: tf.image.transpose(image)  # noqa: E731
    branches = [
        lambda: image,                                       # 1: as stored
        lambda: tf.image.flip_left_right(image),             # 2: mirrored
        lambda: tf.image.rot90(image, 2),                    # 3: upside down
        lambda: tf.image.flip_up_down(image),                # 4: mirrored upside down
        transposed,                                          # 5: mirrored, quarter turn
        lambda: tf.image.rot90(image, 3),                    # 6: quarter turn clockwise
        lambda: tf.image.rot90(tf.image.transpose(image), 2),  # 7: transverse
        lambda: tf.image.rot90(image, 1),                    # 8: quarter turn counter-clockwise
    ]
    index = tf.clip_by_value(tf.cast(orientation, tf.int32) - 1, 0, 7)
    return tf.switch_case(index, branches)


def decode_bytes(data: tf.Tensor, fmt: tf.Tensor | None, formats: Sequence[str], channels: int = 0) -> tf.Tensor:
    """Decode stored image bytes to uint8 (H, W, C), first frame only.

    JPEGs are decoded with the accurate integer IDCT, which gives exactly the pixels Pillow
    (and libjpeg's own tools) see; TensorFlow's default fast IDCT differs by a few levels.
    """
    jpeg_channels = channels if channels in (0, 1, 3) else 0

    def jpeg() -> tf.Tensor:
        return tf.io.decode_jpeg(data, channels=jpeg_channels, dct_method="INTEGER_ACCURATE")

    def other() -> tf.Tensor:
        return tf.io.decode_image(data, channels=channels, expand_animations=False)

    if list(formats) == ["jpeg"]:
        return jpeg()
    if formats and "jpeg" not in formats:
        return other()
    # Mixed formats: the record's image_format says which; files of other tools have none, so sniff.
    is_jpeg = tf.equal(fmt, "jpeg") if fmt is not None else tf.equal(tf.strings.substr(data, 0, 2), b"\xff\xd8")
    return tf.cond(is_jpeg, jpeg, other)


def to_channels(image: tf.Tensor, want: int) -> tf.Tensor:
    """Convert a uint8 (H, W, 1|2|3|4) image to ``want`` channels (gray, gray+alpha, RGB, RGBA)."""
    have = tf.shape(image)[-1]

    def rgba() -> tf.Tensor:
        opaque = tf.fill(tf.concat([tf.shape(image)[:2], [1]], 0), tf.constant(255, tf.uint8))
        return tf.switch_case(have - 1, [
            lambda: tf.concat([tf.tile(image[..., :1], [1, 1, 3]), opaque], -1),
            lambda: tf.concat([tf.tile(image[..., :1], [1, 1, 3]), image[..., 1:2]], -1),
            lambda: tf.concat([image[..., :3], opaque], -1),
            lambda: image[..., :4],
        ])

    def convert() -> tf.Tensor:
        full = rgba()
        if want == 4:
            return full
        if want == 3:
            return full[..., :3]
        gray = tf.image.rgb_to_grayscale(full[..., :3])
        return gray if want == 1 else tf.concat([gray, full[..., 3:]], -1)

    result = tf.cond(tf.equal(have, want), lambda: tf.ensure_shape(image, [None, None, None])[..., :want], convert)
    return tf.ensure_shape(result, [None, None, want])


def resize(image: tf.Tensor, size: Any, mode: str = "stretch") -> tf.Tensor:
    """Bilinear resize (antialiased when shrinking) to (height, width), back to uint8.

    ``mode`` as when writing: ``"stretch"`` ignores the aspect ratio, ``"pad"`` keeps it and pads
    with black, ``"crop"`` keeps it and crops the centre.
    """
    height, width = (int(v) for v in size)
    if mode == "pad":
        resized = tf.image.resize_with_pad(image, height, width, method="bilinear", antialias=True)
    elif mode == "crop":
        shape = tf.cast(tf.shape(image)[:2], tf.float32)
        scale = tf.maximum(height / shape[0], width / shape[1])
        cover = tf.cast(tf.math.ceil(shape * scale), tf.int32)
        resized = tf.image.resize(image, cover, method="bilinear", antialias=True)
        resized = tf.image.resize_with_crop_or_pad(resized, height, width)
    else:
        resized = tf.image.resize(image, (height, width), method="bilinear", antialias=True)
    return tf.cast(tf.clip_by_value(tf.round(resized), 0, 255), tf.uint8)


def _supervised(manifest: Manifest, label_key: str | None):
    key = label_key or (manifest.label or {}).get("feature")
    if key is None:
        raise TFRecorderError("as_supervised=True needs a label: this dataset has none; pass label_key=")

    def split_label(example: dict[str, tf.Tensor]):
        if key not in example:
            raise TFRecorderError(f"label_key={key!r} is not among the features read")
        rest = {k: v for k, v in example.items() if k != key}
        return (rest["image"] if "image" in rest else rest), example[key]

    return split_label
