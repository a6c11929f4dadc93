"""Images inside the table (pure): an image column's values - encoded bytes, ``{"bytes", "path"}`` structs (Hugging
Face ``datasets``' ``Image``), uint8 numpy arrays, PIL images - as the encoded bytes a record stores (arrays and
PIL images encoded once, as PNG: lossless), and such a column as the Arrow struct Parquet holds it in."""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from tfrecorder.schema import brief, image_value_kind, is_image_bytes, is_missing

# The image_uri (and image_name) of an image held in the table without a path of its own: its row's number in the
# table, which is the same on every runner and in errors.csv.
ROW_NAME = "row-{row}"
# Array shapes an image is given as, by their channels: the Pillow mode each is encoded from.
_ARRAY_MODES = {1: "L", 2: "LA", 3: "RGB", 4: "RGBA"}
# Pillow modes PNG stores as they are; any other is converted first (CMYK, YCbCr, LAB, HSV -> RGB).
_PNG_MODES = {"1", "L", "LA", "P", "RGB", "RGBA"}
_ALPHA_MODES = {"LA", "La", "PA", "RGBA", "RGBa"}  # Pillow's modes with an alpha band
_WIDE_MODES = {"I": "32-bit integers", "F": "32-bit floats"}  # and I;16*: values of more than 8 bits
_ORIENTATION = 0x0112  # EXIF orientation: kept in the PNG, so the picture turns as its file would
# The most bytes of images a part of a table holds (a part is read, validated and spilled at a time): rows of
# images make smaller parts than PART_ROWS, so a table of large images converts in the memory of a few parts.
PART_BYTES = 32 * 1024 * 1024


def image_bytes(value: Any) -> tuple[bytes | memoryview | None, str | None]:
    """The encoded bytes of one value of an image column and the path it names (a struct's ``path``; None when
    it has none); (None, path) for a struct that only names a file, (None, None) for a missing value. A value
    that is no image is a ValueError saying why (never showing its bytes)."""
    if is_missing(value):
        return None, None
    kind = image_value_kind(value)
    if kind == "bytes":
        return bytes(value), None
    if kind == "struct":
        data, path = value.get("bytes"), value.get("path")
        path = None if is_missing(path) or not str(path).strip() else str(path).strip()
        if data is not None and not isinstance(data, (bytes, bytearray, memoryview)):
            raise ValueError(f"its 'bytes' is a {type(data).__name__}, not bytes")
        # a memoryview (a Parquet part's own buffer: image_structs) is kept as it is, not copied
        return (data if isinstance(data, (bytes, memoryview)) else bytes(data)) if data else None, path
    if kind == "array":
        return encode_array(value), None
    if kind == "pil":
        return encode_pil(value), None
    raise ValueError(f"a {type(value).__name__} ({brief(value, 40)}) is no image")


def encode_array(pixels: np.ndarray) -> bytes:
    """A uint8 array (HxW, HxWx1/2/3/4) as PNG bytes."""
    if pixels.dtype != np.uint8:
        raise ValueError(f"an array of dtype {pixels.dtype}: give uint8 pixels (0-255)")
    channels = 1 if pixels.ndim == 2 else pixels.shape[-1] if pixels.ndim == 3 else 0
    if channels not in _ARRAY_MODES or 0 in pixels.shape[:2]:
        raise ValueError(f"an array of shape {pixels.shape}: give HxW or HxWx1, 3 or 4 pixels")
    from PIL import Image

    mode = _ARRAY_MODES[channels]
    image = Image.fromarray(np.ascontiguousarray(pixels.reshape(pixels.shape[:2]) if channels == 1 else pixels),
                            mode=mode)
    return _png(image)


def encode_pil(image: Any) -> bytes:
    """A PIL image as PNG bytes (its EXIF orientation kept). One of more than 8 bits a value (modes I, I;16, F:
    integers or floats of no set range) is a ValueError, as an array of another dtype than uint8 is: stored as
    8-bit pixels, 0-255 integers would become 0 and 0-1 floats black."""
    if image.mode in _WIDE_MODES or image.mode.startswith("I;16"):
        raise ValueError(f"a PIL image of mode {image.mode} ({_WIDE_MODES.get(image.mode, '16-bit integers')}): "
                         f"give 8-bit pixels (mode L, RGB or RGBA), e.g. Image.fromarray(pixels.astype('uint8'))")
    if image.mode == "La":  # premultiplied: Pillow converts it to LA only (un-premultiplied)
        image = image.convert("LA")
    if image.mode not in _PNG_MODES:  # alpha (RGBa's too) kept; LAB's "A" is a colour, not an alpha
        alpha = image.mode in _ALPHA_MODES or "transparency" in image.info
        image = image.convert("RGBA" if alpha else "RGB")
    return _png(image)


def _png(image: Any) -> bytes:
    buffer = io.BytesIO()
    exif = image.getexif()
    turned = {"exif": exif} if exif.get(_ORIENTATION, 1) != 1 else {}
    try:
        image.save(buffer, format="PNG", **turned)
    except (OSError, ValueError) as e:
        raise ValueError(f"a {image.mode} image of {image.width}x{image.height} that PNG cannot hold: {e}") from e
    return buffer.getvalue()


def image_structs(column: Any) -> list[dict[str, Any] | None]:
    """A pyarrow column of ``struct<bytes, path>`` images (Hugging Face's ``Image``) as ``to_pandas`` gives it - a
    dict of its fields a row, None for a missing struct - but with each image's bytes a memoryview of the
    column's own buffer instead of a copy: a Parquet part of images is read once, and the shard writers take
    each image from there (copying 41 KB into a new bytes object cost as much as the Parquet read)."""
    import pyarrow as pa

    values: list[dict[str, Any] | None] = []
    for chunk in column.chunks if isinstance(column, pa.ChunkedArray) else [column]:
        fields = dict(zip((f.name for f in chunk.type), chunk.flatten()))  # the struct's offset and nulls applied
        data = fields.pop("bytes")
        others = {name: field.to_pylist() for name, field in fields.items()}
        missing = chunk.is_null().to_numpy(zero_copy_only=False)
        given = data.is_valid().to_numpy(zero_copy_only=False)
        _, offsets_buffer, data_buffer = data.buffers()
        wide = np.int64 if pa.types.is_large_binary(data.type) else np.int32
        offsets = np.frombuffer(offsets_buffer, wide)[data.offset:data.offset + len(data) + 1].tolist() \
            if offsets_buffer is not None else [0] * (len(data) + 1)  # none: an array of no values
        # unsigned bytes, so that a view equals the bytes it holds (pyarrow's buffers are signed: "b")
        buffer = memoryview(data_buffer).cast("B") if data_buffer is not None else memoryview(b"")
        for i in range(len(chunk)):
            if missing[i]:
                values.append(None)
                continue
            row = {"bytes": buffer[offsets[i]:offsets[i + 1]] if given[i] else None}
            row.update((name, found[i]) for name, found in others.items())
            values.append(row)
    return values


def image_struct_array(values: Sequence[Any]) -> Any:
    """An image column's values as a pyarrow ``struct<bytes: binary, path: string>`` array (Hugging Face's
    ``Image`` as Parquet holds it), arrays and PIL images encoded; a value that is no image is a ValueError
    naming its row."""
    import pyarrow as pa

    structs = []
    for row, value in enumerate(values):
        try:
            data, path = image_bytes(value)
        except ValueError as e:
            raise ValueError(f"row {row}: {e}") from e
        structs.append(None if data is None and path is None else {"bytes": data, "path": path})
    return pa.array(structs, pa.struct([("bytes", pa.binary()), ("path", pa.string())]))


def part_rows(rows: int, row_bytes: float) -> int:
    """Rows a part holds: ``rows``, or fewer when rows of ``row_bytes`` each would take more than PART_BYTES."""
    return int(min(rows, max(1, PART_BYTES // row_bytes))) if row_bytes > 0 else rows


def held_bytes_per_row(frame: pd.DataFrame) -> int:
    """About how many bytes a row's images take in a frame that holds them (its object columns whose first
    values are images: ``bytes_per_row``); 0 for a frame of image paths and other values."""
    return sum(bytes_per_row(frame[name]) for name in frame.columns if frame[name].dtype == object)


def bytes_per_row(column: pd.Series, sample: int = 64) -> int:
    """About how many bytes the images of an image column take a row, from its first ``sample`` values: what
    the size of a part (and of the spill) is judged by when a table holds its images. 0 when its first value
    given is no image."""
    values = [v for v in column.iloc[:sample].tolist() if not is_missing(v)]
    if not values or image_value_kind(values[0]) is None or (
            image_value_kind(values[0]) == "bytes" and not is_image_bytes(values[0])):
        return 0
    sizes = []
    for value in values:
        kind = image_value_kind(value)
        if kind == "bytes":
            sizes.append(len(value))
        elif kind == "struct":
            sizes.append(len(value.get("bytes") or b""))
        elif kind == "array":
            sizes.append(int(value.nbytes))
        elif kind == "pil":
            sizes.append(value.width * value.height * len(value.getbands()))
    return int(sum(sizes) / len(sizes)) if sizes else 0
