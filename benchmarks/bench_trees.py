"""Two versions of tfrecorder side by side: this checkout against another one (a worktree of an earlier
commit), on the tables a refactoring must keep as they were - the same bytes written, and no slower.

    git worktree add /tmp/old <commit>
    python -m benchmarks.bench_trees --old /tmp/old
    python -m benchmarks.bench_trees --old /tmp/old --bytes-only   # the files only, no timing rounds

Each version converts in its own processes, the versions taking turns (``--rounds``), each case the best of
``--runs``: 2,000 JPEGs with header and with full checks, a 100,000-row DataFrame, a 1,000-row CSV, 300
detection scenes with the defaults, and reading a segmentation dataset with load_dataset. Then each converts
the same set of tables (images in every storage mode, tabular with float32 and float64 columns, a CSV, a
Parquet glob, detection in both record layouts and resized, segmentation in both layouts, multi-label lists
with a nullable column, the DirectRunner) and every file written is compared byte for byte (dataset.json but
for what ``comparable`` leaves out; not .conversion.json).
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import subprocess
import sys
from pathlib import Path

from benchmarks.common import print_table, work_dir

ROOT = Path(__file__).resolve().parents[1]

# Runs in a child that imports the version under test, then this checkout's benchmarks and tests for the tables.
CHILD = r"""
import json, os, shutil, sys, time
import tfrecorder  # the version under test (PYTHONPATH); its modules come from its own folder from now on
sys.path.insert(0, os.environ["BENCH_ROOT"])  # the tables (benchmarks/data's JPEGs) from this checkout
import numpy as np, pandas as pd
from benchmarks.common import jpeg_table
from tests.conftest import image_table_at

mode, work, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
data = os.path.join(work, "data")
os.makedirs(data, exist_ok=True)
rng = np.random.default_rng(1)
if mode == "times":
    n = 100_000
    frame = pd.DataFrame({"split": rng.choice(["TRAIN", "VALIDATION", "TEST"], n), "label": rng.choice(list("abc"), n),
                          "x": rng.normal(size=n).astype(np.float32), "k": rng.integers(0, 1000, n),
                          "t": [f"w{i}" for i in range(n)], "l": [[1.0, 2.0]] * n})
    small = os.path.join(data, "small.csv")
    frame.iloc[:1000].drop(columns="l").to_csv(small, index=False)
    from tfrecorder import sample_data
    jpegs = jpeg_table(2000)
    scenes = sample_data.make_detection_scenes(os.path.join(data, "scenes"), n=300)
    seg = sample_data.make_segmentation_scenes(os.path.join(data, "seg"), n=200)[["split", "image_uri", "mask_uri"]]
    seg_out = os.path.join(work, "seg_out")  # written once, untimed: the case reads it
    shutil.rmtree(seg_out, ignore_errors=True)
    tfrecorder.convert(seg, seg_out, progress=False, mask_classes=list(sample_data.SEGMENT_CLASSES))
    out, times = os.path.join(work, "out"), {}

    def converting(source, **options):
        def run():
            shutil.rmtree(out, ignore_errors=True)
            tfrecorder.convert(source, out, progress=False, **options)
        return run

    def reading_segmentation():
        ds = tfrecorder.load_dataset(seg_out, "TRAIN", batch_size=16, image_size=(128, 128), as_supervised=True)
        for _ in ds:
            pass

    # The defaults a user gets but where a case says otherwise (the issue's list: header and full checks, a
    # DataFrame, detection defaults, a segmentation read).
    cases = {"2,000 JPEGs, header checks": converting(jpegs, validate_images="header"),
             "2,000 JPEGs, full checks (the default)": converting(jpegs),
             "100,000-row DataFrame": converting(frame), "1,000-row CSV": converting(small),
             "300 detection scenes, defaults": converting(scenes[["split", "image_uri", "label", "xmin", "ymin",
                                                                  "xmax", "ymax"]]),
             "segmentation read (200 scenes, load_dataset 128x128)": reading_segmentation}
    for name, run in cases.items():
        best = []
        for _ in range(runs):
            start = time.perf_counter()
            run()
            best.append(time.perf_counter() - start)
        times[name] = min(best)
    print(json.dumps(times))
else:
    out = sys.argv[4]
    images = image_table_at(__import__("pathlib").Path(data))
    tab = pd.DataFrame({
        "split": ["TRAIN"] * 6 + ["VALIDATION", "TEST"], "label": [0, 1, 2, 1, 0, 2, 1, 0],
        "x": [0.5, 1.5, np.nan, 3.0, 4.25, -1.0, 2.0, 7.5],
        "n": pd.array([1, None, 3, 4, 5, 6, 7, 2**40], dtype="Int64"),
        "flag": [True, False, True, True, False, False, True, False], "text": ["a", "b", None, "d", "é", "", "g", "h"],
        "scores": [[1.0, 2.0], [], [3.5], [0.0, 1.0, 2.0], [], [1.0], [2.0], [3.0]],
        "when": pd.date_range("2020-01-01", periods=8, freq="h"), "raw": [bytes([i]) for i in range(8)],
        "stamp": [1.6e9 + i * 0.001 for i in range(8)]})
    big = pd.DataFrame({"split": rng.choice(["TRAIN", "VALIDATION", "TEST", "UNASSIGNED"], 1000),
                        "label": rng.choice(["a", "b", "c"], 1000), "v": rng.normal(size=1000),
                        "k": rng.integers(0, 9, 1000)})
    big.loc[big.split != "TRAIN", "label"] = "a"
    big.to_csv(os.path.join(data, "big.csv"), index=False)
    for i in range(3):
        big.iloc[i * 300:(i + 1) * 300].to_parquet(os.path.join(data, f"part{i}.parquet"))
    # Detection and segmentation (tfrecorder.sample_data is in both trees): EXIF-turned scenes, text labels, an
    # extra per-object float column and a per-object int column with a missing value; both record layouts.
    from tfrecorder import sample_data, types
    scenes = sample_data.make_detection_scenes(os.path.join(data, "scenes"), n=24)
    det = scenes[["split", "image_uri", "label", "xmin", "ymin", "xmax", "ymax"]].assign(
        score=np.linspace(0.05, 0.95, len(scenes)),
        difficult=pd.array([None if i % 7 == 3 else i % 2 for i in range(len(scenes))], dtype="Int64"))
    seg = sample_data.make_segmentation_scenes(os.path.join(data, "seg"), n=12)[["split", "image_uri", "mask_uri"]]
    masks = dict(mask_classes=list(sample_data.SEGMENT_CLASSES))
    od = dict(record_format="tf_object_detection")
    multilabel = (pd.DataFrame({
        "split": ["TRAIN"] * 6 + ["VALIDATION", "TEST"],
        "label": [["a"], ["a", "b"], ["b"], ["c", "a"], ["c"], ["b", "c"], ["a"], ["c", "b", "a"]],
        "ids": [[1, 2], [3], [], [4, 5, 6], [7], [2**40], [9], [10, 11]],
        "count": pd.array([1, None, 3, 4, None, 6, 7, 8], dtype="Int64")}),
        dict(schema={"split": types.SplitKey, "label": types.StringListLabel, "ids": types.IntegerListInput,
                     "count": types.IntegerInput}))
    cases = {
        "images": (images, {}), "images_gzip": (images, dict(compression="gzip", num_shards=2)),
        "images_jpeg_pad": (images, dict(image_format="jpeg", image_size=(16, 16), resize_mode="pad")),
        "images_png_crop": (images, dict(image_format="png", image_size=(12, 20), resize_mode="crop")),
        "images_raw": (images, dict(image_format="raw", image_size=(10, 10))),
        "images_header": (images, dict(validate_images="header", num_shards=3)),
        "tabular": (tab, {}), "tabular_f32": (tab, dict(float_precision="float32")),
        "tabular_f64": (tab, dict(float_precision="float64")),
        "csv": (os.path.join(data, "big.csv"), {}),
        "parquet_glob": (os.path.join(data, "part*.parquet"), dict(num_shards=2)),
        "images_direct": (images, dict(runner="DirectRunner", num_shards=2)),
        "csv_direct": (os.path.join(data, "big.csv"), dict(runner="DirectRunner")),
        "det": (det, {}), "det_od": (det, od),
        "det_pad": (det, dict(image_format="jpeg", image_size=(64, 64), resize_mode="pad")),
        "seg": (seg, masks), "seg_od": (seg, {**masks, **od}), "multilabel": multilabel,
        "det_direct": (det, dict(runner="DirectRunner", num_shards=2)),
    }
    shutil.rmtree(out, ignore_errors=True)
    for name, (source, options) in cases.items():
        tfrecorder.convert(source, os.path.join(out, name), **({"progress": False} if "runner" not in options else {}),
                           **options)
    print(json.dumps(sorted(cases)))
"""


def child(tree: Path, *args: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(tree), "BENCH_ROOT": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run([sys.executable, "-c", CHILD, *args], env=env, capture_output=True, text=True,
                          cwd=args[1])
    if done.returncode:
        raise SystemExit(f"{tree}: {done.stderr[-3000:]}")
    return done.stdout.strip().splitlines()[-1]


# dataset.json may differ between the trees only in what the refactoring of issue 43 adds: its format version, the
# digests of its sections (which cover the connector names) and each feature's connector name. .conversion.json
# records the run (the version's options and digests), not the data.
UNCOMPARED_KEYS = ("runner", "format_version", "digests")
UNCOMPARED_FILES = (".conversion.json",)


def comparable(manifest: dict) -> dict:
    """dataset.json but for what may differ (UNCOMPARED_KEYS, each feature's ``connector``)."""
    kept = {k: v for k, v in manifest.items() if k not in UNCOMPARED_KEYS}
    kept["features"] = [{k: v for k, v in f.items() if k != "connector"} for f in manifest.get("features", [])]
    return kept


def different(a: Path, b: Path) -> list[str]:
    """The files that differ between two conversions' folders, byte for byte (dataset.json: as ``comparable``)."""
    found = []
    for case in sorted(p.name for p in a.iterdir()):
        names = sorted(p.name for p in (a / case).iterdir() if p.name not in UNCOMPARED_FILES)
        others = sorted(p.name for p in (b / case).iterdir() if p.name not in UNCOMPARED_FILES)
        if names != others:
            found.append(f"{case}/ (in one tree only: {', '.join(sorted(set(names) ^ set(others)))})")
            continue
        for name in names:
            x, y = a / case / name, b / case / name
            if x.is_dir() or y.is_dir():
                same = x.is_dir() and y.is_dir() and not different_tree(x, y)
            elif name == "dataset.json":
                same = comparable(json.loads(x.read_text())) == comparable(json.loads(y.read_text()))
            else:
                same = filecmp.cmp(x, y, shallow=False)
            if not same:
                found.append(f"{case}/{name}")
    return found


def different_tree(a: Path, b: Path) -> bool:
    """Whether two folders inside a case (a TFDS folder, say) hold other names or other bytes."""
    names = sorted(p.relative_to(a) for p in a.rglob("*"))
    if names != sorted(p.relative_to(b) for p in b.rglob("*")):
        return True
    return any((a / n).is_file() and not filecmp.cmp(a / n, b / n, shallow=False) for n in names)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--old", required=True, help="the other checkout (a git worktree)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--bytes-only", action="store_true",
                        help="skip the timing rounds; only compare the files written (a busy machine's timings "
                             "mean nothing)")
    args = parser.parse_args(argv)
    if args.bytes_only:
        args.rounds = 0
    old, new, work = Path(args.old).resolve(), ROOT, work_dir("bench-trees-")
    if not (old / "tfrecorder" / "__init__.py").is_file():  # else the child would import the venv's tfrecorder
        parser.error(f"--old {args.old}: no tfrecorder checkout there (git worktree add --detach <dir> <commit>)")
    times: dict[str, dict[str, float]] = {"old": {}, "new": {}}
    for _ in range(args.rounds):
        for label, tree in (("old", old), ("new", new)):
            for case, seconds in json.loads(child(tree, "times", str(work), str(args.runs))).items():
                times[label][case] = min(seconds, times[label].get(case, float("inf")))
    for label, tree in (("old", old), ("new", new)):
        child(tree, "bytes", str(work), "1", str(work / f"bytes-{label}"))
    rows = [(case, f"{times['new'][case]:.3f} s", f"old: {times['old'][case]:.3f} s",
             f"{times['new'][case] / times['old'][case]:.2f}x the old time") for case in times["new"]]
    diff = different(work / "bytes-old", work / "bytes-new")
    count = sum(1 for _ in (work / "bytes-new").iterdir())
    rows.append((f"files written for {count} tables", "identical" if not diff else f"DIFFERENT: {', '.join(diff)}",
                 f"old: {old}", "check"))
    timing = f"best of {args.runs} runs x {args.rounds} rounds, taking turns" if args.rounds else "files only"
    print_table(f"This checkout against {old} ({timing})", rows)


if __name__ == "__main__":
    main()
