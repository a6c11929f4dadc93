"""Image folders: ``<dir>/<SPLIT>/<label>/<file>`` or ``<dir>/<label>/<file>`` as a table of rows, listed a
label folder at a time (as a pipeline lists them, a worker per label folder)."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import fsspec
import pandas as pd

from tfrecorder.dataset.storage import filesystem
from tfrecorder.errors import TFRecorderError
from tfrecorder.schema import IMAGE_COLUMN, LABEL_COLUMN, SPLIT_COLUMN
from tfrecorder.write.splits import KNOWN_SPLITS

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".gif", ".bmp", ".webp", ".tif", ".tiff")


def image_folder_url(source: Any) -> str | None:
    """``source`` as a URL when it names an existing folder (an image folder), else None."""
    if not isinstance(source, (str, os.PathLike)):
        return None
    url = os.fspath(source)
    fs, path = filesystem(url)
    return url if fs.isdir(path) else None


def image_folder_table(url: str) -> pd.DataFrame:
    """Rows for ``<dir>/<SPLIT>/<label>/<file>`` or ``<dir>/<label>/<file>`` (split then assigned by hash): each
    of its ``label_folders``' images (``folder_rows``), as a pipeline lists them a folder per worker."""
    rows = [row for folder in label_folders(url) for row in folder_rows(url, folder)[0]]
    if not rows:
        raise no_images(url)
    return listing_frame(rows, any(split is not None for split, _, _ in rows))


def no_images(url: str) -> TFRecorderError:
    return TFRecorderError(
        f"image folder {url!r} has no images laid out as <dir>/<SPLIT>/<label>/<file> or <dir>/<label>/<file> "
        f"(extensions {', '.join(IMAGE_EXTENSIONS)})"
    )


def listing_frame(rows: Sequence[tuple[str | None, str, str]], with_split: bool) -> pd.DataFrame:
    """An image folder's (split or None, image URL, label) rows as its table: a split column only when some
    image is under a split folder (``with_split``, a fact of the whole folder), the others UNASSIGNED."""
    df = pd.DataFrame(list(rows), columns=[SPLIT_COLUMN, IMAGE_COLUMN, LABEL_COLUMN])
    if not with_split:
        return df.drop(columns=[SPLIT_COLUMN])
    df[SPLIT_COLUMN] = df[SPLIT_COLUMN].fillna("UNASSIGNED")
    return df


@dataclass(frozen=True)
class LabelFolder:
    """A folder of an image folder whose images are rows of one label, and one split under a split folder."""

    path: str  # on the image folder's filesystem
    split: str | None
    label: str


def label_folders(url: str) -> list[LabelFolder]:
    """The folders of the image folder ``url`` that hold its rows, in path order: each folder in it (its
    images labelled with its name) and, in a split folder, each folder in that (split and label). Lists two
    levels of folders, not the images: a pipeline lists those a folder per worker (``folder_rows``)."""
    fs, root = filesystem(url)
    root = root.rstrip("/")
    found = []
    for top in _folders(fs, root):
        name = top.rsplit("/", 1)[-1]
        found.append(LabelFolder(top, None, name))
        if name.upper() in KNOWN_SPLITS:
            found += [LabelFolder(sub, name.upper(), sub.rsplit("/", 1)[-1]) for sub in _folders(fs, top)]
    return sorted(found, key=lambda f: f.path.split("/"))


def _folders(fs: Any, path: str) -> list[str]:
    return [e["name"].rstrip("/") for e in fs.ls(path, detail=True) if e.get("type") == "directory"]


def folder_rows(url: str, folder: LabelFolder) -> tuple[list[tuple[str | None, str, str]], str]:
    """The rows of one of ``label_folders(url)``, its images in name order, and the identity of what was listed
    (a SHA-256 of each image's name, size and modification time or object generation)."""
    fs = filesystem(url)[0]
    files = sorted((e for e in fs.ls(folder.path, detail=True)
                    if e.get("type") == "file" and e["name"].lower().endswith(IMAGE_EXTENSIONS)),
                   key=lambda e: e["name"])
    identity = hashlib.sha256()
    for e in files:
        version = [str(e.get(k)) for k in ("size", "mtime", "updated", "generation", "ETag") if k in e]
        identity.update(json.dumps([e["name"], *version]).encode("utf-8"))
    return [(folder.split, file_url(url, fs, e["name"]), folder.label) for e in files], identity.hexdigest()


def file_url(url: str, fs: Any, path: str) -> str:
    """The file at ``path`` on ``fs`` named as the source ``url`` names its files: a full URL for a remote source,
    the path for a local one."""
    return fs.unstrip_protocol(path) if "://" in url else path


def create_image_csv(image_dir: str, output_csv: str) -> pd.DataFrame:
    """Write the table of an image folder as a CSV (``tfrecorder create-image-csv``); returns it.

    Examples:
        >>> images = make_sample_images(str(tmp_path / "imgs"), n=6)
        >>> table = tfrecorder.create_image_csv(str(tmp_path / "imgs"), str(tmp_path / "imgs.csv"))
        >>> list(table.columns), len(table)
        (['split', 'image_uri', 'label'], 6)
    """
    df = image_folder_table(image_dir)
    with fsspec.open(output_csv, "w", encoding="utf-8", newline="") as f:
        df.to_csv(f, index=False)
    return df
