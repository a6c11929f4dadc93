"""Shared fixtures: real image files made with Pillow, small tables, and the TFRecorder 2.0 sample data."""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # tests only: keep TensorFlow's C++ start-up chatter out
# Before gcsfs is imported: otherwise each bucket check against the emulator waits 60 s.
os.environ["GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT"] = "false"
if worker := os.environ.get("PYTEST_XDIST_WORKER"):
    # Each pytest-xdist worker has a TMPDIR of its own: tests that check a run leaves nothing there would
    # otherwise see the other worker's files. Set before anything asks tempfile for its folder.
    import atexit
    import shutil
    import tempfile

    _own_tmp = tempfile.mkdtemp(prefix=f"tfrecorder-tests-{worker}-")
    os.environ["TMPDIR"] = _own_tmp
    tempfile.tempdir = None
    atexit.register(shutil.rmtree, _own_tmp, ignore_errors=True)

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from PIL import Image  # noqa: E402

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "tfrecorder-2.0"


def in_stored_order(df: pd.DataFrame, **validate_options) -> pd.DataFrame:
    """``df``'s rows in the order tfrecorder stores them: by the hash of each row's content (Table.row_keys),
    rows of equal content in input order - the order read_tfr and an unshuffled load_dataset give back."""
    keys = validate(df, **validate_options).row_keys()
    return df.iloc[np.lexsort((np.arange(len(df)), keys))]


def validate(df: pd.DataFrame, schema=None, *, base_dir=None, split_fractions=None, float_precision: str = "auto",
             arrow=None):
    """``df`` validated as one part (the steps ``summary_pass.summarize`` takes for each part of a table: the schema
    checked, the part validated, its Facts checked, then finalized): the Table, or the SchemaError."""
    from tfrecorder.write import splits
    from tfrecorder.write.sources.frames import text_columns
    from tfrecorder.write.table.schema_check import check_schema
    from tfrecorder.write.table.validate import finalize, validate_part

    df = text_columns(df)
    schema = check_schema(df, schema, arrow)
    fractions = splits.check_fractions(split_fractions or splits.DEFAULT_FRACTIONS)
    part, facts = validate_part(df, schema, base_dir=base_dir, fractions=fractions)
    facts.check()
    return finalize(part, facts, float_precision)


def convert_column(name: str, series: pd.Series, col_type):
    """One column's values converted for ``col_type`` (``values.convert_values``); the SchemaError names the
    values and rows that do not fit."""
    from tfrecorder.errors import SchemaError
    from tfrecorder.write.table.values import convert_values

    column, problem = convert_values(name, series, col_type, 0, 0)
    if problem is not None:
        raise SchemaError(problem.message())
    return column


def edited_dataset(written: Path, tmp_path: Path, edit, indent: int = 2) -> str:
    """A copy of the dataset folder ``written`` whose dataset.json ``edit`` (a function of the parsed JSON)
    changed, written back with ``indent`` as a person's editor would."""
    import json
    import shutil

    out = tmp_path / "edited"
    shutil.copytree(written, out)
    manifest = json.loads((out / "dataset.json").read_text())
    edit(manifest)
    (out / "dataset.json").write_text(json.dumps(manifest, indent=indent))
    return str(out)


def default_signals() -> None:
    """``preexec_fn`` of a child a test signals: SIGINT and SIGTERM as a terminal gives them. A background job of
    a non-interactive shell (``make test &``) starts with SIGINT ignored, and its children inherit that."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def pixels(seed: int, height: int, width: int, channels: int) -> np.ndarray:
    """Smooth, photo-like uint8 pixels (gradients plus a little noise), reproducible by seed."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    planes = [
        (np.sin(x / (3 + c + seed % 5)) * 60 + np.cos(y / (4 + c)) * 60 + 128 + rng.normal(0, 6, (height, width)))
        for c in range(channels)
    ]
    return np.clip(np.stack(planes, -1), 0, 255).astype(np.uint8)


def write_image(path: Path, fmt: str = "JPEG", mode: str = "RGB", size: tuple[int, int] = (24, 32),
                seed: int = 0) -> Path:
    """Write a real image file of ``fmt`` and Pillow ``mode`` with (height, width) ``size``."""
    channels = {"L": 1, "LA": 2, "RGB": 3, "RGBA": 4, "P": 3}[mode]
    array = pixels(seed, size[0], size[1], channels)
    image = Image.fromarray(array[..., 0] if channels == 1 else array, "RGB" if mode == "P" else mode)
    if mode == "P":
        image = image.convert("P", palette=Image.Palette.ADAPTIVE, colors=64)
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path, format=fmt, **({"quality": 90} if fmt == "JPEG" else {}))
    return path


@pytest.fixture
def command(capfd):
    """``command(*args)``: the tfrecorder command run in this process, through ``cli.main`` (a subprocess adds
    TensorFlow's start-up, seconds, to each run): its exit status, stdout and stderr as a CompletedProcess, argparse's
    exits (--help, --version, a usage error) included. What only a process shows (TensorFlow's start-up lines, Ctrl-C,
    SIGTERM, SIGPIPE, its imports) is tested in a subprocess."""
    import subprocess

    from tfrecorder import cli

    def command(*args: str) -> subprocess.CompletedProcess:
        capfd.readouterr()
        try:
            status = cli.main(list(args))
        except SystemExit as e:
            status = e.code
        out, err = capfd.readouterr()
        return subprocess.CompletedProcess(["tfrecorder", *args], status, out, err)

    return command


@pytest.fixture
def image_table(tmp_path: Path) -> pd.DataFrame:
    """12 rows: JPEG and PNG images of three classes in three splits, with float, int, str, list extras."""
    return image_table_at(tmp_path)


def image_table_at(tmp_path: Path) -> pd.DataFrame:
    """The ``image_table`` fixture's table, with its images written under ``tmp_path``."""
    rows = []
    for i in range(12):
        fmt, ext = ("PNG", "png") if i % 3 == 0 else ("JPEG", "jpg")
        path = write_image(tmp_path / "images" / f"img {i},ü.{ext}", fmt, "RGB", (20 + i % 2, 30), seed=i)
        split = ("TRAIN", "TRAIN", "validation ", "Test")[i % 4]
        label = ("cat", "dog", "goat")[i % 3] if split == "TRAIN" else ("cat", "dog", "goat")[i % 2]
        rows.append({"split": split, "image_uri": str(path), "label": label, "weight": 0.5 * i, "count": i,
                     "note": f"n{i}", "tags": [i, i + 1][: i % 3]})
    return pd.DataFrame(rows)


@pytest.fixture
def tabular_table() -> pd.DataFrame:
    """A table with no images: numbers, text, bools, lists and missing values."""
    return pd.DataFrame({
        "split": ["TRAIN"] * 6 + ["VALIDATION", "TEST"],
        "label": [0, 1, 2, 1, 0, 2, 1, 0],
        "x": [0.5, 1.5, np.nan, 3.0, 4.25, -1.0, 2.0, 7.5],
        "n": pd.array([1, None, 3, 4, 5, 6, 7, 2**40], dtype="Int64"),
        "flag": [True, False, True, True, False, False, True, False],
        "text": ["a", "b", None, "d", "é", "", "g", "h"],
        "scores": [[1.0, 2.0], [], [3.5], [0.0, 1.0, 2.0], [], [1.0], [2.0], [3.0]],
    })


@pytest.fixture
def forked(monkeypatch):
    """Shards written by forked processes (the local runner's path for large tables of local files), however
    small the table; the test fails if it wrote shards but none by forked processes."""
    import tfrecorder.write.runners.local as local

    monkeypatch.setattr(local, "FORK_MIN_ROWS", dict.fromkeys(local.FORK_MIN_ROWS, 0))
    monkeypatch.setattr(local, "FORK_BALANCE", float("inf"))
    monkeypatch.setattr(local.os, "cpu_count", lambda: 2)  # writers fork only where there are cores to use
    written, in_processes = [], []
    real_all, real_forked = local._write_all, local._in_processes
    monkeypatch.setattr(local, "_write_all", lambda *args: written.append(args) or real_all(*args))
    monkeypatch.setattr(local, "_in_processes", lambda *args: in_processes.append(args) or real_forked(*args))
    yield
    assert in_processes or not written, "no shards were written by forked processes"  # (a skipped test wrote none)


@pytest.fixture(scope="session")
def gcs_bucket():
    """A bucket on a GCS emulator served from 127.0.0.1 for the whole session; gcsfs is pointed at it."""
    from tests.servers import gcs_emulator, use_emulator

    with gcs_emulator("tfrecorder-test") as address:
        use_emulator(address)
        yield "tfrecorder-test"


@pytest.fixture(scope="session")
def tf_gcs_env(gcs_bucket, tmp_path_factory):
    """Environment for a subprocess whose TensorFlow gs:// filesystem reaches the emulator through
    the TLS-terminating CONNECT proxy in tests/gcs_proxy.py (run in its own process)."""
    import subprocess
    import sys

    from tests.gcs_proxy import make_certificate

    cert, key = make_certificate(tmp_path_factory.mktemp("proxy"))
    proxy = subprocess.Popen(
        [sys.executable, "-m", "tests.gcs_proxy", "--emulator", os.environ["STORAGE_EMULATOR_HOST"],
         "--cert", str(cert), "--key", str(key)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=Path(__file__).resolve().parents[1])
    port = proxy.stdout.readline().strip()
    proxy_url = f"http://127.0.0.1:{port}"
    yield {**os.environ, "HTTPS_PROXY": proxy_url, "https_proxy": proxy_url, "CURL_CA_BUNDLE": str(cert),
           "NO_GCE_CHECK": "true", "GOOGLE_AUTH_TOKEN_FOR_TESTING": "emulator", "NO_PROXY": "127.0.0.1",
           "TF_CPP_MIN_LOG_LEVEL": "3"}
    proxy.terminate()
    proxy.wait(timeout=30)


@pytest.fixture
def gcs_dir(gcs_bucket, request):
    """A fresh gs:// folder in the emulator's bucket, named after the test."""
    name = "".join(c if c.isalnum() else "-" for c in request.node.name)[:80]
    return f"gs://{gcs_bucket}/{name}"


@pytest.fixture
def shared_images() -> Path:
    """The six real JPEG photos of TFRecorder 2.0's test data (skipped when ../shared is absent)."""
    if not (SHARED_DATA / "images").is_dir():
        pytest.skip("../shared/data/tfrecorder-2.0 is not present")
    return SHARED_DATA / "images"
