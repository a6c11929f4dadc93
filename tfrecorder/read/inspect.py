"""Inspect: write a few records' images and a data.csv to a folder, for a person to look at."""

from __future__ import annotations

import base64
import contextlib
import csv
import io
import logging
import os
import re
from typing import Any

import numpy as np
from PIL import Image, ImageOps

from tfrecorder.arguments import check_count
from tfrecorder.dataset import connectors
from tfrecorder.dataset.boxes import turn
from tfrecorder.dataset.features import (
    IMAGE,
    IMAGE_CHANNELS,
    IMAGE_HEIGHT,
    IMAGE_ORIENTATION,
    IMAGE_WIDTH,
    OBJECTS,
    SEGMENTATION_MASK,
)
from tfrecorder.dataset.manifest import Manifest
from tfrecorder.dataset.store_requests import DEFAULT_STORAGE_TIMEOUT
from tfrecorder.errors import TFRecorderError
from tfrecorder.read.infer import TFRECORDER2_FORMAT
from tfrecorder.read.info import draw_boxes, overlay_instance_masks, overlay_mask
from tfrecorder.read.open import open_dataset
from tfrecorder.read.tf_data import load_dataset
from tfrecorder.types import TRAIN

# An image file's extension by its first bytes: a record's own format feature is not trusted (others' records
# name it "JPEG", "jpg" or not at all), nor is its name ours in every layout.
_SIGNATURES = ((b"\xff\xd8\xff", "jpg"), (b"\x89PNG", "png"), (b"GIF8", "gif"), (b"BM", "bmp"), (b"RIFF", "webp"))
_EXIF_ORIENTATION = 0x0112

logger = logging.getLogger(__name__)
# The names inspect gives the files it writes beside data.csv: the only names it ever deletes.
_WRITTEN_NAME = re.compile(r"\d{5}(-mask|-boxes|-[A-Za-z0-9_]+)?\.[a-z0-9]+")
# The list of what inspect wrote to a folder, one name a line: what a later inspect there may replace or delete.
# A file of the same name that is not on it (a user's own data.csv) is never written over.
_MARKER = ".tfrecorder-inspect"


def inspect(tfrecord_dir: str, split: str = TRAIN, num_records: int = 1, output_dir: str = "output",
            storage_timeout: float = DEFAULT_STORAGE_TIMEOUT) -> str:
    """Write the first ``num_records`` of ``split`` as image files plus ``data.csv``; return the folder
    (``storage_timeout``: see ``read_manifest``).

    Image files are named by record number (``00000.jpg``), never by the stored ``image_name``,
    so nothing in the data decides where files are written. ``data.csv`` has every other
    feature, the label's name, and the image file name. The files an earlier inspect wrote to ``output_dir``
    (listed in its ``.tfrecorder-inspect``) are deleted first; no other file there is touched, and a file of
    the same name that inspect did not write (your own data.csv) is an error, never written over.

    Args:
        tfrecord_dir: a dataset folder (ours or others' TFRecords), local or a URL.
        split: the split to look at.
        num_records: how many records from the start of the split.
        output_dir: the folder to write to (made if missing).
        storage_timeout: seconds one object-store operation may take, its retries included.

    Returns:
        The folder the files were written to.

    Examples:
        >>> folder = tfrecorder.inspect(dataset_dir, split="TRAIN", num_records=2, output_dir=str(tmp_path / "look"))
        >>> sorted(name.split(".")[0] for name in os.listdir(folder))  # 2 images, data.csv, what inspect wrote
        ['', '00000', '00001', 'data']
    """
    return write_samples(tfrecord_dir, split, num_records, output_dir, storage_timeout)[0]


def default_folder(tfrecord_dir: str, split: str) -> str:
    """Where ``tfrecorder inspect`` writes unless told: ``inspect-<dataset folder's name>-<split>`` in the current
    folder, one per dataset and split, so looking at VALIDATION leaves TRAIN's files alone."""
    name = str(tfrecord_dir).rstrip("/").rsplit("/", 1)[-1]
    name = os.path.basename(os.path.abspath(name)) if name in ("", ".", "..") else name
    return f"inspect-{re.sub(r'[^A-Za-z0-9._-]+', '-', name)}-{str(split).strip().lower()}"


def write_samples(tfrecord_dir: str, split: str, num_records: int, output_dir: str,
                  storage_timeout: float = DEFAULT_STORAGE_TIMEOUT) -> tuple[str, int]:
    """``inspect``'s work: (the folder, how many records were written to it). What an earlier run wrote there is
    deleted first, so the folder holds this run's records only."""
    num_records = check_count("num_records", num_records)  # -2 wrote nothing without a word
    manifest = open_dataset(tfrecord_dir, storage_timeout)[0]
    vocabulary = manifest.vocabulary
    ds: Any = load_dataset(tfrecord_dir, split=split, decode_images=False, storage_timeout=storage_timeout)
    ds = ds.take(num_records)
    try:
        os.makedirs(output_dir, exist_ok=True)
    except FileExistsError:
        raise TFRecorderError(f"output_dir {output_dir!r} is a file: give a folder to write the records in") from None
    _refuse_foreign(output_dir, "data.csv")
    _clear_earlier(output_dir)
    try:
        marker = open(os.path.join(output_dir, _MARKER), "w", encoding="utf-8")
    except PermissionError:
        raise TFRecorderError(f"output_dir {output_dir!r}: no permission to write there") from None
    with marker as f:
        f.write("data.csv\n")  # each file is added as it is claimed: an interrupted run's files stay ours
    rows = []
    label = (manifest.label or {}).get("feature")
    raw = _raw_pixels(manifest)
    filed = {f.name: kind for f in manifest.features if (kind := connectors.of(f)).own_file}
    for index, example in enumerate(ds.as_numpy_iterator()):
        objects = example.pop(OBJECTS, None)
        mask = example.pop(SEGMENTATION_MASK.name, None)
        files = {f"{name}_file": _write_kind_files(output_dir, index, name, kind, example.pop(name))
                 for name, kind in filed.items() if name in example}
        row = {k: _text(v) for k, v in example.items() if k != IMAGE.name} | files
        if IMAGE.name in example:
            row["image_file"] = _write_image(output_dir, index, example, raw)
        if mask is not None and IMAGE.name in example and raw is None:
            row["mask_file"] = _write_mask(output_dir, index, example, mask, manifest.masks or {})
        if objects is not None:  # a detection record: its objects' lists, and its picture with the boxes drawn
            masks = objects.pop("mask", None)  # PNGs: laid on the picture, not written into data.csv as text
            row.update({f"{OBJECTS}/{k}": _text(v) for k, v in objects.items()})
            names = [vocabulary[i] if vocabulary else str(i) for i in objects["label"].tolist()]
            row["label_name"] = "|".join(names)
            if IMAGE.name in example and raw is None:
                row["boxes_file"] = _write_boxes(output_dir, index, example, objects["bbox"], names, masks, split)
            rows.append(row)
            continue
        if vocabulary is not None and label in example:
            labels = np.atleast_1d(example[label]).tolist()
            row["label_name"] = "|".join(vocabulary[i] for i in labels)
        rows.append(row)
    columns = sorted({k for r in rows for k in r})
    with open(os.path.join(output_dir, "data.csv"), "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    return output_dir, len(rows)


def _earlier(output_dir: str) -> set[str]:
    """The files an earlier inspect wrote to ``output_dir`` (its marker's list), named as inspect names them."""
    try:
        with open(os.path.join(output_dir, _MARKER), encoding="utf-8") as f:
            names = {line.strip() for line in f}
    except (FileNotFoundError, UnicodeDecodeError):
        return set()
    return {n for n in names if n == "data.csv" or _WRITTEN_NAME.fullmatch(n)}


def _refuse_foreign(output_dir: str, name: str) -> None:
    """A TFRecorderError when ``output_dir`` holds a file ``name`` that no earlier inspect wrote."""
    if os.path.exists(os.path.join(output_dir, name)) and name not in _earlier(output_dir):
        raise TFRecorderError(f"inspect: {os.path.join(output_dir, name)} exists and was not written by inspect; "
                              f"choose another output folder (it is never written over)")


def _claim(output_dir: str, name: str) -> None:
    """``name`` is about to be written: refused if it is someone else's, else added to the marker's list first."""
    _refuse_foreign(output_dir, name)
    with open(os.path.join(output_dir, _MARKER), "a", encoding="utf-8") as f:
        f.write(f"{name}\n")


def _clear_earlier(output_dir: str) -> None:
    """Delete the files an earlier inspect wrote to ``output_dir`` (its marker lists them). Nothing else is
    touched: a user's own files stay, even in the same folder."""
    for name in _earlier(output_dir) - {"data.csv"}:
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(output_dir, name))


def _raw_pixels(manifest: Manifest) -> str | None:
    """How a dataset's images hold raw pixels ("raw", or TFRecorder 2.0's base64 of them); None: encoded files."""
    kept = (manifest.image or {}).get("format")
    return kept if kept in ("raw", TFRECORDER2_FORMAT) else None


def _write_image(output_dir: str, index: int, example: dict, raw: str | None) -> str:
    """The record's image as a file: its encoded bytes as they are, raw pixels as a PNG."""
    if raw is not None:
        shape = tuple(int(example[f.name]) for f in (IMAGE_HEIGHT, IMAGE_WIDTH, IMAGE_CHANNELS))
        stored = example[IMAGE.name]
        if raw == TFRECORDER2_FORMAT:  # URL-safe base64, its padding left off
            stored = base64.urlsafe_b64decode(stored + b"=" * (-len(stored) % 4))
        pixels = np.frombuffer(stored, np.uint8).reshape(shape)
        buffer = io.BytesIO()
        Image.fromarray(pixels[..., 0] if shape[2] == 1 else pixels).save(buffer, "PNG")
        data, extension = buffer.getvalue(), "png"
    else:
        data = example[IMAGE.name]
        extension = next((ext for magic, ext in _SIGNATURES if data.startswith(magic)), "bin")
    name = f"{index:05d}.{extension}"
    _claim(output_dir, name)
    with open(os.path.join(output_dir, name), "wb") as f:
        f.write(data)
    return name


def _write_kind_files(output_dir: str, index: int, name: str, kind: connectors.Connector, stored: Any) -> str:
    """A record's value of a kind that has files of its own (an audio clip, a clip's frames): its stored bytes as
    they are (``stored_files``), and its picture beside them (a spectrogram, a contact sheet) where the kind draws
    one; the first file's name."""
    base = f"{index:05d}-{re.sub(r'[^A-Za-z0-9_]+', '_', name)}"
    files = kind.stored_files(stored)
    for ending, data in files:
        _claim(output_dir, base + ending)
        with open(os.path.join(output_dir, base + ending), "wb") as f:
            f.write(data)
    try:  # the value as data_source gives it (np_example's rule: a kind of one value a record, or a list)
        value = (kind.array(np.array([stored], dtype=object))[0] if kind.plain
                 else kind.array(kind.from_wire(list(stored))))
        picture = kind.picture(value)
    except Exception as e:  # noqa: BLE001 - any decoder's failure: the file is written, its picture said missing
        logger.warning("inspect: record %d's %s cannot be decoded (%s): written as it is, without a picture",
                       index, name, e)
        picture = None
    if picture is not None:
        _claim(output_dir, f"{base}.png")
        picture.save(os.path.join(output_dir, f"{base}.png"))
    return base + files[0][0] if files else ""


def _write_mask(output_dir: str, index: int, example: dict, mask: bytes, masks: dict) -> str:
    """The record's picture as displayed with its mask laid over it: both are stored in the stored pixels'
    frame, so they are laid together there, then turned."""
    picture = Image.open(io.BytesIO(example[IMAGE.name]))
    ids = np.asarray(Image.open(io.BytesIO(mask)))
    laid = overlay_mask(picture, ids, masks.get("ignore_index", 255))
    orientation = int(example.get(IMAGE_ORIENTATION.name, 1))
    if orientation != 1:
        laid.getexif()[0x0112] = orientation  # turned as viewers turn the photo
        laid = ImageOps.exif_transpose(laid)
    name = f"{index:05d}-mask.png"
    _claim(output_dir, name)
    laid.save(os.path.join(output_dir, name))
    return name


def _write_boxes(output_dir: str, index: int, example: dict, boxes: np.ndarray, names: list[str],
                 masks: np.ndarray | None, split: str) -> str:
    """The record's picture as displayed (its EXIF orientation applied) with its boxes drawn, turned with it
    from the stored pixels' frame they are kept in; its objects' instance masks (PNGs of the stored pixels)
    laid over it first, each in its box's colour, in that frame, then turned with the picture. "" where the
    image cannot be decoded (others' records): said in the log, the record's other files still written."""
    try:
        stored = Image.open(io.BytesIO(example[IMAGE.name]))
        stored.load()
    except OSError as e:  # Pillow's UnidentifiedImageError, a truncated file
        logger.warning("inspect: record %d of %s: its image cannot be decoded (%s): written as it is, without its "
                       "boxes drawn", index, split, e)
        return ""
    orientation = _orientation(example, stored)
    shown = ImageOps.exif_transpose(stored).convert("RGB")
    if masks is not None and len(masks):
        laid = overlay_instance_masks(stored, [np.asarray(Image.open(io.BytesIO(png))) for png in masks], names)
        if orientation != 1:
            laid.getexif()[0x0112] = orientation  # turned as viewers turn the photo
            laid = ImageOps.exif_transpose(laid)
        shown = laid
    turned = turn(np.asarray(boxes, np.float64).reshape(-1, 4)[:, [1, 0, 3, 2]], orientation)[:, [1, 0, 3, 2]]
    name = f"{index:05d}-boxes.png"
    _claim(output_dir, name)
    draw_boxes(shown, turned, names).save(os.path.join(output_dir, name))
    return name


def _orientation(example: dict, stored: Image.Image) -> int:
    """The EXIF orientation a record's picture is displayed with: the record's own where its layout keeps one
    (ours), else its image's (the Object Detection API's layout keeps none, and its boxes are in the stored
    pixels' frame as ours are)."""
    if IMAGE_ORIENTATION.name in example:
        return int(example[IMAGE_ORIENTATION.name])
    found = stored.getexif().get(_EXIF_ORIENTATION, 1)
    return found if isinstance(found, int) and 1 <= found <= 8 else 1


def _text(value) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, np.ndarray):
        return "|".join(_text(v) for v in value.tolist())
    if isinstance(value, np.generic):
        return str(value.item())
    return str(value)
