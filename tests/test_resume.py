"""Atomic and resumable conversions: a real SIGKILL mid-run, a re-run that finishes it byte for byte, the lock."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import tfrecorder
from tests.conftest import in_stored_order, write_image
from tfrecorder.errors import RowError, TFRecorderError
from tfrecorder.write.run.lock import OutputLocked

# The child converts the CSV (or appends it, given mode "append"); once `done_before_block` shards are finished it
# blocks on the third image it loads, says so on stdout, and waits there to be killed (SIGKILL, no clean-up).
# Forked writers each count their own loads: more than one may say so.
CHILD = """
import os, sys, threading
import tfrecorder, tfrecorder.write.record.shard as shard
csv, out, runner, done_before_block = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
mode = sys.argv[5] if len(sys.argv) > 5 else "create"  # other modules' tests run this child without one
if runner == "local, streamed":  # spilled to files in parts, as a table larger than memory
    import tfrecorder.write.table.summary_pass as summary_pass
    summary_pass.MEMORY_SPILL_BYTES, summary_pass.PART_ROWS, runner = 0, 7, "local"
if runner == "local, forked":  # shards written by forked processes, as for large tables
    import tfrecorder.write.runners.local as local
    local.FORK_MIN_ROWS, local.FORK_BALANCE = dict.fromkeys(local.FORK_MIN_ROWS, 0), float("inf")
    local.os.cpu_count, runner = lambda: 2, "local"
if runner == "DirectRunner, DataFrame":  # staged as Parquet under output_dir/_beam/input/ for the pipeline
    import pandas as pd
    csv, runner = pd.read_csv(csv), "DirectRunner"
real, loads = shard.load_image, []
def load_image(location, settings, limits):
    done = os.path.join(out, ".tfrecorder", "done")
    if os.path.isdir(done) and len([n for n in os.listdir(done) if n.endswith(".json")]) >= done_before_block:
        loads.append(location)
        if len(loads) == 3:  # one write, a whole line: two forked writers may both block here
            os.write(1, b"BLOCKED\\n")
            threading.Event().wait()
    return real(location, settings, limits)
shard.load_image = load_image
tfrecorder.convert(csv, out, runner=runner, num_shards=4, progress=False, mode=mode)
print("FINISHED", flush=True)
"""


@pytest.fixture
def csv_table(tmp_path: Path) -> Path:
    """30 images in three splits, one of them corrupt (an errors.csv line) and one in TRAIN and TEST (a leak)."""
    rows = []
    for i in range(30):
        fmt, ext = ("PNG", "png") if i % 4 == 0 else ("JPEG", "jpg")
        path = write_image(tmp_path / "images" / f"{i:02d}.{ext}", fmt, "RGB", (16, 20 + i % 3), seed=i)
        split = "TRAIN" if i < 20 else ("VALIDATION", "TEST")[i % 2]
        rows.append({"split": split, "image_uri": str(path), "label": ("a", "b", "c")[i % 3], "i": i})
    rows.append({"split": "TEST", "image_uri": rows[3]["image_uri"], "label": "a", "i": 30})
    path = tmp_path / "table.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    # corrupt the JPEG of the TRAIN row stored last: with num_shards=4, in the last TRAIN shard
    stored = in_stored_order(pd.read_csv(path))
    bad = stored[(stored.split == "TRAIN") & stored.image_uri.str.endswith(".jpg") & (stored.i != 3)].i.iloc[-1]
    Path(rows[bad]["image_uri"]).write_bytes(b"\xff\xd8 not really a jpeg")
    return path


def bad_row(csv_table: Path) -> pd.Series:
    """The row of ``csv_table`` whose image is corrupt."""
    table = pd.read_csv(csv_table)
    return table.iloc[[i for i, uri in enumerate(table.image_uri) if Path(uri).read_bytes()[2:6] == b" not"][0]]


def crash(csv: Path, out: Path, runner: str = "local", done_before_block: int = 2,
          mode: str = "create") -> subprocess.Popen:
    """Start a conversion in a child process and return it, blocked mid-shard after some shards are done."""
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(csv), str(out), runner, str(done_before_block), mode],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = child.stdout.readline().strip()
    if line != "BLOCKED":
        child.kill()
        raise AssertionError(f"the child did not block: {line!r} {child.stderr.read()[-2000:]}")
    return child


def kill(child: subprocess.Popen) -> None:
    child.send_signal(signal.SIGKILL)
    child.wait()
    child.stdout.close()
    child.stderr.close()
    assert child.returncode == -signal.SIGKILL


def files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("runner", ["local", "local, streamed", "local, forked", "DirectRunner",
                                    "DirectRunner, DataFrame"])
def test_killed_conversion_resumes_to_the_same_bytes(tmp_path, csv_table, runner, caplog, monkeypatch, request):
    if runner == "local, streamed":
        import tfrecorder.write.table.summary_pass as summary_pass

        monkeypatch.setattr(summary_pass, "MEMORY_SPILL_BYTES", 0)
        monkeypatch.setattr(summary_pass, "PART_ROWS", 7)
    if runner == "local, forked":
        request.getfixturevalue("forked")
    crashed = runner
    source = pd.read_csv(csv_table) if runner.endswith("DataFrame") else str(csv_table)
    runner = runner.split(",")[0]
    clean = tmp_path / "clean"
    tfrecorder.convert(source, str(clean), runner=runner, num_shards=4, progress=False)

    out = tmp_path / "out"
    child = crash(csv_table, out, crashed)
    # While it runs, the folder is locked: a second conversion is refused, naming the owner.
    with pytest.raises(OutputLocked, match=rf"being written by another conversion: .* \(pid {child.pid}, {runner}\)"):
        tfrecorder.convert(source, str(out), runner=runner, num_shards=4, progress=False)
    kill(child)

    names = sorted(os.listdir(out))
    assert "dataset.json" not in names and ".tfrecorder" in names
    # a record the kill caught being written is a hidden .partial file, which a resume never reads
    done = sorted(n for n in os.listdir(out / ".tfrecorder" / "done") if not n.startswith("."))
    # the child blocked in a shard once two were done; shards written beside it may be done too (forked writers
    # each go on until their own third image), but never all of them
    assert 2 <= len(done) < 12
    finished = [n.removesuffix(".json") for n in done]
    kept = {n: (out / n).stat().st_mtime_ns for n in finished}
    with pytest.raises(TFRecorderError, match="unfinished conversion"):
        tfrecorder.load_dataset(str(out))

    with caplog.at_level("INFO", logger="tfrecorder"):
        result = tfrecorder.convert(source, str(out), runner=runner, num_shards=4, progress=False)
    assert "breaking a stale lock left by" in caplog.text and f"pid {child.pid}" in caplog.text
    assert result.resumed_shards == len(done) and f"{len(done)} of 12 shards were already written" in str(result)
    assert {n: (out / n).stat().st_mtime_ns for n in finished} == kept  # not rewritten
    assert files(out) == files(clean)  # shards, errors.csv, dataset.json and .conversion.json, byte for byte
    assert result.errors == 1 and tfrecorder.read_manifest(str(out)).leakage["count"] == 1


def test_resume_rewrites_a_finished_shard_that_was_damaged_since(tmp_path, csv_table, caplog):
    clean, out = tmp_path / "clean", tmp_path / "out"
    tfrecorder.convert(str(csv_table), str(clean), num_shards=4, progress=False)
    kill(crash(csv_table, out))
    done = sorted(n for n in os.listdir(out / ".tfrecorder" / "done") if not n.startswith("."))  # not .partial
    first = done[0].removesuffix(".json")
    data = bytearray((out / first).read_bytes())
    data[40] ^= 0x01
    (out / first).write_bytes(bytes(data))

    with caplog.at_level("WARNING", logger="tfrecorder"):
        result = tfrecorder.convert(str(csv_table), str(out), num_shards=4, progress=False)
    assert f"rewriting {first}: its CRC-32C differs from the one recorded" in caplog.text
    assert result.resumed_shards == len(done) - 1
    assert files(out) == files(clean)


def without_times(manifest: bytes) -> dict:
    """dataset.json but for its fields that are by design times: when each version's run started, and so the
    digest of its versions (read_tfr checks it against the versions as written)."""
    found = json.loads(manifest)
    for version in found["extra"]["versions"]:
        version.pop("time")
    found["digests"].pop("versions")
    return found


# With forked writers each counts its own loads: an append of these few rows may leave no writer a third image to
# block on, whatever the temporary folder's name makes of the rows' order (seen in CI); the local runner's count is
# the run's.
@pytest.mark.parametrize("runner", ["local"])
def test_killed_append_leaves_the_old_version_readable_and_resumes_to_the_same_bytes(tmp_path, csv_table, runner):
    table = pd.read_csv(csv_table)
    first = table[(table.i % 4 < 2) & (table.i < 30)]  # every split and label; the rest (and the leak) appended
    table.drop(first.index).to_csv(tmp_path / "more.csv", index=False)
    start, clean, out = tmp_path / "start", tmp_path / "clean", tmp_path / "out"
    tfrecorder.convert(first, str(start), num_shards=4, progress=False)
    shutil.copytree(start, clean)
    shutil.copytree(start, out)
    tfrecorder.convert(str(tmp_path / "more.csv"), str(clean), num_shards=4, progress=False, mode="append")

    kill(crash(tmp_path / "more.csv", out, runner, mode="append"))
    done = sorted(n for n in os.listdir(out / ".tfrecorder" / "done") if not n.startswith("."))
    assert 2 <= len(done) < 12 and all("-v2-" in n for n in done)
    assert (out / "dataset.json").read_bytes() == (start / "dataset.json").read_bytes()
    old = tfrecorder.read_tfr(str(out), columns=["image_uri", "label"])
    kept = first[first.image_uri != bad_row(csv_table).image_uri]  # the corrupt image may be in either table
    assert sorted(zip(old.image_uri, old.label)) == sorted(zip(kept.image_uri, kept.label))

    result = tfrecorder.convert(str(tmp_path / "more.csv"), str(out), num_shards=4, progress=False, mode="append")
    assert result.resumed_shards == len(done)
    after, expected = files(out), files(clean)
    assert without_times(after.pop("dataset.json")) == without_times(expected.pop("dataset.json"))
    assert after == expected  # shards, indexes, content keys, errors files, byte for byte
    assert [v.version for v in tfrecorder.versions(str(out))] == [1, 2]
    assert len(tfrecorder.read_tfr(str(out))) == len(table) - 1  # all but the corrupt image


def test_unfinished_run_of_a_different_table_is_refused_unless_overwrite(tmp_path, csv_table):
    out = tmp_path / "out"
    kill(crash(csv_table, out))
    changed = pd.read_csv(csv_table)
    changed.loc[0, "i"] = 100
    with pytest.raises(TFRecorderError, match=r"holds an unfinished conversion of a different table or settings.*"
                                              r"overwrite=True"):
        tfrecorder.convert(changed, str(out), num_shards=4, progress=False)
    with pytest.raises(TFRecorderError, match="different table or settings"):  # settings count too
        tfrecorder.convert(str(csv_table), str(out), num_shards=3, progress=False)
    result = tfrecorder.convert(changed, str(out), num_shards=4, progress=False, overwrite=True)
    assert result.resumed_shards == 0 and result.rows.written == 30
    assert 100 in tfrecorder.read_tfr(str(out), split="TRAIN")["i"].tolist()


def test_a_run_stopped_by_a_bad_image_resumes_once_the_file_is_fixed(tmp_path, csv_table):
    out = tmp_path / "out"
    bad = bad_row(csv_table)
    with pytest.raises(tfrecorder.errors.RowError, match=Path(bad.image_uri).name):
        tfrecorder.convert(str(csv_table), str(out), num_shards=4, progress=False, on_error="raise")
    done = sorted(os.listdir(out / ".tfrecorder" / "done"))  # the shards written before the bad row's
    assert done and "train-00003-of-00004.tfrecord.json" not in done
    assert not (out / ".tfrecorder" / "lock.json").exists()  # released on the way out
    write_image(Path(bad.image_uri), "JPEG", "RGB", (16, 21), seed=7)
    result = tfrecorder.convert(str(csv_table), str(out), num_shards=4, progress=False, on_error="raise")
    assert result.resumed_shards == len(done) and result.errors == 0 and result.rows.written == 31


def test_an_unfinished_run_of_another_runner_says_which_runner_finishes_it(tmp_path, csv_table):
    """Stopped on the DirectRunner, the same table and settings run locally were "a different table or
    settings": the message says which runner it was started with."""
    out = tmp_path / "out"
    with pytest.raises(tfrecorder.errors.RowError):
        tfrecorder.convert(str(csv_table), str(out), num_shards=4, on_error="raise", runner="DirectRunner")
    with pytest.raises(TFRecorderError, match=r"holds an unfinished conversion started with runner='DirectRunner' "
                                              r"\(started .*\); run it again with that runner to finish it"):
        tfrecorder.convert(str(csv_table), str(out), num_shards=4, on_error="raise", progress=False)


def test_a_failing_shard_stops_the_shard_written_beside_it():
    """Two shards are written at once by threads when images are decoded by threads; when one fails, the other
    stops at its next row (and its partial file is removed) instead of finishing into place after the run failed."""
    from tfrecorder.write.runners.local import SHARDS_AT_ONCE, _shards_at_once

    class Bar:
        rows = 0

        def update(self, n: int = 1) -> None:
            self.rows += n

    ended = []

    def write(spec: int, tick) -> int:
        try:
            for _ in range(10**7 if spec == 1 else 1):  # shard 1 runs until stopped (seconds if never)
                tick()
        except BaseException as e:
            ended.append((spec, type(e).__name__))
            raise
        if spec == 0:
            raise RowError(3, "TRAIN", "bad.jpg", "decode_error", "truncated")
        ended.append((spec, "finished"))
        return spec

    assert SHARDS_AT_ONCE == 2
    with pytest.raises(RowError, match="bad.jpg"):
        list(_shards_at_once([0, 1, 2], 2, write, Bar()))  # two at once
    assert ended == [(1, "_Stopped")]  # shard 2 never started
    bar = Bar()
    assert list(_shards_at_once([2, 3, 4, 5], 2, write, bar)) == [2, 3, 4, 5]  # in order
    assert bar.rows == 4


def writer_processes(pid: int) -> list[int]:
    """The processes ``pid`` started (Linux's /proc)."""
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(p) for p in (task / "children").read_text().split()]
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="shards are written by forked processes on Linux")
def test_a_killed_conversion_leaves_no_writer_behind(tmp_path, csv_table):
    """Forked shard writers die with the conversion, however it ends: an orphan would go on writing shards into
    a folder that a re-run is writing again."""
    import select

    child = crash(csv_table, tmp_path / "out", "local, forked")
    writers = writer_processes(child.pid)
    assert len(writers) == 2  # one per core (two here), one of them blocked on an image
    ended = [os.pidfd_open(pid) for pid in writers]
    kill(child)
    waiting, deadline = set(ended), 60  # seconds: a bound for a failing run, not a timing
    while waiting:
        readable, _, _ = select.select(list(waiting), [], [], deadline)
        assert readable, f"writers {writers} still run after their parent was killed"
        waiting -= set(readable)
    for fd in ended:
        os.close(fd)


def test_a_failing_shard_in_a_forked_writer_stops_the_shards_after_it(tmp_path):
    """Shards written by processes: when one fails, the shards before it finish (as one after another would)
    and those after it stop at their next row."""
    from tfrecorder.write.runners.local import Parallelism, _in_processes

    class Bar:
        rows = 0

        def update(self, n: int = 1) -> None:
            self.rows += n

    failed = tmp_path / "1-failed"

    def write(spec: int, mapper, tick) -> int:
        try:
            if spec == 0:
                while not failed.exists():  # shard 0 is still being written when shard 1 fails
                    tick()
            elif spec == 1:
                tick()
                failed.touch()
                raise RowError(3, "TRAIN", "bad.jpg", "decode_error", "truncated")
            for _ in range(10**7 if spec > 1 else 10):  # shards 2 and 3 run until stopped (seconds if never)
                tick()
        except BaseException as e:
            (tmp_path / f"{spec}-{type(e).__name__}").touch()
            raise
        (tmp_path / f"{spec}-finished").touch()
        return spec

    written = []
    with pytest.raises(RowError, match="bad.jpg"):
        for result in _in_processes([0, 1, 2, 3], Parallelism(processes=2), write, Bar()):
            written.append(result)
    assert written == [0]
    assert (tmp_path / "0-finished").exists() and (tmp_path / "1-failed").exists()
    assert not list(tmp_path.glob("[23]-finished"))  # stopped, or never started
    assert list(_in_processes([4, 5, 6], Parallelism(processes=2), write, Bar())) == [4, 5, 6]


def test_which_tables_are_written_by_forked_processes(monkeypatch):
    """Large tables of local files on every core; small ones, remote images, shards bound for gs://, a user's
    num_workers and a TRAIN shard too large to share out (where this process would decode on every core anyway)
    in this process."""
    import tfrecorder.write.runners.local as local
    from tfrecorder.write.settings import ImageSettings, WriteOptions

    monkeypatch.setattr(local.os, "cpu_count", lambda: 2)
    header, full = (WriteOptions(ImageSettings(validate=v), None, "report") for v in ("header", "full"))
    how = local.parallelism
    even, train_heavy = [1000] * 4, [8000, 1000, 1000]
    if sys.platform.startswith("linux"):
        assert how(even, full, images=True, remote=False, workers=None) == local.Parallelism(2, 1, 1)
        assert how(train_heavy, header, images=True, remote=False, workers=None).processes == 2  # one thread
        assert how(train_heavy, header, images=False, remote=False, workers=None).processes == 2
    assert how(train_heavy, full, images=True, remote=False, workers=None) == local.Parallelism(1, 2, 2)
    assert how(even, full, images=True, remote=True, workers=None).processes == 1
    assert how(even, full, images=True, remote=False, workers=3) == local.Parallelism(1, 2, 3)
    assert how([300, 300], header, images=True, remote=False, workers=None) == local.Parallelism(1, 1, 1)
    assert how(even, header, images=True, remote=False, workers=None, local_output=False).processes == 1  # gs://


def test_finished_conversion_leaves_no_run_state_and_refuses_a_second_run_of_other_settings(tmp_path, csv_table):
    out = tmp_path / "out"
    tfrecorder.convert(str(csv_table), str(out), num_shards=4, progress=False)
    assert ".tfrecorder" not in os.listdir(out) and ".conversion.json" in os.listdir(out)
    finished = r"is not empty \(.*dataset.json.*\): it holds a finished conversion made with .*; .*overwrite=True"
    with pytest.raises(TFRecorderError, match=finished):
        tfrecorder.convert(str(csv_table), str(out), num_shards=3, progress=False)


def lock_file(out: Path, **owner) -> None:
    (out / ".tfrecorder").mkdir(parents=True)
    info = {"host": socket.gethostname(), "pid": os.getpid(), "user": "someone", "started": "2026-01-01T00:00:00Z",
            "runner": "local", **owner}
    (out / ".tfrecorder" / "lock.json").write_text(json.dumps(info))


def test_lock_of_another_machine_or_a_dataflow_job_is_not_broken(tmp_path, csv_table):
    for name, owner in (("host", {"host": "elsewhere-42", "pid": 1}), ("job", {"pid": 2**22 + 7, "job": "j-1"})):
        out = tmp_path / name
        lock_file(out, **owner)
        locked = r"being written by another conversion: someone on .* delete .*lock.json"
        with pytest.raises(OutputLocked, match=locked):
            tfrecorder.convert(str(csv_table), str(out), progress=False, overwrite=True)
        (out / ".tfrecorder" / "lock.json").unlink()  # what the message says to do
        assert tfrecorder.convert(str(csv_table), str(out), progress=False).rows.written == 30


def test_lock_of_this_live_process_is_respected(tmp_path, csv_table):
    out = tmp_path / "out"
    lock_file(out)
    with pytest.raises(OutputLocked, match=rf"pid {os.getpid()}"):
        tfrecorder.convert(str(csv_table), str(out), progress=False)
    assert (out / ".tfrecorder" / "lock.json").exists()


def test_a_killed_pipeline_over_an_image_folder_resumes_or_starts_again_if_the_folder_changed(tmp_path):
    """The pipeline lists the image folder itself, so the submitting process cannot tell a changed folder: the
    pipeline records what it listed, keeps the finished shards of an interrupted run of the same folder, and
    writes every shard again when an image was added since."""
    pets = tmp_path / "pets"
    for i in range(30):
        write_image(pets / ("TRAIN" if i < 20 else "TEST") / "abc"[i % 3] / f"{i:02d}.jpg", seed=i)
    options = dict(runner="DirectRunner", num_shards=4)
    clean = tmp_path / "clean"
    tfrecorder.convert(str(pets), str(clean), **options)
    kill(crash(pets, tmp_path / "out", "DirectRunner"))
    result = tfrecorder.convert(str(pets), str(tmp_path / "out"), **options)
    assert result.resumed_shards == 2 and files(tmp_path / "out") == files(clean)

    kill(crash(pets, tmp_path / "out2", "DirectRunner"))
    write_image(pets / "TRAIN" / "a" / "99.jpg", seed=99)
    tfrecorder.convert(str(pets), str(tmp_path / "clean2"), **options)
    result = tfrecorder.convert(str(pets), str(tmp_path / "out2"), **options)
    assert result.resumed_shards == 0 and result.rows.written == 31
    assert files(tmp_path / "out2") == files(tmp_path / "clean2")
