"""AutoML Vision (IO edge): an AutoML Vision object-detection CSV read into the long form, a row per box
(normalized vertices, both vertex forms), and whether a CSV's first line is such a row (``automl_like``).
"""

from __future__ import annotations

import csv
import io

import pandas as pd

from tfrecorder.dataset.storage import open_url
from tfrecorder.errors import SchemaError, TFRecorderError
from tfrecorder.schema import IMAGE_COLUMN, LABEL_COLUMN, SPLIT_COLUMN
from tfrecorder.write.sources.long_form import (
    BOX_COLUMNS,
    add_row,
    empty_columns,
    file_folder,
    finite_number,
    long_frame,
    quoted,
    resolve_uri,
    utf8_text,
)
from tfrecorder.write.splits import TEST, TRAIN, UNASSIGNED, VALIDATION

AUTOML_WIDTH = 11  # split, image, label, then x,y of 4 vertices: 2-vertex rows leave two pairs empty


def read_automl(url: str) -> pd.DataFrame:
    """AutoML Vision's object-detection CSV: ``set,image,label,x1,y1,x2,y2,x3,y3,x4,y4`` normalized, with the
    2-vertex form's empty pairs (``0.1,0.2,,,0.3,0.4,,``); a row of just ``set,image`` is an image without
    objects. A file whose rows are in two units (some vertices over 1: pixels) is refused."""
    with open_url(url) as f:
        text = utf8_text(f.read(), f"AutoML Vision CSV {url!r}", "utf-8-sig")
    # a table naming its images itself (AutoML's are full gs:// URIs): a relative name is the CSV's folder's, as
    # in any CSV table, never the working directory's
    folder = file_folder(url)
    columns = empty_columns(())
    pixels: list[int] = []  # the lines of boxes with a vertex over 1, and how many are within [0, 1]
    normalized = 0
    reader = csv.reader(io.StringIO(text, newline=""), skipinitialspace=True)
    for values in reader:
        line = reader.line_num
        if not values or values == [""]:  # a blank line
            continue
        if len(values) > AUTOML_WIDTH:
            raise TFRecorderError(f"AutoML Vision CSV {url!r} line {line} has {len(values)} fields: a row has at "
                                  f"most {AUTOML_WIDTH} (set, image URI, label, then x,y of 4 vertices); remove "
                                  f"the others")
        values = [*values, *[""] * (AUTOML_WIDTH - len(values))]
        cells = [v.strip() for v in values]
        if cells[0].upper() not in (TRAIN, VALIDATION, TEST, UNASSIGNED) or not cells[1]:
            raise TFRecorderError(f"{url!r} line {line}: not an AutoML Vision object-detection row (set, image "
                                  f"URI, label, box): {quoted(','.join(values))}")
        where = f"{url!r} line {line}"
        numbers = [None if not c else finite_number(c, where, "vertex") for c in cells[3:]]
        given = [(x, y) for x, y in zip(numbers[0::2], numbers[1::2]) if x is not None and y is not None]
        if not cells[2] and not given:
            add_row(columns, {SPLIT_COLUMN: cells[0].upper(), IMAGE_COLUMN: resolve_uri(cells[1], folder),
                              LABEL_COLUMN: None,
                           **dict.fromkeys(BOX_COLUMNS)})
            continue
        if len(given) < 2 or not cells[2]:
            raise TFRecorderError(f"{where}: a box needs a label and two opposite vertices (x_min,y_min and "
                                  f"x_max,y_max), got {quoted(','.join(values))}")
        xs, ys = [x for x, _ in given], [y for _, y in given]
        if max(*xs, *ys) > 1:
            pixels.append(line)
        else:
            normalized += 1
        add_row(columns, {SPLIT_COLUMN: cells[0].upper(), IMAGE_COLUMN: resolve_uri(cells[1], folder),
                          LABEL_COLUMN: cells[2],
                       "xmin": min(xs), "ymin": min(ys), "xmax": max(xs), "ymax": max(ys)})
    if pixels and normalized:  # the table's units are read from its range: one row in pixels turns every box
        shown = ", ".join(map(str, pixels[:5])) + (", ..." if len(pixels) > 5 else "")
        raise SchemaError(f"AutoML Vision CSV {url!r} mixes units: {len(pixels)} rows have vertices over 1, in "
                          f"pixels (line {shown}), {normalized} are normalized to [0, 1] as AutoML's format says; "
                          f"give every vertex as a fraction of the image's width or height")
    return long_frame(columns, ())


def automl_like(cells: list[str]) -> bool:
    """Whether a CSV's first line is an AutoML Vision object-detection row: a split, then AUTOML_WIDTH fields;
    or more of them (``read_automl`` names the line) whose vertices are numbers or empty, x_min and y_min given -
    not a headerless classification row with more labels (text) after its image."""
    if cells[0].strip().upper() not in (TRAIN, VALIDATION, TEST, UNASSIGNED) or len(cells) < AUTOML_WIDTH:
        return False
    if len(cells) == AUTOML_WIDTH:
        return True
    vertices = [c.strip() for c in cells[3:AUTOML_WIDTH]]
    return all(_is_number(v) for v in vertices[:2]) and all(not v or _is_number(v) for v in vertices)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
