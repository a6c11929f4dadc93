"""Beam runners: identical output to the local writer, Dataflow's argument checks and packaging, no eager imports.

Dataflow itself is exercised with Beam's dry run against the GCS emulator in test_gcs.py."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tarfile

import pytest

import tfrecorder
from tfrecorder.errors import TFRecorderError


def test_direct_runner_writes_the_same_bytes_as_local(image_table, tmp_path):
    local = tfrecorder.convert(image_table, str(tmp_path / "local"), num_shards=2, compression="gzip",
                               progress=False)
    direct = tfrecorder.convert(image_table, str(tmp_path / "direct"), num_shards=2, compression="gzip",
                                runner="DirectRunner")
    names = sorted(p.name for p in (tmp_path / "local").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "direct").iterdir())
    for name in names:
        a, b = (tmp_path / "local" / name).read_bytes(), (tmp_path / "direct" / name).read_bytes()
        if name == "dataset.json":  # identical but for the runner that wrote it
            a, b = json.loads(a), json.loads(b)
            assert (a.pop("runner"), b.pop("runner")) == ("local", "DirectRunner")
        assert a == b, name
    assert direct.counters == {"rows": 12, "written": 12, "errors": 0, "bytes": direct.bytes}
    assert direct.metrics == local.metrics


def test_dataflow_needs_project_region_and_gs_output(image_table, tmp_path):
    with pytest.raises(TFRecorderError, match=r"needs project and region: pass project=..., region=..."):
        tfrecorder.convert(image_table, "gs://b/out", runner="DataflowRunner")
    with pytest.raises(TFRecorderError, match=r"output_dir must be a gs:// URL, not '.*out'"):
        tfrecorder.convert(image_table, str(tmp_path / "out"), runner="DataflowRunner", project="p", region="r")
    assert not (tmp_path / "out").exists()


def test_sdist_staged_for_workers_holds_this_package(tmp_path):
    from tfrecorder.write.runners.dataflow_package import build_sdist

    path = build_sdist(str(tmp_path))
    assert path.endswith(f"tfrecorder-{tfrecorder.__version__}.tar.gz")
    names = tarfile.open(path).getnames()
    assert f"tfrecorder-{tfrecorder.__version__}/tfrecorder/write/runners/beam.py" in names
    assert not any("__pycache__" in n for n in names)


def test_converting_locally_imports_neither_beam_nor_tensorflow(tmp_path):
    code = ("import sys, pandas as pd, tfrecorder;"
            f"tfrecorder.convert(pd.DataFrame({{'x': [1, 2]}}), {str(tmp_path / 'o')!r}, progress=False);"
            "assert 'apache_beam' not in sys.modules and 'tensorflow' not in sys.modules")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr


def test_job_names_are_valid_and_unique():
    from tfrecorder.write.runners.beam import job_name

    names = {job_name("Pets v2!") for _ in range(5)}
    assert len(names) == 5
    for name in names:
        assert re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", name) and len(name) <= 63
        assert name.startswith("tfrecorder-pets-v2-")


def test_direct_runner_leaves_nothing_outside_output_dir(tabular_table, tmp_path):
    import os
    import tempfile

    tfrecorder.convert(tabular_table, str(tmp_path / "warm"), runner="DirectRunner")  # Beam's one-time set-up
    before = set(os.listdir(tempfile.gettempdir()))
    for mode in ("in_memory", "multi_processing"):
        tfrecorder.convert(tabular_table, str(tmp_path / mode), runner="DirectRunner",
                           dataflow_options={"direct_running_mode": mode, "direct_num_workers": 2})
    assert set(os.listdir(tempfile.gettempdir())) - before == set()  # no /tmp/beam-temp* per conversion


def test_the_job_holds_names_of_row_files_not_rows(tmp_path, monkeypatch):
    """Dataflow refuses job requests over ~20 MB: the pipeline must not grow with the table. Each shard's rows
    go to a file under output_dir/_beam/rows/ (removed once the dataset is complete), the job holds names."""
    import apache_beam as beam
    import numpy as np
    import pandas as pd

    sizes = {}
    run = beam.Pipeline.run

    def measured(pipeline, *args, **kwargs):
        sizes[len(sizes)] = len(pipeline.to_runner_api().SerializeToString())
        return run(pipeline, *args, **kwargs)

    monkeypatch.setattr(beam.Pipeline, "run", measured)
    for rows in (500, 50_000):
        rng = np.random.default_rng(0)
        table = pd.DataFrame({"split": rng.choice(["TRAIN", "TEST"], rows), "label": rng.integers(0, 3, rows),
                              "x": rng.normal(size=rows), "note": [f"row {i}" for i in range(rows)]})
        out = tmp_path / str(rows)
        tfrecorder.convert(table, str(out), runner="DirectRunner", num_shards=2)
        assert sorted(p.name for p in out.iterdir() if not p.name.endswith((".tfrecord", ".tfindex"))) == [
            "dataset.json", "dataset_info.json", "errors.csv", "features.json"]  # no _beam/ left behind
        assert len(tfrecorder.read_tfr(str(out))) == rows
    small, large = sizes[0], sizes[1]
    assert large < 1_000_000 and abs(large - small) <= 0.1 * small, (small, large)


def test_a_bad_split_in_the_last_rows_of_a_large_csv_stops_direct_runner_before_any_shard(tmp_path):
    """Validation covers the whole table before the job starts: the error names the row and the value, and
    output_dir gets no shard (nor the rows for the workers)."""
    import numpy as np
    import pandas as pd

    from tfrecorder.errors import SchemaError

    rows = 300_000
    rng = np.random.default_rng(0)
    table = pd.DataFrame({"split": rng.choice(["TRAIN", "TEST"], rows), "label": rng.integers(0, 5, rows),
                          "x": rng.normal(size=rows)})
    table.loc[rows - 2, "split"] = "TRAINING"
    table.to_csv(tmp_path / "big.csv", index=False)
    message = rf"column 'split': 1 rows have values outside .*'TRAINING' \(row {rows - 2}\)"
    with pytest.raises(SchemaError, match=message):
        tfrecorder.convert(str(tmp_path / "big.csv"), str(tmp_path / "out"), runner="DirectRunner")
    left = sorted(p.name for p in (tmp_path / "out").rglob("*")) if (tmp_path / "out").exists() else []
    assert not [name for name in left if ".tfrecord" in name or name.endswith(".parquet")], left
