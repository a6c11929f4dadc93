"""Doctests of the package's docstrings (pytest --doctest-modules): the names their examples use."""

from __future__ import annotations

import os

import pytest

# Each test worker runs TensorFlow's ops on one thread (and the notebooks' kernels and subprocesses it starts, which
# inherit these): the workers already keep every core busy, and a pool per worker that spins up for each op only
# takes time from the other worker (5% of a run of the detection, segmentation and reader tests).
for _threads in ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS", "OMP_NUM_THREADS"):
    os.environ.setdefault(_threads, "1")

collect_ignore = ["tfrecorder/__main__.py", "notebooks/make_notebooks.py", "docs/make_api.py",
                  "tests/data/make_datumaro_fixture.py"]  # needs Datumaro: run by hand (its README says how)


# The inner loop, `pytest -m "not slow"`, leaves out what needs more than the package and a temporary folder:
# whole notebooks and the docs' code blocks, servers (the GCS emulator, HTTP), subprocesses (the command line,
# the wheel, killed runs, lint; those in other modules carry @pytest.mark.slow), Beam and Dask pipelines (tests
# named for the DirectRunner or every runner), and the property and fuzz searches; and what takes seconds per
# test: a tf.data pipeline for every resize mode, Keras models. `make test` runs them all.
_SLOW_MODULES = {"test_beam", "test_dask", "test_gcs", "test_store_faults", "test_http", "test_resume",
                 "test_big_files", "test_entrance_beam", "test_cli", "test_cli_output", "test_release",
                 "test_package", "test_properties", "test_fuzz", "test_stream", "test_memory"}
_SLOW_WORDS = ("DirectRunner", "direct_runner", "every_runner", "and_runner", "Dask", "beam",
               "the_code_blocks_of_a_page_run", "quick_start", "every_resize_mode", "keras", "the_notebook_runs")


def pytest_collection_modifyitems(items):
    for item in items:
        module = item.path.stem
        if module in _SLOW_MODULES or any(word in item.nodeid for word in _SLOW_WORDS):
            item.add_marker(pytest.mark.slow)
    # The long ones first: on two workers a notebook (10-40 s) or a pipeline that is left for the end keeps one
    # worker busy while the other has nothing left to do. Notebooks, then every module with a slow test, then the
    # rest; a module's tests stay together and in their order, and the Makefile's --dist loadfile gives each module
    # to one worker (its module-scoped fixtures are made once).
    slow_paths = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: 0 if "test_the_notebook_runs" in item.nodeid else 1 if item.path in slow_paths else 2)


@pytest.fixture(scope="session")
def _doctest_dataset(tmp_path_factory):
    """One table and its converted dataset for every doctest of a session (each reads it, none writes to it):
    a conversion per doctest cost the suite ~30 of them."""
    import tfrecorder
    from tests.conftest import image_table_at

    folder = tmp_path_factory.mktemp("doctest-dataset")
    df = image_table_at(folder / "table")
    dataset_dir = str(folder / "dataset")
    tfrecorder.convert(df, dataset_dir, progress=False)
    return df, dataset_dir


@pytest.fixture(autouse=True)
def _doctest_names(request, tmp_path_factory):
    from _pytest.doctest import DoctestItem  # the one way to tell a doctest item apart

    if not isinstance(request.node, DoctestItem):
        return
    import tfrecorder
    from tfrecorder.sample_data import make_sample_images

    df, dataset_dir = request.getfixturevalue("_doctest_dataset")
    namespace = request.getfixturevalue("doctest_namespace")
    namespace.update(tfrecorder=tfrecorder, os=os, tmp_path=tmp_path_factory.mktemp("doctest"), df=df.copy(),
                     dataset_dir=dataset_dir, make_sample_images=make_sample_images)
