"""Beam's DaskRunner on a real Dask cluster (a ``distributed.LocalCluster`` of 2 worker processes): a CSV glob, a
DataFrame, ``WriteDataset`` inside a user's pipeline and an image table with a broken image each write the bytes
the local runner writes; the runner that ran is what the result and dataset.json say; a worker killed mid-run
costs nothing but time, and a run stopped part-way leaves no lock and is resumed to the same bytes. Needs
``apache-beam[dask]`` (the test extra installs it)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import tfrecorder
from tfrecorder.errors import TFRecorderError

distributed = pytest.importorskip("distributed")
pytest.importorskip("apache_beam.runners.dask.dask_runner")

DASK = "DaskRunner"


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as c:
        yield c


@pytest.fixture
def on_dask(cluster) -> dict:
    """convert's keywords for the test cluster (Beam's flag name; its destination, ``address``, works too)."""
    return dict(runner=DASK, pipeline_options={"dask_client_address": cluster.scheduler_address})


def same_files(local: Path, other: Path, runner: str = DASK) -> None:
    names = sorted(p.name for p in local.iterdir() if p.name != ".conversion.json")
    assert names == sorted(p.name for p in other.iterdir() if p.name != ".conversion.json")
    for name in names:
        a, b = (local / name).read_bytes(), (other / name).read_bytes()
        if name == "dataset.json":  # identical but for the runner that wrote it
            a, b = json.loads(a), json.loads(b)
            assert (a.pop("runner"), b.pop("runner")) == ("local", runner)
        if runner == "WriteDataset" and name.startswith(".content-keys"):  # rows numbered as a PCollection's staged
            a, b = (sorted(np.load(io.BytesIO(v))[["key", "split", "shard"]].tolist()) for v in (a, b))
        assert a == b, name


def test_a_dataframe_with_a_broken_image_and_a_csv_glob_on_dask_write_the_local_bytes(image_table, tmp_path,
                                                                                       on_dask):
    Path(image_table["image_uri"][4]).write_bytes(b"\xff\xd8 not a jpeg")
    local = tfrecorder.convert(image_table, str(tmp_path / "local"), num_shards=2, progress=False)
    frame = tfrecorder.convert(image_table, str(tmp_path / "frame"), num_shards=2, **on_dask)
    assert frame.runner == DASK and frame.metrics == local.metrics
    assert frame.error_codes == local.error_codes == {"unsupported_format": 1}
    same_files(tmp_path / "local", tmp_path / "frame")

    for i, part in enumerate((image_table[:7], image_table[7:])):
        part.to_csv(tmp_path / f"part-{i}.csv", index=False)
    glob = str(tmp_path / "part-*.csv")
    tfrecorder.convert(glob, str(tmp_path / "glob-local"), num_shards=2, progress=False)
    tfrecorder.convert(glob, str(tmp_path / "glob"), num_shards=2, **on_dask)
    same_files(tmp_path / "glob-local", tmp_path / "glob")


def test_audio_clips_on_dask_write_the_local_bytes(tmp_path, on_dask):
    """An audio column (WAV and FLAC clips, one resampled by sample_rate=) on the DaskRunner: the local bytes."""
    import numpy as np
    import soundfile

    paths = []
    for row, (rate, kind) in enumerate([(16_000, "WAV"), (8_000, "FLAC"), (22_050, "FLAC"), (16_000, "WAV")]):
        t = np.arange(rate // 4) / rate
        paths.append(str(tmp_path / f"{row}.{kind.lower()}"))
        soundfile.write(paths[-1], (0.5 * np.sin(2 * np.pi * (300 + 100 * row) * t)).astype(np.float32), rate,
                        format=kind)
    table = pd.DataFrame({"split": ["TRAIN", "TRAIN", "TRAIN", "TEST"], "audio_uri": paths, "label": ["a", "b"] * 2})
    tfrecorder.convert(table, str(tmp_path / "local"), sample_rate=16_000, num_shards=2, progress=False)
    tfrecorder.convert(table, str(tmp_path / "dask"), sample_rate=16_000, num_shards=2, **on_dask)
    same_files(tmp_path / "local", tmp_path / "dask")


def test_write_dataset_in_a_dask_pipeline_writes_what_convert_writes(image_table, tmp_path, cluster):
    """The folder is claimed as the pipeline is built: no step repeats a side effect when the DaskRunner computes a
    side input again for each step that reads it (it once made two claims, and two 'started' times)."""
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions
    from apache_beam.runners.dask.dask_runner import DaskRunner

    from tfrecorder.beam import WriteDataset

    tfrecorder.convert(image_table, str(tmp_path / "convert"), num_shards=2, progress=False)
    pipeline = beam.Pipeline(runner=DaskRunner(), options=PipelineOptions(address=cluster.scheduler_address))
    _ = pipeline | beam.Create(image_table.to_dict("records")) | WriteDataset(str(tmp_path / "beam"), num_shards=2)
    result = pipeline.run()
    result.wait_until_finish()
    result.client.close()
    names = sorted(p.name for p in (tmp_path / "beam").iterdir())
    assert ".tfrecorder" not in names and "_beam" not in names
    same_files(tmp_path / "convert", tmp_path / "beam", runner="WriteDataset")


def test_a_run_stopped_part_way_leaves_no_lock_and_resumes_to_the_same_bytes(image_table, tmp_path, on_dask):
    missing = Path(image_table["image_uri"][5])
    kept = missing.read_bytes()
    missing.unlink()
    output = tmp_path / "dask"
    with pytest.raises(TFRecorderError, match="img 5"):
        tfrecorder.convert(image_table, str(output), num_shards=3, on_error="raise", **on_dask)
    assert not (output / ".tfrecorder" / "lock.json").exists() and not (output / "dataset.json").exists()
    missing.write_bytes(kept)
    tfrecorder.convert(image_table, str(output), num_shards=3, on_error="raise", **on_dask)
    tfrecorder.convert(image_table, str(tmp_path / "local"), num_shards=3, on_error="raise", progress=False)
    same_files(tmp_path / "local", output)


def test_runner_names_classes_and_options_are_checked(tmp_path):
    table = pd.DataFrame({"split": ["TRAIN"], "x": [1.0]})
    with pytest.raises(TFRecorderError, match=r"runner='Dask': use 'local', one of 'DirectRunner', "
                                              r"'DataflowRunner', 'DaskRunner'"):
        tfrecorder.convert(table, str(tmp_path / "a"), runner="Dask")
    with pytest.raises(TFRecorderError, match=r"runner='no.such.Runner': cannot import it"):
        tfrecorder.convert(table, str(tmp_path / "b"), runner="no.such.Runner")
    with pytest.raises(TFRecorderError, match=r"runner='tfrecorder.types.ColumnType' is not a Beam runner class"):
        tfrecorder.convert(table, str(tmp_path / "e"), runner="tfrecorder.types.ColumnType")
    with pytest.raises(TFRecorderError, match=r"pipeline option 'dask_client_adress' is none of Beam's options "
                                              r"for DaskRunner: did you mean 'dask_client_address'\?"):
        tfrecorder.convert(table, str(tmp_path / "c"), runner=DASK,
                           pipeline_options={"dask_client_adress": "tcp://127.0.0.1:1"})
    with pytest.raises(TFRecorderError, match=r"pipeline_options= and dataflow_options= .* give one of them"):
        tfrecorder.convert(table, str(tmp_path / "d"), runner="DirectRunner", pipeline_options={},
                           dataflow_options={})
    assert not any((tmp_path / name).exists() and any((tmp_path / name).iterdir()) for name in "abcde")


def test_a_runner_class_or_its_path_runs_as_its_name(tmp_path):
    from apache_beam.runners.direct.direct_runner import DirectRunner

    table = pd.DataFrame({"split": ["TRAIN"] * 3, "x": [1.0, 2.0, 3.0]})
    by_class = tfrecorder.convert(table, str(tmp_path / "class"), runner=DirectRunner)
    by_path = tfrecorder.convert(table, str(tmp_path / "path"),
                                 runner="apache_beam.runners.direct.direct_runner.DirectRunner")
    assert by_class.runner == by_path.runner == "DirectRunner"
    assert tfrecorder.read_manifest(str(tmp_path / "path")).runner == "DirectRunner"


def test_a_worker_killed_mid_run_leaves_the_local_bytes(image_table, tmp_path, cluster, on_dask):
    """A worker process killed once the first shard is written (its nanny starts another; Dask gives the lost
    tasks to a worker): the run ends with the local runner's bytes, or, if it fails, the same call resumes to
    them, keeping the shards already written."""
    import os
    import signal
    import threading
    import time

    tfrecorder.convert(image_table, str(tmp_path / "local"), num_shards=6, progress=False)
    output = tmp_path / "dask"
    done = output / ".tfrecorder" / "done"
    outcome: dict = {}

    def convert() -> None:
        try:
            outcome["result"] = tfrecorder.convert(image_table, str(output), num_shards=6, **on_dask)
        except TFRecorderError as e:  # the run lost to the kill: resumed below
            outcome["error"] = e

    run = threading.Thread(target=convert)
    run.start()
    deadline = time.monotonic() + 120
    while not (done.is_dir() and any(done.iterdir())) and run.is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)  # polling the journal, not waiting for time: the kill must land between two shards
    killed = run.is_alive()
    if killed:
        with distributed.Client(cluster.scheduler_address) as client:
            victim = sorted(client.scheduler_info()["workers"])[0]
            os.kill(client.run(os.getpid, workers=[victim])[victim], signal.SIGKILL)
    run.join(300)
    assert killed, "the run ended before a worker could be killed: give it more shards"
    if "error" in outcome:
        resumed = tfrecorder.convert(image_table, str(output), num_shards=6, **on_dask)
        assert resumed.resumed_shards > 0
    cluster.wait_for_workers(2)
    same_files(tmp_path / "local", output)
