"""Sample data: a small labelled image table (shapes on textured backgrounds) for the demo, notebooks and tests."""

from __future__ import annotations

import os
import random

import numpy as np
import pandas as pd
from PIL import Image, ImageDraw, ImageFilter

CLASSES = ("circle", "square", "triangle")


def make_sample_images(directory: str, n: int = 300, size: tuple[int, int] = (64, 64), seed: int = 0) -> pd.DataFrame:
    """Draw ``n`` images of three classes as JPEG and PNG files under ``directory``; return their table.

    The table has ``split`` (80/10/10), ``image_uri``, ``label`` and two extra columns,
    ``brightness`` (float) and ``camera`` (str). The same arguments always give the same files.

    Example:
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
