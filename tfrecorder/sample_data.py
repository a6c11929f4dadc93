"""Sample data: a small labelled image table (shapes on textured backgrounds) for the demo, notebooks and tests."""

from __future__ import annotations

import os
import random
import shutil
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from PIL import Image, ImageDraw, ImageFilter

from tfrecorder.dataset.boxes import INVERSE, turn
from tfrecorder.types import BOX_EDGES

CLASSES = ("circle", "square", "triangle")


def make_sample_images(directory: str, n: int = 300, size: tuple[int, int] = (64, 64), seed: int = 0) -> pd.DataFrame:
    """Draw ``n`` images of three classes as JPEG and PNG files under ``directory``; return their table.

    The table has ``split`` (80/10/10), ``image_uri``, ``label`` and two extra columns,
    ``brightness`` (float) and ``camera`` (str). The same arguments always give the same files.

    Examples:
        >>> df = make_sample_images(str(tmp_path / "images"), n=6)
        >>> list(df.columns)
        ['split', 'image_uri', 'label', 'brightness', 'camera']
    """
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        label = CLASSES[i % len(CLASSES)]
        split = "TRAIN" if i % 10 < 8 else ("VALIDATION" if i % 10 == 8 else "TEST")
        image, brightness = _draw(label, size, rng)
        fmt = "png" if i % 4 == 3 else "jpg"
        folder = os.path.join(directory, split, label)
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, f"{label}-{i:04d}.{fmt}")
        if fmt == "jpg":
            image.save(path, quality=90)
        else:
            image.save(path)
        rows.append((split, path, label, brightness, rng.choice(("phone", "scanner", "webcam"))))
    return pd.DataFrame(rows, columns=["split", "image_uri", "label", "brightness", "camera"])


def _draw(label: str, size: tuple[int, int], rng: random.Random) -> tuple[Image.Image, float]:
    height, width = size
    base = tuple(rng.randrange(40, 200) for _ in range(3))
    image = Image.new("RGB", (width, height), base)
    draw = ImageDraw.Draw(image)
    for _ in range(12):  # soft background texture, so JPEGs are realistic rather than flat
        x, y = rng.randrange(width), rng.randrange(height)
        r = rng.randrange(4, max(5, width // 3))
        tone = tuple(min(255, c + rng.randrange(-30, 30)) for c in base)
        draw.ellipse((x - r, y - r, x + r, y + r), fill=tone)
    image = image.filter(ImageFilter.GaussianBlur(2))
    draw = ImageDraw.Draw(image)
    color = tuple(rng.randrange(0, 256) for _ in range(3))
    cx, cy = width // 2 + rng.randrange(-8, 9), height // 2 + rng.randrange(-8, 9)
    r = rng.randrange(min(width, height) // 5, min(width, height) // 3)
    if label == "circle":
        draw.ellipse((cx - r, cy - r, cx + r, cy + r), fill=color)
    elif label == "square":
        draw.rectangle((cx - r, cy - r, cx + r, cy + r), fill=color)
    else:
        draw.polygon([(cx, cy - r), (cx - r, cy + r), (cx + r, cy + r)], fill=color)
    brightness = round(float(np.asarray(image.convert("L")).mean()) / 255, 4)
    return image, brightness


# Object colours of the detection scenes: each class a solid colour, so a box on its object holds that colour.
OBJECT_COLORS = {"red": (220, 30, 30), "green": (30, 190, 40), "blue": (30, 40, 220), "yellow": (230, 210, 30)}
# The EXIF orientations the scenes cycle through: upright, and phone photos stored turned (6, 8, 3).
SCENE_ORIENTATIONS = (1, 6, 1, 8, 1, 3)
# What stores a picture so that its EXIF orientation shows it upright: the inverse of the turn a viewer makes.
_STORED_TURN = {2: Image.Transpose.FLIP_LEFT_RIGHT, 3: Image.Transpose.ROTATE_180, 4: Image.Transpose.FLIP_TOP_BOTTOM,
                5: Image.Transpose.TRANSPOSE, 6: Image.Transpose.ROTATE_90, 7: Image.Transpose.TRANSVERSE,
                8: Image.Transpose.ROTATE_270}


def _save_turned(shown: Image.Image, orientation: int, path: str) -> Image.Image:
    """Save ``shown`` as a JPEG stored turned, with the EXIF ``orientation`` that shows it upright (as phones
    save photos); the stored picture."""
    stored = shown.transpose(_STORED_TURN[orientation]) if orientation in _STORED_TURN else shown
    exif = Image.Exif()
    if orientation != 1:
        exif[0x0112] = orientation
    stored.save(path, quality=95, exif=exif.tobytes())
    return stored


def make_detection_scenes(directory: str, n: int = 24, size: tuple[int, int] = (96, 128), seed: int = 0,
                          orientations: tuple[int, ...] = SCENE_ORIENTATIONS) -> pd.DataFrame:
    """Draw ``n`` JPEG scenes of 1-3 solid rectangles (classes ``OBJECT_COLORS``) on noise under ``directory``;
    return their boxes in the long form, a row per box: ``split`` (80/10/10), ``image_uri``, ``label``,
    ``xmin, ymin, xmax, ymax`` in pixels of the picture as displayed, and ``orientation``, ``stored_width``,
    ``stored_height`` (the file's EXIF orientation and its pixels' size as stored: scenes cycle through
    ``orientations``, stored turned with the EXIF tag that shows them upright).

    Examples:
        >>> boxes = make_detection_scenes(str(tmp_path / "scenes"), n=3)
        >>> sorted(boxes.columns)[:4]
        ['image_uri', 'label', 'orientation', 'split']
    """
    rng = np.random.default_rng(seed)
    height, width = size
    os.makedirs(directory, exist_ok=True)
    rows = []
    names = list(OBJECT_COLORS)
    for i in range(n):
        split = "TRAIN" if i % 10 < 8 else ("VALIDATION" if i % 10 == 8 else "TEST")
        picture = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
        cells = rng.permutation(6)[: 1 + i % 3]  # a 2 x 3 grid of cells, an object in a few of them
        boxes = []
        for cell in cells:
            top, left = (cell // 3) * height // 2, (cell % 3) * width // 3
            cell_h, cell_w = height // 2, width // 3
            h, w = int(rng.integers(cell_h // 2, cell_h - 4)), int(rng.integers(cell_w // 2, cell_w - 4))
            y, x = top + int(rng.integers(2, cell_h - h - 1)), left + int(rng.integers(2, cell_w - w - 1))
            label = names[int(rng.integers(len(names)))]
            picture[y:y + h, x:x + w] = OBJECT_COLORS[label]
            boxes.append((label, x, y, x + w, y + h))
        orientation = orientations[i % len(orientations)]
        path = os.path.join(directory, f"scene-{i:04d}.jpg")
        stored = _save_turned(Image.fromarray(picture), orientation, path)
        for label, x0, y0, x1, y1 in boxes:
            rows.append((split, path, label, float(x0), float(y0), float(x1), float(y1), orientation,
                         stored.width, stored.height))
    return pd.DataFrame(rows, columns=["split", "image_uri", "label", "xmin", "ymin", "xmax", "ymax",
                                       "orientation", "stored_width", "stored_height"])


def stored_pixels(scenes: pd.DataFrame) -> pd.DataFrame:
    """The scenes' boxes in the stored pixels' frame (as a tool that ignores EXIF orientation draws them)."""
    out = scenes.copy()
    for orientation, rows in scenes.groupby("orientation"):
        shown_w = np.where(orientation in (5, 6, 7, 8), rows["stored_height"], rows["stored_width"])
        shown_h = np.where(orientation in (5, 6, 7, 8), rows["stored_width"], rows["stored_height"])
        size = np.stack([shown_w, shown_h, shown_w, shown_h], 1).astype(float)
        normalized = turn(rows[list(BOX_EDGES)].to_numpy() / size, INVERSE[int(orientation)])
        stored = np.stack([rows["stored_width"], rows["stored_height"]] * 2, 1).astype(float)
        out.loc[rows.index, list(BOX_EDGES)] = np.round(normalized * stored)
    return out


def write_voc(scenes: pd.DataFrame, directory: Any) -> str:
    """The scenes of ``make_detection_scenes`` as labelImg saves them: a Pascal VOC folder (``Annotations/``
    with an XML per image, boxes of the stored pixels - labelImg shows photos without their EXIF orientation -
    1-based and inclusive, ``<size>`` as stored; the images copied into ``JPEGImages/``; the splits in
    ``ImageSets/Main``). Returns the folder.

    Examples:
        >>> scenes = make_detection_scenes(str(tmp_path / "scenes"), n=3)
        >>> sorted(os.listdir(write_voc(scenes, tmp_path / "voc")))
        ['Annotations', 'ImageSets', 'JPEGImages']
    """
    root = Path(directory)
    boxes = stored_pixels(scenes)
    for folder in ("Annotations", "JPEGImages", "ImageSets/Main"):
        os.makedirs(root / folder, exist_ok=True)
    lists: dict[str, list[str]] = {"train": [], "val": [], "test": []}
    for uri, rows in boxes.groupby("image_uri", sort=False):
        stem = os.path.splitext(os.path.basename(uri))[0]
        shutil.copyfile(uri, root / "JPEGImages" / f"{stem}.jpg")
        first = rows.iloc[0]
        lists[{"TRAIN": "train", "VALIDATION": "val", "TEST": "test"}[first.split]].append(stem)
        annotation = ElementTree.Element("annotation")
        ElementTree.SubElement(annotation, "filename").text = f"{stem}.jpg"
        size = ElementTree.SubElement(annotation, "size")
        for name, value in (("width", first.stored_width), ("height", first.stored_height), ("depth", 3)):
            ElementTree.SubElement(size, name).text = str(value)
        for row in rows.itertuples():
            obj = ElementTree.SubElement(annotation, "object")
            ElementTree.SubElement(obj, "name").text = row.label
            ElementTree.SubElement(obj, "difficult").text = "0"
            box = ElementTree.SubElement(obj, "bndbox")
            for name, value in (("xmin", row.xmin + 1), ("ymin", row.ymin + 1), ("xmax", row.xmax),
                                ("ymax", row.ymax)):
                ElementTree.SubElement(box, name).text = str(int(value))
        ElementTree.ElementTree(annotation).write(root / "Annotations" / f"{stem}.xml")
    for name, stems in lists.items():
        (root / "ImageSets" / "Main" / f"{name}.txt").write_text("".join(f"{s}\n" for s in stems))
    return str(root)


YOLO_LAYOUTS = ("ultralytics", "roboflow", "darknet")
_YOLO_SPLITS = {"TRAIN": "train", "VALIDATION": "val", "TEST": "test"}
_ROBOFLOW_SPLITS = {"TRAIN": "train", "VALIDATION": "valid", "TEST": "test"}


def write_yolo(scenes: pd.DataFrame, directory: Any, layout: str = "ultralytics", shapes: str = "boxes") -> str:
    """The scenes of ``make_detection_scenes`` as a YOLO dataset; returns its folder. Coordinates are normalized
    to the picture as displayed (Ultralytics loads images with their EXIF orientation applied), written exactly
    (``repr``). Classes are ``OBJECT_COLORS``' in their order (other labels: sorted).

    ``layout``: ``"ultralytics"`` (``data.yaml``, ``images/<split>/``, ``labels/<split>/``), ``"roboflow"``
    (``data.yaml`` naming ``../train/images``, ``../valid/images``, ``../test/images``, and a README, as Roboflow
    exports) or ``"darknet"`` (``obj.names``, ``obj.data``, ``train.txt``... naming ``data/obj_<split>_data/<image>``,
    a label file beside each image, as CVAT exports). ``shapes``: ``"boxes"`` (``class cx cy w h``),
    ``"polygons"`` (each box as a polygon of 5 points on its edges) or ``"pose"`` (``class cx cy w h`` then
    ``x y v`` for each point of the scenes' ``keypoints`` column, ``[x, y, v] * K`` in pixels as displayed).

    Examples:
        >>> scenes = make_detection_scenes(str(tmp_path / "scenes"), n=3)
        >>> sorted(os.listdir(write_yolo(scenes, tmp_path / "yolo")))
        ['data.yaml', 'images', 'labels']
    """
    if layout not in YOLO_LAYOUTS or shapes not in ("boxes", "polygons", "pose"):
        raise ValueError(f"layout={layout!r}, shapes={shapes!r}: give a layout of {YOLO_LAYOUTS} and shapes "
                         f"'boxes', 'polygons' or 'pose'")
    root = Path(directory)
    labels = set(scenes["label"].dropna())
    names = list(OBJECT_COLORS) if labels <= set(OBJECT_COLORS) else sorted(labels)
    lists: dict[str, list[str]] = {}
    count = 0
    for uri, rows in scenes.groupby("image_uri", sort=False):
        first = rows.iloc[0]
        image, label = _yolo_paths(root, layout, first.split, os.path.basename(uri))
        os.makedirs(image.parent, exist_ok=True)
        os.makedirs(label.parent, exist_ok=True)
        shutil.copyfile(uri, image)
        lists.setdefault(first.split, []).append(image.name)
        turned = int(first.orientation) in (5, 6, 7, 8)
        width, height = ((first.stored_height, first.stored_width) if turned else
                         (first.stored_width, first.stored_height))
        lines = [_yolo_line(names.index(row.label), row, float(width), float(height), shapes)
                 for row in rows.itertuples() if isinstance(row.label, str)]
        count = len(getattr(rows.iloc[0], "keypoints", None) or []) // 3 if shapes == "pose" else 0
        label.write_text("".join(f"{line}\n" for line in lines))
    if layout == "darknet":
        (root / "obj.names").write_text("".join(f"{name}\n" for name in names))
        data = [f"classes = {len(names)}", "names = data/obj.names", "backup = backup/"]
        for split, files in lists.items():
            folder = _ROBOFLOW_SPLITS[split]
            (root / f"{folder}.txt").write_text("".join(f"data/obj_{folder}_data/{f}\n" for f in files))
            data.append(f"{folder} = data/{folder}.txt")
        (root / "obj.data").write_text("\n".join(data) + "\n")
        return str(root)
    yaml_lines = [] if layout == "roboflow" else ["path: .  # the dataset's root"]
    for split in lists:
        key = _YOLO_SPLITS[split]
        yaml_lines.append(f"{key}: ../{_ROBOFLOW_SPLITS[split]}/images" if layout == "roboflow" else
                          f"{key}: images/{key}")
    if shapes == "pose":
        yaml_lines.append(f"kpt_shape: [{count}, 3]")
    yaml_lines += [f"nc: {len(names)}", "names: [" + ", ".join(names) + "]" if layout == "roboflow" else
                   "names:\n" + "".join(f"  {i}: {name}\n" for i, name in enumerate(names)).rstrip("\n")]
    (root / "data.yaml").write_text("\n".join(yaml_lines) + "\n")
    if layout == "roboflow":
        (root / "README.roboflow.txt").write_text("This dataset was exported via roboflow.com\n")
    return str(root)


def _yolo_paths(root: Path, layout: str, split: str, name: str) -> tuple[Path, Path]:
    """Where a YOLO layout keeps an image of ``split`` and its label file."""
    stem = os.path.splitext(name)[0]
    if layout == "ultralytics":
        folder = _YOLO_SPLITS[split]
        return root / "images" / folder / name, root / "labels" / folder / f"{stem}.txt"
    if layout == "roboflow":
        folder = _ROBOFLOW_SPLITS[split]
        return root / folder / "images" / name, root / folder / "labels" / f"{stem}.txt"
    darknet = root / f"obj_{_ROBOFLOW_SPLITS[split]}_data"
    return darknet / name, darknet / f"{stem}.txt"


def _yolo_line(class_id: int, row: Any, width: float, height: float, shapes: str) -> str:
    """One object's label line: its box (or polygon, or box and points) normalized to the displayed picture."""
    x0, y0, x1, y1 = row.xmin / width, row.ymin / height, row.xmax / width, row.ymax / height
    if shapes == "polygons":
        values = [x0, y0, (x0 + x1) / 2, y0, x1, y0, x1, y1, x0, y1]
    else:
        values = [(x0 + x1) / 2, (y0 + y1) / 2, x1 - x0, y1 - y0]
    if shapes == "pose":
        points = list(row.keypoints)
        for k in range(0, len(points), 3):
            values += [points[k] / width, points[k + 1] / height, points[k + 2]] if points[k + 2] else [0.0, 0.0, 0]
    return " ".join([str(class_id), *(repr(float(v)) if isinstance(v, float) else str(v) for v in values)])


# The keypoint scenes' points: each a coloured dot, so a point on its dot holds that colour; the skeleton joins the
# head to each hand (COCO's pairs, counted from 1).
KEYPOINT_COLORS = {"head": (230, 210, 30), "left_hand": (30, 190, 40), "right_hand": (30, 40, 220)}
KEYPOINT_SKELETON = [[1, 2], [1, 3]]
_DOT = 4  # a dot's half size, in pixels


def make_keypoint_scenes(directory: str, n: int = 12, size: tuple[int, int] = (96, 128), seed: int = 0,
                         orientations: tuple[int, ...] = SCENE_ORIENTATIONS) -> str:
    """Draw ``n`` JPEG scenes of 1-2 grey "person" boxes, each with a dot of its keypoint's colour
    (``KEYPOINT_COLORS``) at each of its 3 keypoints (one left unlabelled in some: v 0, not drawn), on noise, and
    write COCO person keypoints annotations of them; return the JSON file's path
    (``<directory>/annotations/person_keypoints_train.json``, images in ``<directory>/train``). Scenes cycle
    through ``orientations``, stored turned with the EXIF tag that shows them upright; boxes and points (x, y at
    the dot's centre) are pixels of the stored picture, with its stored width and height, as an annotation tool
    that ignores EXIF draws them.

    Examples:
        >>> path = make_keypoint_scenes(str(tmp_path / "people"), n=2)
        >>> os.path.basename(path)
        'person_keypoints_train.json'
    """

    rng = np.random.default_rng(seed)
    height, width = size
    images_dir = _coco_folders(directory)
    images: list[dict[str, Any]] = []
    annotations: list[dict[str, Any]] = []
    for i in range(n):
        picture = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
        for half in range(1 + i % 2):  # a person in the left half, and in some the right one
            left = half * width // 2
            x0, y0 = left + 4 + int(rng.integers(0, 6)), 4 + int(rng.integers(0, 6))
            x1, y1 = left + width // 2 - 4 - int(rng.integers(0, 6)), height - 4 - int(rng.integers(0, 6))
            picture[y0:y1, x0:x1] = (128, 128, 128)
            spots = [((x0 + x1) // 2, y0 + 3 * _DOT), (x0 + 2 * _DOT, (y0 + y1) // 2),
                     (x1 - 2 * _DOT, (y0 + y1) // 2 + int(rng.integers(-6, 7)))]
            orientation = orientations[i % len(orientations)]
            points: list[float] = []
            for k, ((x, y), color) in enumerate(zip(spots, KEYPOINT_COLORS.values())):
                if (i + k) % 5 == 4:  # not labelled: COCO's 0, 0, 0
                    points += [0, 0, 0]
                    continue
                picture[y - _DOT:y + _DOT, x - _DOT:x + _DOT] = color
                points += [*_stored_box((x, y, x, y), size, orientation)[:2], 2]
            sx0, sy0, sx1, sy1 = _stored_box((x0, y0, x1, y1), size, orientation)
            annotations.append({"id": len(annotations) + 1, "image_id": i + 1, "category_id": 1, "iscrowd": 0,
                                "bbox": [sx0, sy0, sx1 - sx0, sy1 - sy0], "area": float((x1 - x0) * (y1 - y0)),
                                "keypoints": points, "num_keypoints": sum(1 for v in points[2::3] if v)})
        name = f"scene-{i:04d}.jpg"
        orientation = orientations[i % len(orientations)]
        stored_image = _save_turned(Image.fromarray(picture), orientation, os.path.join(images_dir, name))
        images.append({"id": i + 1, "file_name": name, "width": stored_image.width, "height": stored_image.height})
    categories = [{"id": 1, "name": "person", "supercategory": "person", "keypoints": list(KEYPOINT_COLORS),
                   "skeleton": KEYPOINT_SKELETON}]
    return _write_coco(directory, "person_keypoints_train.json", images, annotations, categories)


def _stored_box(box: tuple[float, float, float, float], size: tuple[int, int], orientation: int) -> list[float]:
    """A box (x0, y0, x1, y1; a point is a box of no size) in pixels of a picture of ``size`` as displayed, in
    pixels of its stored pixels, which ``orientation`` turns to show it."""
    height, width = size
    stored_w, stored_h = (height, width) if orientation in (5, 6, 7, 8) else (width, height)
    turned = turn(np.array([box]) / [width, height, width, height], INVERSE[orientation])
    return (turned[0] * [stored_w, stored_h, stored_w, stored_h]).round(3).tolist()


# The instance scenes' segmentations: COCO polygons, COCO RLE (compressed text), uncompressed RLE (a crowd's).
INSTANCE_SEGMENTATIONS = ("polygons", "rle", "counts")


def make_instance_scenes(directory: str, n: int = 6, size: tuple[int, int] = (64, 80), seed: int = 0,
                         orientations: tuple[int, ...] = SCENE_ORIENTATIONS, segmentation: str = "polygons") -> str:
    """Draw ``n`` JPEG scenes of solid coloured shapes (labels ``OBJECT_COLORS``: each object's label is its
    colour) - a circle; a triangle and a circle apart; a circle with a triangle over a sliver of its edge - on a
    grey ground, and write COCO instances annotations of them with each object's ``segmentation`` as
    ``INSTANCE_SEGMENTATIONS`` says: ``"polygons"``, ``"rle"`` (compressed) or ``"counts"`` (uncompressed, the
    objects ``iscrowd``). Return the JSON file's path (``<directory>/annotations/instances_train.json``, images
    in ``<directory>/train``). Scenes cycle through ``orientations``, stored turned with the EXIF tag that shows
    them upright; boxes and segmentations are of the stored pixels (an annotation tool that ignores EXIF). Each
    object's pixels are painted where pycocotools draws its polygon, so its mask holds its colour; the same
    arguments give the same images and masks whatever ``segmentation``.

    Examples:
        >>> path = make_instance_scenes(str(tmp_path / "shapes"), n=2, segmentation="rle")
        >>> os.path.basename(path)
        'instances_train.json'
    """
    import warnings

    from pycocotools import mask as coco_mask

    warnings.filterwarnings("ignore", "__array__ implementation", DeprecationWarning)  # pycocotools' decode
    if segmentation not in INSTANCE_SEGMENTATIONS:
        raise ValueError(f"segmentation={segmentation!r}: one of {INSTANCE_SEGMENTATIONS}")
    rng = np.random.default_rng(seed)
    height, width = size
    images_dir = _coco_folders(directory)
    images: list[dict[str, Any]] = []
    annotations: list[dict[str, Any]] = []
    colors = list(OBJECT_COLORS)
    for i in range(n):
        orientation = orientations[i % len(orientations)]
        stored_h, stored_w = (width, height) if orientation in (5, 6, 7, 8) else (height, width)
        picture = (np.full((stored_h, stored_w, 3), 110) + rng.integers(-8, 9, (stored_h, stored_w, 3))
                   ).astype(np.uint8)
        for k, shown in enumerate(_instance_shapes(i, size, rng)):  # later shapes over earlier ones
            polygon = [v for x, y in shown for v in _stored_box((x, y, x, y), size, orientation)[:2]]
            rle = coco_mask.merge(coco_mask.frPyObjects([polygon], stored_h, stored_w))
            color = colors[(i + k) % len(colors)]
            picture[coco_mask.decode(rle).astype(bool)] = OBJECT_COLORS[color]
            x, y, w, h = (float(v) for v in coco_mask.toBbox(rle))
            if segmentation == "polygons":
                given: Any = [polygon]
            elif segmentation == "rle":
                given = {"size": [stored_h, stored_w], "counts": rle["counts"].decode("ascii")}
            else:
                given = {"size": [stored_h, stored_w], "counts": _runs(coco_mask.decode(rle))}
            annotations.append({"id": len(annotations) + 1, "image_id": i + 1, "category_id": colors.index(color) + 1,
                                "iscrowd": int(segmentation == "counts"), "bbox": [x, y, w, h],
                                "area": float(coco_mask.area(rle)), "segmentation": given})
        name = f"shapes-{i:04d}.jpg"
        exif = Image.Exif()
        if orientation != 1:
            exif[0x0112] = orientation
        Image.fromarray(picture).save(os.path.join(images_dir, name), quality=95, subsampling=0, exif=exif.tobytes())
        images.append({"id": i + 1, "file_name": name, "width": stored_w, "height": stored_h})
    categories = [{"id": j + 1, "name": color, "supercategory": "shape"} for j, color in enumerate(colors)]
    return _write_coco(directory, "instances_train.json", images, annotations, categories)


def _instance_shapes(i: int, size: tuple[int, int], rng: np.random.Generator) -> list[list[tuple[float, float]]]:
    """Scene ``i``'s shapes as polygons of the picture as displayed: a circle (24 points); a triangle and a
    circle apart; a circle with a triangle over a sliver of its right edge."""
    height, width = size
    radius = min(height, width) / 5

    def circle(cx: float, cy: float) -> list[tuple[float, float]]:
        return [(cx + radius * np.cos(a), cy + radius * np.sin(a)) for a in np.linspace(0, 2 * np.pi, 24,
                                                                                         endpoint=False)]

    def triangle(x: float, y: float) -> list[tuple[float, float]]:  # its left corner at (x, y)
        return [(x, y), (x + 1.6 * radius, y - radius), (x + 1.6 * radius, y + radius)]

    jitter = float(rng.uniform(-2, 2))
    cy = height / 2 + jitter
    if i % 3 == 0:
        return [circle(width / 2 + jitter, cy)]
    if i % 3 == 1:
        return [triangle(width * 0.08, cy), circle(width * 0.7, cy)]
    cx = width * 0.4
    return [circle(cx, cy), triangle(cx + radius - 2, cy)]  # the triangle's corner 2 px into the circle


def _runs(mask: np.ndarray) -> list[int]:
    """COCO's uncompressed RLE counts of a 0/1 mask: run lengths in column-major order, from a run of 0s."""
    flat = mask.ravel(order="F")
    changes = np.flatnonzero(np.diff(flat)) + 1
    bounds = np.concatenate([[0], changes, [flat.size]])
    runs = np.diff(bounds).tolist()
    return ([0] + runs) if flat[0] else runs


def _coco_folders(directory: str) -> str:
    """A COCO dataset's folders under ``directory`` made: ``train/`` for its images (returned), ``annotations/``."""
    os.makedirs(os.path.join(directory, "annotations"), exist_ok=True)
    images_dir = os.path.join(directory, "train")
    os.makedirs(images_dir, exist_ok=True)
    return images_dir


def _write_coco(directory: str, name: str, images: list[Any], annotations: list[Any], categories: list[Any]) -> str:
    """The COCO file ``annotations/<name>`` under ``directory``, written; its path."""
    import json

    path = os.path.join(directory, "annotations", name)
    with open(path, "w") as f:
        json.dump({"images": images, "annotations": annotations, "categories": categories}, f)
    return path


SEGMENT_CLASSES = ("background", *OBJECT_COLORS)  # a segmentation scene's class ids: 0 background, then colours


def make_segmentation_scenes(directory: str, n: int = 24, size: tuple[int, int] = (96, 128), seed: int = 0,
                             orientations: tuple[int, ...] = SCENE_ORIENTATIONS) -> pd.DataFrame:
    """Draw ``n`` JPEG scenes of solid rectangles and ellipses (classes ``SEGMENT_CLASSES``) on noise, each with
    its mask of class ids, under ``directory``; return ``split, image_uri, mask_uri, orientation``. Photos are
    stored turned with an EXIF orientation (cycling through ``orientations``) while their masks are upright,
    as a labelling tool saves them; masks come in pairs of grey PNGs and of VOC-style palette PNGs, every
    other one with a 255 border (VOC's "ignore") around each region.

    Examples:
        >>> scenes = make_segmentation_scenes(str(tmp_path / "seg"), n=2)
        >>> list(scenes.columns)
        ['split', 'image_uri', 'mask_uri', 'orientation']
    """
    rng = np.random.default_rng(seed)
    height, width = size
    os.makedirs(directory, exist_ok=True)
    rows = []
    for i in range(n):
        split = "TRAIN" if i % 10 < 8 else ("VALIDATION" if i % 10 == 8 else "TEST")
        picture = Image.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8))
        mask = Image.new("L", (width, height), 0)
        draw_picture, draw_mask = ImageDraw.Draw(picture), ImageDraw.Draw(mask)
        for cell in rng.permutation(6)[: 2 + i % 3]:
            top, left = (cell // 3) * height // 2, (cell % 3) * width // 3
            box = (left + 3, top + 3, left + width // 3 - 4, top + height // 2 - 4)
            class_id = int(rng.integers(1, len(SEGMENT_CLASSES)))
            shape = draw_picture.ellipse if cell % 2 else draw_picture.rectangle
            shape(box, fill=OBJECT_COLORS[SEGMENT_CLASSES[class_id]])
            (draw_mask.ellipse if cell % 2 else draw_mask.rectangle)(
                box, fill=class_id, outline=255 if i % 2 else class_id)
        orientation = orientations[i % len(orientations)]
        image_path = os.path.join(directory, f"scene-{i:04d}.jpg")
        _save_turned(picture, orientation, image_path)
        mask_path = os.path.join(directory, f"scene-{i:04d}-mask.png")
        if (i // 2) % 2:  # VOC's SegmentationClass: a palette PNG whose indices are the class ids
            palette = mask.convert("P")
            palette.putpalette([v for c in range(256) for v in _voc_color(c)])
            palette.save(mask_path)
        else:
            mask.save(mask_path)
        rows.append((split, image_path, mask_path, orientation))
    return pd.DataFrame(rows, columns=["split", "image_uri", "mask_uri", "orientation"])


def _voc_color(class_id: int) -> tuple[int, int, int]:
    """Pascal VOC's palette colour of a class id (its bit-interleaved colour map)."""
    r = g = b = 0
    for shift in range(8):
        r |= ((class_id >> 0) & 1) << (7 - shift)
        g |= ((class_id >> 1) & 1) << (7 - shift)
        b |= ((class_id >> 2) & 1) << (7 - shift)
        class_id >>= 3
    return r, g, b
