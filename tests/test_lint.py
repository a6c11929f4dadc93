"""The code base passes ruff (pyproject.toml) and mypy (setup.cfg states its strictness), so style drift and
type errors fail make test."""

from __future__ import annotations

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


@pytest.mark.slow  # a subprocess
def test_mypy_passes():
    proc = subprocess.run([sys.executable, "-m", "mypy", "tfrecorder"], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
