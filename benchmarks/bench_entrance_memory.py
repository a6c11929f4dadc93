"""Memory at the entrance: peak RSS of read_annotations on a COCO instances JSON, against the file's size.

The file is made like COCO's own: most of its bytes are the annotations' ``segmentation`` polygons (long lists
of 2-decimal coordinates), beside images with their URLs and dates and 80 categories; or, with ``--shape
boxes``, as Roboflow and CVAT export boxes: ``"segmentation": []``, ~11 boxes an image (40 MiB: ~27,000 images,
~300,000 annotations). The read runs in a process of its own; its peak (VmHWM) is taken after the imports (and
a read of a tiny file, for what a first read imports) and again after the read, so the increase is the read's
alone. ``python -m benchmarks.bench_entrance_memory --mib 150``, ``... --shape boxes --mib 40``.
"""

from __future__ import annotations

import argparse
import json
import os
import random

from benchmarks.common import peak_rss_mib, print_table, run_child, work_dir

ANNOTATION_BYTES = 545  # COCO train2017: 448 MB for 860k annotations, polygons the bulk of each
BOX_BYTES = 133  # a Roboflow/CVAT export of boxes: 40 MB for 300k annotations and their 27k images
SHAPES = ("polygons", "boxes")


def coco_json(path: str, mib: float, seed: int = 0, shape: str = "polygons") -> int:
    """Write a COCO-like instances JSON of about ``mib`` MiB at ``path``; returns its size in bytes."""
    rng = random.Random(seed)
    boxes = shape == "boxes"
    separators = (",", ":") if boxes else None  # Roboflow's export is compact
    annotations_wanted = int(mib * 2**20 / (BOX_BYTES if boxes else ANNOTATION_BYTES))
    images_wanted = max(1, annotations_wanted // (11 if boxes else 7))
    categories = [{"supercategory": f"group{i // 10}", "id": i + 1, "name": f"class{i}"} for i in range(80)]
    with open(path, "w") as f:
        f.write('{"info": {"description": "bench", "year": 2017}, "licenses": [{"url": "http://x", "id": 1, '
                '"name": "by"}], "images": [')
        for i in range(images_wanted):
            image = {"license": 1, "file_name": f"{i:012d}.jpg", "coco_url": f"http://images.example/{i:012d}.jpg",
                     "height": 480, "width": 640, "date_captured": "2013-11-14 16:28:13",
                     "flickr_url": f"http://farm.example/{i}.jpg", "id": i + 1}
            f.write(("," if i else "") + json.dumps(image, separators=separators))
        f.write('], "annotations": [')
        for i in range(annotations_wanted):
            x, y = rng.uniform(0, 500), rng.uniform(0, 350)
            if boxes:  # Roboflow's key order and numbers
                annotation = {"id": i, "image_id": i % images_wanted + 1, "category_id": rng.randrange(80) + 1,
                              "bbox": [round(x), round(y), round(rng.uniform(5, 140), 1), round(rng.uniform(5, 130),
                                                                                                 1)],
                              "area": round(rng.uniform(25, 18200), 2), "segmentation": [], "iscrowd": 0}
                f.write(("," if i else "") + json.dumps(annotation, separators=separators))
                continue
            polygon = [round(v, 2) for _ in range(rng.randrange(12, 36))
                       for v in (x + rng.uniform(0, 140), y + rng.uniform(0, 130))]
            annotation = {"segmentation": [polygon], "area": round(rng.uniform(10, 9000), 4), "iscrowd": 0,
                          "image_id": i % images_wanted + 1, "bbox": [round(x, 2), round(y, 2), 140.0, 130.0],
                          "category_id": rng.randrange(80) + 1, "id": i + 1}
            f.write(("," if i else "") + json.dumps(annotation))
        f.write('], "categories": ' + json.dumps(categories) + "}")
    return os.path.getsize(path)


def _child(path: str, shape: str) -> None:
    import tfrecorder.write.sources.annotations as annotations

    tiny = f"{path}.tiny.json"
    coco_json(tiny, 0.01, shape=shape)
    annotations.read_annotations(tiny)  # what a first read imports is not the read's
    before = peak_rss_mib()
    boxes = annotations.read_annotations(path)
    print(f"{peak_rss_mib()} {before} {len(boxes)}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--mib", type=float, default=150.0, help="the COCO file's size")
    parser.add_argument("--shape", choices=SHAPES, default="polygons", help="what its annotations hold")
    args = parser.parse_args(argv)
    if args.child:
        return _child(args.child, args.shape)
    path = str(work_dir("bench-entrance-") / "instances_train2017.json")
    size = coco_json(path, args.mib, shape=args.shape) / 2**20
    peak, before, rows = map(float, run_child("benchmarks.bench_entrance_memory", path, "--shape",
                                              args.shape).split())
    print_table("COCO read_annotations memory (its own process)", [
        (f"COCO JSON {size:,.0f} MiB of {args.shape}, {rows:,.0f} boxes", f"peak RSS {peak:,.0f} MiB",
         f"before the read {before:,.0f} MiB", f"+{peak - before:,.0f} MiB = {(peak - before) / size:.2f}x the file "
                                             f"({peak / size:.2f}x in all)")],
        header=("case", "peak", "baseline", "read's increase / file size"))


if __name__ == "__main__":
    main()
