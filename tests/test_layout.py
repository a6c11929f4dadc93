"""The package's shape holds: the read side never imports the write side, dataset/ imports neither, write/'s
folders follow the flow and no import runs back up it, the rest of the package enters write/ by its entry points
only, and Beam is imported in one module only.

Imports are read from the source (every ``import`` statement, those inside functions included), so a
lazy import cannot dodge the rules.
"""

from __future__ import annotations

import ast
import re
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


# write/'s stages in the order a conversion runs them: a source's parts (sources/), checked, spilled and planned
# (table/), a shard's records written (record/), the run's life in its folder (run/), the runners that carry out
# the stages (runners/), and convert.py, the one module that knows every stage.
FLOW = ("sources", "table", "record", "run", "runners", "convert")
# write/'s shared ground, below every stage: the one list of options (options.py), the objects a conversion
# carries (settings.py) and the split names (splits.py). They import no other module of write/ than each other.
GROUND = ("options", "settings", "splits")


def test_the_layout_is_there():
    for folder in ("dataset", "write", *(f"write.{stage}" for stage in FLOW[:-1]), "read"):
        assert f"tfrecorder.{folder}" in MODULES, folder


def _stage(module: str) -> str:
    """The stage (or ground module) of a module of write/: the folder or top-level module under write/."""
    return module.split(".")[2]


def _write_modules(imports: set[str]) -> set[str]:
    """The modules of write/ among ``imports`` (``from pkg import name`` gives pkg.name: a module or not)."""
    return {i for i in imports if i in MODULES and i.startswith("tfrecorder.write.")}


def test_no_import_runs_back_up_the_flow():
    """A module of write/ imports only modules of its own stage, of earlier stages (FLOW), and the ground
    (options.py, settings.py, splits.py); the ground imports only itself. So a stage can be read, tested and
    changed knowing only what comes before it, and nothing earlier in the flow depends on how a later stage does
    its job."""
    stages = {_stage(m) for m in MODULES if m.startswith("tfrecorder.write.")}
    assert stages == {*FLOW, *GROUND}  # every module of write/ is in a stage or the ground
    back = []
    for module, imports in MODULES.items():
        if not module.startswith("tfrecorder.write."):
            continue
        here = _stage(module)
        for target in _write_modules(imports):
            there = _stage(target)
            if here in GROUND:
                ok = there in GROUND
            else:
                ok = there in GROUND or FLOW.index(there) <= FLOW.index(here)
            if not ok:
                back.append(f"{module} -> {target}")
    assert not back


def test_the_rest_of_the_package_enters_write_by_its_entry_points_only():
    """Outside write/, a module imports only these modules of it: convert (convert, convert_and_load), options
    (the keywords: the CLI's flags, to_tfr's runner), sources (create_image_csv) and the Beam transform
    (tfrecorder.beam.WriteDataset); the package's lazy public names add ConvertResult and read_annotations.
    Every other module of write/ can move or change without a user's import breaking."""
    import tfrecorder

    users = {m: sorted(_write_modules(i)) for m, i in MODULES.items() if not m.startswith("tfrecorder.write")}
    assert {m: i for m, i in users.items() if i} == {
        "tfrecorder.accessor": ["tfrecorder.write.convert"],  # lazily: `import tfrecorder` stays light
        "tfrecorder.beam": ["tfrecorder.write.runners.beam"],
        "tfrecorder.cli": ["tfrecorder.write.convert", "tfrecorder.write.options", "tfrecorder.write.sources"],
    }
    lazy = {module for module in tfrecorder._LAZY.values() if module.startswith("tfrecorder.write")}
    assert lazy == {"tfrecorder.write.convert", "tfrecorder.write.run.result", "tfrecorder.write.sources",
                    "tfrecorder.write.sources.annotations"}


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


def _documented_modules() -> set[str]:
    """The modules docs/how-it-works.md's package tree names, as paths under tfrecorder/ ("read/open.py"): a
    name belongs to the innermost folder above it (a line that starts with ``folder/``, less indented)."""
    text = (PACKAGE.parent / "docs" / "how-it-works.md").read_text()
    tree = text.split("```\ntfrecorder/\n", 1)[1].split("```", 1)[0]
    found, folders = set(), []  # folders: (indent, path) from the outermost
    for line in tree.splitlines():
        indent = len(line) - len(line.lstrip())
        while folders and folders[-1][0] >= indent:
            folders.pop()
        head = line.split()[0] if line.strip() else ""
        if head.endswith("/"):  # what the folder's own line names is in it
            folders.append((indent, (folders[-1][1] if folders else "") + head))
        where = folders[-1][1] if folders else ""
        found.update(where + name for name in re.findall(r"\b(\w+\.py)\b", line))
    return found


def test_how_it_works_names_every_module():
    """A contributor finds each module in docs/how-it-works.md's tree, in its folder (0.4 left 8 out)."""
    modules = {str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py") if p.name != "__init__.py"}
    missing = sorted(modules - _documented_modules())
    assert not missing, f"docs/how-it-works.md does not name: {', '.join(missing)}"
