"""FeatureInfo: one feature as dataset.json lists it (its own module so that connectors, which read it, and the
manifest, which names each feature's connector, do not import each other)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class FeatureInfo:
    """One feature of every record: its tf dtype, shape (``[]`` scalar, ``[null]`` variable-length list,
    ``[null, K, ...]`` a value of that shape for each object of a detection record) and connector."""

    name: str
    role: str  # split, image, label, feature
    dtype: str  # int64, float32, string
    shape: list[int | None]
    connector: str | None = None  # its kind of value: a connector's name (connectors.named), e.g. "ListOf(Text)"
    nullable: bool = False
    column: str | None = None  # input column it came from (None for derived image features)
    source: str | None = None  # python type of the input values: int, bool, float, str, bytes
    type: str | None = None  # tfrecorder.types name
    default: Any = None  # value load_dataset gives a missing nullable scalar
    float64_reason: str | None = None  # a float column stored as float64 by float_precision="auto": why
    pandas: dict[str, Any] | None = None  # the input column's pandas dtype (dataset.dtypes): what read_tfr gives
    parameters: dict[str, Any] | None = None  # its connector's (``Connector.parameters``); None: it takes none

    @property
    def is_list(self) -> bool:
        """Whether a record holds a list of its values (of any length), not one value."""
        return self.shape[:1] == [None]
