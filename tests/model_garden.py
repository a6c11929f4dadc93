"""TF Model Garden's decoders, from tf-models-official's own files, for the interop tests.

``make test`` installs tf-models-official without its dependencies (it pins an older TensorFlow). Its
``official.vision`` package imports Model Garden's whole training stack on import, so a decoder's module is
loaded through plain package objects over the same folders, running none of the packages' ``__init__``.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import os
import sys
import types

import pytest

_PACKAGES = ("official", "official.vision", "official.vision.dataloaders")


def model_garden(module: str) -> types.ModuleType:
    """``official.vision.dataloaders.<module>``, or the test skipped when tf-models-official is absent."""
    if "official" not in sys.modules:
        spec = importlib.util.find_spec("official")
        if spec is None:
            pytest.skip("tf-models-official is not installed (make test installs it with --no-deps)")
        root = list(spec.submodule_search_locations)[0]
        for name in _PACKAGES:
            path = os.path.join(root, *name.split(".")[1:])
            package = types.ModuleType(name)
            package.__path__ = [path]
            package.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=True)
            package.__spec__.submodule_search_locations = [path]
            sys.modules[name] = package
    return importlib.import_module(f"official.vision.dataloaders.{module}")
