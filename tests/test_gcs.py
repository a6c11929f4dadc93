"""gs:// through a real GCS emulator on 127.0.0.1: images read from it, datasets written to it."""

from __future__ import annotations

import json
from pathlib import Path

import fsspec
import pandas as pd
import pytest
from PIL import Image

import tfrecorder
from tfrecorder.write.sources.annotated import ROOT_ATTR


def upload_images(table: pd.DataFrame, gcs_dir: str) -> pd.DataFrame:
    fs = fsspec.filesystem("gs")
    uris = []
    for path in table["image_uri"]:
        uri = f"{gcs_dir}/images/{Path(path).name}"
        with fs.open(uri, "wb") as f:
            f.write(Path(path).read_bytes())
        uris.append(uri)
    return table.assign(image_uri=uris)


def test_images_on_gcs_written_to_gcs_match_a_local_run(image_table, gcs_dir, tmp_path):
    remote = upload_images(image_table, gcs_dir)
    remote.loc[3, "image_uri"] = f"{gcs_dir}/images/missing.jpg"
    out = f"{gcs_dir}/out"
    result = tfrecorder.convert(remote, out, num_shards=2, progress=False)
    assert result.errors == 1 and result.splits["TEST"].written == 2
    local = tfrecorder.convert(remote, str(tmp_path / "local"), num_shards=2, progress=False)

    fs = fsspec.filesystem("gs")
    names = sorted(p.rsplit("/", 1)[1] for p in fs.ls(out))
    assert names == sorted(p.name for p in (tmp_path / "local").iterdir())
    assert not any(n.endswith(".partial") for n in names)
    for name in names:
        if name.endswith(".tfrecord"):
            assert fs.cat(f"{out}/{name}") == (tmp_path / "local" / name).read_bytes(), name
    errors = fs.cat(f"{out}/errors.csv").decode()
    assert f"{gcs_dir}/images/missing.jpg,not_found" in errors
    manifest = json.loads(fs.cat(f"{out}/dataset.json"))
    assert manifest["rows"]["TEST"] == {"rows_in": 3, "written": 2, "errors": 1, "discarded": 0}
    assert tfrecorder.read_manifest(out).records("TRAIN") == 6
    assert local.metrics == result.metrics


def test_non_empty_gcs_output_needs_overwrite_but_for_the_same_conversion(tabular_table, gcs_dir):
    first = tfrecorder.convert(tabular_table, gcs_dir, progress=False)
    again = tfrecorder.convert(tabular_table, gcs_dir, progress=False)  # its .conversion.json, read from the store
    assert again.reused and again.splits == first.splits
    try:
        tfrecorder.convert(tabular_table, gcs_dir, progress=False, compression="gzip")
    except tfrecorder.TFRecorderError as e:
        assert "is not empty" in str(e) and "compression=None there, 'gzip' here" in str(e)
    else:
        raise AssertionError("another conversion into the same gs:// folder was not refused")
    assert not tfrecorder.convert(tabular_table, gcs_dir, progress=False, overwrite=True).reused


def test_dataflow_dry_run(image_table, gcs_bucket, gcs_dir):
    remote = upload_images(image_table, gcs_dir)
    result = tfrecorder.convert(
        remote, f"{gcs_dir}/out", runner="DataflowRunner", project="my-project", region="europe-west4",
        job_label="Pets v2!", dataflow_options={"dry_run": True, "no_auth": True, "machine_type": "n2-standard-4",
                                                "sdk_location": "container"},
    )
    options = result.pipeline_options
    assert options["runner"] == "DataflowRunner"
    assert (options["project"], options["region"]) == ("my-project", "europe-west4")
    assert options["job_name"].startswith("tfrecorder-pets-v2-") and result.job_name == options["job_name"]
    assert options["temp_location"] == f"{gcs_dir}/out/_beam/temp"
    assert options["staging_location"] == f"{gcs_dir}/out/_beam/staging"
    assert options["machine_type"] == "n2-standard-4"
    (package,) = options["extra_packages"]
    assert Path(package).name == f"tfrecorder-{tfrecorder.__version__}.tar.gz"
    assert not Path(package).parent.exists()  # staged for the job, then removed from the temporary folder
    assert result.splits == {}  # nothing was submitted, so nothing was written
    assert str(result).startswith(f"Dataflow job {result.job_name} built (dry run, not submitted): it writes gs:")


def test_dataflow_dry_run_honours_a_given_wheel(tabular_table, gcs_dir, tmp_path):
    wheel = tmp_path / "tfrecorder-9.9-py3-none-any.whl"
    wheel.write_bytes(b"PK")
    result = tfrecorder.convert(
        tabular_table, gcs_dir, runner="DataflowRunner", project="my-project", region="us-central1",
        tfrecorder_wheel=str(wheel),
        dataflow_options={"dry_run": True, "no_auth": True, "sdk_location": "container"},
    )
    assert result.pipeline_options["extra_packages"] == [str(wheel)]


def test_load_dataset_reads_gcs_through_tensorflows_own_filesystem(image_table, gcs_dir, tf_gcs_env, tmp_path):
    import subprocess
    import sys

    remote = upload_images(image_table, gcs_dir)
    tfrecorder.convert(remote, f"{gcs_dir}/out", num_shards=2, compression="gzip", progress=False)
    tfrecorder.convert(image_table, str(tmp_path / "local"), num_shards=2, compression="gzip", progress=False)
    code = (
        "import sys, numpy as np, tfrecorder;"
        f"ds = tfrecorder.load_dataset({gcs_dir + '/out'!r}, split='TRAIN', shuffle=True, seed=1);"
        "np.savez(sys.argv[1], **{str(x['count']): x['image'] for x in ds.as_numpy_iterator()})"
    )
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path / "images.npz")], env=tf_gcs_env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    import numpy as np

    from_gcs = dict(np.load(tmp_path / "images.npz"))
    local = {str(x["count"]): x["image"] for x in tfrecorder.load_dataset(str(tmp_path / "local"), split="TRAIN")
             .as_numpy_iterator()}
    assert sorted(from_gcs) == sorted(local) == ["0", "1", "4", "5", "8", "9"]
    for count, image in local.items():
        np.testing.assert_array_equal(from_gcs[count], image)


def test_a_stopped_gcs_conversion_resumes_and_leaves_no_state(image_table, gcs_dir, tmp_path):
    remote = upload_images(image_table, gcs_dir)
    broken = f"{gcs_dir}/images/{Path(image_table.image_uri[8]).name}"  # a TRAIN row in the second shard
    fs = fsspec.filesystem("gs")
    good = fs.cat(broken)
    fs.pipe(broken, b"\xff\xd8 truncated")
    out = f"{gcs_dir}/out"
    try:
        tfrecorder.convert(remote, out, num_shards=2, progress=False, on_error="raise")
    except tfrecorder.RowError as e:
        assert broken in str(e)
    else:
        raise AssertionError("the broken image did not stop the run")
    assert fs.exists(f"{out}/.tfrecorder/done/train-00000-of-00002.tfrecord.json")
    assert not fs.exists(f"{out}/.tfrecorder/lock.json") and not fs.exists(f"{out}/dataset.json")

    fs.pipe(broken, good)
    result = tfrecorder.convert(remote, out, num_shards=2, progress=False, on_error="raise")
    assert result.resumed_shards == 1 and result.rows.written == 12
    fs.invalidate_cache()
    assert not fs.exists(f"{out}/.tfrecorder/run.json") and not fs.exists(f"{out}/.tfrecorder/lock.json")
    tfrecorder.convert(remote, str(tmp_path / "clean"), num_shards=2, progress=False)
    for name in (p.name for p in (tmp_path / "clean").iterdir() if p.name != ".conversion.json"):  # on_error differs
        assert fs.cat(f"{out}/{name}") == (tmp_path / "clean" / name).read_bytes(), name
    assert tfrecorder.verify(out).ok


def test_a_dataflow_job_of_a_large_csv_holds_no_rows_and_the_submitter_reads_none(gcs_dir, monkeypatch):
    """Dataflow refuses job requests over ~20 MB, and a driver that reads the table cannot take 100M rows: the
    job for a CSV on gs:// holds its files' names (the same size for 2k and 200k rows) and the submitting
    process reads no row of it - the pipeline's workers read, validate and plan."""
    import apache_beam as beam
    import numpy as np

    fs = fsspec.filesystem("gs")
    for rows in (2_000, 200_000):
        rng = np.random.default_rng(rows)
        table = pd.DataFrame({"split": rng.choice(["TRAIN", "VALIDATION", "TEST"], rows),
                              "label": rng.integers(0, 5, rows), "x": rng.normal(size=rows).round(4),
                              "note": [f"row {i}" for i in range(rows)]})
        with fs.open(f"{gcs_dir}/{rows}/table.csv", "wb") as f:
            f.write(table.to_csv(index=False).encode())

    sizes: dict[int, int] = {}
    run = beam.Pipeline.run

    def measured(pipeline, *args, **kwargs):  # the job as built (Dataflow's runner runs a copy of it again)
        sizes.setdefault(rows, len(pipeline.to_runner_api().SerializeToString()))
        return run(pipeline, *args, **kwargs)

    def no_table(*args, **kwargs):
        raise AssertionError("the submitting process read the table")

    monkeypatch.setattr(beam.Pipeline, "run", measured)
    monkeypatch.setattr(pd, "read_csv", no_table)
    monkeypatch.setattr(pd, "read_parquet", no_table)
    for rows in (2_000, 200_000):
        result = tfrecorder.convert(f"{gcs_dir}/{rows}/*.csv", f"{gcs_dir}/out-{rows}", runner="DataflowRunner",
                                    project="my-project", region="europe-west4",
                                    dataflow_options={"dry_run": True, "no_auth": True, "sdk_location": "container"})
        assert result.splits == {} and result.job_name
    small, large = sizes[2_000], sizes[200_000]
    assert large < 1_000_000 and abs(large - small) <= 0.1 * small, (small, large)


def test_direct_runner_reads_a_csv_on_gcs_and_spills_its_rows_there(image_table, gcs_dir, tmp_path):
    """The pipeline reads the CSV from gs://, spills its rows under gs://.../_beam/rows/ (256 KiB upload blocks)
    and writes the local runner's shards there; nothing of the spill is left once the dataset is complete."""
    remote = upload_images(image_table, gcs_dir)
    fs = fsspec.filesystem("gs")
    with fs.open(f"{gcs_dir}/table.csv", "wb") as f:
        f.write(remote.to_csv(index=False).encode())
    out = f"{gcs_dir}/out"
    result = tfrecorder.convert(f"{gcs_dir}/table.csv", out, runner="DirectRunner", num_shards=2)
    tfrecorder.convert(f"{gcs_dir}/table.csv", str(tmp_path / "local"), num_shards=2, progress=False)
    fs.invalidate_cache()
    names = sorted(p.rsplit("/", 1)[1] for p in fs.ls(out))
    assert names == sorted(p.name for p in (tmp_path / "local").iterdir())  # no _beam/ left
    for name in names:
        if ".tfrecord" in name or name == "errors.csv":
            assert fs.cat(f"{out}/{name}") == (tmp_path / "local" / name).read_bytes(), name
    assert result.rows.written == len(image_table)


def test_an_image_folder_on_gcs_is_listed_by_the_direct_runner(gcs_dir, tmp_path):
    """gs:// has no folders, only names with slashes: the pipeline's listing (a worker per label folder) finds
    the same rows as the local runner's one recursive listing, and writes the same shards."""
    from tests.conftest import write_image

    fs = fsspec.filesystem("gs")
    for i, name in enumerate(["TRAIN/cat/a.jpg", "TRAIN/dog/b.jpg", "TEST/cat/c.jpg", "TEST/dog/d.jpg",
                              "TRAIN/cat/e.jpg"]):
        fs.pipe(f"{gcs_dir}/pets/{name}", write_image(tmp_path / f"{i}.jpg", seed=i).read_bytes())
    local = tfrecorder.convert(f"{gcs_dir}/pets", str(tmp_path / "local"), num_shards=1, progress=False)
    direct = tfrecorder.convert(f"{gcs_dir}/pets", str(tmp_path / "direct"), num_shards=1, runner="DirectRunner")
    assert direct.rows == local.rows and local.rows.written == 5
    for name in ("train-00000-of-00001.tfrecord", "test-00000-of-00001.tfrecord", "errors.csv"):
        assert (tmp_path / "direct" / name).read_bytes() == (tmp_path / "local" / name).read_bytes(), name


def test_a_dataflow_submission_that_hangs_is_an_error_not_a_process_that_never_returns(tabular_table, gcs_bucket,
                                                                                    monkeypatch):
    """Beam takes a bucket name it finds invalid ("b") for a missing one and looks for a default bucket through
    Google's APIs, each call retried for a minute or more: offline, the submission waits and waits."""
    from tfrecorder.write.runners import beam_launch

    fsspec.filesystem("gs").mkdir("b")
    monkeypatch.setattr(beam_launch, "SUBMIT_SECONDS", 3.0)
    with pytest.raises(tfrecorder.TFRecorderError, match=r"submitting the Dataflow job tfrecorder-\S+ did not finish "
                                                         r"within 3 s .* look for the job in the console"):
        tfrecorder.convert(tabular_table, "gs://b/out", runner="DataflowRunner", project="my-project",
                           region="europe-west4",
                           dataflow_options={"dry_run": True, "no_auth": True, "sdk_location": "container"})
    assert not fsspec.filesystem("gs").exists("gs://b/out/.tfrecorder/lock.json")  # the lock is released


def test_a_missing_bucket_is_one_line_before_any_work(tabular_table, gcs_bucket, tmp_path):
    with pytest.raises(tfrecorder.TFRecorderError, match=r"^gs://no-such-bucket does not exist: create it, or check "
                                                         r"the bucket's name in output_dir='gs://no-such-bucket/out'$"):
        tfrecorder.convert(tabular_table, "gs://no-such-bucket/out", progress=False)
    tabular_table.to_csv(tmp_path / "t.csv", index=False)
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "tfrecorder", "convert", str(tmp_path / "t.csv"),
                           "gs://no-such-bucket/out"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1 and proc.stderr.splitlines() == [
        "tfrecorder: error: gs://no-such-bucket does not exist: create it, or check the bucket's name in "
        "output_dir='gs://no-such-bucket/out'"]


def test_data_source_reads_gcs_by_ranges_and_array_record_shards_write_to_gcs(image_table, gcs_dir, tmp_path):
    """Random access to a gs:// folder: each record one ranged read, as from a local disk; ArrayRecord shards
    (written to a local temporary, then uploaded) are the local run's bytes, verify reads them from the store."""
    local, out = str(tmp_path / "local"), f"{gcs_dir}/out"
    tfrecorder.convert(image_table, local, num_shards=2, progress=False)
    tfrecorder.convert(image_table, out, num_shards=2, progress=False)
    remote, here = (tfrecorder.data_source(d, "TRAIN", image_size=(8, 8)) for d in (out, local))
    for i in (5, 0, -1):
        assert (remote[i]["image"] == here[i]["image"]).all() and remote[i]["label"] == here[i]["label"]
    arrays = f"{gcs_dir}/arrays"
    tfrecorder.convert(image_table, arrays, num_shards=2, file_format="array_record", progress=False)
    tfrecorder.convert(image_table, str(tmp_path / "arrays"), num_shards=2, file_format="array_record",
                       progress=False)
    fs = fsspec.filesystem("gs")
    name = "train-00001-of-00002.array_record"
    assert fs.cat(f"{arrays}/{name}") == (tmp_path / "arrays" / name).read_bytes()
    assert tfrecorder.verify(arrays).ok
    with pytest.raises(tfrecorder.TFRecorderError, match=r"holds ArrayRecord shards, which array_record's reader "
                                                         r"opens from local disk only"):
        tfrecorder.data_source(arrays, "TRAIN")


def test_a_yolo_dataset_on_gcs_reads_as_the_same_folder_on_disk(gcs_dir, tmp_path):
    """A YOLO dataset in a bucket: its label files read by threads, each whole one of plain boxes parsed at once
    and the rest a line at a time, into the long form the same folder on disk gives, a bad line's message naming
    its gs:// file."""
    root = tmp_path / "yolo"
    labels = {"a": "0 0.5 0.5 0.2 0.2\n1 0.25 0.25 0.1 0.1\n", "b": "1 0.5 0.5 0.2 0.2\n7 0.5 0.5 0.2 0.2\n",
              "c": "", "d": None, "e": "\ufeff0 0.5 0.5 0.4 0.4\n"}
    for name, text in labels.items():
        (root / "images" / "train").mkdir(parents=True, exist_ok=True)
        Image.new("RGB", (32, 32), "gray").save(root / "images" / "train" / f"{name}.png")
        if text is not None:
            (root / "labels" / "train").mkdir(parents=True, exist_ok=True)
            (root / "labels" / "train" / f"{name}.txt").write_bytes(text.encode())
    (root / "data.yaml").write_text("train: images/train\nnames: [cat, dog]\n")
    fs = fsspec.filesystem("gs")
    fs.put(str(root), f"{gcs_dir}/yolo", recursive=True)
    local = tfrecorder.read_annotations(str(root))
    remote = tfrecorder.read_annotations(f"{gcs_dir}/yolo")
    assert remote["image_uri"].tolist() == [u.replace(str(root), f"{gcs_dir}/yolo") for u in local["image_uri"]]
    pd.testing.assert_frame_equal(remote.drop(columns="image_uri"), local.drop(columns="image_uri"),
                                  check_exact=True)
    assert remote["label"].fillna("-").tolist() == ["cat", "dog", "dog", "-", "-", "cat"]
    refused = remote.attrs[ROOT_ATTR]["refused"]
    assert list(refused.values()) == [f"{gcs_dir}/yolo/labels/train/b.txt line 2: class 7 is not in names (0-1)"]
