"""The code base passes ruff with the project's settings (pyproject.toml), so style drift fails make test."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_passes():
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "tfrecorder", "tests", "benchmarks", "examples"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
