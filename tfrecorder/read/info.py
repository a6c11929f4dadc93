"""Overview: info() and show(), a dataset summarised and its pictures shown for a person to check."""

from __future__ import annotations

import base64
import html
import io
import os
import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from PIL import Image, ImageDraw, ImageOps

from tfrecorder._notebook import in_notebook
from tfrecorder.dataset import connectors
from tfrecorder.dataset.features import IMAGE, IMAGE_URI, OBJECTS, SEGMENTATION_MASK
from tfrecorder.dataset.layouts import feature_lists_of, layout_of
from tfrecorder.dataset.manifest import FeatureInfo, Manifest
from tfrecorder.dataset.store_requests import DEFAULT_STORAGE_TIMEOUT
from tfrecorder.dataset.versions import Version, versions_of
from tfrecorder.errors import TFRecorderError
from tfrecorder.read.open import open_dataset
from tfrecorder.types import TRAIN

THUMBNAIL = 128


@dataclass(frozen=True)
class DatasetInfo:
    """What ``tfrecorder.info`` returns: renders as text, and as tables with label bars in a notebook."""

    tfrecord_dir: str
    manifest: Manifest
    label_counts: dict[str, dict[str, int]] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        """Splits, counts, bytes, schema and labels as plain data (what ``tfrecorder info`` prints)."""
        m = self.manifest
        return {
            "splits": {k: {"records": m.records(k), "shards": len(v), "bytes": sum(s.bytes for s in v)}
                       for k, v in m.splits.items()},
            "rows": {k: vars(v) for k, v in m.rows.items()},
            "features": {f.name: _feature_text(f) for f in m.features},
            "labels": m.vocabulary,
            "label_counts": self.label_counts,
            "compression": m.compression,
            "leakage": m.leakage.get("count", 0),
            "feature_lists": list(feature_lists_of(m)),  # SequenceExample records: each read [T, ...]
            "versions": [_version_text(v) for v in versions_of(m)],
        }

    def __str__(self) -> str:
        lines = [f"{self.tfrecord_dir}"]
        for name, split in self.summary()["splits"].items():
            lines.append(f"  {name:<10} {split['records']:>9,} records  {split['shards']:>4} shards  "
                         f"{split['bytes'] / 2**20:>9.1f} MiB")
            counts = self.label_counts.get(name, {})
            if counts:
                lines.append(f"    {self._counted(name)}: " + ", ".join(f"{k} {v:,}" for k, v in counts.items()))
        lines.append("  features: " + ", ".join(f"{k} ({v})" for k, v in self.summary()["features"].items()))
        for v in self.summary()["versions"] if len(self.summary()["versions"]) > 1 else ():
            when = v["time"] or "time not recorded"
            lines.append(f"  version {v['version']}: {v['rows_added']:,} rows added ({when})"
                         f"{', labels added: ' + ', '.join(v['labels_added']) if v['labels_added'] else ''}")
        if layout_of(self.manifest).sequences:
            lines.append("  records: tf.train.SequenceExample; feature lists: "
                         + (", ".join(self.summary()["feature_lists"]) or "none"))
        return "\n".join(lines)

    def _counted(self, split: str) -> str:
        """What a split's counts count: labels, or a segmentation dataset's mask pixels (in a sample of the
        masks of a large split)."""
        if self.manifest.masks is None:
            return "labels"
        stride = self.manifest.masks.get("pixel_stride", {}).get(split, 1)
        return "mask pixels per class" + (f" (in 1 mask of {stride}, by content key)" if stride > 1 else "")

    def _repr_html_(self) -> str:
        parts = [f"<h4>{html.escape(self.tfrecord_dir)}</h4><table><tr><th>split</th><th>records</th>"
                 "<th>shards</th><th>bytes</th></tr>"]
        for name, split in self.summary()["splits"].items():
            parts.append(f"<tr><td>{name}</td><td>{split['records']:,}</td><td>{split['shards']}</td>"
                         f"<td>{split['bytes']:,}</td></tr>")
        parts.append("</table>")
        for name, counts in self.label_counts.items():
            top = max(counts.values(), default=1)
            rows = "".join(
                f"<tr><td>{html.escape(str(k))}</td><td>{v:,}</td><td><div style='background:#4c78a8;height:10px;"
                f"width:{int(200 * v / top)}px'></div></td></tr>" for k, v in counts.items())
            parts.append(f"<p>{name} {html.escape(self._counted(name))}</p><table>{rows}</table>")
        return "".join(parts)


def _version_text(version: Version) -> dict[str, Any]:
    return {"version": version.version, "time": version.time, "rows_added": version.rows_added,
            "shards": len(version.shards), "labels_added": list(version.labels_added)}


def versions(tfrecord_dir: str, storage_timeout: float = DEFAULT_STORAGE_TIMEOUT) -> list[Version]:
    """The versions of a dataset, oldest first: version 1 is its conversion, each ``convert(..., mode="append")``
    the next. ``load_dataset``, ``read_tfr``, ``data_source`` and ``info`` read the latest, or the one their
    ``version=`` names.

    Args:
        tfrecord_dir: a dataset folder written by tfrecorder, local or a URL.
        storage_timeout: seconds one object-store operation may take, its retries included.

    Returns:
        A ``Version`` each: its number, ``time`` its run started (UTC; None for version 1, whose dataset.json
        records none), ``rows`` by split (``rows_added`` in all), the ``shards`` it added, the ``options`` it was
        converted with, its ``errors_file`` and the labels it added.

    Examples:
        >>> [v.version for v in tfrecorder.versions(dataset_dir)]
        [1]
    """
    manifest, folder = open_dataset(tfrecord_dir, storage_timeout)
    return versions_of(manifest, folder.url_of("dataset.json"))


def info(tfrecord_dir: str, storage_timeout: float = DEFAULT_STORAGE_TIMEOUT,
         version: int | None = None) -> DatasetInfo:
    """Splits, counts, bytes, shards, schema and the label distribution of each split (``storage_timeout``: see
    ``read_manifest``).

    Args:
        tfrecord_dir: a dataset folder (ours or others' TFRecords), a glob or a list of files.
        storage_timeout: seconds one object-store operation may take, its retries included.
        version: the dataset version to read (``tfrecorder.versions``): its shards and counts; None: the latest.

    Returns:
        A ``DatasetInfo``: it prints as a summary and renders as a table in a notebook.

    Examples:
        >>> info = tfrecorder.info(dataset_dir)
        >>> info.label_counts["TRAIN"]
        {'cat': 2, 'dog': 2, 'goat': 2}
    """
    manifest = open_dataset(tfrecord_dir, storage_timeout, version)[0]
    counts: dict[str, dict[str, int]] = {}
    label = (manifest.label or {}).get("feature")
    if manifest.objects is not None:  # a detection dataset: its objects per class, counted as they were written
        counts = {split: dict(found) for split, found in manifest.objects.get("counts", {}).items()}
    elif manifest.masks is not None:  # a segmentation dataset: its mask pixels per class, counted when written
        counts = {split: {mask_class_name(manifest.masks, int(k)): v for k, v in found.items()}
                  for split, found in manifest.masks.get("pixels", {}).items()}
    elif label:
        counts = _label_counts(tfrecord_dir, manifest, storage_timeout, version)
    return DatasetInfo(str(tfrecord_dir), manifest, counts)


def _label_counts(tfrecord_dir: str, manifest: Manifest, storage_timeout: float,
                  version: int | None = None) -> dict[str, dict[str, int]]:
    """Each split's labels counted from its records, read with plain Python (read_tfr): ``tfrecorder info``
    answers without the seconds TensorFlow takes to import."""
    from tfrecorder.read.pandas import read_tfr

    feature = manifest.feature(manifest.label["feature"])  # type: ignore[index]
    names = manifest.vocabulary
    column = feature.column or feature.name
    column = f"{column}_id" if names is not None else column  # string labels come back as names, ids beside
    counts = {}
    for split in manifest.splits:
        ids = read_tfr(tfrecord_dir, split=split, columns=[column], storage_timeout=storage_timeout,
                       version=version)[column]
        counter: Counter = Counter()
        for value in ids:  # an id a record, or a list of them (multi-label); a missing label counts nothing
            counter.update(int(v) for v in (value if isinstance(value, list) else [] if pd.isna(value) else [value]))
        counts[split] = {(names[k] if names else str(k)): v for k, v in sorted(counter.items())}
    return counts


@dataclass(frozen=True)
class ImageGrid:
    """Thumbnails with captions; renders as an HTML grid in a notebook (inline images, no files)."""

    thumbnails: tuple[bytes, ...]  # PNG bytes
    captions: tuple[str, ...]

    def _repr_html_(self) -> str:
        cells = "".join(
            f"<figure style='display:inline-block;margin:4px;width:{THUMBNAIL}px;vertical-align:top'>"
            f"<img src='data:image/png;base64,{base64.b64encode(png).decode()}'/>"
            f"<figcaption style='font-size:10px;word-break:break-all'>{html.escape(caption)}</figcaption></figure>"
            for png, caption in zip(self.thumbnails, self.captions))
        return f"<div>{cells}</div>"

    def contact_sheet(self) -> Image.Image:
        """All thumbnails on one picture, captions under each."""
        columns = min(4, max(1, len(self.thumbnails)))
        rows = -(-len(self.thumbnails) // columns)
        cell = (THUMBNAIL + 8, THUMBNAIL + 30)
        sheet = Image.new("RGB", (columns * cell[0], max(1, rows) * cell[1]), "white")
        draw = ImageDraw.Draw(sheet)
        for i, (png, caption) in enumerate(zip(self.thumbnails, self.captions)):
            x, y = (i % columns) * cell[0] + 4, (i // columns) * cell[1] + 4
            sheet.paste(Image.open(io.BytesIO(png)).convert("RGB"), (x, y))
            for line, text in enumerate(caption.split("\n")[:2]):
                draw.text((x, y + THUMBNAIL + 2 + 11 * line), text[:22], fill="black")
        return sheet


# Box outlines: a colour per class id, bright on photos.
_BOX_COLORS = ("#ff3b30", "#34c759", "#007aff", "#ffcc00", "#af52de", "#ff9500", "#5ac8fa", "#ff2d55")


def mask_class_name(masks: dict[str, Any], class_id: int) -> str:
    """A mask class id's name: dataset.json's ``mask_classes`` entry, "ignore" for ignore_index, else the id."""
    classes = masks.get("classes") or []
    if class_id == masks.get("ignore_index"):
        return "ignore"
    return classes[class_id] if class_id < len(classes) else str(class_id)


def overlay_mask(image: Image.Image, mask: Any, ignore_index: int) -> Image.Image:
    """``image`` with its mask of class ids laid over it: each class but 0 (background) and ``ignore_index``
    in a colour of its own, half transparent."""
    mask = np.asarray(mask)
    colours = np.zeros((256, 3), np.uint8)
    for class_id in range(1, 256):
        colours[class_id] = [int(_BOX_COLORS[(class_id - 1) % len(_BOX_COLORS)][i:i + 2], 16) for i in (1, 3, 5)]
    painted = (mask > 0) & (mask != ignore_index)
    pixels = np.asarray(image.convert("RGB")).copy()
    pixels[painted] = (pixels[painted] * 0.45 + colours[mask[painted]] * 0.55).astype(np.uint8)
    return Image.fromarray(pixels)


def object_colors(labels: list[str]) -> list[str]:
    """Each object's colour, by its label: the colour its box is drawn in and its mask laid in."""
    colors = {name: _BOX_COLORS[i % len(_BOX_COLORS)] for i, name in enumerate(sorted(set(labels)))}
    return [colors[name] for name in labels]


def draw_boxes(image: Image.Image, boxes: Any, labels: list[str]) -> Image.Image:
    """Draw normalized ``[ymin, xmin, ymax, xmax]`` boxes on ``image`` (in place), each with its label."""
    draw = ImageDraw.Draw(image)
    width, height = image.size
    for (y0, x0, y1, x1), name, color in zip(np.asarray(boxes, np.float64).reshape(-1, 4), labels,
                                             object_colors(labels)):
        box = (x0 * width, y0 * height, max(x0 * width, x1 * width - 1), max(y0 * height, y1 * height - 1))
        draw.rectangle(box, outline=color, width=2)
        draw.text((box[0] + 3, box[1] + 2), name, fill=color)
    return image


def overlay_instance_masks(image: Image.Image, masks: Any, labels: list[str]) -> Image.Image:
    """``image`` with each object's mask (``[N, H, W]``, nonzero on the object, the image's size) laid over it
    in its object's colour (``object_colors``), half transparent. Where masks overlap the later object is
    shown, as ``mask_from_instances`` draws later objects over earlier ones. Masks of another size than the
    image (a foreign dataset's) are not laid: a mask off its picture would mislead more than none."""
    masks = np.asarray(masks)
    pixels = np.asarray(image.convert("RGB")).copy()
    if masks.ndim != 3 or not len(masks) or len(masks) != len(labels) or masks.shape[1:] != pixels.shape[:2]:
        return Image.fromarray(pixels)
    colours = np.array([[int(c[i:i + 2], 16) for i in (1, 3, 5)] for c in object_colors(labels)], np.float64)
    covered = masks > 0
    # The last object covering each pixel: argmax over the reversed stack finds the first from the end.
    last = len(covered) - 1 - np.argmax(covered[::-1], axis=0)
    painted = covered.any(axis=0)
    pixels[painted] = (pixels[painted] * 0.45 + colours[last[painted]] * 0.55).astype(np.uint8)
    return Image.fromarray(pixels)


def thumbnail_of(example: dict[str, Any], manifest: Manifest) -> tuple[Image.Image, str]:
    """A decoded record's picture as ``show`` draws it (``load_dataset``'s or ``data_source``'s dict, 3 channels):
    at most ``THUMBNAIL`` pixels a side, its mask laid over it, its boxes and their labels drawn; and its caption
    (its label names, then its file name)."""
    names = manifest.vocabulary
    label_feature = (manifest.label or {}).get("feature")
    image = Image.fromarray(np.asarray(example[IMAGE.name]))
    thumb = ImageOps.contain(image, (THUMBNAIL, THUMBNAIL))
    mask = example.get(SEGMENTATION_MASK.name)
    if mask is not None:  # a segmentation record: its mask laid over the picture, a colour per class
        thumb = overlay_mask(image, mask[..., 0], (manifest.masks or {}).get("ignore_index", 255))
        thumb = ImageOps.contain(thumb, (THUMBNAIL, THUMBNAIL))
    objects = example.get(OBJECTS)
    if objects is not None:  # a detection record: each mask laid, each box and its label drawn where it is
        labels = [names[int(v)] if names else str(int(v)) for v in objects["label"]]
        if "mask" in objects:  # instance masks, the picture's size: laid before it shrinks to a thumbnail
            thumb = ImageOps.contain(overlay_instance_masks(image, objects["mask"], labels),
                                     (THUMBNAIL, THUMBNAIL))
        draw_boxes(thumb, objects["bbox"], labels)
    label = example.get(label_feature) if label_feature else None
    if objects is not None:
        label = objects["label"]
    uri = example.get(IMAGE_URI.name, b"")
    uri = uri.decode("utf-8", "replace") if isinstance(uri, bytes) else str(uri)
    return thumb, f"{label_text(label, names)}\n{os.path.basename(uri)}"


def label_text(label: Any, names: Sequence[str] | None) -> str:
    """A record's label ids (one, or several) as their names, comma-separated; "" for none."""
    if label is None:
        return ""
    return ",".join(names[int(v)] if names else str(int(v)) for v in np.atleast_1d(label))


def _grid(pictures: Sequence[tuple[Image.Image, str]], path: str | None) -> ImageGrid | str:
    """``show``'s answer for (thumbnail, caption) pairs: the ``ImageGrid`` in a notebook (``path`` None), else
    the contact sheet saved to ``path`` (or a temporary file) and its path."""
    grid = ImageGrid(tuple(_png(thumb) for thumb, _ in pictures), tuple(caption for _, caption in pictures))
    if path is None and in_notebook():
        return grid
    target = path or tempfile.mkstemp(prefix="tfrecorder-show-", suffix=".png")[1]
    grid.contact_sheet().save(target)
    return target


def _png(picture: Image.Image) -> bytes:
    buffer = io.BytesIO()
    picture.save(buffer, "PNG")
    return buffer.getvalue()


def show(tfrecord_dir: str, split: str = TRAIN, n: int = 16, path: str | None = None) -> ImageGrid | str:
    """The first ``n`` images of ``split`` with their label names and URIs, to check by eye.

    In a notebook it returns an ``ImageGrid`` that renders inline (nothing written); elsewhere it
    saves a PNG contact sheet (to ``path``, or a temporary file) and returns the file's path.

    Args:
        tfrecord_dir: a dataset folder (ours or others' TFRecords).
        split: the split to show.
        n: how many images, from the start of the split.
        path: where to save the contact sheet outside a notebook (default: a temporary file).

    Returns:
        An ``ImageGrid`` in a notebook, else the PNG file's path.

    Examples:
        >>> tfrecorder.show(dataset_dir, split="TRAIN", n=4, path=str(tmp_path / "sheet.png")).endswith("sheet.png")
        True
    """
    from tfrecorder.read.tf_data import load_dataset

    manifest = open_dataset(tfrecord_dir)[0]
    pictured = next((f.name for f in manifest.features if connectors.of(f).own_file), None)  # a clip's spectrogram
    if manifest.image is None and pictured is not None:
        return _show_pictures(tfrecord_dir, manifest, split, n, path, pictured)
    if manifest.image is None:
        raise TFRecorderError(f"{tfrecord_dir!r} holds no images (a table of values): show draws pictures; "
                              f"tfrecorder.read_tfr({tfrecord_dir!r}) gives its rows")
    ds: Any = load_dataset(tfrecord_dir, split=split, channels=3)  # one split: a Dataset
    ds = ds.take(max(0, int(n)))
    return _grid([thumbnail_of(example, manifest) for example in ds.as_numpy_iterator()], path)


def _show_pictures(tfrecord_dir: str, manifest: Any, split: str, n: int, path: str | None,
                   feature: str) -> ImageGrid | str:
    """``show`` of a dataset without images whose records hold a kind that draws a picture of its values (an audio
    clip's spectrogram): a picture of each of the first ``n`` records' ``feature``, captioned with its label."""
    from tfrecorder.read.tf_data import load_dataset

    kind = connectors.of(manifest.feature(feature))
    label_feature = (manifest.label or {}).get("feature")
    ds: Any = load_dataset(tfrecord_dir, split=split, features=[feature, *([label_feature] if label_feature else [])])
    return _grid([(ImageOps.contain(kind.picture(example[feature]), (THUMBNAIL, THUMBNAIL)),
                   label_text(example.get(label_feature) if label_feature else None, manifest.vocabulary))
                  for example in ds.take(max(0, int(n))).as_numpy_iterator()], path)


def _feature_text(feature: FeatureInfo) -> str:
    """How ``info`` shows a feature: what its kind says of it (an audio clip's rate), else its dtype and shape."""
    return connectors.of(feature).summary(feature) or f"{feature.dtype}{_shape_text(feature)}" + (
        "?" if feature.nullable else "")


def _shape_text(feature: FeatureInfo) -> str:
    """How ``info`` shows a feature's shape: nothing for a scalar, ``[]`` for a list (or a value per object), the
    shape of a tensor (``[20, 8]``, ``[None, 4]``)."""
    if connectors.of(feature).nested or feature.shape == [None]:
        return "[]"
    return f"[{', '.join(str(d) for d in feature.shape)}]" if feature.shape else ""
