"""Notebooks are committed without outputs and as notebooks/make_notebooks.py writes them, and every one runs:
its code cells, in order, in one namespace, from the notebooks' folder (a cell tagged ``skip-execution`` is left
out, as Jupyter tools leave it). They run in the test's process, not in a Jupyter kernel of their own: a kernel
is one more process importing TensorFlow (about 5 s of CPU each, a minute of the suite for twelve notebooks),
and the cells are what a reader runs.
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


@pytest.fixture
def fresh_seeds():
    """A notebook seeds TensorFlow, numpy and Python globally (``tf.keras.utils.set_random_seed``), as a kernel of
    its own may: the seeds are unset after it, so a later test of this process orders as a new process does."""
    yield
    import random

    import numpy as np
    import tensorflow as tf

    tf.random.set_seed(None)
    tf.keras.backend.clear_session()
    np.random.seed(None)
    random.seed()


@pytest.mark.parametrize("name", sorted(make_notebooks.NOTEBOOKS))
def test_the_notebook_runs(name, monkeypatch, fresh_seeds):
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    monkeypatch.chdir(NOTEBOOKS)
    namespace: dict = {"__name__": "__main__"}
    for number, cell in enumerate(notebook.cells):
        if cell.cell_type != "code" or "skip-execution" in cell.metadata.get("tags", []):
            continue
        try:
            exec(compile(cell.source, f"{name} cell {number}", "exec"), namespace)  # noqa: S102 - our notebooks
        except Exception as e:  # noqa: BLE001 - the failing cell named, with its error
            raise AssertionError(f"{name}, cell {number} fails: {type(e).__name__}: {e}\n{cell.source}") from e


def test_dataflow_notebook_calls_match_the_api_with_a_dry_run(image_table, gcs_dir):
    import fsspec

    notebook = nbformat.read(NOTEBOOKS / "05_dataflow.ipynb", as_version=4)
    code = {tag: cell.source for cell in notebook.cells if cell.cell_type == "code"
            for tag in cell.metadata.get("tags", []) if tag.startswith("dataflow-")}
    for source in code.values():
        compile(source, "05_dataflow.ipynb", "exec")
    fs = fsspec.filesystem("gs")
    table = image_table.copy()
    for i, path in enumerate(table["image_uri"]):
        table.loc[i, "image_uri"] = f"{gcs_dir}/images/{i}.jpg"
        fs.pipe(table.loc[i, "image_uri"], Path(path).read_bytes())
    fs.pipe(f"{gcs_dir}/data.csv", table[["split", "image_uri", "label"]].to_csv(index=False).encode())
    namespace: dict = {}
    exec(code["dataflow-setup"], namespace)
    namespace.update(BUCKET=gcs_dir, DATAFLOW_OPTIONS={**namespace["DATAFLOW_OPTIONS"], "dry_run": True,
                                                       "no_auth": True, "sdk_location": "container"})
    exec(code["dataflow-submit"], namespace)
    result = namespace["result"]
    assert result.pipeline_options["machine_type"] == "n2-standard-4"
    assert result.pipeline_options["project"] == "my-project" and result.job_name.startswith("tfrecorder-pets-")
