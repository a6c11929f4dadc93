"""Notebooks are committed without outputs and as notebooks/make_notebooks.py writes them.

`make test` executes them too (pytest --nbmake, set in setup.cfg).
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
sys.path.insert(0, str(NOTEBOOKS))
import make_notebooks  # noqa: E402


@pytest.mark.parametrize("name", sorted(make_notebooks.NOTEBOOKS))
def test_committed_notebook_is_clean_and_up_to_date(name):
    committed = nbformat.read(NOTEBOOKS / name, as_version=4)
    assert all(not cell.get("outputs") and not cell.get("execution_count") for cell in committed.cells
               if cell.cell_type == "code"), f"{name} has outputs: strip them"
    assert committed == make_notebooks.build(name), f"{name} differs from make_notebooks.py: regenerate it"
