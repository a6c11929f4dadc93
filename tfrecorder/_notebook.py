"""Where we run: the one test for "in a Jupyter notebook" (progress bars, inline pictures)."""

from __future__ import annotations

import sys


def in_notebook() -> bool:
    """True inside an IPython kernel (Jupyter, Colab, VS Code notebooks)."""
    return "ipykernel" in sys.modules
