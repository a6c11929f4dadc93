"""YOLO label files (IO edge): the ``.txt`` file of each image of a YOLO dataset found (Ultralytics' rule), read by
threads, inside the dataset's root only, and each line parsed into an object - a box, a polygon (its box and its
instance mask), or a box and its keypoints (``kpt_shape``) - or the problem of a bad line. ``yolo.py`` finds the
dataset's images and turns the objects into the long form."""

from __future__ import annotations

import contextvars
import errno
import json
import math
import os
import posixpath
import stat
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from tfrecorder.write.settings import Root
from tfrecorder.write.sources.long_form import path_url, quoted

TOLERANCE = 0.005  # a coordinate this far beyond [0, 1] is kept (the writer clips it, as any normalized box)
LABEL_THREADS = 16  # label files of an object store read at once: small files, whose reads are mostly waiting


@dataclass
class YoloDataset:
    """What a data.yaml or a Darknet folder says: the root, the class names, the images of each split (paths on
    ``fs``) and the files read to learn them."""

    fs: Any
    url: str  # the dataset's file as given
    root: str  # the dataset's root (a path on fs): every file named must be inside it
    names: dict[int, str]
    images: dict[str, str] = field(default_factory=dict)  # image path -> split, in the order found
    read: set[str] = field(default_factory=set)  # files read to find them (the yaml, lists, obj.names)
    warnings: list[str] = field(default_factory=list)
    kpt_shape: tuple[int, int] | None = None
    kpt_names: list[str] | None = None
    files: list[str] | None = None  # every file under the root, sorted, once walked
    folder_links: list[str] = field(default_factory=list)  # the links to folders that walk met (not followed)
    guard: Root | None = None  # the root as a Root, made the first time a named file is checked against it
    no_area: list[tuple[str, int]] = field(default_factory=list)  # (label file, line) of each box of no area
    label_folders: set[str] = field(default_factory=set)  # the folders the images' label files are in, once read
    listed_by: dict[str, str] = field(default_factory=dict)  # image path -> the .txt list that names it
    ids: dict[str, str] = field(init=False)  # each class id as a label line writes it (``3``) -> its name

    def __post_init__(self) -> None:
        self.ids = {str(i): name for i, name in self.names.items()}


# Each object's label, box edges (normalized), keypoints and polygon (as instance_mask JSON: [[x1, y1, ...]]).
Objects = list[tuple[str, tuple[float, float, float, float], list[float] | None, bytes | None]]


def label_path(image: str, root: str = "") -> str:
    """An image's label file: its path with the last ``images`` folder inside ``root`` replaced by ``labels`` and
    its extension by ``.txt`` (beside the image when no folder inside the root is called ``images``: one above
    it, ``~/images/my-dataset/``, is not the dataset's)."""
    start = len(root) + 1 if root and image.startswith(root) and image[len(root):len(root) + 1] == "/" else 0
    head, sep, tail = image.rpartition("/images/")
    if sep and len(head) + 1 < start:  # the last images/ is above the root: is it the root's own first folder?
        sep = "/images/" if image.startswith("images/", start) else ""
        head, tail = image[:start - 1], image[start + len("images/"):]
    path = f"{head}/labels/{tail}" if sep else image
    stem, dot, extension = path.rpartition(".")
    return f"{stem}.txt" if dot and "/" not in extension else f"{path}.txt"


Found = tuple[str | None, Objects, list[str], int]  # an image's label file (None: none), objects, problems, polygons


@dataclass
class Boxes:
    """The boxes of the label files read at once (``quick_boxes``), a row each, in the images' order."""

    image: np.ndarray  # each box's image: its index in the dataset's images
    label: np.ndarray  # its class name (object)
    edges: np.ndarray  # [boxes, 4]: xmin, ymin, xmax, ymax, normalized


@dataclass
class Labels:
    """Each image's label file, objects, problems and polygons (``found``, in the images' order: no objects for an
    image whose boxes are in ``boxes``) and the boxes of the files read at once."""

    found: list[Found]
    boxes: Boxes | None = None

    def merged(self) -> list[Found]:
        """``found`` with each image's boxes among its objects, as the full rules give them."""
        if self.boxes is None:
            return self.found
        found = [(file, list(objects), problems, polygons) for file, objects, problems, polygons in self.found]
        for image, label, edges in zip(self.boxes.image.tolist(), self.boxes.label, self.boxes.edges.tolist()):
            found[image][1].append((label, tuple(edges), None, None))
        return found


def read_labels(dataset: YoloDataset, guard: Root) -> Labels:
    """Each image's label file, objects, problems and polygons. An object store's files are read by
    ``LABEL_THREADS`` threads, a run of images each (a task per image costs more than a small file's read); local
    ones in this thread: from the page cache a read waits less than its lines take to parse, and threads that
    parse only take the interpreter's lock in turn (slower than one: see benchmarks/bench_yolo.py). Files of
    plain box lines are read at once (``quick_boxes``), the rest a line at a time (``parse``). A label file
    outside the root is never read: a problem."""
    fs = dataset.fs
    images = list(dataset.images)
    paths = [label_path(image, dataset.root) for image in images]
    dataset.label_folders = {posixpath.dirname(path) for path in paths}
    listed, outside = _label_files(dataset, guard)
    read = read_local if is_local(fs) else fs.cat_file

    def fetch(image: str, path: str) -> Found | bytes:
        link = listed.get(path)
        if link is not False:  # not a plain file in a folder inside the root
            return _unlisted(dataset, guard, (image, path), outside, listed, read)
        try:
            return read(path)
        except OSError as e:  # removed since the folder was listed
            return path, [], [f"cannot be read ({e.strerror or e})"], 0

    def run(start: int, stop: int) -> list[Found | bytes]:
        return [fetch(image, path) for image, path in zip(images[start:stop], paths[start:stop])]

    if is_local(fs):
        fetched = run(0, len(images))
    else:
        size = max(1, math.ceil(len(images) / (4 * LABEL_THREADS)))
        with ThreadPoolExecutor(LABEL_THREADS) as pool:
            pending = [pool.submit(contextvars.copy_context().run, run, i, i + size)
                       for i in range(0, len(images), size)]
            fetched = [found for p in pending for found in p.result()]
    boxes, quick = quick_boxes([f if isinstance(f, bytes) else None for f in fetched], dataset)
    found = [f if not isinstance(f, bytes) else (path, [], [], 0) if i in quick else _parsed(dataset, path, f)
             for i, (f, path) in enumerate(zip(fetched, paths))]
    return Labels(found, boxes)


PLAIN_BYTES = b"0123456789.+-eE \t\n"  # all a file of plain box lines is made of
PLAIN_WIDTH = b"0 0 0 0 0\n"  # a first line of five values: the parser's width (the rest may not start so)
# Python's own float parsing, to the bit: pandas' parser before 3.1 is its own unless asked for Python's; 3.1 has one,
# and deprecates asking
PLAIN_PRECISION = {"float_precision": "round_trip"} if tuple(map(int, pd.__version__.split(".")[:2])) < (3, 1) else {}


def quick_boxes(datas: list[bytes | None], dataset: YoloDataset) -> tuple[Boxes | None, set[int]]:
    """The boxes of the label files (``datas``, None where there is none to read) that are all plain box lines
    (``class cx cy w h``: a known class, each coordinate and edge in bounds, an area), parsed at once by pandas'
    CSV parser, and which files those are; None and none where there is no such file. The rules are
    ``parse``'s, and its numbers (``PLAIN_PRECISION``). Any other file (a polygon, keypoints,
    a blank or bad line, a byte order mark) is read by ``parse``, a line at a time."""
    import io

    chosen = [i for i, data in enumerate(datas) if data and not data.translate(None, PLAIN_BYTES)]
    if dataset.kpt_shape is not None or not dataset.names or max(dataset.names) >= 2**53 or not chosen:
        return None, set()  # (ids past 2**53 are not all floats: the lines' classes are compared as floats)
    texts = [datas[i] if datas[i].endswith(b"\n") else datas[i] + b"\n" for i in chosen]  # type: ignore[union-attr]
    counts = np.array([text.count(b"\n") for text in texts])
    try:
        table = pd.read_csv(io.BytesIO(b"".join([PLAIN_WIDTH, *texts])), sep=r"\s+", header=None,
                            skip_blank_lines=False, dtype=np.float64, **PLAIN_PRECISION)
    except ValueError:  # a line of more values, or a word no number: each file read a line at a time
        return None, set()
    values = table.to_numpy()[1:]
    if values.shape != (counts.sum(), 5):
        return None, set()
    ids, names = np.array(sorted(dataset.names)), np.array([dataset.names[i] for i in sorted(dataset.names)], object)
    cls, cx, cy, w, h = values.T
    at = np.searchsorted(ids, cls).clip(0, len(ids) - 1)
    low, high = -TOLERANCE, 1 + TOLERANCE
    with np.errstate(invalid="ignore", over="ignore"):  # NaN (a short or blank line), an infinity: fail each test
        x0, y0, x1, y1 = cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2  # as _box makes them
        good = ((ids[at] == cls) & (low <= x0) & (x0 < x1) & (x1 <= high) & (low <= y0) & (y0 < y1) & (y1 <= high)
                & (low <= cx) & (cx <= high) & (low <= cy) & (cy <= high) & (w <= high) & (h <= high))
    file = np.repeat(np.arange(len(chosen)), counts)
    whole = np.bincount(file[~good], minlength=len(chosen)) == 0  # files of good lines only
    keep = whole[file]
    quick = np.array(chosen)[whole]
    image = np.array(chosen)[file[keep]]
    edges = np.stack([x0, y0, x1, y1], axis=1)[keep]
    return Boxes(image, names[at[keep]], edges), set(quick.tolist())


def _unlisted(dataset: YoloDataset, guard: Root, label: tuple[str, str], outside: set[str],
              listed: dict[str, bool | None], read: Any) -> tuple[str | None, Objects, list[str], int]:
    """An image whose label file is not a plain file in a folder inside the root: none, one outside the root or a
    link out of it (never read), a folder or a FIFO (never read), or a link inside the root (read)."""
    fs = dataset.fs
    image, path = label
    link = listed.get(path)
    if posixpath.dirname(path) in outside or link and not guard.holds(path_url(dataset.url, fs, path)):
        inside = guard.holds(path_url(dataset.url, fs, image))  # an image outside is a row error of its own
        problems = ["its label file is outside the dataset's root: not read"] if inside else []
        # a link in the root to a file out of it is the image's label file, refused: no orphan to note too
        return (path if link else None), [], problems, 0
    if path not in listed:
        return None, [], [], 0
    try:
        if link is None or is_local(fs) and not stat.S_ISREG(os.stat(path).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")  # a folder, or a FIFO a read would wait on
        data = read(path)
    except OSError as e:  # a link to nothing (an unfetched git-annex or DVC file), a folder, a FIFO
        return path, [], [f"cannot be read ({e.strerror or e})"], 0
    return _parsed(dataset, path, data)


def _parsed(dataset: YoloDataset, path: str, data: bytes) -> tuple[str, Objects, list[str], int]:
    try:
        text = data.decode("utf-8").removeprefix("\ufeff")  # Notepad's byte order mark
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        return path, [], [f"line {line}: is not UTF-8 text (byte 0x{data[e.start]:02x}); save it as UTF-8"], 0
    objects, problems, polygons, empty = parse(text, dataset)
    if empty:
        dataset.no_area.extend((path, number) for number in empty)
    return path, objects, problems, polygons


def read_local(path: str) -> bytes:
    """The file's bytes, by the system's calls alone: a Python file object costs more than a label file's read."""
    fd = os.open(path, os.O_RDONLY)
    try:
        parts = []
        while part := os.read(fd, 1 << 16):
            parts.append(part)
        return b"".join(parts)
    finally:
        os.close(fd)


def is_local(fs: Any) -> bool:
    protocols = fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)
    return "file" in protocols


def _label_files(dataset: YoloDataset, guard: Root) -> tuple[dict[str, bool | None], set[str]]:
    """The .txt entries in every folder inside the root that holds a label file of the dataset's images, each
    with whether it is a link (checked against the root, and for what it points to, where it is read), or None
    for an entry that is no regular file (a folder, a FIFO: never read), listed once a folder, not asked for
    once an image; and those folders outside the root, never listed."""
    fs = dataset.fs
    files: dict[str, bool | None] = {}
    outside = set()
    for folder in dataset.label_folders:
        if not guard.holds(path_url(dataset.url, fs, folder)):
            outside.add(folder)
        elif is_local(fs) and os.path.isdir(folder):  # the directory's entries say what each is: no stat each
            with os.scandir(folder) as entries:
                files.update((e.path, True if e.is_symlink() else False if e.is_file() else None)
                             for e in entries if e.name.endswith(".txt"))
        elif not is_local(fs) and fs.isdir(folder):
            files.update((e["name"], bool(e.get("islink"))) for e in fs.ls(folder, detail=True)
                         if e["name"].endswith(".txt"))
    return files, outside


def parse(text: str, dataset: YoloDataset) -> tuple[Objects, list[str], int, list[int]]:
    """One label file's objects, the problem of each bad line (``line N: ...``), how many were polygons, and the
    lines of boxes of no area (a width or height of 0: Ultralytics drops them as it trains; no box to store)."""
    objects: Objects = []
    problems: list[str] = []
    empty: list[int] = []
    polygons = 0
    ids = dataset.ids if dataset.kpt_shape is None else {}  # the usual line's class, read first
    low, high = -TOLERANCE, 1 + TOLERANCE
    for number, line in enumerate(text.splitlines(), 1):
        words = line.split()
        if len(words) == 5 and words[0] in ids:
            # the usual line, a box of area inside the picture, made here as _line makes it (a dataset's lines are
            # nearly all this one); anything else _line reads or names the fault of
            try:
                cx, cy, w, h = float(words[1]), float(words[2]), float(words[3]), float(words[4])
            except ValueError:
                cx = cy = w = h = math.nan
            x0, y0, x1, y1 = cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2
            # each coordinate and edge in bounds, and an area (a NaN fails every comparison)
            if low <= x0 < x1 <= high and low <= y0 < y1 <= high and low <= cx <= high and low <= cy <= high \
                    and w <= high and h <= high:
                objects.append((ids[words[0]], (x0, y0, x1, y1), None, None))
                continue
        if not words:
            continue
        try:
            label, edges, points, polygon = _line(words, dataset)
        except _BadLine as e:
            problems.append(f"line {number}: {e}")
            continue
        if not (edges[0] < edges[2] and edges[1] < edges[3]):
            empty.append(number)
            continue
        objects.append((label, edges, points, polygon))
        polygons += polygon is not None
    return objects, problems, polygons, empty


class _BadLine(Exception):
    """What is wrong with a label line."""


def _line(words: list[str], dataset: YoloDataset) -> tuple[str, tuple[float, float, float, float], list[float] | None,
                                                        bytes | None]:
    """A label line's class name, box edges (normalized), keypoints (``[x, y, v] * K``) and polygon (COCO's
    segmentation JSON of its points, normalized: its instance mask); _BadLine says what is wrong."""
    label = _class(words[0], dataset.names)
    try:
        values = [float(w) for w in words[1:]]
    except ValueError:
        values = [_number(w) for w in words[1:]]  # raises, naming the word
    dims = dataset.kpt_shape[1] if dataset.kpt_shape is not None else 2
    coordinates = values if dims == 2 else [v for i, v in enumerate(values) if i < 4 or (i - 4) % 3 != 2]  # not v
    if not (coordinates and math.isfinite(sum(coordinates))  # a NaN or an infinity makes the sum not finite
            and -TOLERANCE <= min(coordinates) and max(coordinates) <= 1 + TOLERANCE):
        for value in coordinates:
            if not math.isfinite(value):
                raise _BadLine(f"{value} is not a finite number")
            if not -TOLERANCE <= value <= 1 + TOLERANCE:
                raise _BadLine(f"coordinate {value:g} is outside [0, 1] (YOLO's are normalized to the image's size)")
    if dataset.kpt_shape is not None:
        count = dataset.kpt_shape[0]
        if len(values) != 4 + count * dims:
            raise _BadLine(f"{len(words)} values, where kpt_shape [{count}, {dims}] makes a line class, cx cy w h "
                           f"and {count} points of {dims}: {5 + count * dims}")
        return label, _box(values[:4]), _keypoints(values[4:], dims), None
    if len(values) == 4:
        return label, _box(values), None, None
    if len(values) % 2:
        raise _BadLine(f"an odd number of polygon values ({len(values)}): a polygon is class then x y of each point")
    if len(values) < 6:
        raise _BadLine(f"{len(words)} values: a box is class cx cy w h (5), a polygon class x1 y1 ... xn yn (3 "
                       f"points or more)")
    xs, ys = values[0::2], values[1::2]
    return label, (min(xs), min(ys), max(xs), max(ys)), None, json.dumps([values]).encode("ascii")


def _class(word: str, names: Mapping[int, str]) -> str:
    if word.isdigit() and len(word) < 19 and int(word) in names:  # the usual line: a known id (int() of a long
        return names[int(word)]                                    # word is refused: float() reads it)
    try:
        number = float(word)
    except ValueError:
        raise _BadLine(f"class {quoted(word)} is not a number") from None
    if not math.isfinite(number) or number != int(number) or number < 0:
        raise _BadLine(f"class {quoted(word)} is not a class id (0, 1, ...)")
    if int(number) not in names:
        ids = sorted(names)  # unique: a run of ids is as long as its span
        shown = f"{ids[0]}-{ids[-1]}" if len(ids) == ids[-1] - ids[0] + 1 else ", ".join(map(str, ids[:10]))
        raise _BadLine(f"class {int(number)} is not in names ({shown})")
    return names[int(number)]


def _number(word: str) -> float:
    try:
        value = float(word)
    except ValueError:
        raise _BadLine(f"{quoted(word)} is not a number") from None
    if not math.isfinite(value):
        raise _BadLine(f"{quoted(word)} is not a finite number")
    return value


def _box(values: list[float]) -> tuple[float, float, float, float]:
    cx, cy, w, h = values
    if w < 0 or h < 0:
        raise _BadLine(f"the box's {'width' if w < 0 else 'height'} {min(w, h):g} is negative")
    edges = cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2
    # an edge past the picture beyond the coordinates' tolerance: this line's fault, named here (the writer would
    # refuse the image's box naming a row of the long form the user never saw)
    for name, edge in zip(("left", "top", "right", "bottom"), edges):
        if not -TOLERANCE <= edge <= 1 + TOLERANCE:
            axis = "cx - w/2" if name == "left" else "cy - h/2" if name == "top" else \
                "cx + w/2" if name == "right" else "cy + h/2"
            raise _BadLine(f"the box's {name} edge ({axis}) {edge:g} is outside [0, 1]: past the image's edge")
    return edges


def _keypoints(values: list[float], dims: int) -> list[float]:
    """``[x, y, v] * K``: v as given (COCO's 0, 1, 2), or where only x y are given 2 for a point and 0 for (0, 0),
    YOLO's mark of a point not labelled."""
    points: list[float] = []
    for i in range(0, len(values), dims):
        x, y = values[i], values[i + 1]
        if dims == 3:
            visibility = values[i + 2]
            if visibility not in (0, 1, 2):
                raise _BadLine(f"keypoint {i // dims + 1}'s visibility {visibility:g} is not 0, 1 or 2")
        else:
            visibility = 0 if x == 0 and y == 0 else 2
        points += [x, y, float(visibility)]
    return points
