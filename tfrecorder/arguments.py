"""Arguments (pure): the checks ``convert`` and ``load_dataset`` share for their keywords - a value of the wrong
kind is one TFRecorderError naming the keyword and the value, never a TensorFlow error or a silent misreading
(``image_size="224x224"`` was once read as (2, 2))."""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

from tfrecorder.errors import TFRecorderError

# The most pixels an image may have unless told otherwise: Pillow's own limit for a decompression bomb (2 x
# MAX_IMAGE_PIXELS). It bounds convert's decoded images (max_image_pixels=) and every image_size= up front.
DEFAULT_MAX_PIXELS = 178_956_970


def is_count(value: Any) -> bool:
    """A whole number: an int or numpy integer, not a bool (True is 1 to Python, never what a caller meant)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def check_count(name: str, value: Any, least: int = 1, what: str = "a positive whole number") -> int:
    """``value`` as an int of at least ``least``, or a TFRecorderError naming ``name``."""
    if not is_count(value) or value < least:
        raise TFRecorderError(f"{name}={value!r}: give {what}")
    return int(value)


def check_optional_count(name: str, value: Any, unset: str) -> int | None:
    """``check_count`` where None is allowed (``unset`` says what None means)."""
    if value is None:
        return None
    return check_count(name, value, what=f"a positive whole number, or None for {unset}")


def check_number(name: str, value: Any, what: str = "a number above 0") -> float:
    """``value`` as a float above 0 (an int or float, not a bool or text), or a TFRecorderError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:  # numpy floats are floats
        raise TFRecorderError(f"{name}={value!r}: give {what}")
    return float(value)


def check_switch(name: str, value: Any) -> bool:
    """``value`` as a bool: True or False only (``"no"`` is true to Python, never what a caller meant)."""
    if not isinstance(value, bool):
        raise TFRecorderError(f"{name}={value!r}: give True or False")
    return value


def check_image_size(value: Any, max_pixels: int = DEFAULT_MAX_PIXELS,
                     raise_with: str | None = None) -> tuple[int, int] | None:
    """``image_size`` as (height, width): one number is a square, None keeps each image's size. A size of more
    than ``max_pixels`` is refused here, before any work, not met as a MemoryError mid-run; ``raise_with`` is
    the keyword that raises the bound, where the caller has one (convert's ``max_image_pixels=``)."""
    if value is None:
        return None
    given = value  # the errors show what the caller wrote
    if is_count(value):
        value = (value, value)
    usage = "give (height, width) in pixels, or one number for a square (224 is (224, 224))"
    try:
        parts = () if isinstance(value, (str, bytes, dict)) else tuple(value)
    except TypeError:
        parts = ()
    if len(parts) != 2:
        raise TFRecorderError(f"image_size={given!r}: {usage}")
    if not all(is_count(v) and v > 0 for v in parts):
        raise TFRecorderError(f"image_size={given!r}: height and width are positive whole numbers; {usage}")
    height, width = int(parts[0]), int(parts[1])
    if height * width > max_pixels:
        bound, fix = ((f"{raise_with}{max_pixels}", f", or a larger {raise_with}") if raise_with else
                      (f"the {max_pixels:,} an image may have (Pillow's decompression-bomb limit)", ""))
        raise TFRecorderError(f"image_size={given!r} makes images of {height * width:,} pixels, more than {bound}: "
                              f"give a smaller size{fix}")
    return height, width


def check_choice(name: str, value: Any, allowed: Sequence[Any]) -> None:
    """A TFRecorderError naming the argument and its choices when ``value`` is not one of them."""
    if not isinstance(value, str) or value not in allowed:
        raise TFRecorderError(f"{name}={value!r}: use one of {', '.join(map(repr, allowed))}")
