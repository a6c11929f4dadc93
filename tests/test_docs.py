"""Every Python code block of the README and of docs/ runs, page by page, as a reader follows it.

The blocks are found by their fences (``page_blocks``), so
each page's blocks run here one after the other in one namespace and one folder, as a reader runs them,
with the files they name made first (a sample CSV of images, a VOC folder, image/mask pairs). A block that
needs a Google Cloud project says so in its fence (```python title="needs a Google Cloud project: ...") and
is left out; tests/test_notebooks.py runs the Dataflow calls against an emulator with Beam's dry run. Every
page may assume ``import pandas as pd`` and ``import tfrecorder``, and a Keras ``model`` to fit.
"""

from __future__ import annotations

import importlib.util
import os
import re
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = ["README.md", *sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md"))]
# Pages whose blocks read a dataset in out/ that an earlier page wrote: the folder is made for them.
READS_OUT = {"docs/reading.md", "docs/other-readers.md", "docs/looking-at-a-dataset.md"}


def blocks(page: str) -> list[str]:
    """The page's Python blocks that need nothing optional."""
    return [code for code, needs in page_blocks(page) if needs is None]


# A block that needs an optional package says which in its fence: ```python title="needs jax (pip install jax)"
NEEDS = re.compile(r'```python title="needs ([\w-]+) \(pip install [^)]*\)"')


def page_blocks(page: str) -> list[tuple[str, str | None]]:
    """The page's Python blocks in order, each with the optional package it needs (None: none); the blocks that
    need a cloud or a cluster are left out."""
    found: list[tuple[str, str | None]] = []
    fence: str | None = None
    lines: list[str] = []
    for line in (ROOT / page).read_text().splitlines():
        if fence is None and line.startswith("```"):
            fence, lines = line.strip(), []
        elif fence is not None and line.startswith("```"):
            needs = NEEDS.fullmatch(fence)
            if fence == "```python" or needs:
                found.append((textwrap.dedent("\n".join(lines) + "\n"), needs.group(1) if needs else None))
            fence = None
        elif fence is not None:
            lines.append(line)
    return found


def installed(package: str) -> bool:
    return importlib.util.find_spec(package) is not None


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> Path:
    """What the docs' blocks read: data.csv (split,image_uri,label, paths relative to it) with its images,
    a VOC folder, pairs.csv (split,image_uri,mask_uri), all made once and copied into each page's folder."""
    import pandas as pd

    from tfrecorder.sample_data import (
        make_detection_scenes,
        make_sample_images,
        make_segmentation_scenes,
        write_voc,
    )

    root = tmp_path_factory.mktemp("docs-files")
    images = make_sample_images(str(root / "images"), n=30)
    images.assign(image_uri=[os.path.relpath(u, root) for u in images["image_uri"]])[
        ["split", "image_uri", "label"]].to_csv(root / "data.csv", index=False)
    write_voc(make_detection_scenes(str(root / "scenes"), n=24), root / "VOC2012")
    pairs = make_segmentation_scenes(str(root / "pairs"), n=20)
    pairs.assign(image_uri=[os.path.relpath(u, root) for u in pairs["image_uri"]],
                 mask_uri=[os.path.relpath(u, root) for u in pairs["mask_uri"]])[
        ["split", "image_uri", "mask_uri"]].to_csv(root / "pairs.csv", index=False)
    assert not pd.read_csv(root / "pairs.csv").empty
    return root


def _model():
    """The `model` a quick start trains: any Keras classifier of 224x224 images into the sample's 3 classes."""
    import tensorflow as tf

    model = tf.keras.Sequential([tf.keras.Input((224, 224, 3)), tf.keras.layers.Rescaling(1 / 255),
                                 tf.keras.layers.GlobalAveragePooling2D(), tf.keras.layers.Dense(3)])
    model.compile("adam", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def test_every_page_has_its_blocks_found():
    found = {page: len(blocks(page)) for page in PAGES}
    assert found["README.md"] >= 3 and found["docs/index.md"] >= 2, found
    assert sum(found.values()) >= 9


def run_page(page: str, files: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, needing: str | None = None
             ) -> None:
    """The page's plain blocks, and those that need the package ``needing``, run in order in one namespace."""
    import shutil

    import tfrecorder

    work = tmp_path / "work"
    shutil.copytree(files, work)
    monkeypatch.chdir(work)
    if page in READS_OUT:
        tfrecorder.convert("data.csv", "out/", progress=False)
    namespace: dict = {"__name__": "__docs__", "model": _model()}
    exec("import pandas as pd\nimport tfrecorder", namespace)  # noqa: S102 - what every page assumes imported
    for number, (code, needs) in enumerate(page_blocks(page), 1):
        if needs is not None and needs != needing:
            continue
        try:
            exec(compile(code, f"{page} block {number}", "exec"), namespace)  # noqa: S102 - our own docs
        except Exception as e:  # noqa: BLE001 - the failing block named, with its error
            raise AssertionError(f"{page}, code block {number} fails: {type(e).__name__}: {e}\n{code}") from e


@pytest.mark.parametrize("page", [p for p in PAGES if blocks(p)])
def test_the_code_blocks_of_a_page_run(page, files, tmp_path, monkeypatch):
    run_page(page, files, tmp_path, monkeypatch)


@pytest.mark.parametrize("page, needs", sorted({(p, n) for p in PAGES for _, n in page_blocks(p) if n}))
def test_a_pages_blocks_that_need_a_package_run_where_it_is_installed(page, needs, files, tmp_path, monkeypatch):
    """A block titled "needs jax (pip install jax)" runs after its page's blocks where the package is installed
    (the test extra installs jax; not torch, a download of gigabytes with its CUDA libraries): skipped, saying
    so, where it is not."""
    if not installed(needs):
        pytest.skip(f"{needs} is not installed: {page}'s block that needs it is not run")
    run_page(page, files, tmp_path, monkeypatch, needing=needs)


def test_the_error_code_table_is_the_list_the_package_raises():
    """docs/questions.md's table of errors.csv codes says, for every code and no other, what the package's one
    list (tfrecorder.errors.ROW_ERRORS) says: a new code, or a changed meaning or fix, must reach the page."""
    from tfrecorder.errors import ROW_ERRORS

    rows = [line for line in (ROOT / "docs" / "questions.md").read_text().splitlines() if line.startswith("| `")]
    table = {}
    for line in rows:
        code, meaning, fix = (cell.strip() for cell in line.strip("|").split("|"))
        table[code.strip("`")] = (meaning, fix)
    assert table == ROW_ERRORS


def test_every_row_error_the_package_raises_is_in_the_list():
    """Each code written literally at an ImageError in the package is one of ROW_ERRORS (and ImageError refuses
    any other at run time)."""
    import re

    from tfrecorder.errors import ROW_ERRORS, ImageError

    raised = {code for path in (ROOT / "tfrecorder").rglob("*.py")
              for code in re.findall(r'ImageError\(\s*"(\w+)"', path.read_text())}
    assert raised and raised <= set(ROW_ERRORS), raised - set(ROW_ERRORS)
    with pytest.raises(AssertionError, match="no_such_code"):
        ImageError("no_such_code", "x")


@pytest.mark.parametrize("number", range(1, len(blocks("README.md")) + 1))
def test_each_readme_quick_start_runs_twice_in_a_row(number, files, tmp_path, monkeypatch):
    """A notebook cell or a script is run again as written: the second run of each quick start into its folder
    returns the finished conversion (no 'output_dir is not empty' error), and says so."""
    import shutil

    work = tmp_path / "work"
    shutil.copytree(files, work)
    monkeypatch.chdir(work)
    code = compile(blocks("README.md")[number - 1], f"README.md block {number}", "exec")
    namespace: dict = {"__name__": "__docs__", "model": _model()}
    exec("import pandas as pd\nimport tfrecorder", namespace)  # noqa: S102 - what every page assumes imported
    exec(code, namespace)  # noqa: S102 - our own docs
    exec(code, namespace)  # noqa: S102
    if "result" in namespace:
        assert namespace["result"].reused, f"README block {number} wrote its conversion again"


def test_the_images_page_names_the_memory_bounds_of_a_table_of_images():
    """docs/images.md says how much of a table's images a part holds and how large a Parquet's images stay in
    memory: the figures the code has."""
    from tfrecorder.write.sources.embedded import PART_BYTES
    from tfrecorder.write.table.summary_pass import MEMORY_IMAGE_BYTES

    text = " ".join((ROOT / "docs" / "images.md").read_text().split())
    assert f"at most {PART_BYTES // 2**20} MiB of images at a time" in text
    assert f"a Parquet's up to {MEMORY_IMAGE_BYTES // 2**20} MiB, stay in memory" in text
