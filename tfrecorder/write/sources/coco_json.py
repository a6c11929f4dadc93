"""COCO JSON (IO edge): a COCO file's text parsed a top-level key at a time, keeping only the keys its reader
reads (``COCO_KEYS``), its ``annotations`` handed on an entry at a time as each is parsed, so no list of them
is ever held (a box-only export's 300,000 annotations as dicts took 9x the file).

The parse is ``json``'s own, a value at a time (``JSONDecoder.raw_decode``); the top-level object and the
annotations' array around them are read here, with ``json``'s messages and positions for what is not JSON.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any, Protocol

# The keys read from a COCO file. Every other key is dropped as its object is parsed. The segmentation polygons,
# most of a COCO file's bytes and ~4x their size as Python floats, are kept as their compact JSON bytes, made as
# each annotation is parsed (bytes, which pandas keeps as they are, where str would be copied into an Arrow
# string column); an RLE's "size" and "counts" with them.
COCO_KEYS = frozenset({"images", "annotations", "categories", "id", "file_name", "width", "height", "image_id",
                       "bbox", "category_id", "iscrowd", "area", "name", "keypoints", "skeleton", "segmentation",
                       "size", "counts"})
SEGMENTATION = "segmentation"
STREAMED = "annotations"  # the top-level array handed on an entry at a time
_SPACE = re.compile(r"[ \t\n\r]*")  # what json skips between tokens


class Entries(Protocol):
    """Where the entries of the streamed array go, each as it is parsed."""

    def add(self, index: int, entry: Any) -> None: ...


def parse_coco(text: str, entries: Callable[[], Entries]) -> Any:
    """``text``'s JSON value, each object keeping ``COCO_KEYS``; a top-level ``annotations`` array's entries go
    to ``entries()`` (made for the array, the last one where a key repeats) one at a time, and the value under
    that key is what they went to. Raises ``json.JSONDecodeError`` (a ``ValueError``) as ``json.loads`` does."""
    decoder = json.JSONDecoder(object_pairs_hook=kept_keys)
    start = _SPACE.match(text).end()
    if not text.startswith("{", start):  # not an object: parsed whole, for the reader to say it is not COCO
        value, end = decoder.raw_decode(text, start)
        return _ended(text, end, value)
    data: dict[str, Any] = {}
    position = _SPACE.match(text, start + 1).end()
    if text.startswith("}", position):
        return _ended(text, position + 1, data)
    while True:
        key, position = _key(text, position)
        if key == STREAMED and text.startswith("[", position):
            data[key] = sink = entries()
            position = _array(text, position, decoder, sink)
        else:
            value, position = decoder.raw_decode(text, position)
            data.update(kept_keys([(key, value)]))
        position = _SPACE.match(text, position).end()
        if text.startswith("}", position):
            return _ended(text, position + 1, data)
        if not text.startswith(",", position):
            raise json.JSONDecodeError("Expecting ',' delimiter", text, position)
        position = _SPACE.match(text, position + 1).end()


def _key(text: str, position: int) -> tuple[str, int]:
    """The key at ``position`` and where its value starts (past the ``:``)."""
    if not text.startswith('"', position):
        raise json.JSONDecodeError("Expecting property name enclosed in double quotes", text, position)
    key, position = json.decoder.scanstring(text, position + 1)  # type: ignore[attr-defined]  # json's own
    position = _SPACE.match(text, position).end()
    if not text.startswith(":", position):
        raise json.JSONDecodeError("Expecting ':' delimiter", text, position)
    return key, _SPACE.match(text, position + 1).end()


def _array(text: str, position: int, decoder: json.JSONDecoder, sink: Entries) -> int:
    """Each entry of the array at ``position`` (its ``[``) handed to ``sink`` as parsed; where the array ends."""
    position = _SPACE.match(text, position + 1).end()
    if text.startswith("]", position):
        return position + 1
    index = 0
    while True:
        entry, position = decoder.raw_decode(text, position)
        sink.add(index, entry)
        index += 1
        position = _SPACE.match(text, position).end()
        if text.startswith("]", position):
            return position + 1
        if not text.startswith(",", position):
            raise json.JSONDecodeError("Expecting ',' delimiter", text, position)
        position = _SPACE.match(text, position + 1).end()


def _ended(text: str, end: int, value: Any) -> Any:
    end = _SPACE.match(text, end).end()
    if end != len(text):
        raise json.JSONDecodeError("Extra data", text, end)
    return value


def kept_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    return {key: segmentation_text(value) if key == SEGMENTATION else value
            for key, value in pairs if key in COCO_KEYS}


def segmentation_text(value: Any) -> str | bytes | None:
    """An annotation's segmentation (polygons or RLE) as compact JSON (UTF-8 bytes), the instance mask column's
    value (``types.InstanceMask``: drawn when written); None for none (``[]``)."""
    if isinstance(value, Mapping) and not value:  # an object of none of RLE's keys: the mask's decode names it
        return b"{}"
    if isinstance(value, str) or not value:  # text already (a file of another tool) or none
        return value or None
    return json.dumps(value, separators=(",", ":")).encode("ascii")
