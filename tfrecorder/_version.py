"""The package version: the one place it is written (pyproject.toml and dataset.json read it from here)."""

__version__ = "0.4.0"
