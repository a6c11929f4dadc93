"""Shared benchmark helpers: realistic test images, timing by median of runs, and the result table."""

from __future__ import annotations

import os
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd
from PIL import Image, ImageDraw, ImageFilter

DATA = Path(__file__).resolve().parent / "data"


def scene(seed: int, size: tuple[int, int] = (375, 500)) -> Image.Image:
    """A natural-looking synthetic scene: sky and ground gradients, blurred shapes, fine texture.

    Noise JPEGs are unrealistically large; these compress like photos (~40-100 KB at q90, 500x375).
    """
    rng = random.Random(seed)
    height, width = size
    sky = [rng.randrange(90, 200) for _ in range(3)]
    ground = [rng.randrange(30, 140) for _ in range(3)]
    horizon = rng.randrange(height // 3, 2 * height // 3)
    image = Image.new("RGB", (width, height))
    draw = ImageDraw.Draw(image)
    for y in range(height):
        top, bottom, t = (sky, [min(255, c + 50) for c in sky], y / horizon) if y < horizon else (
            ground, [c // 2 for c in ground], (y - horizon) / (height - horizon))
        draw.line([(0, y), (width, y)], fill=tuple(int(a + (b - a) * t) for a, b in zip(top, bottom)))
    for _ in range(rng.randrange(15, 40)):
        x, y, r = rng.randrange(width), rng.randrange(height), rng.randrange(5, 80)
        color = tuple(rng.randrange(256) for _ in range(3))
        if rng.random() < 0.5:
            draw.ellipse((x - r, y - r, x + r, y + r), fill=color)
        else:
            draw.polygon([(x + rng.randrange(-r, r), y + rng.randrange(-r, r)) for _ in range(5)], fill=color)
    image = image.filter(ImageFilter.GaussianBlur(rng.uniform(0.8, 1.5)))
    return Image.blend(image, _texture(rng, width, height), 0.35)


def _texture(rng: random.Random, width: int, height: int) -> Image.Image:
    """Cloud-like detail at several scales (noise upsampled per octave), like foliage, grass or gravel."""
    import numpy as np

    np_rng = np.random.default_rng(rng.randrange(2**32))
    total = np.zeros((height, width, 3))
    for cells, weight in ((4, 0.35), (16, 0.25), (64, 0.2), (160, 0.2)):
        small = np_rng.integers(0, 256, (max(2, cells * height // width), cells, 3), dtype=np.uint8)
        total += weight * np.asarray(Image.fromarray(small).resize((width, height), Image.Resampling.BICUBIC))
    return Image.fromarray(total.clip(0, 255).astype(np.uint8))


def jpeg_table(n: int = 2000, size: tuple[int, int] = (375, 500)) -> pd.DataFrame:
    """``n`` scene JPEGs (quality 90) in benchmarks/data, made once and reused; their table."""
    folder = DATA / f"jpeg-{size[0]}x{size[1]}"
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for i in range(n):
        path = folder / f"{i:05d}.jpg"
        if not path.exists():
            _make_scene_jpeg(folder, i, size)
        split = "TRAIN" if i % 10 < 8 else ("VALIDATION" if i % 10 == 8 else "TEST")
        rows.append((split, str(path), f"class{i % 5}", i * 0.5))
    return pd.DataFrame(rows, columns=["split", "image_uri", "label", "weight"])


# distinct scenes; the next images are their three mirror images (drawing a scene takes ~0.3 s), and those after
# 10,000 scenes again (a fourth mirror image would be a file already made: a duplicate, which an append refuses)
_SCENES = 2500
_VARIANTS = (Image.Transpose.FLIP_LEFT_RIGHT, Image.Transpose.FLIP_TOP_BOTTOM, Image.Transpose.ROTATE_180)


def _make_scene_jpeg(folder: Path, i: int, size: tuple[int, int]) -> None:
    path = folder / f"{i:05d}.jpg"
    if i < _SCENES or i >= _SCENES * (1 + len(_VARIANTS)):
        scene(i, size).save(path, quality=90)
        return
    base = folder / f"{i % _SCENES:05d}.jpg"
    if not base.exists():
        _make_scene_jpeg(folder, i % _SCENES, size)
    variant = _VARIANTS[(i // _SCENES - 1) % len(_VARIANTS)]
    with Image.open(base) as image:  # new bytes of the same size and kind: no two files alike
        image.transpose(variant).save(path, quality=90)


def median_seconds(fn: Callable[[], object], runs: int = 3, setup: Callable[[], object] | None = None) -> float:
    """Median wall time of ``runs`` calls of ``fn`` (``setup`` runs untimed before each)."""
    times = []
    for _ in range(runs):
        if setup:
            setup()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def interleaved_times(cases: dict[str, Callable[[], object]], runs: int = 3) -> dict[str, list[float]]:
    """Seconds of every run of each case, running the cases in turn each round so machine drift hits all alike."""
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(runs):
        for name, fn in cases.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return times


def interleaved_medians(cases: dict[str, Callable[[], object]], runs: int = 3) -> dict[str, float]:
    """Median seconds of each case, the cases run in turn (see interleaved_times)."""
    return {name: statistics.median(t) for name, t in interleaved_times(cases, runs).items()}


def interleaved_best(cases: dict[str, Callable[[], object]], runs: int = 5) -> dict[str, float]:
    """Fastest run of each case, the cases run in turn (see interleaved_times).

    For the multi-core cases: the 2-vCPU machines these numbers come from lose their second core for
    seconds at a time (two processes each running the same loop take 0.75 s in one minute, 1.28 s the
    next), so a median of a few runs lands on either side at random. The fastest run of each case is
    what it does with the cores it was given.
    """
    return {name: min(t) for name, t in interleaved_times(cases, runs).items()}


def peak_rss_mib() -> float:
    """This process's peak RSS in MiB. /proc's VmHWM, not getrusage: Linux carries ru_maxrss across exec,
    so a benchmark child would report its parent's peak."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def print_table(title: str, rows: list[tuple[str, str, str, str]],
                header: tuple[str, str, str, str] = ("case", "ours", "baseline", "ratio")) -> None:
    """Print case | ours | baseline | ratio (or ``header``) as a Markdown table."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(4)]
    print(f"\n### {title}\n")
    for i, row in enumerate([header, *rows]):
        print("| " + " | ".join(c.ljust(w) for c, w in zip(row, widths)) + " |")
        if i == 0:
            print("|" + "|".join("-" * (w + 2) for w in widths) + "|")


def run_child(module: str, case: str, *args: str, env: dict | None = None) -> str:
    """Run ``python -m <module> --child <case> <args>`` (a case measured in a process of its own: its time
    and peak memory are its alone) and return the last line it printed; its stderr in the error if it fails."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", module, "--child", case, *args], capture_output=True, text=True,
                          env=env)
    if proc.returncode:
        raise RuntimeError(f"{module} {case} failed:\n{proc.stderr[-3000:]}")
    return proc.stdout.strip().splitlines()[-1]


# The Object Detection API's dataset_util helpers, which its generate_tfrecord.py and create_coco_tf_record.py
# (the baselines of bench_detection and bench_instance_masks) both call.
def bytes_feature(values):
    import tensorflow as tf

    return tf.train.Feature(bytes_list=tf.train.BytesList(value=values))


def float_feature(values):
    import tensorflow as tf

    return tf.train.Feature(float_list=tf.train.FloatList(value=values))


def int64_feature(values):
    import tensorflow as tf

    return tf.train.Feature(int64_list=tf.train.Int64List(value=values))


def work_dir(prefix: str) -> Path:
    """A temporary folder for a benchmark's files, removed when the process exits (however it exits)."""
    import atexit
    import shutil
    import tempfile

    path = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def fresh(path: Path) -> Path:
    """An empty folder at ``path``."""
    import shutil

    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


def input_bytes(paths) -> int:
    return sum(os.path.getsize(p) for p in paths)
