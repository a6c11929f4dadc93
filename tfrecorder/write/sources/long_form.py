"""The long form (IO edge): what the annotation readers (``voc``, ``coco``, ``automl``) share - the columns
they build, a value per column (``LONG_FORM``: a row per box), the frame they end in, and the checks and
wording of what they read: text as UTF-8, finite numbers, a bad value quoted short, a name joined to its folder.
"""

from __future__ import annotations

import math
import os
import posixpath
import re
import reprlib
from collections.abc import Mapping
from typing import Any

import pandas as pd

from tfrecorder.errors import TFRecorderError
from tfrecorder.schema import IMAGE_COLUMN, LABEL_COLUMN, SPLIT_COLUMN
from tfrecorder.types import INSTANCE_MASK_COLUMN, KEYPOINTS_COLUMN

BOX_COLUMNS = ("xmin", "ymin", "xmax", "ymax")
LONG_FORM = (SPLIT_COLUMN, IMAGE_COLUMN, LABEL_COLUMN, *BOX_COLUMNS)
SIZE_COLUMNS = ("width", "height")  # the image the boxes were drawn on, as the annotation says
URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")  # a name that is a URL (http://, gs://, file://...)
SHOWN = 60  # characters of a bad value a message quotes


def empty_columns(extra: tuple[str, ...]) -> dict[str, list[Any]]:
    """The long form's columns, empty: rows are added a value per column (a dict per row would hold each
    key again, several times the boxes' own size)."""
    return {name: [] for name in (*LONG_FORM, *extra)}


def add_row(columns: dict[str, list[Any]], row: Mapping[str, Any]) -> None:
    for name, values in columns.items():
        values.append(row[name])


def long_frame(columns: dict[str, list[Any]], extra: tuple[str, ...]) -> pd.DataFrame:
    """The long form: its columns in order, the box edges float, the format's counts nullable integers."""
    names = [*LONG_FORM, *extra]
    # copy=False: columns given as arrays (COCO's) are the frame's, not copied beside it
    df = pd.DataFrame(columns, columns=names, copy=False) if len(columns[SPLIT_COLUMN]) else \
        pd.DataFrame(columns=names)
    df[list(BOX_COLUMNS)] = df[list(BOX_COLUMNS)].astype("float64")
    for column in extra:
        if column not in ("area", KEYPOINTS_COLUMN, INSTANCE_MASK_COLUMN):  # the format's counts and flags
            df[column] = df[column].astype("Int64")
    if "area" in extra:
        df["area"] = df["area"].astype("float64")
    if len(df) and df[LABEL_COLUMN].isna().all():
        # labels are class names, even where every row's was refused (each image's rows then error rows,
        # named in errors.csv): left untyped, the table check could not tell the column's kind
        df[LABEL_COLUMN] = df[LABEL_COLUMN].astype("string")
    return df


def utf8_text(data: bytes, what: str, encoding: str = "utf-8") -> str:
    """``data`` as text, without the byte order mark Windows editors put first; not UTF-8: one line naming
    ``what`` and the line."""
    try:
        return data.decode(encoding).removeprefix("\ufeff")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise TFRecorderError(f"{what} is not UTF-8 text: byte 0x{data[e.start]:02x} at line {line}; save it as "
                              f"UTF-8") from None


def finite_number(value: Any, where: str, name: str) -> float:
    if isinstance(value, bool):  # JSON's true/false: Python's 1 and 0, no coordinate
        raise TFRecorderError(f"{where}: {name} {quoted(value)} is not a number")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise TFRecorderError(f"{where}: {name} {quoted(value)} is not a number") from None
    if not math.isfinite(number):
        raise TFRecorderError(f"{where}: {name} {quoted(value)} is not a finite number")
    return number


def quoted(value: Any) -> str:
    """``value`` as a message quotes it: its repr, cut short - made by ``reprlib``, which shows a few items of
    each list and level, never the whole of a large value (a YAML alias bomb of a few hundred bytes expands to
    gigabytes)."""
    text = _SHORT.repr(value)
    return text if len(text) <= SHOWN else f"{text[:SHOWN]}..."


_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxlist, _SHORT.maxtuple, _SHORT.maxdict, _SHORT.maxset = 3, 8, 8, 8, 8
_SHORT.maxstring = _SHORT.maxother = SHOWN + 2


def path_url(url: str, fs: Any, path: str) -> str:
    return fs.unstrip_protocol(path) if "://" in url else path


def windows_name(name: str) -> str:
    """A relative file name from an annotation file or list, its folders written with ``/``: tools on Windows
    write ``images\\train\\a.jpg``, which on Linux or macOS would name one file of that whole name (a
    backslash in a real file name is rarer than an export made on Windows)."""
    return name.replace("\\", "/")


def join_name(folder: str, name: str) -> str:
    """A name from an annotation file in ``folder``, joined as given (``..`` kept: the fetch's root check sees
    it). A URL name is kept as it is, as is an absolute name under a local folder; under a remote folder an
    absolute name is on that store: a remote annotation file never names a local file. Backslashes are
    folders, as an annotation file written on Windows names them (``train\\a.jpg``: ``windows_name``)."""
    if URL.match(name):
        return name
    name = windows_name(name)
    if "://" in folder:
        if name.startswith("/"):
            scheme, rest = folder.split("://", 1)
            return f"{scheme}://{rest.split('/', 1)[0]}{name}"
        return posixpath.join(folder, name)
    return os.path.join(folder, name)


def annotation_folder(url: str) -> str:
    """The folder of an annotation file, or its parent when that folder is named ``annotations`` (COCO's and
    Datumaro's layout: ``annotations/instances_train.json`` beside ``images/``)."""
    folder = file_folder(url)
    parent, name = (posixpath if "://" in url else os.path).split(folder)
    return parent if name.lower() == "annotations" else folder


def is_relative(uri: str | None) -> bool:
    """A relative local path: read from a CSV's folder, or from the working directory for a DataFrame."""
    return uri is not None and uri != "" and "://" not in uri and not os.path.isabs(uri)


def file_folder(url: str) -> str:
    """The folder of the file at ``url`` (a path made absolute, or a URL's): what its relative names are read
    from."""
    return posixpath.dirname(url) if "://" in url else os.path.dirname(os.path.abspath(url))


def resolve_uri(uri: str | None, base_dir: str | None) -> str | None:
    """Join a relative path to ``base_dir`` (the CSV's folder); URLs and absolute paths stay."""
    if base_dir is None or not is_relative(uri):
        return uri
    if "://" in base_dir:
        return posixpath.join(base_dir, uri)
    return os.path.join(base_dir, uri)
