"""Every Python code block of the README and of docs/ runs, page by page, as a reader follows it.

The blocks are found with mktestdocs (`grab_code_blocks`): a small library that only finds the blocks, so
each page's blocks run here one after the other in one namespace and one folder, as a reader runs them,
with the files they name made first (a sample CSV of images, a VOC folder, image/mask pairs). A block that
needs a Google Cloud project says so in its fence (```python title="needs a Google Cloud project: ...") and
is left out; tests/test_notebooks.py runs the Dataflow calls against an emulator with Beam's dry run. Every
page may assume ``import pandas as pd`` and ``import tfrecorder``, and a Keras ``model`` to fit.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from mktestdocs import grab_code_blocks

ROOT = Path(__file__).resolve().parents[1]
PAGES = ["README.md", *sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md"))]
# Pages whose blocks read a dataset in out/ that an earlier page wrote: the folder is made for them.
READS_OUT = {"docs/reading.md", "docs/other-readers.md"}


def blocks(page: str) -> list[str]:
    return grab_code_blocks((ROOT / page).read_text(), lang="python")


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


@pytest.mark.parametrize("page", [p for p in PAGES if blocks(p)])
def test_the_code_blocks_of_a_page_run(page, files, tmp_path, monkeypatch):
    import shutil

    import tfrecorder

    work = tmp_path / "work"
    shutil.copytree(files, work)
    monkeypatch.chdir(work)
    if page in READS_OUT:
        tfrecorder.convert("data.csv", "out/", progress=False)
    namespace: dict = {"__name__": "__docs__", "model": _model()}
    exec("import pandas as pd\nimport tfrecorder", namespace)  # noqa: S102 - what every page assumes imported
    for number, code in enumerate(blocks(page), 1):
        try:
            exec(compile(code, f"{page} block {number}", "exec"), namespace)  # noqa: S102 - our own docs
        except Exception as e:  # noqa: BLE001 - the failing block named, with its error
            raise AssertionError(f"{page}, code block {number} fails: {type(e).__name__}: {e}\n{code}") from e


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
