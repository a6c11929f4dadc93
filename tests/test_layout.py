"""The package's shape holds: the read side never imports the write side, dataset/ imports neither, no
import runs back up from a stage to the runners, and Beam is imported in one module only.

Imports are read from the source (every ``import`` statement, those inside functions included), so a
lazy import cannot dodge the rules.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "tfrecorder"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)  # from pkg import submodule
    return found


MODULES = {_module_name(p): _imports(p) for p in sorted(PACKAGE.rglob("*.py"))}


def _importers(prefix: str) -> dict[str, list[str]]:
    return {m: sorted(i for i in imports if i == prefix or i.startswith(prefix + "."))
            for m, imports in MODULES.items()}


def test_the_layout_is_there():
    for folder in ("dataset", "write", "write.runners", "read"):
        assert f"tfrecorder.{folder}" in MODULES, folder


@pytest.mark.parametrize("side", ["tfrecorder.read", "tfrecorder.dataset"])
def test_read_side_and_dataset_never_import_the_write_side(side):
    bad = {m: i for m, i in _importers("tfrecorder.write").items() if m.startswith(side) and i}
    assert not bad


def test_dataset_imports_only_itself_and_the_shared_top_level_modules():
    allowed = ("tfrecorder.dataset", "tfrecorder.errors", "tfrecorder.types", "tfrecorder._version")
    for module, imports in MODULES.items():
        if module.startswith("tfrecorder.dataset"):
            ours = {i for i in imports if i.startswith("tfrecorder")}
            assert all(i.startswith(allowed) for i in ours), (module, ours)


def test_write_side_imports_the_read_side_only_to_load_after_converting():
    users = {m: i for m, i in _importers("tfrecorder.read").items() if m.startswith("tfrecorder.write") and i}
    assert users == {"tfrecorder.write.convert": ["tfrecorder.read.tf_data", "tfrecorder.read.tf_data.load"]}


def test_no_stage_imports_a_runner():
    users = {m for m, i in _importers("tfrecorder.write.runners").items()
             if i and m.startswith("tfrecorder.write") and not m.startswith("tfrecorder.write.runners")}
    assert users == {"tfrecorder.write.convert"}  # the one module that knows every stage


def test_beam_is_imported_by_the_beam_runner_only():
    users = {m for m, i in _importers("apache_beam").items() if i}
    assert users == {"tfrecorder.write.runners.beam", "tfrecorder.write.runners.beam_steps",
                     "tfrecorder.write.runners.beam_launch"}


def test_no_import_dodges_a_cycle_and_the_version_has_one_home():
    for path in PACKAGE.rglob("*.py"):
        text = path.read_text()
        assert "TYPE_CHECKING" not in text, path
        assert "from tfrecorder import __version__" not in text, path


def test_only_the_record_layouts_know_which_layout_a_dataset_has():
    # a comparison with record_format (or a layout's name) is a branch that belongs on dataset/layouts.py's
    # RecordLayout: a new layout would have to find every one
    branches = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Compare):
                operands = [ast.unparse(o) for o in (node.left, *node.comparators)]
                if any("record_format" in o.lower() or o.strip("'\"") == "tf_object_detection" for o in operands):
                    branches.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert not branches
