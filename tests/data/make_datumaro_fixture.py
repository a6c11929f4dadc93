"""Writes tests/data/datumaro_tf_detection_api/ with Datumaro's tf_detection_api exporter (see its README)."""
import sys

import numpy as np
from datumaro.components.annotation import Bbox
from datumaro.components.dataset import Dataset
from datumaro.components.dataset_base import DatasetItem
from datumaro.components.media import Image

COLORS = {"red": (220, 40, 40), "green": (40, 200, 60), "blue": (40, 70, 220)}  # tests/test_foreign_od.py's
NAMES = list(COLORS)
# (subset, id, [(label, x, y, w, h)]) on a 16x16 grey picture; one image without objects
SCENES = [
    ("train", "a", [("red", 1, 2, 6, 5), ("blue", 9, 8, 6, 7)]),
    ("train", "b", [("green", 4, 4, 8, 8)]),
    ("train", "c", [("blue", 0, 0, 7, 16), ("red", 9, 1, 6, 6), ("green", 9, 9, 7, 6)]),
    ("train", "d", []),
    ("val", "e", [("green", 2, 9, 12, 6)]),
    ("val", "f", [("red", 5, 1, 6, 6), ("blue", 1, 9, 5, 6)]),
]


def picture(objects):
    pixels = np.full((16, 16, 3), 128, np.uint8)
    for name, x, y, w, h in objects:
        pixels[y:y + h, x:x + w] = COLORS[name][::-1]  # Datumaro holds pixels as OpenCV does: BGR
    return pixels


items = [DatasetItem(id=name, subset=subset, media=Image.from_numpy(picture(objects), ext=".png"),
                     annotations=[Bbox(x, y, w, h, label=NAMES.index(label)) for label, x, y, w, h in objects])
         for subset, name, objects in SCENES]
dataset = Dataset.from_iterable(items, categories=NAMES)
dataset.export(sys.argv[1], "tf_detection_api", save_media=True, image_ext=".png")
