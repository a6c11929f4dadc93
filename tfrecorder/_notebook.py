"""Where we run: the one test for "in a Jupyter notebook" (progress bars, inline pictures)."""

from __future__ import annotations

import sys
from typing import Any


def in_notebook() -> bool:
    """True inside an IPython kernel (Jupyter, Colab, VS Code notebooks)."""
    return "ipykernel" in sys.modules


def progress_bar() -> Any:
    """tqdm's class for the bar: the notebook widget where it can be drawn (a kernel with ipywidgets), the text
    bar otherwise. tqdm.auto alone warns "IProgress not found" in a notebook without ipywidgets, at every first
    conversion; the text bar says the same thing quietly."""
    if in_notebook():
        try:
            from tqdm.notebook import IProgress  # None when ipywidgets is missing or too old
        except ImportError:
            IProgress = None
        if IProgress is not None:
            from tqdm.auto import tqdm
            return tqdm
    from tqdm.std import tqdm
    return tqdm
