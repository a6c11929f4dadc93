"""The code base passes ruff (pyproject.toml) and mypy (setup.cfg states its strictness), so style drift and
type errors fail make test."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow  # a subprocess
def test_ruff_passes():
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "tfrecorder", "tests", "benchmarks", "examples"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# mypy's cache kept outside the checkout, shared by every clone and worktree of this user: a fresh clone checks
# only the modules that differ from the last run anywhere (~3 s), not numpy's and pandas' stubs again (~30 s).
# mypy checks each cached module against its source file and writes its cache files atomically.
MYPY_CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tfrecorder-tests" / "mypy"


@pytest.mark.slow  # a subprocess
def test_mypy_passes():
    proc = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(MYPY_CACHE), "tfrecorder"], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
