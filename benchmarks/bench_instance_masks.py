"""Instance masks: writing a COCO instances file (scene JPEGs of 500x375, about 4 polygon objects each) against
the Object Detection API's ``create_coco_tf_record.py`` loop as it is written (pycocotools draws each object's
mask, Pillow encodes a PNG per object at its default level, a ``tf.train.Example`` per image, one
TFRecordWriter), ours at the defaults and with ``validate_images="header"``; and the masks' drawing and PNG
encoding alone, one core, at Pillow's default zlib level and at ours (``instance_masks.PNG_LEVEL``): the work
both writers must do, the bound on what the ratio can reach on one core."""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import random
import time
from pathlib import Path

import numpy as np
from PIL import Image

from benchmarks.bench_detection import CLASSES
from benchmarks.common import (
    bytes_feature,
    float_feature,
    fresh,
    int64_feature,
    interleaved_best,
    jpeg_table,
    print_table,
    work_dir,
)

WIDTH, HEIGHT = 500, 375  # jpeg_table's scenes


def coco_file(n: int, root: Path) -> Path:
    """``n`` scene JPEGs (hard links, else copies, in ``root/train2017``) and a COCO instances file of them
    (``root/annotations/instances_train2017.json``): 2-6 objects an image (about 4), each a polygon of 6-14
    points around a centre, inside the image, its box the polygon's extent."""
    import shutil

    images = jpeg_table(n)
    folder, notes = root / "train2017", root / "annotations"
    folder.mkdir(parents=True, exist_ok=True)
    notes.mkdir(parents=True, exist_ok=True)
    rng = random.Random(0)
    entries, annotations = [], []
    for i, uri in enumerate(images["image_uri"]):
        name = os.path.basename(uri)
        try:
            os.link(uri, folder / name)
        except OSError:  # another file system
            shutil.copyfile(uri, folder / name)
        entries.append({"id": i + 1, "file_name": name, "width": WIDTH, "height": HEIGHT})
        for _ in range(rng.randint(2, 6)):
            cx, cy, radius = rng.uniform(60, WIDTH - 60), rng.uniform(60, HEIGHT - 60), rng.uniform(15, 58)
            points = []
            for k in range(rng.randint(6, 14)):
                angle, reach = 2 * np.pi * k / 14 + rng.uniform(0, 0.3), radius * rng.uniform(0.5, 1.0)
                points += [round(cx + reach * np.cos(angle), 2), round(cy + reach * np.sin(angle), 2)]
            xs, ys = points[0::2], points[1::2]
            box = [min(xs), min(ys), max(xs) - min(xs), max(ys) - min(ys)]
            annotations.append({"id": len(annotations) + 1, "image_id": i + 1, "category_id": rng.randint(1, 5),
                                "iscrowd": 0, "bbox": box, "area": box[2] * box[3], "segmentation": [points]})
    path = notes / "instances_train2017.json"
    path.write_text(json.dumps({"images": entries, "annotations": annotations,
                                "categories": [{"id": k + 1, "name": c} for k, c in enumerate(CLASSES)]}))
    return path


# --- the baseline: create_coco_tf_record.py's create_tf_example, include_masks=True -----------------------------

def _create_tf_example(image, annotations_list, image_dir, category_index, tf, mask):
    image_height = image["height"]
    image_width = image["width"]
    filename = image["file_name"]
    image_id = image["id"]

    full_path = os.path.join(image_dir, filename)
    with tf.io.gfile.GFile(full_path, "rb") as fid:
        encoded_jpg = fid.read()
    encoded_jpg_io = io.BytesIO(encoded_jpg)
    Image.open(encoded_jpg_io)
    key = hashlib.sha256(encoded_jpg).hexdigest()

    xmin, xmax, ymin, ymax, is_crowd, category_names, category_ids, area, encoded_mask_png = ([] for _ in range(9))
    num_annotations_skipped = 0
    for object_annotations in annotations_list:
        (x, y, width, height) = tuple(object_annotations["bbox"])
        if width <= 0 or height <= 0:
            num_annotations_skipped += 1
            continue
        if x + width > image_width or y + height > image_height:
            num_annotations_skipped += 1
            continue
        category_id = int(object_annotations["category_id"])
        xmin.append(float(x) / image_width)
        xmax.append(float(x + width) / image_width)
        ymin.append(float(y) / image_height)
        ymax.append(float(y + height) / image_height)
        is_crowd.append(object_annotations["iscrowd"])
        category_ids.append(category_id)
        category_names.append(category_index[category_id]["name"].encode("utf8"))
        area.append(object_annotations["area"])
        run_len_encoding = mask.frPyObjects(object_annotations["segmentation"], image_height, image_width)
        binary_mask = mask.decode(run_len_encoding)
        if not object_annotations["iscrowd"]:
            binary_mask = np.amax(binary_mask, axis=2)
        pil_image = Image.fromarray(binary_mask)
        output_io = io.BytesIO()
        pil_image.save(output_io, format="PNG")
        encoded_mask_png.append(output_io.getvalue())

    b, f, i = bytes_feature, float_feature, int64_feature  # dataset_util's, as the script calls them

    feature_dict = {
        "image/height": i([image_height]), "image/width": i([image_width]),
        "image/filename": b([filename.encode("utf8")]), "image/source_id": b([str(image_id).encode("utf8")]),
        "image/key/sha256": b([key.encode("utf8")]), "image/encoded": b([encoded_jpg]),
        "image/format": b([b"jpeg"]),
        "image/object/bbox/xmin": f(xmin), "image/object/bbox/xmax": f(xmax),
        "image/object/bbox/ymin": f(ymin), "image/object/bbox/ymax": f(ymax),
        "image/object/class/text": b(category_names), "image/object/is_crowd": i(is_crowd),
        "image/object/area": f(area), "image/object/mask": b(encoded_mask_png),
    }
    example = tf.train.Example(features=tf.train.Features(feature=feature_dict))
    return key, example, num_annotations_skipped


def create_coco_tf_record(annotations_file: Path, image_dir: Path, out: Path) -> None:
    """_create_tf_record_from_coco_annotations: the JSON loaded, annotations grouped by image, a
    create_tf_example per image, one writer (the script shards its output; one file here, as the issue says)."""
    import tensorflow as tf
    from pycocotools import mask

    with tf.io.gfile.GFile(str(annotations_file), "r") as fid:
        groundtruth_data = json.load(fid)
    images = groundtruth_data["images"]
    category_index = {c["id"]: c for c in groundtruth_data["categories"]}
    annotations_index: dict = {}
    for annotation in groundtruth_data["annotations"]:
        annotations_index.setdefault(annotation["image_id"], []).append(annotation)
    out.mkdir(parents=True, exist_ok=True)
    with tf.io.TFRecordWriter(str(out / "coco_train.record")) as writer:
        for image in images:
            _, tf_example, _ = _create_tf_example(image, annotations_index.get(image["id"], []), str(image_dir),
                                                  category_index, tf, mask)
            writer.write(tf_example.SerializeToString())


def masks_alone(annotations_file: Path, level: int | None) -> float:
    """Seconds to draw every object's mask (pycocotools) and encode it as a PNG at zlib ``level`` (None: Pillow's
    default) on one core: the part of either writer no choice of ours removes."""
    from pycocotools import mask

    objects = json.loads(annotations_file.read_text())["annotations"]
    options = {} if level is None else {"compress_level": level}
    start = time.perf_counter()
    for annotation in objects:
        drawn = mask.decode(mask.merge(mask.frPyObjects(annotation["segmentation"], HEIGHT, WIDTH)))
        Image.fromarray(drawn, "L").save(io.BytesIO(), "PNG", **options)
    return time.perf_counter() - start


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--images", type=int, default=1000, help="scene JPEGs (500x375), about 4 objects each")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    import warnings

    import tfrecorder
    from tfrecorder.write.record.instance_masks import PNG_LEVEL

    warnings.filterwarnings("ignore", "__array__ implementation", DeprecationWarning)  # pycocotools' decode
    work = work_dir("bench-instance-masks-")
    coco = coco_file(args.images, work / "coco")
    objects = len(json.loads(coco.read_text())["annotations"])
    create_coco_tf_record(coco, work / "coco" / "train2017", work / "warm-loop")
    tfrecorder.convert(str(coco), str(work / "warm"), progress=False)

    baseline = "create_coco_tf_record.py loop (include_masks: PNG per object at Pillow's default level)"
    outputs = {"loop": work / "loop", "ours": work / "ours", "header": work / "header"}
    write = interleaved_best({
        baseline: lambda: create_coco_tf_record(coco, work / "coco" / "train2017", fresh(outputs["loop"])),
        "to_tfr (defaults: every image decoded, every mask drawn and checked)":
            lambda: tfrecorder.convert(str(coco), str(fresh(outputs["ours"])), progress=False),
        "to_tfr, validate_images='header'":
            lambda: tfrecorder.convert(str(coco), str(fresh(outputs["header"])), validate_images="header",
                                       progress=False),
    }, args.runs)
    bounds = {"the masks alone, one core: drawn and PNG-encoded at Pillow's default level":
              min(masks_alone(coco, None) for _ in range(args.runs)),
              f"the masks alone, one core: drawn and PNG-encoded at zlib level {PNG_LEVEL} (ours)":
              min(masks_alone(coco, PNG_LEVEL) for _ in range(args.runs))}
    base = write[baseline]
    rows = [(name, f"{seconds:.2f} s", f"{args.images / seconds:,.0f} images/s", f"{base / seconds:.2f}x")
            for name, seconds in {**write, **bounds}.items()]
    print_table(f"Instance masks: {args.images:,} JPEGs of 500x375, {objects:,} polygon objects; best of "
                f"{args.runs} interleaved runs (ratio: the loop's time over the case's)", rows,
                ("case", "seconds", "throughput", "vs the loop"))
    sizes = {name: sum(f.stat().st_size for f in path.glob("*.tfrecord")) + sum(
        f.stat().st_size for f in path.glob("*.record")) for name, path in outputs.items()}
    print(f"\nbytes written: {', '.join(f'{k} {v / 2**20:.1f} MiB' for k, v in sizes.items())}")
    counts = tfrecorder.read_manifest(str(outputs["ours"])).objects["instance_masks"]["counts"]
    print(f"objects with a mask in our records: {sum(counts.values()):,} of {objects:,}")


if __name__ == "__main__":
    main()
