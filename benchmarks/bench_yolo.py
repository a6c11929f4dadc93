"""YOLO: converting a YOLO dataset (data.yaml, images/<split>/, a label file per image) against
the same boxes given as a long-form CSV of normalized edges naming the same images, with the defaults; and what
bounds it: the same table converted once read (the work after reading is the CSV's), and the label files only
opened and read."""

from __future__ import annotations

import argparse
import os
import shutil
from pathlib import Path

import pandas as pd

from benchmarks.bench_detection import CLASSES, box_table
from benchmarks.common import fresh, interleaved_best, print_table, work_dir
from tfrecorder.write.sources.yolo_labels import read_local

WIDTH, HEIGHT = 500, 375  # box_table's scenes
FOLDERS = {"TRAIN": "train", "VALIDATION": "val", "TEST": "test"}


def yolo_folder(table: pd.DataFrame, root: Path) -> pd.DataFrame:
    """``table``'s images (hard links, else copies: inside the root) and boxes as an Ultralytics YOLO dataset
    under ``root``; returns the same boxes as the long form of normalized edges naming those images, which
    is what ``read_annotations`` gives for the folder."""
    rows = []
    for uri, boxes in table.groupby("image_uri", sort=False):
        folder = FOLDERS[boxes["split"].iloc[0]]
        image = root / "images" / folder / os.path.basename(uri)
        label = root / "labels" / folder / f"{image.stem}.txt"
        image.parent.mkdir(parents=True, exist_ok=True)
        label.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(uri, image)
        except OSError:  # another file system
            shutil.copyfile(uri, image)
        lines = []
        for box in boxes.itertuples():
            x0, y0, x1, y1 = box.xmin / WIDTH, box.ymin / HEIGHT, box.xmax / WIDTH, box.ymax / HEIGHT
            lines.append(f"{CLASSES.index(box.label)} {(x0 + x1) / 2!r} {(y0 + y1) / 2!r} {x1 - x0!r} {y1 - y0!r}")
            rows.append((box.split, str(image), box.label, x0, y0, x1, y1))
        label.write_text("\n".join(lines) + "\n")
    names = "".join(f"  {i}: {name}\n" for i, name in enumerate(CLASSES))
    (root / "data.yaml").write_text(f"path: .\ntrain: images/train\nval: images/val\ntest: images/test\n"
                                    f"names:\n{names}")
    return pd.DataFrame(rows, columns=["split", "image_uri", "label", "xmin", "ymin", "xmax", "ymax"])


def _records(folder: Path) -> pd.DataFrame:
    """A converted folder's box rows, by label name, in one order."""
    import tfrecorder

    rows = tfrecorder.read_tfr(str(folder))[["split", "image_uri", "label", "xmin", "ymin", "xmax", "ymax"]]
    return rows.sort_values(list(rows.columns)).reset_index(drop=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--images", type=int, default=2000, help="scene JPEGs (500x375), 1-5 boxes each")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    import tfrecorder

    work = work_dir("bench-yolo-")
    table = box_table(args.images)
    long_form = yolo_folder(table, work / "yolo")
    csv = work / "boxes.csv"
    long_form.to_csv(csv, index=False)
    warm = long_form[long_form["image_uri"].isin(long_form["image_uri"].unique()[:20])]
    tfrecorder.convert(warm, str(work / "warm"), progress=False)

    outputs = {"csv": work / "out-csv", "yolo": work / "out-yolo", "read": work / "out-read"}
    frame = tfrecorder.read_annotations(str(work / "yolo"))
    label_files = sorted((work / "yolo" / "labels").rglob("*.txt"))
    cases = {
        "long-form CSV of the same boxes (normalized edges)":
            lambda: tfrecorder.convert(str(csv), str(fresh(outputs["csv"])), progress=False),
        "YOLO folder (data.yaml, a label file per image)":
            lambda: tfrecorder.convert(str(work / "yolo"), str(fresh(outputs["yolo"])), progress=False),
        "read_annotations of the YOLO folder alone": lambda: tfrecorder.read_annotations(str(work / "yolo")),
        "bound: read_annotations' table converted (already read)":
            lambda: tfrecorder.convert(frame, str(fresh(outputs["read"])), progress=False),
        "bound: the label files only opened and read": lambda: [read_local(str(f)) for f in label_files],
    }
    seconds = interleaved_best(cases, args.runs)
    base = seconds["long-form CSV of the same boxes (normalized edges)"]
    images = table["image_uri"].nunique()
    rows = [(name, f"{s:.2f} s", f"{images / s:,.0f} images/s", f"{base / s:.2f}x") for name, s in seconds.items()]
    print_table(f"YOLO: {images:,} JPEGs of 500x375, {len(table):,} boxes, defaults; best of {args.runs} "
                f"interleaved runs (ratio: the CSV's time over the case's)", rows,
                ("case", "seconds", "throughput", "vs the CSV"))
    same = _records(outputs["csv"]).equals(_records(outputs["yolo"]))
    floor = seconds["bound: read_annotations' table converted (already read)"] + seconds[
        "bound: the label files only opened and read"]
    print(f"\nthe YOLO folder's records are the CSV's (label names, boxes, images; its label ids are data.yaml's "
          f"order, the CSV's sorted): {same}; the most a YOLO folder can give "
          f"(the table once read converted, plus its label files' reads alone): {base / floor:.2f}x the CSV")


if __name__ == "__main__":
    main()
