"""tfrecorder: pandas tables of images and labels -> TFRecord shards -> tuned tf.data pipelines.

Importing registers the ``df.tensorflow`` accessor. TensorFlow is imported only when a
function that needs it is first used; Apache Beam only when a Beam runner is chosen.
"""

from __future__ import annotations

import importlib
from typing import Any

from tfrecorder import accessor as _accessor  # noqa: E402,F401  (registers df.tensorflow)
from tfrecorder import input_schema, types  # noqa: E402
from tfrecorder._version import __version__
from tfrecorder.errors import RowError, SchemaError, TFRecorderError  # noqa: E402
from tfrecorder.schema import IMAGE_CSV_SCHEMA, Schema  # noqa: E402

# Public names that import heavier modules (TensorFlow, fsspec) on first use.
_LAZY = {
    "convert": "tfrecorder.write.convert",
    "convert_and_load": "tfrecorder.write.convert",
    "ConvertResult": "tfrecorder.write.run.result",
    "load_dataset": "tfrecorder.read.tf_data",
    "load": "tfrecorder.read.tf_data",
    "label_names": "tfrecorder.read.tf_data",
    "feature_spec": "tfrecorder.read.tf_data",
    "read_manifest": "tfrecorder.read.open",
    "create_image_csv": "tfrecorder.write.sources",
    "read_annotations": "tfrecorder.write.sources.annotations",
    "inspect": "tfrecorder.read.inspect",
    "read_tfr": "tfrecorder.read.pandas",
    "data_source": "tfrecorder.read.data_source",
    "info": "tfrecorder.read.info",
    "show": "tfrecorder.read.info",
    "statistics": "tfrecorder.summary.statistics",
    "report": "tfrecorder.summary.page",
    "verify": "tfrecorder.read.verify",
    "versions": "tfrecorder.read.info",  # a dataset's versions: its conversion, then each append
    "VerifyReport": "tfrecorder.read.verify",
    "FileFormat": "tfrecorder.dataset.file_formats",  # subclass it to add a shard file format (convert's file_format)
    "Connector": "tfrecorder.dataset.connectors",  # subclass it to add a kind of value (a column's connector)
    "Media": "tfrecorder.dataset.connectors",  # subclass it to add a kind of file a column names (audio, ...)
}

__all__ = [
    "__version__", "types", "input_schema", "Schema", "IMAGE_CSV_SCHEMA",
    "TFRecorderError", "SchemaError", "RowError", *_LAZY,
]


def __getattr__(name: str) -> Any:
    if name in ("beam", "torch"):  # modules for Apache Beam and PyTorch, imported on first use
        return importlib.import_module(f"tfrecorder.{name}")
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'tfrecorder' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
