"""Beam runners: identical output to the local writer, Dataflow's argument checks and packaging, no eager imports.

Dataflow itself is exercised with Beam's dry run against the GCS emulator in test_gcs.py."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
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
        if name == ".conversion.json":  # what each conversion was made of: its runner among them
            continue
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
    for module in ("beam", "beam_steps", "beam_launch"):  # the steps' DoFns are unpickled from beam_steps
        assert f"tfrecorder-{tfrecorder.__version__}/tfrecorder/write/runners/{module}.py" in names
    assert not any("__pycache__" in n for n in names)


def test_converting_locally_imports_neither_beam_nor_tensorflow(tmp_path):
    code = ("import sys, pandas as pd, tfrecorder;"
            f"tfrecorder.convert(pd.DataFrame({{'x': [1, 2]}}), {str(tmp_path / 'o')!r}, progress=False);"
            "assert 'apache_beam' not in sys.modules and 'tensorflow' not in sys.modules")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr


def test_job_names_are_valid_and_unique():
    from tfrecorder.write.runners.beam_launch import job_name

    names = {job_name("Pets v2!") for _ in range(5)}
    assert len(names) == 5
    for name in names:
        assert re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", name) and len(name) <= 63
        assert name.startswith("tfrecorder-pets-v2-")


@pytest.mark.parametrize("in_a_notebook", [False, True])
def test_beam_runners_leave_nothing_in_the_temporary_folder(tabular_table, tmp_path, monkeypatch, in_a_notebook,
                                                            gcs_dir):
    import os
    import tempfile

    import apache_beam.pipeline

    # In IPython Beam leaves its local temporary folder for its interactive runner to tidy.
    monkeypatch.setattr(apache_beam.pipeline, "is_in_ipython", lambda: in_a_notebook)
    tfrecorder.convert(tabular_table, str(tmp_path / "warm"), runner="DirectRunner")  # Beam's one-time set-up
    before = set(os.listdir(tempfile.gettempdir()))
    # IPython changes what Beam does with its own temporary folder, whatever the mode: in a notebook one mode is
    # enough (test time), outside both
    for mode in ("in_memory",) if in_a_notebook else ("in_memory", "multi_processing"):
        tfrecorder.convert(tabular_table, str(tmp_path / mode), runner="DirectRunner",
                           dataflow_options={"direct_running_mode": mode, "direct_num_workers": 2})
    result = tfrecorder.convert(tabular_table, gcs_dir, runner="DataflowRunner", project="my-project",
                                region="europe-west4",
                                dataflow_options={"dry_run": True, "no_auth": True, "sdk_location": "container"})
    assert result.job_name and result.pipeline_options["extra_packages"]  # built, tfrecorder packaged for workers
    assert set(os.listdir(tempfile.gettempdir())) - before == set()  # no beam-pipeline-temp*, tfrecorder-stage-*


def test_the_job_holds_names_of_row_files_not_rows(tmp_path, monkeypatch):
    """Dataflow refuses job requests over ~20 MB: the pipeline must not grow with the table. The DataFrame goes
    to Parquet files under output_dir/_beam/ (removed once the dataset is complete), the job holds names."""
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
            ".conversion.json", "dataset.json", "dataset_info.json", "errors.csv", "features.json",
            "statistics.pb"]  # no _beam/
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


def _same_files(a, b, staged: bool = False) -> None:
    """Every file two conversions wrote is byte-identical (dataset.json: but for the runner that wrote it; not
    .conversion.json, which names the runner and which WriteDataset, a step of a pipeline, does not write).
    ``staged``: a PCollection's rows, numbered as WriteDataset stages them: the content keys' rows aside."""
    names = sorted(p.name for p in a.iterdir() if p.name != ".conversion.json")
    assert names == sorted(p.name for p in b.iterdir() if p.name != ".conversion.json")
    for name in names:
        x, y = (a / name).read_bytes(), (b / name).read_bytes()
        if name == "dataset.json":
            x, y = json.loads(x), json.loads(y)
            x.pop("runner"), y.pop("runner")
        if staged and name.startswith(".content-keys"):
            x, y = (sorted(np.load(io.BytesIO(v))[["key", "split", "shard"]].tolist()) for v in (x, y))
        assert x == y, name


def test_a_dataframe_is_read_and_validated_by_the_pipeline_from_parquet(image_table, tmp_path, monkeypatch):
    """A DataFrame handed to a Beam runner goes to output_dir/_beam/input/ as Parquet, and the pipeline reads
    and validates it as it does a Parquet source (this process validates no row: ``summary_pass.summarize`` fails here).
    Every dtype comes back as it was: relative image paths, nullable ints, categoricals, float32, lists,
    pandas strings - the same files as the local runner, errors.csv included (a missing image)."""
    import numpy as np
    import pandas as pd

    from tfrecorder.write.table import summary_pass

    df = image_table.copy()
    monkeypatch.chdir(tmp_path)
    df["image_uri"] = [str(Path(u).relative_to(tmp_path)) for u in df["image_uri"]]
    df.loc[3, "image_uri"] = "images/missing.jpg"
    n = len(df)
    df = df.assign(maybe=pd.array([1, None] * (n // 2), dtype="Int64"), kind=pd.Categorical(["a", "b", "c"] * (n // 3)),
                   third=np.arange(n, dtype=np.float32) / 3, gaps=[np.nan if i % 4 else i / 10 for i in range(n)],
                   flag=[bool(i % 2) for i in range(n)], words=[["x", "y"][: i % 3] for i in range(n)],
                   text=[None if i % 5 == 0 else f"t{i}" for i in range(n)], small=np.arange(n, dtype=np.uint8),
                   s=pd.array([f"s{i}" for i in range(n)], dtype="string"))
    tfrecorder.convert(df, str(tmp_path / "local"), num_shards=2, progress=False)

    def no_validation(*args, **kwargs):
        raise AssertionError("the DataFrame was validated by the submitting process")

    from tfrecorder.write.runners import beam as beam_module

    staged, real_stage = [], beam_module.stage_frame

    def stage(parts, folder):
        found = real_stage(parts, folder)
        staged.extend(p.relative_to(tmp_path / "direct").as_posix() for p in (tmp_path / "direct").rglob("*.parquet"))
        return found

    monkeypatch.setattr(summary_pass, "summarize", no_validation)  # the whole table's summary: the local runner's
    monkeypatch.setattr(beam_module, "stage_frame", stage)
    result = tfrecorder.convert(df, str(tmp_path / "direct"), num_shards=2, runner="DirectRunner")
    assert staged == ["_beam/input/part-00000.parquet"]
    assert result.errors == 1 and result.rows.written == n - 1
    _same_files(tmp_path / "local", tmp_path / "direct")  # and no _beam/ left


@pytest.mark.parametrize("values", [["x", b"\x00y", "z"], [1, 2.5, 3], [[1], [2.5], []]])
def test_a_dataframe_parquet_would_change_is_refused_by_beam_runners_before_any_work(tmp_path, values):
    """Parquet makes an object column of str beside bytes all bytes, and ints beside floats all floats (which
    dataset.json's ``source`` would show): a Beam runner, which reads a DataFrame as Parquet, names the column
    and what to do before it takes output_dir; the local runner converts it."""
    import pandas as pd

    df = pd.DataFrame({"split": ["TRAIN", "TRAIN", "TEST"], "label": ["a", "b", "a"],
                       "mixed": pd.Series(values, dtype=object)})
    assert tfrecorder.convert(df, str(tmp_path / "local"), progress=False).rows.written == 3
    with pytest.raises(TFRecorderError, match=r"reads a DataFrame as Parquet.*column 'mixed' holds mixed.* values.*"
                                              r"runner='local'"):
        tfrecorder.convert(df, str(tmp_path / "direct"), runner="DirectRunner")
    assert not (tmp_path / "direct").exists() or not list((tmp_path / "direct").iterdir())


def test_a_dataframe_with_bad_values_fails_the_pipeline_as_locally(tmp_path):
    import pandas as pd

    from tfrecorder.errors import SchemaError

    df = pd.DataFrame({"split": ["TRAIN", "TRAINING", "TEST"], "label": ["a", "b", "a"], "x": [1.0, 2.0, 3.0]})
    with pytest.raises(SchemaError) as local:
        tfrecorder.convert(df, str(tmp_path / "local"), progress=False)
    with pytest.raises(SchemaError) as direct:
        tfrecorder.convert(df, str(tmp_path / "direct"), runner="DirectRunner")
    assert str(direct.value) == str(local.value) and "'TRAINING' (row 1)" in str(local.value)
    assert not (tmp_path / "direct").exists() or not list((tmp_path / "direct").iterdir())


def test_an_image_folder_is_listed_by_the_pipeline(tmp_path, monkeypatch):
    """Beam runners list an image folder inside the pipeline, a worker per label folder (this process lists
    nothing: image_folder_table fails here): the same files as the local runner, errors.csv included, for a
    folder with split folders, loose images in a split folder (skipped: at a level not read) and an unreadable
    image. A folder without images is the local runner's error, and leaves output_dir as it was."""
    from tests.conftest import write_image
    from tfrecorder.write import sources

    pets = tmp_path / "pets"
    names = ["TRAIN/cat/a.jpg", "TRAIN/cat/b.png", "TRAIN/z.jpg", "TRAIN/a.jpg", "train/dog/c.jpg", "cat-x/d.jpg",
             "cat/e.jpg", "test/cat/f.jpg", "misc/sub/ignored.jpg", "VALIDATION/dog/g.jpg"]
    for i, name in enumerate(names):
        write_image(pets / name, "PNG" if name.endswith(".png") else "JPEG", seed=i)
    (pets / "TRAIN" / "cat" / "broken.jpg").write_bytes(b"\xff\xd8 not a jpeg")
    options = dict(num_shards=2, split_fractions=(1, 0, 0))  # images outside split folders: all TRAIN
    tfrecorder.convert(str(pets), str(tmp_path / "local"), progress=False, **options)

    def not_here(url):
        raise AssertionError("the submitting process listed the images")

    monkeypatch.setattr(sources, "image_folder_table", not_here)
    result = tfrecorder.convert(str(pets), str(tmp_path / "direct"), runner="DirectRunner", **options)
    assert result.rows.rows_in == 8 and result.errors == 1
    assert {"TRAIN/a.jpg (at a level not read)", "TRAIN/z.jpg (at a level not read)"} <= set(result.skipped)
    _same_files(tmp_path / "local", tmp_path / "direct")

    (tmp_path / "empty" / "cat").mkdir(parents=True)
    with pytest.raises(TFRecorderError, match="has no images laid out as"):
        tfrecorder.convert(str(tmp_path / "empty"), str(tmp_path / "none"), runner="DirectRunner")
    assert not (tmp_path / "none").exists() or not list((tmp_path / "none").iterdir())


def _rows_pipeline(raw, output, **options):
    """A user's pipeline: tuples -> dicts (a Map before WriteDataset), a row count beside it, and the result
    after it; the count and the results it gave."""
    import apache_beam as beam
    from apache_beam.testing.util import assert_that, equal_to

    from tfrecorder.beam import WriteDataset

    columns = ("split", "image_uri", "label", "weight", "count", "note", "tags")
    with beam.Pipeline() as pipeline:
        rows = pipeline | beam.Create(raw) | "AsDicts" >> beam.Map(lambda values: dict(zip(columns, values)))
        counted = rows | "Count" >> beam.combiners.Count.Globally()
        written = (rows | WriteDataset(output, **options)
                   | beam.Map(lambda result: (result.rows.rows_in, result.rows.written, result.runner)))
        assert_that(counted, equal_to([len(raw)]), label="CountBeside")
        assert_that(written, equal_to([(len(raw), len(raw), "WriteDataset")]), label="Result")


def test_write_dataset_inside_a_pipeline_writes_what_convert_writes(image_table, tmp_path):
    """``tfrecorder.beam.WriteDataset`` in a pipeline that does other work writes the files convert writes for
    a DataFrame of the same rows, byte for byte, whatever order the rows come in; none of its staging is left."""
    rows = list(image_table.itertuples(index=False, name=None))
    tfrecorder.convert(image_table, str(tmp_path / "convert"), num_shards=2, progress=False)
    _rows_pipeline(rows, str(tmp_path / "beam"), num_shards=2)
    _same_files(tmp_path / "convert", tmp_path / "beam", staged=True)
    _rows_pipeline(rows[::-1], str(tmp_path / "reversed"), num_shards=2)
    _same_files(tmp_path / "convert", tmp_path / "reversed", staged=True)


def test_write_dataset_refuses_a_bad_table_and_resumes_after_a_failure(image_table, tmp_path):
    """A bad split fails the pipeline with convert's SchemaError and leaves output_dir empty and unlocked; a
    pipeline stopped by a missing image (on_error="raise") is resumed by the same pipeline once the image is
    there, to convert's bytes."""
    import apache_beam as beam

    from tfrecorder.beam import WriteDataset
    from tfrecorder.errors import SchemaError

    bad = image_table.assign(split=["TRAINING"] + list(image_table["split"][1:]))
    with pytest.raises(SchemaError) as local:
        tfrecorder.convert(bad, str(tmp_path / "local"), progress=False)
    message = str(local.value).split(" (row")[0]  # a PCollection's rows are numbered as they are staged
    with pytest.raises(Exception, match=re.escape(message)), beam.Pipeline() as pipeline:
        _ = pipeline | beam.Create(bad.to_dict("records")) | WriteDataset(str(tmp_path / "bad"))
    assert not list((tmp_path / "bad").iterdir())

    missing = Path(image_table["image_uri"][5])
    kept = missing.read_bytes()
    missing.unlink()
    output = str(tmp_path / "beam")
    with pytest.raises(Exception, match="img 5"), beam.Pipeline() as pipeline:
        _ = pipeline | beam.Create(image_table.to_dict("records")) | WriteDataset(output, num_shards=3,
                                                                                   on_error="raise")
    assert not (tmp_path / "beam" / "dataset.json").exists()
    missing.write_bytes(kept)
    with beam.Pipeline() as pipeline:
        _ = pipeline | beam.Create(image_table.to_dict("records")) | WriteDataset(output, num_shards=3,
                                                                                   on_error="raise")
    tfrecorder.convert(image_table, str(tmp_path / "convert"), num_shards=3, progress=False)
    _same_files(tmp_path / "convert", tmp_path / "beam", staged=True)


def test_write_dataset_takes_convert_options_not_the_pipelines():
    from tfrecorder.beam import WriteDataset

    with pytest.raises(TFRecorderError, match=r"WriteDataset\(runner=...\): .* set the pipeline.s on it"):
        WriteDataset("out", runner="DirectRunner")
    with pytest.raises(TFRecorderError, match="image_format='gif'"):
        WriteDataset("out", image_format="gif")
    with pytest.raises(TFRecorderError, match=r"WriteDataset\(shards=...\): no such keyword"):
        WriteDataset("out", shards=3)
