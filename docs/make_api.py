"""Writes docs/api.md, the API reference, from the docstrings of tfrecorder's public names (`make docs`)."""

from __future__ import annotations

import inspect
from pathlib import Path

import tfrecorder
from tfrecorder import types

OUT = Path(__file__).resolve().parent / "api.md"
FUNCTIONS = ["convert", "convert_and_load", "load_dataset", "load", "read_tfr", "label_names", "info", "show",
             "inspect", "verify", "feature_spec", "read_manifest", "create_image_csv", "read_annotations"]
CLASSES = ["ConvertResult", "VerifyReport", "Schema", "TFRecorderError", "SchemaError", "RowError"]


def section(name: str, obj: object) -> str:
    try:
        signature = f"{name}{inspect.signature(obj)}"
    except (TypeError, ValueError):
        signature = name
    return f"## `tfrecorder.{name}`\n\n```python\n{signature}\n```\n\n{inspect.getdoc(obj) or ''}\n"


def render() -> str:
    parts = ["# tfrecorder API reference\n\nGenerated from the docstrings by `docs/make_api.py` (`make docs`); "
             "the examples in them run as doctests in `make test`.\n",
             section("DataFrame.tensorflow.to_tfr", tfrecorder.accessor.TensorflowAccessor.to_tfr)]
    parts += [section(name, getattr(tfrecorder, name)) for name in FUNCTIONS + CLASSES]
    parts.append(section("beam.WriteDataset", tfrecorder.beam.WriteDataset))  # imports Apache Beam
    rows = "\n".join(f"| `types.{t.__name__}` | {t.role.value} | {t.kind.value}{'[]' if t.is_list else ''} | "
                     f"{inspect.getdoc(t)} |" for t in types.ALL_TYPES)
    parts.append(f"## Column types (`tfrecorder.types`)\n\n| type | role | stored as | meaning |\n|---|---|---|---|\n"
                 f"{rows}\n")
    return "\n".join(parts)


if __name__ == "__main__":
    OUT.write_text(render())
