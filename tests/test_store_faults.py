"""A store that fails: a real GCS emulator behind a relay that refuses, falls silent, stalls or breaks
requests (tests/servers.py). Each run ends in bounded time with one error naming the output folder, and the
same conversion run again resumes to the bytes of a clean run. The deadline is made short through
``storage_timeout`` so that each case takes seconds."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import tfrecorder
from tests.conftest import default_signals
from tests.servers import Relay, gcs_emulator, use_emulator

BUCKET = "faults"
OUT = f"gs://{BUCKET}/out"
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def relay(gcs_bucket, monkeypatch):
    """An emulator of this test's own, reached through a Relay; gcsfs is pointed at the relay meanwhile. Retries
    in this process back off from 50 ms instead of Google's 1 s: the same tries, sooner."""
    from tfrecorder.dataset import gcs

    monkeypatch.setattr(gcs, "_BACKOFF", {**gcs._BACKOFF, "initial": 0.05, "maximum": 0.8})
    with gcs_emulator(BUCKET) as address:
        relay = Relay(("127.0.0.1", int(address.rsplit(":", 1)[1])))
        previous = os.environ["STORAGE_EMULATOR_HOST"]
        use_emulator(relay.address)
        try:
            yield relay
        finally:
            relay.close()
            use_emulator(previous)


def shards(folder: str) -> dict[str, bytes]:
    """The shard files of a finished dataset, local or gs://, by name."""
    import fsspec

    fs, path = fsspec.core.url_to_fs(folder)
    fs.invalidate_cache()  # gcsfs keeps listings: this one must be of now
    return {p.rsplit("/", 1)[1]: fs.cat_file(p) for p in fs.ls(path, detail=False) if p.endswith(".tfrecord")}


@pytest.fixture
def clean(image_table, tmp_path) -> dict[str, bytes]:
    """The shards a run on a healthy local disk writes for ``image_table``."""
    tfrecorder.convert(image_table, str(tmp_path / "clean"), num_shards=2, progress=False)
    return shards(str(tmp_path / "clean"))


def command(table: Path, *flags: str) -> list[str]:
    return [sys.executable, "-m", "tfrecorder", "convert", str(table), OUT, "--num-shards", "2", "--no-progress",
            *flags]


def test_a_store_that_refuses_mid_write_is_one_line_and_the_same_command_resumes(image_table, relay, tmp_path):
    table = tmp_path / "table.csv"
    image_table.to_csv(table, index=False)
    tfrecorder.convert(str(table), str(tmp_path / "clean"), num_shards=2, progress=False)
    relay.after(8, "refuse")  # the lock and the first uploads get through, then the host is down
    env = {**os.environ, "STORAGE_EMULATOR_HOST": relay.address}
    done = subprocess.run(command(table, "--storage-timeout", "4"), env=env, capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert "Traceback" not in done.stderr and len(lines) <= 3, done.stderr
    assert lines[-1].startswith(f"tfrecorder: error: the store stopped working while converting into {OUT}: "
                                f"connection refused by 127.0.0.1:{relay.port}"), lines[-1]
    assert "Run the same conversion again once the store answers: it resumes" in lines[-1]

    relay.heal()
    again = subprocess.run(command(table, "--storage-timeout", "4"), env=env, capture_output=True, text=True,
                           cwd=ROOT, timeout=120)
    assert again.returncode == 0, again.stderr
    assert shards(OUT) == shards(str(tmp_path / "clean"))


@pytest.mark.parametrize("fault", ["silent", "refuse"])
def test_a_lost_store_is_one_error_and_nothing_half_written_is_left(image_table, clean, relay, fault):
    relay.after(8, fault)
    with pytest.raises(tfrecorder.TFRecorderError) as caught:
        tfrecorder.convert(image_table, OUT, num_shards=2, progress=False, storage_timeout=2)
    cause = "no answer from the store for 2 s" if fault == "silent" else "connection refused"
    assert f"converting into {OUT}: {cause}" in str(caught.value)
    relay.heal()
    assert not [n for n in shards(OUT) if n not in clean]  # no shard but whole ones under their own names
    for name, data in shards(OUT).items():
        assert data == clean[name], name
    tfrecorder.convert(image_table, OUT, num_shards=2, progress=False, storage_timeout=2)
    assert shards(OUT) == clean
    assert tfrecorder.verify(OUT).ok


def test_one_request_that_never_answers_costs_a_retry_not_the_run(image_table, clean, relay):
    relay.after(6, "stall")  # one request, past the lock, is held without an answer
    tfrecorder.convert(image_table, OUT, num_shards=2, progress=False, storage_timeout=6)
    assert relay.held.is_set()
    assert shards(OUT) == clean


def test_transient_503s_and_resets_are_retried_to_identical_bytes(image_table, clean, relay):
    relay.flaky(fail=0.1, reset=0.05, seed=3)
    tfrecorder.convert(image_table, OUT, num_shards=2, progress=False)
    assert relay.failed > 0
    assert shards(OUT) == clean


def test_ctrl_c_during_a_request_that_never_answers_ends_the_command(image_table, relay, tmp_path):
    table = tmp_path / "table.csv"
    image_table.to_csv(table, index=False)
    relay.after(13, "silent")  # the shard threads' uploads are held: with the default deadline, for 60 s each
    env = {**os.environ, "STORAGE_EMULATOR_HOST": relay.address}
    process = subprocess.Popen(command(table), env=env, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                               preexec_fn=default_signals)
    try:
        assert relay.held.wait(120), "the run never reached the silent store"
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=30)  # not the 60 s a held request may wait
    finally:
        process.kill()
    assert process.returncode == 130, stderr
    assert stderr.strip().splitlines()[-1] == "tfrecorder: interrupted: run the same command again to resume where " \
                                              "it stopped"


@pytest.mark.parametrize("reader", ["verify", "info", "inspect", "read_tfr", "load_dataset", "read_manifest"])
def test_readers_of_a_lost_store_end_with_one_error_naming_the_folder(tabular_table, relay, reader, tmp_path):
    tfrecorder.convert(tabular_table, OUT, progress=False)
    relay.refuse()
    call = {
        "verify": lambda: tfrecorder.verify(OUT, storage_timeout=1),
        "info": lambda: tfrecorder.info(OUT, storage_timeout=1),
        "inspect": lambda: tfrecorder.inspect(OUT, output_dir=str(tmp_path / "look"), storage_timeout=1),
        "read_tfr": lambda: tfrecorder.read_tfr(OUT, storage_timeout=1),
        "load_dataset": lambda: tfrecorder.load_dataset(OUT, storage_timeout=1),
        "read_manifest": lambda: tfrecorder.read_manifest(OUT, storage_timeout=1),
    }[reader]
    with pytest.raises(tfrecorder.TFRecorderError) as caught:
        call()
    assert str(caught.value).startswith(f"cannot read {OUT}: connection refused by 127.0.0.1:{relay.port} "
                                        f"(given up at storage_timeout=1 s)"), str(caught.value)


def test_verify_in_the_command_while_the_store_is_down_is_one_line(tabular_table, relay):
    tfrecorder.convert(tabular_table, OUT, progress=False)
    relay.refuse()
    env = {**os.environ, "STORAGE_EMULATOR_HOST": relay.address}
    done = subprocess.run([sys.executable, "-m", "tfrecorder", "verify", OUT, "--storage-timeout", "1"], env=env,
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [f"tfrecorder: error: cannot read {OUT}: connection refused by "
                                                f"127.0.0.1:{relay.port} (given up at --storage-timeout 1 s)"]


def test_storage_timeout_must_be_a_positive_number(tabular_table, tmp_path):
    with pytest.raises(tfrecorder.TFRecorderError, match=r"storage_timeout=0: give a number of seconds above 0"):
        tfrecorder.convert(tabular_table, str(tmp_path / "out"), storage_timeout=0)


def test_a_table_on_a_lost_store_is_one_error_too(tabular_table, relay, tmp_path):
    import fsspec

    with fsspec.open(f"gs://{BUCKET}/table.csv", "w") as f:
        tabular_table.to_csv(f, index=False)
    relay.refuse()
    with pytest.raises(tfrecorder.TFRecorderError) as caught:
        tfrecorder.convert(f"gs://{BUCKET}/table.csv", str(tmp_path / "out"), progress=False, storage_timeout=1)
    assert f"converting into {tmp_path / 'out'}: connection refused by 127.0.0.1:{relay.port}" in str(caught.value)


def test_a_beam_pipeline_that_loses_the_store_is_the_same_one_error(image_table, relay):
    relay.after(30, "refuse")  # the pipeline's workers are writing shards
    with pytest.raises(tfrecorder.TFRecorderError) as caught:
        tfrecorder.convert(image_table, OUT, runner="DirectRunner", num_shards=2, progress=False, storage_timeout=2)
    assert str(caught.value).startswith(f"the store stopped working while converting into {OUT}: connection "
                                        f"refused by 127.0.0.1:{relay.port}"), str(caught.value)
