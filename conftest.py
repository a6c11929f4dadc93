"""Doctests of the package's docstrings (pytest --doctest-modules): the names their examples use."""

from __future__ import annotations

import os

import pytest

collect_ignore = ["tfrecorder/__main__.py", "notebooks/make_notebooks.py", "docs/make_api.py",
                  "tests/data/make_datumaro_fixture.py"]  # needs Datumaro: run by hand (its README says how)


@pytest.fixture(autouse=True)
def _doctest_names(request, tmp_path_factory):
    from _pytest.doctest import DoctestItem  # the one way to tell a doctest item apart

    if not isinstance(request.node, DoctestItem):
        return
    import tfrecorder
    from tests.conftest import image_table_at
    from tfrecorder.sample_data import make_sample_images

    tmp_path = tmp_path_factory.mktemp("doctest")
    namespace = request.getfixturevalue("doctest_namespace")
    df = image_table_at(tmp_path / "table")
    dataset_dir = str(tmp_path / "dataset")
    tfrecorder.convert(df, dataset_dir, progress=False)
    namespace.update(tfrecorder=tfrecorder, os=os, tmp_path=tmp_path, df=df, dataset_dir=dataset_dir,
                     make_sample_images=make_sample_images)
