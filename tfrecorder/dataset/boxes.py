"""Boxes (pure): normalized boxes turned as an EXIF orientation turns the picture - one rule for the writer
(boxes into the stored pixels' frame) and ``read_tfr`` (back into the displayed picture's)."""

from __future__ import annotations

import numpy as np


def turn(boxes: np.ndarray, orientation: int) -> np.ndarray:
    """Normalized ``[xmin, ymin, xmax, ymax]`` boxes of stored pixels as the picture displays them after
    EXIF ``orientation`` (1-8), as ``connectors.tf_geometry.apply_orientation`` turns the pixels."""
    if orientation == 1:
        return boxes
    x0, y0, x1, y1 = boxes.T
    mapped = _MAPPINGS[orientation](x0, y0, x1, y1)
    return np.stack(mapped, axis=1)


_MAPPINGS = {  # each orientation's (xmin, ymin, xmax, ymax) from the stored ones
    2: lambda x0, y0, x1, y1: (1 - x1, y0, 1 - x0, y1),  # mirrored
    3: lambda x0, y0, x1, y1: (1 - x1, 1 - y1, 1 - x0, 1 - y0),  # upside down
    4: lambda x0, y0, x1, y1: (x0, 1 - y1, x1, 1 - y0),  # mirrored upside down
    5: lambda x0, y0, x1, y1: (y0, x0, y1, x1),  # transposed
    6: lambda x0, y0, x1, y1: (1 - y1, x0, 1 - y0, x1),  # a quarter turn clockwise
    7: lambda x0, y0, x1, y1: (1 - y1, 1 - x1, 1 - y0, 1 - x0),  # transverse
    8: lambda x0, y0, x1, y1: (y0, 1 - x1, y1, 1 - x0),  # a quarter turn counter-clockwise
}


INVERSE = {1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 6: 8, 7: 7, 8: 6}  # the orientation that undoes each
