"""Package hygiene a user notices: import is light and quiet, and `make demo` keeps working."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_import_is_quiet_and_imports_neither_tensorflow_nor_beam():
    code = (
        "import logging, sys; before = list(logging.getLogger().handlers); import tfrecorder, pandas as pd;"
        "assert hasattr(pd.DataFrame(), 'tensorflow');"
        "assert 'tensorflow' not in sys.modules and 'apache_beam' not in sys.modules, 'heavy import';"
        "assert logging.getLogger().handlers == before and logging.getLogger().level == logging.WARNING"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "" and proc.stderr == ""


def test_public_names():
    import tfrecorder

    for name in ("convert", "convert_and_load", "inspect", "read_tfr", "info", "show", "load_dataset", "load",
                 "label_names", "Schema", "IMAGE_CSV_SCHEMA", "SchemaError",
                 "TFRecorderError", "input_schema", "types"):
        assert hasattr(tfrecorder, name), name
    from tfrecorder import types

    for name in ("SplitKey", "ImageUri", "IntegerInput", "FloatInput", "StringInput", "IntegerLabel", "StringLabel"):
        assert hasattr(types, name), name
    assert callable(tfrecorder.convert)


def test_demo_runs_and_prints_what_it_did(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}  # as a new user runs it
    env["TFRECORDER_DEMO_DIR"] = str(tmp_path / "demo")
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / "demo.py")], capture_output=True, text=True,
                          env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""  # no TensorFlow start-up lines
    out = proc.stdout
    assert "sample table: 300 rows" in out and "['jpg', 'png']" in out
    assert re.search(r"^TRAIN\s+240\s+240\s+0\s+1\s", out, re.M), out  # rows, written, errors, shards
    assert "labels: ['circle', 'square', 'triangle']" in out
    assert re.search(r"image +uint8 +\(32, 64, 64, 3\)", out) and "image_orientation int64" in out  # aligned


def test_convert_and_load(image_table, tmp_path):
    import tfrecorder

    splits = tfrecorder.convert_and_load(image_table, str(tmp_path / "out"), progress=False)
    assert sorted(splits) == ["TEST", "TRAIN", "VALIDATION"]
    assert int(splits["TRAIN"].cardinality()) == 6


def test_the_documentation_site_builds_without_a_warning(tmp_path):
    """make docs: MkDocs in strict mode - every page in the nav, every link inside the docs, every API entry
    found and its docstring parsed - with the API reference generated from the package's public names."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                           cwd=ROOT, capture_output=True, text=True, env=env)
    assert built.returncode == 0, built.stderr[-3000:]
    reference = (tmp_path / "site" / "reference" / "index.html").read_text()
    for name in ("convert", "load_dataset", "read_tfr", "read_annotations", "WriteDataset", "MaskUri"):
        assert name in reference, name




def test_every_public_function_says_its_arguments_and_what_it_returns():
    """The API reference is made from the docstrings: each public function has Args: and Returns: sections."""
    import inspect

    import tfrecorder

    lacking = [name for name in tfrecorder.__all__ if inspect.isfunction(function := getattr(tfrecorder, name))
               and not {"Args:", "Returns:"} <= set((function.__doc__ or "").split())]
    assert not lacking, f"no Args:/Returns: in the docstrings of {', '.join(lacking)}"
