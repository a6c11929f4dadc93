"""load_dataset on a fleet: its pipeline on tf.data service workers in other processes, Dataset.save/load, an
iterator checkpointed and restored in another process, a shard swapped after opening, the seeded order across
runs and epochs, and each host's part (shard=) before and after a restore."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

import tfrecorder
from tfrecorder import sample_data
from tfrecorder.errors import TFRecorderError

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def datasets(tmp_path_factory) -> dict[str, str]:
    """A classification split of 20 records and a detection split of 10 images, each in 3 shards."""
    root = tmp_path_factory.mktemp("fleet")
    images = sample_data.make_sample_images(str(root / "images"), n=24, size=(16, 16))
    images["number"] = range(len(images))  # each record's name in these tests
    scenes = sample_data.make_detection_scenes(str(root / "scenes"), n=12, size=(32, 32))
    out = {"classification": str(root / "classification"), "detection": str(root / "detection")}
    tfrecorder.convert(images, out["classification"], num_shards=3, progress=False)
    tfrecorder.convert(scenes, out["detection"], num_shards=3, progress=False)
    return out


def _name(element: dict) -> str:
    """A record's name: its number (classification), or its decoded pixels' digest (detection)."""
    if "number" in element:
        return str(int(element["number"]))
    return hashlib.sha1(np.asarray(element["image"]).tobytes()).hexdigest()[:12]


def _names(ds: tf.data.Dataset) -> list[str]:
    return [_name(element) for element in ds.as_numpy_iterator()]


def _python(code: str, *args: str, timeout: int = 240) -> str:
    """``code`` run by a new Python process (its stdout); an error or a hang fails the test with its stderr."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=timeout,
                          env=env, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@contextlib.contextmanager
def _service(workers: int = 2) -> Iterator[str]:
    """A tf.data service on 127.0.0.1: a dispatcher and ``workers`` workers, each a process of its own."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    service = "tf.data.experimental.service"
    dispatcher = f"{service}.DispatchServer({service}.DispatcherConfig(port={port})).join()"
    worker = (f"{service}.WorkerServer({service}.WorkerConfig(dispatcher_address='127.0.0.1:{port}', "
              f"worker_address='127.0.0.1:%port%', port=0)).join()")
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    servers = [subprocess.Popen([sys.executable, "-c", f"import tensorflow as tf; {code}"], env=env,
                                stderr=subprocess.DEVNULL) for code in [dispatcher] + [worker] * workers]
    try:
        yield f"grpc://127.0.0.1:{port}"
    finally:
        for server in servers:
            server.kill()
            server.wait()


_SERVICE_CLIENT = """
import json, sys
import tensorflow as tf, tfrecorder
from tests.test_fleet import _names
service, results = sys.argv[1], {}
for kind, folder in json.loads(sys.argv[2]).items():
    modes = [("distributed_epoch", False), ("parallel_epochs", True)] + [("distributed_epoch", True)] * (kind < "d")
    for mode, cardinality in modes:
        ds = tfrecorder.load_dataset(folder, "TRAIN", shuffle=True, seed=1, image_size=(8, 8),
                                     cardinality=cardinality)
        ds = ds.apply(tf.data.experimental.service.distribute(mode, service, job_name=f"{kind}-{mode}-{cardinality}"))
        try:
            results[f"{kind} {mode} {cardinality}"] = sorted(_names(ds))
        except tf.errors.OpError as e:
            results[f"{kind} {mode} {cardinality}"] = e.message.splitlines()[0][-160:]
print(json.dumps(results))
"""


@pytest.mark.slow  # four processes start TensorFlow (about 30 s on two cores)
def test_workers_in_other_processes_read_every_record_once(datasets):
    expected = {kind: sorted(_names(tfrecorder.load_dataset(folder, "TRAIN", image_size=(8, 8))))
                for kind, folder in datasets.items()}
    with _service() as service:
        results = json.loads(_python(_SERVICE_CLIENT, service, json.dumps(datasets)))
    for kind, names in expected.items():
        assert len(names) == len(set(names)) == (20 if kind == "classification" else 10)
        assert results[f"{kind} distributed_epoch False"] == names  # each worker a part: every record once
        assert results[f"{kind} parallel_epochs True"] == sorted(names * 2)  # each worker the whole split
    # the split's length is asserted as it is read: a worker that reads a part of it stops at its end
    assert "expected to contain 20 elements" in results["classification distributed_epoch True"]


def test_save_and_load_give_the_same_records(datasets, tmp_path):
    for kind, folder in datasets.items():
        ds = tfrecorder.load_dataset(folder, "TRAIN", image_size=(8, 8))
        ds.save(str(tmp_path / kind))
        assert _names(tf.data.Dataset.load(str(tmp_path / kind))) == _names(ds)


_RESTORE = """
import json, sys
import tensorflow as tf, tfrecorder
from tests.test_fleet import _name, _names
folder, checkpoint = sys.argv[1], sys.argv[2]
ds = tfrecorder.load_dataset(folder, "TRAIN", shuffle=True, seed=3, batch_size=None)
epochs = [_names(ds), _names(ds)]
iterator = iter(ds)
tf.train.Checkpoint(iterator=iterator).read(checkpoint).assert_consumed()
print(json.dumps({"epochs": epochs, "rest": [_name(e) for e in iterator]}))
"""


@pytest.mark.slow  # a new process starts TensorFlow (about 8 s)
def test_an_iterator_restored_in_another_process_gives_the_rest_and_the_order_is_seeded(datasets, tmp_path):
    folder = datasets["classification"]
    ds = tfrecorder.load_dataset(folder, "TRAIN", shuffle=True, seed=3)
    epochs = [_names(ds), _names(ds)]
    iterator = iter(tfrecorder.load_dataset(folder, "TRAIN", shuffle=True, seed=3))  # a new run: epochs[0]
    seen = [_name(next(iterator)) for _ in range(7)]
    checkpoint = tf.train.Checkpoint(iterator=iterator).write(str(tmp_path / "ckpt"))
    other = json.loads(_python(_RESTORE, folder, checkpoint))
    assert other["epochs"] == epochs  # the same order on every run
    assert epochs[0] != epochs[1] and sorted(epochs[0]) == sorted(epochs[1])  # another order each epoch
    assert seen + other["rest"] == epochs[0]  # exactly the records not yet seen, in their order


def test_a_shard_swapped_after_opening_is_an_error_naming_it(datasets, tmp_path):
    folder = tmp_path / "swapped"
    shutil.copytree(datasets["classification"], folder)
    shards = sorted(folder.glob("train-*.tfrecord"))
    ds = tfrecorder.load_dataset(str(folder), "TRAIN")  # every shard checked as the dataset is opened
    counts = [len(list(tf.data.TFRecordDataset(str(s)))) for s in shards]
    longer = next(i for i, n in enumerate(counts) if n != counts[-1])
    shutil.copyfile(shards[longer], shards[-1])  # valid records (their CRCs hold), another number of them
    with pytest.raises(tf.errors.InvalidArgumentError, match=rf"{shards[-1].name} holds {counts[longer]} records, "
                                                             rf"dataset.json says {counts[-1]}: it was replaced"):
        list(ds)


def _host_parts(folder: str, hosts: int, **options) -> list[list[str]]:
    """Each of ``hosts`` hosts' records, checking that its length (``cardinality``) is what it reads."""
    parts = []
    for index in range(hosts):
        ds = tfrecorder.load_dataset(folder, "TRAIN", shard=(index, hosts), decode_images=False, **options)
        parts.append(_names(ds))
        assert int(ds.cardinality()) == len(parts[-1])
    return parts


@pytest.mark.parametrize("kind", ["classification", "detection"])
def test_three_hosts_read_disjoint_parts_holding_every_record_once(datasets, kind):
    folder = datasets[kind]
    every = sorted(_names(tfrecorder.load_dataset(folder, "TRAIN", decode_images=False)))
    parts = _host_parts(folder, 3, shuffle=True, seed=5)
    assert sorted(sum(parts, [])) == every and all(parts)
    assert _host_parts(folder, 3, shuffle=True, seed=5) == parts  # seeded: the same parts in the same order
    if kind == "classification":  # more hosts than shards: every 5th record
        assert sorted(sum(_host_parts(folder, 5), [])) == every


def test_each_host_restored_mid_epoch_goes_on_with_its_own_records(datasets):
    folder = datasets["classification"]
    seen, rest = [], []
    for index in range(3):
        ds = tfrecorder.load_dataset(folder, "TRAIN", shard=(index, 3), shuffle=True, seed=2)
        iterator = iter(ds)
        seen += [_name(next(iterator)) for _ in range(2)]
        checkpoint = tf.train.Checkpoint(iterator=iterator)
        saved = checkpoint.write(str(Path(folder).parent / f"host-{index}" / "ckpt"))
        again = iter(tfrecorder.load_dataset(folder, "TRAIN", shard=(index, 3), shuffle=True, seed=2))
        tf.train.Checkpoint(iterator=again).read(saved).assert_consumed()
        rest += [_name(e) for e in again]
    assert sorted(seen + rest) == sorted(_names(tfrecorder.load_dataset(folder, "TRAIN")))


def test_an_input_context_and_jax_name_the_same_parts(datasets):
    folder = datasets["classification"]
    context = tf.distribute.InputContext(num_input_pipelines=3, input_pipeline_id=1)
    second = _host_parts(folder, 3)[1]
    assert _names(tfrecorder.load_dataset(folder, "TRAIN", shard=context, decode_images=False)) == second
    assert _names(tfrecorder.load_dataset(folder, "TRAIN", input_context=context, decode_images=False)) == second
    assert _names(tfrecorder.load_dataset(folder, "TRAIN", num_shards=3, shard_index=1, decode_images=False)) == second
    # one JAX process here: its part is the whole split
    assert _names(tfrecorder.load_dataset(folder, "TRAIN", shard="jax")) == _names(
        tfrecorder.load_dataset(folder, "TRAIN"))


@pytest.mark.parametrize(("options", "message"), [
    ({"shard": (3, 3)}, r"shard=\(3, 3\): need 0 <= index < count$"),
    ({"shard": (0, 0)}, r"shard=\(0, 0\): need 0 <= index < count$"),
    ({"shard": "torch"}, r"shard='torch': give \(index, count\), a tf.distribute.InputContext or 'jax'$"),
    ({"shard": 2}, r"shard=2: give \(index, count\)"),
    ({"shard": (0, 2), "num_shards": 2, "shard_index": 1}, r"^shard and num_shards/shard_index both say which part"),
    ({"cardinality": "no"}, r"^cardinality='no': give True or False$"),
])
def test_wrong_parts_are_refused_in_one_line(datasets, options, message):
    with pytest.raises(TFRecorderError, match=message):
        tfrecorder.load_dataset(datasets["classification"], "TRAIN", **options)


def test_without_cardinality_the_length_is_unknown_and_the_records_the_same(datasets):
    folder = datasets["detection"]
    ds = tfrecorder.load_dataset(folder, "TRAIN", cardinality=False, batch_size=4, image_size=(8, 8))
    assert int(ds.cardinality()) == tf.data.UNKNOWN_CARDINALITY
    assert int(tfrecorder.load_dataset(folder, "TRAIN", batch_size=4, image_size=(8, 8)).cardinality()) == 3
    assert sum(len(b["image"]) for b in ds) == 10
