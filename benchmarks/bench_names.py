"""Many class names: ``read_annotations`` of a YOLO ``data.yaml`` and ``info`` over others' Object Detection records
with a ``label_map.pbtxt``, with 4,000, 40,000 and 400,000 names (a name in every 10 given twice, so that two ids
of one name are told apart as the readers do). Seconds for each; the time should grow with the names, not with
their square (40,000 names took 35 s and 97 s when each name was checked against every name before it).

``python -m benchmarks.bench_names`` (``--names 4000 40000`` for fewer cases).
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

import yaml

import tfrecorder
from benchmarks.common import print_table, work_dir
from tfrecorder.sample_data import make_detection_scenes, write_yolo

DATUMARO = Path(__file__).resolve().parents[1] / "tests" / "data" / "datumaro_tf_detection_api"


def _names(count: int) -> list[str]:
    return [f"class{i - i % 10 if i % 10 == 5 else i}" for i in range(count)]  # class0 twice, class10 twice, ...


def yolo_seconds(folder: Path, count: int) -> float:
    """``read_annotations`` of a YOLO dataset of 6 images whose data.yaml names ``count`` classes."""
    root = folder / f"yolo-{count}"
    shutil.rmtree(root, ignore_errors=True)
    write_yolo(make_detection_scenes(str(folder / "scenes"), n=6), root)
    config = yaml.safe_load((root / "data.yaml").read_text())
    names = config["names"]  # the scenes' classes first
    names = list(names.values()) if isinstance(names, dict) else list(names)
    config["names"] = names + _names(count)[len(names):]
    (root / "data.yaml").write_text(yaml.safe_dump(config))
    start = time.perf_counter()
    tfrecorder.read_annotations(str(root))
    return time.perf_counter() - start


def label_map_seconds(folder: Path, count: int) -> float:
    """``info`` over a Datumaro export whose label_map.pbtxt names ``count`` classes."""
    export = folder / f"export-{count}"
    shutil.rmtree(export, ignore_errors=True)
    shutil.copytree(DATUMARO, export)
    (export / "label_map.pbtxt").write_text("".join(f"item {{\n  id: {i + 1}\n  name: '{name}'\n}}\n"
                                                   for i, name in enumerate(_names(count))))
    start = time.perf_counter()
    tfrecorder.info(str(export))
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--names", type=int, nargs="+", default=[4_000, 40_000, 400_000])
    args = parser.parse_args(argv)
    folder = work_dir("names")
    rows = []
    for count in args.names:
        rows.append((f"{count:,} names", f"{yolo_seconds(folder, count):.2f} s (data.yaml)",
                     f"{label_map_seconds(folder, count):.2f} s (label map, info)", ""))
    print_table("Class names: read_annotations of a data.yaml, info over a label map", rows,
                header=("case", "YOLO", "others' OD records", ""))


if __name__ == "__main__":
    main()
