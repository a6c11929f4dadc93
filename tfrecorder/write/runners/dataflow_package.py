"""Staging (IO edge): package the installed tfrecorder so Dataflow workers can install it, no wheel by hand."""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import logging
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from tfrecorder._version import __version__
from tfrecorder.errors import TFRecorderError

logger = logging.getLogger(__name__)

_PYPROJECT = """[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "tfrecorder"
version = "{version}"
requires-python = ">=3.11"
dependencies = {dependencies}

[tool.setuptools.packages.find]
include = ["tfrecorder*"]
"""


def _dependencies() -> list[str]:
    try:
        requires = importlib.metadata.requires("tfrecorder") or []
    except importlib.metadata.PackageNotFoundError:
        return []
    return [r for r in requires if "extra ==" not in r]


@contextlib.contextmanager
def staged_sdist() -> Iterator[str]:
    """``build_sdist`` into a temporary folder that is removed on the way out: once Beam has staged the package
    to the job's staging_location (the job is submitted, built as a dry run, or failed)."""
    folder = tempfile.mkdtemp(prefix="tfrecorder-stage-")
    try:
        yield build_sdist(folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def build_sdist(directory: str) -> str:
    """Build a source distribution of the running tfrecorder (same files, same version) in ``directory``;
    return its path.

    Beam's ``extra_packages`` stages it and each Dataflow worker pip-installs it. Built
    offline with the setuptools that is installed; nothing is downloaded.
    """
    source = Path(__file__).resolve().parents[2]  # the tfrecorder package: write/runners/ is two below it
    out = Path(directory)
    work = Path(tempfile.mkdtemp(prefix="tfrecorder-build-"))
    try:
        shutil.copytree(source, work / "tfrecorder", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        (work / "pyproject.toml").write_text(
            _PYPROJECT.format(version=__version__, dependencies=json.dumps(_dependencies())))
        code = f"from setuptools import build_meta; print(build_meta.build_sdist({str(out)!r}))"
        proc = subprocess.run([sys.executable, "-c", code], cwd=work, capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            raise TFRecorderError(
                f"could not package tfrecorder for Dataflow workers ({proc.stderr.strip().splitlines()[-1:]}); "
                f"build a wheel yourself and pass tfrecorder_wheel=PATH"
            )
        path = out / proc.stdout.strip().splitlines()[-1]
        logger.info("staged tfrecorder %s as %s", __version__, path)
        return str(path)
    finally:
        shutil.rmtree(work, ignore_errors=True)
