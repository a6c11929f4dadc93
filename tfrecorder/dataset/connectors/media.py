"""Media connectors' base (pure): a kind of value a record keeps as a file's bytes - audio, a document, any file
a kind knows how to check - given as a column of locations (paths and URLs, resolved as image URIs are) or of the
bytes themselves. What is shared lives here: the column's values, their content key and Arrow type, and the
contract of ``prepare``, which the shard's writer calls for each row in its threads after fetching the bytes with
the image fetch's limits (``write/record/shard.py``). A kind subclasses ``Media`` in a module of its own."""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from tfrecorder.dataset.connectors.base import BytesValues, Connector, object_array, object_hashes
from tfrecorder.errors import KIND_ROW_ERRORS, ROW_ERRORS

# A media column's checked value: the location as given (credentials redacted: what messages name), where to
# fetch it (resolved against the table's folder), or the bytes the table holds; one of the last two is set.
URI, LOCATION, DATA = "uri", "location", "data"
# A value of several files (a clip's frame images): LOCATION holds their locations a line each, resolved and
# fetched each, and prepare is given them packed (``packed``): this tag, then each file's length and bytes.
LOCATIONS_SEPARATOR, FILES = "\n", b"TFRFILES\0"
SUMMARIZED_VALUES = 32  # distinct values of a summarized measure kept: a few rates, not every clip's length


class Media(BytesValues):
    """A kind of value kept as a file's bytes, fetched and checked by the shard's writer.

    A subclass implements ``prepare`` (the bytes to store and what it measured, or an ``ImageError`` whose code
    is one of ``row_errors``: a kind outside the package documents its own codes, which join errors.csv's as the
    class is defined; the package's kinds document theirs in ``errors.ROW_ERRORS``) and lists its
    measures (``measures``: name -> the connector of its values), stored as ``<feature>/<name>`` beside the
    bytes. A row without a value is the row error ``missing_uri``."""

    abstract = True
    row_errors: ClassVar[dict[str, tuple[str, str]]] = {}  # code -> (what happened, what to do), as ROW_ERRORS
    # stored beside the bytes as <feature>/<name>: each measure's connector, or its name ("Int64", "Text")
    measures: ClassVar[dict[str, Connector | str]] = {}
    # measures whose distinct values dataset.json's connector is told (``summarized``): a few each (a sample rate)
    summarized_measures: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for code, text in cls.__dict__.get("row_errors", {}).items():
            known = ROW_ERRORS.get(code) or KIND_ROW_ERRORS.get(code)
            if known is not None and known != text:
                raise TypeError(f"{cls.__name__}: row error {code!r} is already documented as {known[0]!r}: give "
                                f"yours a code of its own")
            if code not in ROW_ERRORS:  # the package's own kinds document theirs in ROW_ERRORS
                KIND_ROW_ERRORS[code] = text

    # writing: the column
    def check(self, value: Any, sources: set[str]) -> dict[str, Any]:
        if isinstance(value, (bytes, bytearray, memoryview, np.bytes_)):
            sources.add("bytes")
            return {URI: None, LOCATION: None, DATA: bytes(value)}
        if isinstance(value, (str, np.str_)) and str(value).strip():
            sources.add("str")
            return {URI: str(value).strip(), LOCATION: str(value).strip(), DATA: None}
        raise TypeError("not a location or bytes")

    def hashes(self, values: Sequence[Any] | np.ndarray) -> np.ndarray:
        """By the location as given, or by held bytes' CRC-32 and length (the rows' order rests on it; content
        is compared by the writers)."""
        keys = [None if v is None else v[URI] if v[URI] is not None else
                f"{zlib.crc32(v[DATA]):08x}:{len(v[DATA])}" for v in values]
        return object_hashes(object_array(keys))

    def arrow_type(self) -> Any:
        import pyarrow as pa

        return pa.struct([(URI, pa.string()), (LOCATION, pa.string()), (DATA, pa.large_binary())])

    # writing: the shard
    def prepare(self, data: bytes, uri: str) -> tuple[bytes, dict[str, Any]]:
        """The bytes a record stores of the file ``data`` (named ``uri`` in messages) and the value of each of
        ``measures``; an ``ImageError`` (a row error) where the file is not one of this kind."""
        raise NotImplementedError

    def feature_name(self, column: str) -> str:
        """A column it claims by a name ending ``_uri`` is stored without it, as ``image_uri``'s image is
        (``audio_uri``: ``audio``); any other keeps its name."""
        return column.removesuffix("_uri") if column in self.claimed_names else column

    def configured(self, keywords: Mapping[str, Any]) -> Media:
        return self

    def summarized(self, found: Mapping[str, Sequence[Any]]) -> Media:
        """This kind as dataset.json keeps it, told the distinct values of each of ``summarized_measures`` that
        the written records hold (``found``; at most ``SUMMARIZED_VALUES`` each)."""
        return self

    def feature_names(self, feature: str) -> dict[str, Connector]:
        """Every feature a column stored under ``feature`` writes, with its connector: the bytes, then each
        measure."""
        from tfrecorder.dataset.connectors import named  # the registry imports this module

        return {feature: self, **{f"{feature}/{name}": named(c) if isinstance(c, str) else c
                                  for name, c in self.measures.items()}}


def packed(files: Sequence[bytes]) -> bytes:
    """Several files as one value ``prepare`` is given (``FILES``): ``unpacked`` gives them back."""
    return FILES + b"".join(len(f).to_bytes(8, "little") + bytes(f) for f in files)


def unpacked(data: bytes) -> list[bytes]:
    """The files ``packed`` put in ``data``."""
    files, at = [], len(FILES)
    while at < len(data):
        size = int.from_bytes(data[at:at + 8], "little")
        files.append(data[at + 8:at + 8 + size])
        at += 8 + size
    return files
