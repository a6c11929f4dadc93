"""Image folders: ``<dir>/<SPLIT>/<label>/<file>`` or ``<dir>/<label>/<file>`` as a table of rows, listed a
label folder at a time (as a pipeline lists them, a worker per label folder)."""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import fsspec
import pandas as pd

from tfrecorder.dataset.storage import filesystem
from tfrecorder.errors import TFRecorderError
from tfrecorder.schema import IMAGE_COLUMN, IMAGE_EXTENSIONS, LABEL_COLUMN, SPLIT_COLUMN
from tfrecorder.write.splits import KNOWN_SPLITS, VALIDATION

# Split folders by other names tools give them (Roboflow's and YOLO's ``valid``, ``val``).
FOLDER_SPLITS = {**{name: name for name in KNOWN_SPLITS}, "VALID": VALIDATION, "VAL": VALIDATION}
YAML_EXTENSIONS = (".yaml", ".yml")


def image_folder_url(source: Any) -> str | None:
    """``source`` as a URL when it names an existing folder (an image folder), else None. A folder laid out as
    a dataset format convert does not read (YOLO's) is a TFRecorderError naming what it looks like."""
    if not isinstance(source, (str, os.PathLike)):
        return None
    url = os.fspath(source)
    fs, path = filesystem(url)
    if not fs.isdir(path):
        return None
    looks = yolo_evidence(fs, path.rstrip("/"))
    if looks:
        raise not_read_yet(url, f"looks like a YOLO dataset ({looks})")
    export = annotation_evidence(fs, path.rstrip("/"))
    if export:
        raise TFRecorderError(
            f"source {url!r} holds annotation files ({export}): as an image folder its labels would be its folder "
            f"names and every box lost. Give convert the annotation file itself (a COCO .json), or convert one "
            f"table of them: pd.concat([tfrecorder.read_annotations(f) for f in files])")
    return url


_ANNOTATION_HEAD = 1 << 16  # bytes of a .json or .xml file read to tell whether it is annotations


def annotation_evidence(fs: Any, root: str) -> str:
    """The first annotation file of another tool's export in the folder ``root`` or a folder in it (a COCO JSON:
    Roboflow's ``train/_annotations.coco.json``, CVAT's; FiftyOne's ``labels.json``; labelImg's VOC XML beside
    the images of a subfolder), told by its first bytes, with what it is; "" when there is none."""
    folders = [root, *sorted(e["name"].rstrip("/") for e in fs.ls(root, detail=True) if e.get("type") == "directory")]
    for folder in folders:
        for path in sorted(fs.ls(folder, detail=False)):
            name = path.rsplit("/", 1)[-1].lower()
            if not name.endswith((".json", ".xml")) or name.startswith("."):
                continue
            with fs.open(path, "rb") as f:
                head = f.read(_ANNOTATION_HEAD)
            kind = ("COCO" if b'"images"' in head and b'"annotations"' in head else
                    "FiftyOne" if b'"classes"' in head and b'"labels"' in head else
                    "VOC" if b"<annotation" in head else "")
            if kind:
                return f"{path[len(root) + 1:]}: {kind}"
    return ""


def not_read_yet(url: str, looks: str) -> TFRecorderError:
    """The error for a YOLO dataset given where a table or an image folder is read: what it ``looks`` like."""
    return TFRecorderError(
        f"source {url!r} {looks}: it is neither a table nor an image folder; convert and read_annotations read a "
        f"YOLO dataset given as its data.yaml or the folder of it")


IMAGES_BESIDE_LABELS = "images/ beside labels/ of .txt files"  # yolo_evidence's for a folder without a YAML file


def yolo_evidence(fs: Any, root: str) -> str:
    """What makes the folder ``root`` a YOLO (or Roboflow YOLO) dataset - a ``data.yaml``, ``images/`` beside a
    ``labels/`` of .txt files, in it or in its split folders (``train/images``) - or "" when nothing does."""
    entries = fs.ls(root, detail=True)
    yaml = sorted(e["name"] for e in entries if e.get("type") == "file" and e["name"].lower().endswith(YAML_EXTENSIONS))
    described = next((p for p in yaml if _yolo_yaml(fs, p)), None)
    if described:
        return described.rsplit("/", 1)[-1]
    folders = {e["name"].rstrip("/").rsplit("/", 1)[-1]: e["name"].rstrip("/") for e in entries
               if e.get("type") == "directory"}
    if _images_and_labels(fs, folders):
        return IMAGES_BESIDE_LABELS
    for name, path in sorted(folders.items()):
        if name.upper() in FOLDER_SPLITS:
            if _images_and_labels(fs, {p.rsplit("/", 1)[-1]: p for p in _folders(fs, path)}):
                return f"{name}/images beside {name}/labels/ of .txt files"
    return ""


def _yolo_yaml(fs: Any, path: str) -> bool:
    """Whether a YAML file is a YOLO dataset's description: ``data.yaml``, or keys ``names:`` or ``nc:``."""
    if path.rsplit("/", 1)[-1].lower() in ("data.yaml", "data.yml"):
        return True
    with fs.open(path, "rb") as f:
        head = f.read(1 << 16).decode("utf-8", "replace")
    return any(line.startswith(("names:", "nc:")) for line in head.splitlines())


def _images_and_labels(fs: Any, folders: dict[str, str]) -> bool:
    if "images" not in folders or "labels" not in folders:
        return False
    return any(p.lower().endswith(".txt") for p in fs.ls(folders["labels"], detail=False))


def image_folder_table(url: str) -> pd.DataFrame:
    """Rows for ``<dir>/<SPLIT>/<label>/<file>`` or ``<dir>/<label>/<file>`` (split then assigned by hash): each
    of its ``label_folders``' images (``folder_rows``), as a pipeline lists them a folder per worker."""
    rows = [row for folder in label_folders(url) for row in folder_rows(url, folder)[0]]
    if not rows:
        raise no_images(url)
    return listing_frame(rows, any(split is not None for split, _, _ in rows))


def no_images(url: str) -> TFRecorderError:
    """The error for a folder without rows: what it holds instead (images outside label folders, tables)."""
    return TFRecorderError(
        f"image folder {url!r} has no images laid out as <dir>/<SPLIT>/<label>/<file> or <dir>/<label>/<file> "
        f"(extensions {', '.join(IMAGE_EXTENSIONS)}){_what_it_holds(url)}"
    )


def _what_it_holds(url: str) -> str:
    fs, root = filesystem(url)
    files = [p for p in fs.find(root.rstrip("/")) if not p.rsplit("/", 1)[-1].startswith(".")]
    images = [p for p in files if p.lower().endswith(IMAGE_EXTENSIONS)]
    tables = sorted({p.rsplit(".", 1)[-1].lower() for p in files if p.lower().endswith((".csv", ".parquet"))})
    if images:
        return (f": its {len(images)} images (e.g. {images[0].rsplit('/', 1)[-1]!r}) are not in label folders; "
                f"move them into one folder per label, or give a table of image_uri and label")
    if tables:
        # the glob of the folder that holds them, in it or below (the Hugging Face Hub's data/)
        first = next(p for p in files if p.lower().endswith(f".{tables[0]}"))
        below = posixpath.dirname(first)[len(root.rstrip("/")):]
        return (f": it holds {' and '.join(tables).upper()} files; give one, or a glob of them "
                f"('{url.rstrip('/')}{below}/*.{tables[0]}')")
    return ""


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
        subs = _folders(fs, top) if name.upper() in FOLDER_SPLITS else []
        if subs:  # a split folder: its folders are the labels; an image beside them is at a level not read
            found += [LabelFolder(sub, FOLDER_SPLITS[name.upper()], sub.rsplit("/", 1)[-1]) for sub in subs]
        else:  # a label folder, were its name a split's (a class called "test")
            found.append(LabelFolder(top, None, name))
    return sorted(found, key=lambda f: f.path.split("/"))


def _folders(fs: Any, path: str) -> list[str]:
    """The folders in ``path`` (links to folders too) but hidden ones (``.ipynb_checkpoints``, ``.git``): never
    label folders."""
    return [e["name"].rstrip("/") for e in fs.ls(path, detail=True)
            if (e.get("type") == "directory" or e.get("islink") and fs.isdir(e["name"])) and not _hidden(e["name"])]


def hidden_within(path: str) -> bool:
    """Whether any name of the relative ``path`` starts with a dot: in a tool's folder, or a tool's file."""
    return any(part.startswith(".") for part in path.split("/"))


def _hidden(path: str) -> bool:
    """Whether the last name of ``path`` starts with a dot: a tool's file (``.DS_Store``, macOS's ``._a.jpg``,
    Jupyter's ``.ipynb_checkpoints``), not the user's data."""
    return path.rstrip("/").rsplit("/", 1)[-1].startswith(".")


def folder_rows(url: str, folder: LabelFolder) -> tuple[list[tuple[str | None, str, str]], str]:
    """The rows of one of ``label_folders(url)``, its images in name order, and the identity of what was listed
    (a SHA-256 of each image's name, size and modification time or object generation)."""
    fs = filesystem(url)[0]
    # a link is a row too, read where it leads (class folders are often made of links to the images; one to
    # nothing is a not_found row): fsspec lists links as neither file nor folder
    files = sorted((e for e in fs.ls(folder.path, detail=True)
                    if (e.get("type") == "file" or e.get("islink") and not fs.isdir(e["name"]))
                    and _is_row(e["name"])),
                   key=lambda e: e["name"])
    identity = hashlib.sha256()
    for e in files:
        version = [str(e.get(k)) for k in ("size", "mtime", "updated", "generation", "ETag") if k in e]
        identity.update(json.dumps([e["name"], *version]).encode("utf-8"))
    return [(folder.split, file_url(url, fs, e["name"]), folder.label) for e in files], identity.hexdigest()


def skipped_files(url: str) -> tuple[str, ...]:
    """Every file under the image folder ``url`` that is not a row, as ``"<path in it> (why)"``: a hidden file,
    one that is not an image (by its extension), or an image at a level not read (beside the label folders,
    or below them)."""
    fs, root = filesystem(url)
    root = root.rstrip("/")
    read = {folder.path for folder in label_folders(url)}
    skipped = []
    for path in sorted(fs.find(root)):
        parent, name = path.rsplit("/", 1)
        image = name.lower().endswith(IMAGE_EXTENSIONS)
        if parent in read and _is_row(name) or path in read:  # a row; a link to a label folder (find lists it)
            continue
        inside = path[len(root) + 1:]
        why = ("hidden" if hidden_within(inside) else
               "not an image" if not image else "at a level not read")
        skipped.append(f"{inside} ({why})")
    return tuple(skipped)


def _is_row(path: str) -> bool:
    """Whether a file of a label folder is a row: an image (by its extension) that is not hidden."""
    return path.lower().endswith(IMAGE_EXTENSIONS) and not _hidden(path)


def skipped_note(url: str, skipped: Sequence[str]) -> str:
    """What a result says of the files of an image folder that are not rows."""
    shown = ", ".join(skipped[:5]) + (", ..." if len(skipped) > 5 else "")
    return (f"{len(skipped)} files under {url!r} are not rows and were skipped: {shown} (result.skipped lists "
            f"them; rows are <dir>/<SPLIT>/<label>/<image> or <dir>/<label>/<image>)")


def file_url(url: str, fs: Any, path: str) -> str:
    """The file at ``path`` on ``fs`` named as the source ``url`` names its files: a full URL for a remote source,
    the path for a local one."""
    return fs.unstrip_protocol(path) if "://" in url else path


def create_image_csv(image_dir: str, output_csv: str) -> pd.DataFrame:
    """Write the table of an image folder as a CSV (``tfrecorder create-image-csv``); returns it.

    Args:
        image_dir: a folder of ``<SPLIT>/<label>/<file>`` or ``<label>/<file>`` images.
        output_csv: the CSV file to write (``split,image_uri,label``, paths as found).

    Returns:
        The table written, as a DataFrame.

    Examples:
        >>> images = make_sample_images(str(tmp_path / "imgs"), n=6)
        >>> table = tfrecorder.create_image_csv(str(tmp_path / "imgs"), str(tmp_path / "imgs.csv"))
        >>> list(table.columns), len(table)
        (['split', 'image_uri', 'label'], 6)
    """
    fs, path = filesystem(image_dir)
    if not fs.isdir(path):
        raise TFRecorderError(f"image folder {image_dir!r} {'is a file' if fs.exists(path) else 'does not exist'}: "
                              f"give the folder of <SPLIT>/<label>/<file> or <label>/<file> images")
    df = image_folder_table(image_dir)
    out_fs, out_path = filesystem(output_csv)
    if out_fs.isdir(out_path):
        raise TFRecorderError(f"output_csv {output_csv!r} is a folder: give the path of the CSV file to write")
    with fsspec.open(output_csv, "w", encoding="utf-8", newline="") as f:
        df.to_csv(f, index=False)
    return df
