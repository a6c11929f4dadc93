"""Other tools' TFRecord files (pure but for the listing): what reading them (``read/infer``) and converting them
(``write/sources/od_records``) share - their compression told from their first bytes, their split from their
names, and the label map an Object Detection API export keeps beside them."""

from __future__ import annotations

import json
import posixpath
import re
import zlib
from typing import Any

from tfrecorder.types import TEST, TRAIN, VALIDATION

LABEL_MAP_SUFFIX = "label_map.pbtxt"  # Datumaro's and ours: label_map.pbtxt; Roboflow's: <name>_label_map.pbtxt
_ITEM = re.compile(r"item\s*\{(.*?)\}", re.DOTALL)
_QUOTED = r"""("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')"""


def sniff_compression(head: bytes) -> str | None:
    """gzip, zlib or None, from a file's first bytes."""
    if head[:2] == b"\x1f\x8b":
        return "gzip"
    if len(head) >= 2 and head[0] & 0x0F == 8 and (head[0] * 256 + head[1]) % 31 == 0:
        try:
            zlib.decompressobj().decompress(head)
            return "zlib"
        except zlib.error:
            return None
    return None


def split_of(name: str) -> str:
    """TRAIN, VALIDATION or TEST from a file name's prefix, else from its folder when that is named after a split
    (Roboflow's export: ``valid/cells.tfrecord``); TRAIN when neither names one."""
    base = posixpath.basename(name).lower()
    if base.startswith(("valid", "val", "eval", "dev")):
        return VALIDATION
    if base.startswith("test"):
        return TEST
    return _SPLIT_FOLDERS.get(posixpath.basename(posixpath.dirname(name)).lower(), TRAIN)


_SPLIT_FOLDERS = {"valid": VALIDATION, "val": VALIDATION, "validation": VALIDATION, "eval": VALIDATION,
                  "dev": VALIDATION, "test": TEST}


def label_map(fs: Any, paths: list[str]) -> tuple[dict[int, str], str | None]:
    """The names of a ``*label_map.pbtxt`` beside the files (the first folder that has one), by id; and its URL."""
    for folder in dict.fromkeys(posixpath.dirname(p) for p in paths):
        try:
            found = sorted(p for p in fs.ls(folder, detail=False) if p.endswith(LABEL_MAP_SUFFIX))
        except (FileNotFoundError, NotImplementedError):
            continue
        if found:
            return parse_label_map(fs.cat_file(found[0]).decode("utf-8", "replace")), fs.unstrip_protocol(found[0])
    return {}, None


def parse_label_map(text: str) -> dict[int, str]:
    """The names of a label map's ``item { id: 1 name: 'cat' display_name: 'Cat' }`` entries by id (its
    display_name where it has one, as the Object Detection API's label_map_util reads it)."""
    names: dict[int, str] = {}
    for item in _ITEM.findall(text):
        found_id = re.search(r"\bid\s*:\s*(-?\d+)", item)
        name = re.search(rf"\bdisplay_name\s*:\s*{_QUOTED}", item) or re.search(rf"\bname\s*:\s*{_QUOTED}", item)
        if found_id and name:
            names[int(found_id.group(1))] = _unquoted(name.group(1))
    return names


def _unquoted(quoted: str) -> str:
    """A protobuf text-format string's value: its escapes read as JSON reads them (ours are json.dumps')."""
    body = quoted[1:-1]
    if quoted[0] == "'":
        body = body.replace("\\'", "'").replace('"', '\\"')
    try:
        return json.loads(f'"{body}"')
    except ValueError:
        return body
