"""A big file behaves like a small one when things go wrong: a CSV of 64 MiB or more (converted a part at a time,
its rows spilled to TMPDIR, its shards written by forked processes) meets SIGTERM, SIGKILL, a writer killed by
the OOM killer and a full temporary folder. Each ends with one clear line, leaves no spill behind, and the
re-run finishes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import tfrecorder
from tests.conftest import default_signals
from tfrecorder.write.run import spill_folder
from tfrecorder.write.table import summary_pass

BIG = 64 * 1024 * 1024  # several parts, and more than the spill keeps in memory

ROOT = Path(__file__).resolve().parents[1]


def _csv(path: Path, rows: int) -> Path:
    rng = np.random.default_rng(0)
    pd.DataFrame({
        "split": rng.choice(["TRAIN", "VALIDATION", "TEST"], rows, p=[0.8, 0.1, 0.1]),
        "label": rng.choice(["cat", "dog", "goat"], rows),
        "x": rng.random(rows), "n": rng.integers(0, 1000, rows),
        "text": [f"row {i} " + "lorem ipsum dolor sit amet " * 9 for i in range(rows)],
    }).to_csv(path, index=False)
    return path


@pytest.fixture(scope="module")
def big_csv(tmp_path_factory) -> Path:
    """One CSV of ~70 MiB for the module: 250,000 rows of a label, numbers and a long text (the memory tests:
    a whole-file read would show)."""
    path = _csv(tmp_path_factory.mktemp("big") / "table.csv", 250_000)
    assert path.stat().st_size >= BIG
    return path


MID_ROWS, MID_PART_ROWS = 30_000, 10_000


@pytest.fixture(scope="module")
def mid_csv(tmp_path_factory) -> Path:
    """A CSV of 30,000 rows (~8 MiB): converted as a table larger than memory by ``as_large`` - in parts of
    10,000 rows, every row spilled to files - as a big one is, in a fraction of its time."""
    return _csv(tmp_path_factory.mktemp("mid") / "table.csv", MID_ROWS)


@pytest.fixture
def as_large(monkeypatch):
    monkeypatch.setattr(summary_pass, "PART_ROWS", MID_PART_ROWS)
    monkeypatch.setattr(summary_pass, "MEMORY_SPILL_BYTES", 0)


def spills(tmp: Path) -> list[str]:
    return [name for name in os.listdir(tmp) if name.startswith(spill_folder.SPILL_PREFIX)]


# The child runs the command; where BLOCK says, it stops and waits to be signalled: in the summary pass once
# the first parts are spilled ("summary"), or in a forked shard writer ("writer"), printing its pid. With
# "starting", the first forked writer, before its own set-up, sends SIGTERM to the command (a user stopping it)
# and to itself (the command's stop reaching a writer that has not yet set its signal handlers).
CHILD = """
import os, signal, sys, threading
import tfrecorder.write.runners.local as local, tfrecorder.write.table.summary_pass as summary_pass
from tfrecorder.cli import main
block = os.environ["BLOCK"]
summary_pass.PART_ROWS, summary_pass.MEMORY_SPILL_BYTES = int(os.environ["PART_ROWS"]), 0  # as_large
if block == "starting":
    real_start = local._start_writer
    def _start_writer(*args):
        try:  # the first writer only: the command is stopped once, and no other writer ends before it is
            os.close(os.open(os.path.join(os.environ["TMPDIR"], "stopped"), os.O_CREAT | os.O_EXCL))
        except FileExistsError:
            return real_start(*args)
        os.write(1, f"BLOCKED {os.getpid()}\\n".encode())
        os.kill(os.getppid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGTERM)
        return real_start(*args)
    local._start_writer = _start_writer
elif block == "writer":
    def write_spilled_shard(*args, **kwargs):
        os.write(1, f"BLOCKED {os.getpid()}\\n".encode())  # one write: two writers may block at once
        threading.Event().wait()
    local.write_spilled_shard = write_spilled_shard
else:
    real, parts = summary_pass.validate_part, []
    def validate_part(*args, **kwargs):
        parts.append(1)
        if len(parts) == 3:
            os.write(1, f"BLOCKED {os.getpid()}\\n".encode())
            threading.Event().wait()
        return real(*args, **kwargs)
    summary_pass.validate_part = validate_part
sys.exit(main(sys.argv[1:]))
"""


def start(csv: Path, out: Path, tmp: Path, block: str) -> tuple[subprocess.Popen, int]:
    tmp.mkdir(exist_ok=True)
    env = {**os.environ, "TMPDIR": str(tmp), "BLOCK": block, "PYTHONPATH": str(ROOT), "PART_ROWS": str(MID_PART_ROWS)}
    child = subprocess.Popen([sys.executable, "-c", CHILD, "convert", str(csv), str(out), "--no-progress"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                             preexec_fn=default_signals)
    line = child.stdout.readline().split()
    if line[:1] != ["BLOCKED"]:
        child.kill()
        raise AssertionError(f"the child did not block: {line} {child.stderr.read()[-3000:]}")
    return child, int(line[1])


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    with open(f"/proc/{pid}/stat") as f:  # a zombie until its parent reaps it is gone too
        return f.read().split(") ")[-1].startswith("Z")


@pytest.mark.parametrize("block", ["summary", "writer"])
def test_sigterm_stops_the_conversion_as_ctrl_c_does(mid_csv, tmp_path, block):
    child, blocked = start(mid_csv, tmp_path / "out", tmp_path / "tmp", block)
    assert spills(tmp_path / "tmp")  # the rows spilled so far
    child.send_signal(signal.SIGTERM)
    _, stderr = child.communicate(timeout=120)
    assert (child.returncode, stderr) == (
        143, "tfrecorder: stopped by SIGTERM: run the same command again to resume where it stopped\n")
    assert spills(tmp_path / "tmp") == []
    assert gone(blocked)  # with "writer": the forked writer, stopped by its parent


def test_sigterm_while_the_writers_start_is_one_line_too(mid_csv, tmp_path):
    """A writer that is stopped before it has set its own signal handlers does not run the command's (which
    would print a traceback from the writer): it starts with SIGINT and SIGTERM held."""
    child, writer = start(mid_csv, tmp_path / "out", tmp_path / "tmp", "starting")
    _, stderr = child.communicate(timeout=120)
    assert (child.returncode, stderr) == (
        143, "tfrecorder: stopped by SIGTERM: run the same command again to resume where it stopped\n")
    assert spills(tmp_path / "tmp") == []
    assert gone(writer)


def test_the_next_run_removes_the_spill_of_a_killed_one(mid_csv, tmp_path, monkeypatch, as_large):
    child, _ = start(mid_csv, tmp_path / "out", tmp_path / "tmp", "summary")
    child.send_signal(signal.SIGKILL)
    child.communicate(timeout=60)
    (left,) = spills(tmp_path / "tmp")  # nothing could tidy up
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    other = tfrecorder.convert(mid_csv, str(tmp_path / "other"), progress=False, validate_images="header",
                               num_shards=1)  # another output folder: its spill is not that one
    assert other.rows.written == MID_ROWS and spills(tmp_path / "tmp") == [left]
    tfrecorder.convert(mid_csv, str(tmp_path / "out"), progress=False, num_shards=1)
    assert spills(tmp_path / "tmp") == []
    assert tfrecorder.verify(str(tmp_path / "out")).ok


def test_a_killed_shard_writer_is_one_error_naming_its_shard(mid_csv, tmp_path, monkeypatch, forked, as_large):
    from tfrecorder.write.runners import local

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    parent, real = os.getpid(), local.write_spilled_shard

    def killed(shard, *args, **kwargs):  # the kernel's OOM killer, in the writer of the TRAIN shard
        if os.getpid() != parent and shard.spec.split == "TRAIN":
            os.kill(os.getpid(), signal.SIGKILL)
        return real(shard, *args, **kwargs)

    monkeypatch.setattr(local, "write_spilled_shard", killed)
    with pytest.raises(tfrecorder.TFRecorderError) as caught:
        tfrecorder.convert(mid_csv, str(tmp_path / "out"), progress=False)
    message = str(caught.value)
    assert message.startswith("the process writing train-00000-of-00001.tfrecord was killed by SIGKILL, most "
                              "often by the kernel's out-of-memory killer")
    assert "num_workers=1" in message and "run the same conversion again: it keeps the 0 shards" in message.lower()
    assert spills(tmp_path) == []
    monkeypatch.setattr(local, "write_spilled_shard", real)
    result = tfrecorder.convert(mid_csv, str(tmp_path / "out"), progress=False)
    assert result.rows.written == MID_ROWS and tfrecorder.verify(str(tmp_path / "out")).ok


def test_a_full_temporary_folder_is_one_error_naming_it(mid_csv, tmp_path, monkeypatch, as_large):
    small = tmp_path / "small"
    small.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(small)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"a small filesystem for TMPDIR needs mount (tmpfs): {mounted.stderr.decode().strip()}")
    try:
        monkeypatch.setattr(tempfile, "tempdir", str(small))
        size = mid_csv.stat().st_size / 2**20
        with pytest.raises(tfrecorder.TFRecorderError, match=(
                rf"no space left in the temporary folder {small} for the spill files of this conversion: this "
                rf"table \({size:.0f} MiB of CSV\) needs about {size / 2:.0f} MiB there while it is converted "
                r"\(up to 256 MiB more for a shard written in segments\); "
                r"set TMPDIR to a folder with more room")):
            tfrecorder.convert(mid_csv, str(tmp_path / "out"), progress=False)
        assert os.listdir(small) == []
    finally:
        subprocess.run(["umount", str(small)], check=True)


@pytest.fixture(scope="module")
def big_parquet(tmp_path_factory) -> Path:
    """One Parquet file of ~70 MiB: 150,000 rows whose first 100,000 (the first part) hold only empty or null
    values in three columns - what the file's own schema says they are must decide, not those values."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path, rows, empty = tmp_path_factory.mktemp("big") / "table.parquet", 150_000, 100_000
    rng = np.random.default_rng(0)
    pq.write_table(pa.table({
        "split": pa.array(rng.choice(["TRAIN", "VALIDATION", "TEST"], rows, p=[0.8, 0.1, 0.1])),
        "scores": pa.array([[]] * empty + [[1.5, 2.5]] * (rows - empty), pa.list_(pa.float64())),
        "weights": pa.array([None] * empty + [[0.25]] * (rows - empty), pa.list_(pa.float64())),
        "blob": pa.array([None] * empty + [b"\x00\xff"] * (rows - empty), pa.binary()),
        "padding": pa.array([rng.bytes(480) for _ in range(rows)], pa.binary()),  # incompressible: the size
    }), path)
    assert path.stat().st_size >= BIG
    return path


def test_parquet_column_kinds_come_from_the_files_schema(big_parquet, tmp_path):
    result = tfrecorder.convert(big_parquet, str(tmp_path / "out"), progress=False)
    assert result.rows.written == 150_000
    features = {f.name: (f.dtype, f.shape) for f in tfrecorder.read_manifest(str(tmp_path / "out")).features}
    assert features["scores"] == features["weights"] == ("float32", [None]) and features["blob"] == ("string", [])
    back = tfrecorder.read_tfr(str(tmp_path / "out"), columns=["scores", "weights", "blob"])
    assert sorted(map(tuple, back["scores"])) == [()] * 100_000 + [(1.5, 2.5)] * 50_000
    assert back["weights"].isna().sum() == 100_000 and [0.25] in back["weights"].tolist()
    assert back["blob"].isna().sum() == 100_000


PEAK = """
import sys, tfrecorder
try:
    tfrecorder.convert(sys.argv[1], sys.argv[2], progress=False)
    print("converted")
except tfrecorder.TFRecorderError as e:
    print(e)
print(next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:")) / 1024)
"""


def converted_in_a_fresh_process(csv: Path, out: Path) -> tuple[str, float]:
    """(what the conversion said, the process's own peak memory in MiB: VmHWM, not a child's ru_maxrss)."""
    proc = subprocess.run([sys.executable, "-c", PEAK, str(csv), str(out)], capture_output=True, text=True,
                          timeout=600, env={**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    said, peak = proc.stdout.strip().rsplit("\n", 1)
    return said, float(peak)


@pytest.fixture(scope="module")
def clean_peak(big_csv, tmp_path_factory) -> float:
    """The peak memory of converting the big CSV as it is, in a fresh process (once for the module)."""
    said, peak = converted_in_a_fresh_process(big_csv, tmp_path_factory.mktemp("clean") / "out")
    assert said == "converted"
    return peak


@pytest.mark.parametrize("last_line,message", [
    (b"TRAIN,cat,0.5,1,one field too many,x\n", "line 250002 has 6 fields, the header has 5"),
    (b"TRAIN,cat,0.5,1,caf\xff\n", "is not UTF-8 text: byte 0xff at line 250002; save it as UTF-8"),
])
def test_a_bad_last_line_is_named_at_the_memory_of_a_clean_run(big_csv, clean_peak, tmp_path, last_line,
                                                               message):
    bad = tmp_path / "bad.csv"
    with open(big_csv, "rb") as source, open(bad, "wb") as target:
        target.write(source.read())
        target.write(last_line)
    said, peak = converted_in_a_fresh_process(bad, tmp_path / "out")
    assert said == f"CSV {str(bad)!r} {'cannot be parsed: ' if 'fields' in message else ''}{message}"
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").glob("*.tfrecord"))
    small = tmp_path / "small.csv"  # the same answer for the same kind of line in a small file
    small.write_bytes(b"split,label,x,n,text\nTRAIN,cat,0.5,1,a\n" + last_line)
    with pytest.raises(tfrecorder.TFRecorderError, match=message.replace("250002", "3")):
        tfrecorder.convert(small, str(tmp_path / "small-out"), progress=False)
    assert peak <= 1.25 * clean_peak, (peak, clean_peak)
