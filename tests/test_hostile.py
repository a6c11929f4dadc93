"""What hostile and unlucky users found (reliability round 2): each case reproduces the report, then checks
the fix. Image reads are bounded in bytes and time; dataset.json cannot send readers outside the folder."""

from __future__ import annotations

import csv
import json
import os
import threading
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf

import tfrecorder
from tests.conftest import write_image
from tests.servers import http_server
from tfrecorder.errors import ImageError
from tfrecorder.write.record.fetch import fetch
from tfrecorder.write.record.images import MemoryBudget
from tfrecorder.write.settings import FetchLimits, Retry


def errors_of(out: Path) -> dict[int, tuple[str, str]]:
    with open(out / "errors.csv", newline="") as f:
        return {int(r["row"]): (r["error"], r["message"]) for r in csv.DictReader(f)}


def test_files_that_are_not_images_or_are_too_big_are_row_errors_without_being_read(tmp_path):
    good = write_image(tmp_path / "good.jpg")
    fifo = tmp_path / "pipe.jpg"
    os.mkfifo(fifo)  # reading it would wait forever for a writer
    sparse = tmp_path / "huge.jpg"
    with open(sparse, "wb") as f:
        f.truncate(3 * 1024**3)  # 3 GiB on paper, no blocks on disk: it must not be read
    uris = [str(good), "/dev/zero", str(fifo), str(sparse)]
    df = pd.DataFrame({"split": "TRAIN", "image_uri": uris, "label": 1})
    out = tmp_path / "out"
    result = tfrecorder.convert(df, str(out), progress=False, num_shards=1)
    assert result.splits["TRAIN"].written == 1 and result.errors == 3
    errors = errors_of(out)
    assert errors[1] == ("not_a_file", "not a regular file (a character device): /dev/zero")
    assert errors[2] == ("not_a_file", f"not a regular file (a FIFO): {fifo}")
    assert errors[3] == ("too_large", f"3221225472 bytes is over max_image_bytes=268435456: {sparse}")
    assert tfrecorder.verify(str(out)).ok


def test_max_image_bytes_is_a_row_error_naming_the_uri(tmp_path):
    small, big = write_image(tmp_path / "s.png", "PNG", size=(8, 8)), write_image(tmp_path / "b.png", "PNG",
                                                                                size=(200, 200))
    df = pd.DataFrame({"split": "TRAIN", "image_uri": [str(small), str(big)], "label": 1})
    tfrecorder.convert(df, str(tmp_path / "out"), progress=False, max_image_bytes=2000)
    error, message = errors_of(tmp_path / "out")[1]
    assert error == "too_large" and message.endswith(f"bytes is over max_image_bytes=2000: {big}")
    with pytest.raises(tfrecorder.TFRecorderError, match=r"max_image_bytes=2147483648: give a size from 1 to"):
        tfrecorder.convert(df, str(tmp_path / "o2"), max_image_bytes=2**31)


def test_an_endless_http_body_stops_at_max_image_bytes(tmp_path):
    with http_server(tmp_path) as (base, _):
        df = pd.DataFrame({"split": "TRAIN", "image_uri": [f"{base}/endless/x.jpg"], "label": 1})
        with pytest.raises(tfrecorder.TFRecorderError, match="no row was written: the 1 rows not discarded all failed"):
            tfrecorder.convert(df, str(tmp_path / "out"), progress=False, max_image_bytes=4 * 1024**2)
    assert errors_of(tmp_path / "out")[0] == (
        "too_large", f"more than 4194304 bytes is over max_image_bytes=4194304: {base}/endless/x.jpg")


def test_a_server_that_never_answers_is_a_fetch_error_after_the_timeout(tmp_path):
    with http_server(tmp_path) as (base, hits):
        with pytest.raises(ImageError) as caught:
            fetch(f"{base}/silent/x.jpg", FetchLimits(timeout=0.3, retry=Retry(attempts=2, backoff_seconds=0.0)))
    assert hits.reach("/silent/x.jpg", 2) == 2  # a try the client gave up on may be counted a moment later
    assert caught.value.error == "fetch_error"
    assert caught.value.message.startswith(f"no answer within 0.3 s for {base}/silent/x.jpg after 2 tries")


def test_decoding_workers_share_one_memory_budget():
    budget = MemoryBudget(100)
    gate = threading.Barrier(8)

    def decode(nbytes: int) -> None:
        gate.wait()  # all eight ask at once
        with budget.hold(nbytes):
            pass

    threads = [threading.Thread(target=decode, args=(80,)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert budget.peak == 80 and budget.used == 0  # one at a time: two would be 160
    with budget.hold(500):  # larger than the whole budget: it still goes, alone
        assert budget.used == 500


def _edit_manifest(out: Path, edit) -> None:
    import json

    manifest = json.loads((out / "dataset.json").read_text())
    edit(manifest)
    (out / "dataset.json").write_text(json.dumps(manifest))


@pytest.mark.parametrize("name", ["../other/x.tfrecord", "/etc/passwd", "file:///etc/passwd", "sub/x.tfrecord",
                                  "..", "C:\\x.tfrecord", "URL"])
def test_dataset_json_cannot_send_readers_outside_the_folder(tabular_table, tmp_path, name):
    out = tmp_path / "out"
    tfrecorder.convert(tabular_table, str(out), progress=False)
    with http_server(tmp_path) as (base, hits):
        target = f"{base}/x.tfrecord" if name == "URL" else name

        def point_away(manifest):
            manifest["splits"]["TRAIN"][0]["file"] = target

        _edit_manifest(out, point_away)
        readers = (tfrecorder.load_dataset, tfrecorder.read_tfr, tfrecorder.verify, tfrecorder.info,
                   tfrecorder.label_names)
        for read in readers:
            with pytest.raises(tfrecorder.TFRecorderError, match=r"split TRAIN: shard .* is not a plain file name"):
                read(str(out))
    assert hits == {}  # nothing was fetched


@pytest.mark.parametrize("edit,message", [
    (lambda m: m["features"][2].update(dtype="float16"), r"feature 'x' has dtype 'float16'"),
    (lambda m: m["features"][2].update(shape=[3]), r"feature 'x' has dtype 'float32' and shape \[3\]"),
    (lambda m: m["splits"]["TRAIN"][0].update(index="../i.tfindex"), r"index '../i.tfindex' is not a plain file"),
])
def test_damaged_dataset_json_is_a_clear_error(tabular_table, tmp_path, edit, message):
    out = tmp_path / "out"
    tfrecorder.convert(tabular_table, str(out), progress=False)
    _edit_manifest(out, edit)
    with pytest.raises(tfrecorder.TFRecorderError, match=message):
        tfrecorder.load_dataset(str(out))
    with pytest.raises(tfrecorder.TFRecorderError, match=message):
        tfrecorder.verify(str(out))


def test_bad_channels_in_dataset_json_are_blamed_on_dataset_json(image_table, tmp_path):
    out = tmp_path / "out"
    tfrecorder.convert(image_table, str(out), progress=False)
    _edit_manifest(out, lambda m: m["image"].update(channels=[7]))
    with pytest.raises(tfrecorder.TFRecorderError, match=r"image channels \[7\] are not among 1, 2, 3, 4; dataset"):
        tfrecorder.load_dataset(str(out), split="TRAIN")


def test_huge_record_lengths_are_reported_not_allocated(tmp_path):
    """A length field of 2**40 with a correct CRC: verify reports it, read_tfr refuses it, neither allocates."""
    from tfrecorder.dataset.records import masked_crc

    out = tmp_path / "out"
    tfrecorder.convert(pd.DataFrame({"split": ["TRAIN"], "x": [1]}), str(out), progress=False)
    shard = out / "train-00000-of-00001.tfrecord"
    length = (2**40).to_bytes(8, "little")
    size = shard.stat().st_size  # the size dataset.json lists, so readers get as far as the length field
    shard.write_bytes((length + masked_crc(length).to_bytes(4, "little")).ljust(size, b"\x00"))
    report = tfrecorder.verify(str(out))
    assert any("length 1099511627776 is over the 2147483647-byte limit" in str(p) for p in report.problems)
    with pytest.raises(tfrecorder.TFRecorderError, match="is over the 2147483647-byte limit"):
        tfrecorder.read_tfr(str(out))


def _tabular(n: int, seed: int = 0) -> pd.DataFrame:
    """``n`` TRAIN rows whose records all have the same size (so shards of equal row counts are equal in bytes)."""
    return pd.DataFrame({"split": ["TRAIN"] * n, "x": [10**6 + 10 * i + seed for i in range(n)],
                         "note": [f"row {i:06d} of table {seed}" for i in range(n)]})


def test_a_shard_copied_over_another_is_an_error_for_every_reader(tmp_path):
    out = tmp_path / "out"
    tfrecorder.convert(_tabular(200), str(out), progress=False, num_shards=2)  # two shards of the same size
    first, second = out / "train-00000-of-00002.tfrecord", out / "train-00001-of-00002.tfrecord"
    assert first.stat().st_size == second.stat().st_size
    second.write_bytes(first.read_bytes())  # 100 duplicated rows, 100 missing: no reader may return that
    with pytest.raises(Exception, match="train-00001-of-00002.tfrecord is not the shard dataset.json describes: "
                                        "its first record is not the one dataset.json lists"):
        list(tfrecorder.load_dataset(str(out), split="TRAIN"))
    with pytest.raises(tfrecorder.TFRecorderError, match="its first record is not the one dataset.json lists"):
        tfrecorder.read_tfr(str(out))


def test_a_test_shard_copied_over_a_train_shard_is_refused_by_read_tfr(tmp_path):
    out = tmp_path / "out"
    df = pd.DataFrame({"split": ["TRAIN", "TEST"] * 50, "x": range(100)})
    tfrecorder.convert(df, str(out), progress=False)
    (out / "train-00000-of-00001.tfrecord").write_bytes((out / "test-00000-of-00001.tfrecord").read_bytes())
    with pytest.raises(tfrecorder.TFRecorderError, match="train-00000-of-00001.tfrecord .*dataset.json"):
        tfrecorder.read_tfr(str(out), split="TRAIN")


def test_a_reader_gets_an_error_not_a_mixture_when_the_folder_is_overwritten(tmp_path):
    out = tmp_path / "out"
    # shards of 5,000 records: more than the reader's buffer holds (600 rows would be read whole at once)
    tfrecorder.convert(_tabular(15_000, seed=1), str(out), progress=False, num_shards=3)
    records = iter(tfrecorder.load_dataset(str(out), split="TRAIN"))
    assert int(next(records)["x"]) % 10 == 1  # the first shard is open
    tfrecorder.convert(_tabular(15_000, seed=2), str(out), progress=False, num_shards=3, overwrite=True)
    with pytest.raises(Exception, match="dataset.json changed since this reader opened the folder"):
        seen = [int(r["x"]) for r in records]
        assert all(x % 10 == 1 for x in seen)  # if it ever got here, every record would be the old table's


def _shard_heads(out: str) -> list:
    """Each shard's size and first record: what a reader checked as it opened the shard."""
    manifest = json.load(open(os.path.join(out, "dataset.json")))
    source = tfrecorder.data_source(out, "TRAIN", decode=False)
    starts = np.cumsum([0] + [s["records"] for s in manifest["splits"]["TRAIN"]])[:-1]
    return [(s["bytes"], source[int(i)]) for s, i in zip(manifest["splits"]["TRAIN"], starts)]


@pytest.mark.parametrize("file_format", ["tfrecord", "array_record"])
def test_an_overwrite_that_keeps_every_shards_size_and_first_record_is_still_an_error(tmp_path, file_format):
    """Another conversion after an image changed (a BMP: its bytes keep their size; a row's key is its URI, so
    its place stays too) past each shard's first record: every shard keeps its size and first record, which were
    all a reader checked as it opened one, so data_source and load_dataset read the old first shard and the new
    second one without a word. dataset.json changed: that is the error."""
    images = [write_image(tmp_path / f"{i}.bmp", "BMP", size=(8, 8), seed=i) for i in range(8)]
    table = pd.DataFrame({"split": "TRAIN", "image_uri": [str(p) for p in images], "label": ["a", "b"] * 4})
    out = str(tmp_path / "out")
    options = dict(progress=False, num_shards=2, file_format=file_format)
    tfrecorder.convert(table, out, **options)
    heads = _shard_heads(out)
    later = next(p for p in images if all(str(p).encode() not in first for _, first in heads))  # no shard's first
    source = tfrecorder.data_source(out, "TRAIN")
    source[0]  # noqa: B018 - its first shard opened
    records = iter(tfrecorder.load_dataset(out, "TRAIN"))
    next(records)
    write_image(later, "BMP", size=(8, 8), seed=99)  # the same size of file, other pixels
    tfrecorder.convert(table, out, overwrite=True, **options)
    assert _shard_heads(out) == heads  # the checks of old could not tell
    with pytest.raises(tfrecorder.TFRecorderError, match="dataset.json changed since this reader opened the folder"):
        source[:]  # noqa: B018
    with pytest.raises(Exception, match="dataset.json changed since this reader opened the folder"):
        list(records)


def test_overwrite_deletes_only_what_our_dataset_json_lists(tmp_path):
    folder = tmp_path / "data"
    write_image(folder / "images" / "a.jpg")
    pd.DataFrame({"split": ["TRAIN"], "image_uri": ["images/a.jpg"], "label": ["cat"]}).to_csv(
        folder / "data.csv", index=False)
    (folder / "other-dataset.tfrecord").write_bytes(b"a user's own records")
    with pytest.raises(tfrecorder.TFRecorderError, match=r"holds TFRecord files that no dataset.json of tfrecorder "
                                                        r"lists: other-dataset.tfrecord"):
        tfrecorder.convert(str(folder / "data.csv"), str(folder), progress=False, overwrite=True)
    assert (folder / "other-dataset.tfrecord").read_bytes() == b"a user's own records"
    (folder / "other-dataset.tfrecord").unlink()
    # another tool's files of the names we write: a Hugging Face save_to_disk's dataset_info.json, a dataset.json
    # of its own. They were written over (an unreadable dataset.json was taken for a damaged one of ours).
    for name, text in (("dataset_info.json", '{"mine": 1}'), ("dataset.json", '{"my": "own metadata"}')):
        (folder / name).write_text(text)
        with pytest.raises(tfrecorder.TFRecorderError, match=rf"holds {name}, which no conversion of tfrecorder "
                                                            rf"wrote there.*overwrite=True would write over them"):
            tfrecorder.convert(str(folder / "data.csv"), str(folder), progress=False, overwrite=True)
        assert (folder / name).read_text() == text
        (folder / name).unlink()
    tfrecorder.convert(str(folder / "data.csv"), str(folder), progress=False, overwrite=True)
    tfrecorder.convert(str(folder / "data.csv"), str(folder), progress=False, overwrite=True, num_shards=1)
    assert (folder / "data.csv").exists() and (folder / "images" / "a.jpg").exists()
    assert tfrecorder.verify(str(folder)).ok


def test_csv_values_are_not_changed_on_the_way_in(tmp_path):
    (tmp_path / "t.csv").write_text(
        "split,id,code,word,label\n"
        "TRAIN,123456789,007,None,cat \n"
        "TRAIN,,010,null,cat\n"
        "TEST,5,2,NA,n/a\n"
        "TRAIN,6,3,,n/a\n")
    tfrecorder.convert(str(tmp_path / "t.csv"), str(tmp_path / "out"), progress=False)
    df = tfrecorder.read_tfr(str(tmp_path / "out")).astype(object).where(lambda d: d.notna(), None)
    df = df.sort_values("code")  # rows are stored by the hash of their content: put them in a known order
    assert df["id"].tolist() == [123456789, None, 5, 6]  # an integer with a blank stays an integer
    assert str(tfrecorder.read_tfr(str(tmp_path / "out"))["id"].dtype) == "Int64"
    assert df["code"].tolist() == ["007", "010", "2", "3"]  # leading zeros: text
    assert df["word"].tolist() == ["None", "null", "NA", None]  # only the empty cell is missing
    assert tfrecorder.label_names(str(tmp_path / "out")) == ["cat", "n/a"]  # "cat " is "cat"; "n/a" is a label


def test_a_csv_with_a_column_named_twice_is_refused(tmp_path):
    (tmp_path / "t.csv").write_text("split,label,x,label\nTRAIN,a,1,b\n")
    with pytest.raises(tfrecorder.SchemaError, match=r"the header names column 'label' twice \(columns 2 and 4\)"):
        tfrecorder.convert(str(tmp_path / "t.csv"), str(tmp_path / "out"))


def test_a_cell_longer_than_the_csv_module_allows_is_read(tmp_path):
    long = "x" * 200_000
    (tmp_path / "t.csv").write_text(f"split,note\nTRAIN,{long}\n")
    tfrecorder.convert(str(tmp_path / "t.csv"), str(tmp_path / "out"), progress=False)
    assert tfrecorder.read_tfr(str(tmp_path / "out"))["note"][0] == long


@pytest.mark.parametrize("value", ["traın", "teſt"])
def test_split_look_alikes_are_refused(value):
    with pytest.raises(tfrecorder.SchemaError, match="rows have values outside TRAIN/VALIDATION/TEST"):
        tfrecorder.convert(pd.DataFrame({"split": [value], "x": [1]}), "unused")


def test_leakage_groups_list_a_bounded_number_of_rows(tmp_path):
    """A group lists its first row of each split, then the rest, up to ROWS_REPORTED: its first 10 rows were all
    TRAIN's, the TEST row the user must find named nowhere (nor in the warning)."""
    image = write_image(tmp_path / "a.jpg")
    df = pd.DataFrame({"split": ["TRAIN"] * 30 + ["TEST"] * 5, "image_uri": str(image), "label": 1})
    out = tmp_path / "out"
    tfrecorder.convert(df, str(out), progress=False)
    (group,) = tfrecorder.read_manifest(str(out)).leakage["groups"]
    assert group["rows"] == [0, 30, *range(1, 9)] and group["row_count"] == 35  # a TEST row among them


def test_a_folder_named_like_a_glob_is_a_path(tabular_table, tmp_path):
    out = tmp_path / "exp[1]"
    tfrecorder.convert(tabular_table, str(out), progress=False)
    (tmp_path / "exp1").mkdir()  # what the glob would have matched instead
    assert len(list(tfrecorder.load_dataset(str(out), split="TRAIN"))) == 6
    assert len(tfrecorder.read_tfr(str(out))) == 8
    assert tfrecorder.info(str(out)).label_counts["TRAIN"] and tfrecorder.label_names(str(out)) is None
    assert tfrecorder.verify(str(out)).ok


def test_a_missing_dataset_json_is_named_not_read_around(tabular_table, tmp_path):
    out = tmp_path / "out"
    tfrecorder.convert(tabular_table, str(out), progress=False)
    (out / "dataset.json").unlink()
    for read in (tfrecorder.load_dataset, tfrecorder.read_tfr, tfrecorder.verify, tfrecorder.label_names):
        with pytest.raises(tfrecorder.TFRecorderError, match=r"has no dataset.json, but files tfrecorder writes "
                                                            r"beside one \(errors.csv\): it was deleted or lost"):
            read(str(out))
    assert len(tfrecorder.read_tfr(str(out / "*.tfrecord"))) == 8  # the way to read the shards anyway


def test_a_glob_is_no_way_around_an_unfinished_conversion(tabular_table, tmp_path):
    out = tmp_path / "inprog"
    tfrecorder.convert(tabular_table, str(out), progress=False, compression="gzip")
    (out / "dataset.json").unlink()
    (out / ".tfrecorder").mkdir()  # what a running (or stopped) conversion leaves
    with pytest.raises(tfrecorder.TFRecorderError, match="holds an unfinished conversion"):
        tfrecorder.load_dataset(str(out / "*.gz"))


@pytest.fixture
def small_disk(tmp_path):
    """A 128 KiB tmpfs (root only: skipped where mounting is not allowed)."""
    import subprocess

    mount = tmp_path / "small"
    mount.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=128k", "tmpfs", str(mount)],
                                           capture_output=True).returncode != 0:
        pytest.skip("needs root to mount a small tmpfs")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], capture_output=True)


def test_a_full_disk_names_the_file_and_a_rerun_after_freeing_space_resumes(small_disk, tmp_path):
    import subprocess

    uris = [str(write_image(tmp_path / "img" / f"{i}.png", "PNG", size=(48, 48), seed=i)) for i in range(80)]
    df = pd.DataFrame({"split": "TRAIN", "image_uri": uris, "label": 1})
    out = small_disk / "out"
    with pytest.raises(tfrecorder.TFRecorderError, match=rf"no space left on the device writing {out}/.*: free "
                                                        r"some space .* run the same conversion again"):
        tfrecorder.convert(df, str(out), progress=False, num_shards=8)
    subprocess.run(["mount", "-o", "remount,size=8m", str(small_disk)], check=True)
    result = tfrecorder.convert(df, str(out), progress=False, num_shards=8)
    assert result.resumed_shards > 0 and result.splits["TRAIN"].written == 80
    assert tfrecorder.verify(str(out)).ok


def test_of_many_simultaneous_starts_exactly_one_takes_the_lock(tmp_path):
    from tfrecorder.dataset.storage import Folder
    from tfrecorder.write.run.lock import Lock, OutputLocked

    folder = Folder.of(str(tmp_path / "out"))
    start = threading.Barrier(16)
    won, refused = [], []

    def contend() -> None:
        start.wait()
        try:
            won.append(Lock.acquire(folder, "local"))
        except OutputLocked:
            refused.append(1)

    threads = [threading.Thread(target=contend) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(won) == 1 and len(refused) == 15
    assert sorted(os.listdir(tmp_path / "out" / ".tfrecorder")) == ["lock.json"]  # complete, nothing else left
    won[0].release()


def test_run_records_left_beside_a_finished_dataset_are_tidied_by_the_next_run(tabular_table, tmp_path):
    out = tmp_path / "out"
    tfrecorder.convert(tabular_table, str(out), progress=False)
    (out / ".tfrecorder" / "done").mkdir(parents=True)  # as a kill between dataset.json and the clean-up leaves
    (out / ".tfrecorder" / "run.json").write_text('{"fingerprint": "x"}')
    with pytest.raises(tfrecorder.TFRecorderError, match="it holds a finished conversion"):
        tfrecorder.convert(tabular_table, str(out), progress=False, num_shards=2)  # the same one is reused
    assert not (out / ".tfrecorder").exists()
    assert tfrecorder.verify(str(out)).ok


def test_verify_images_finds_a_truncated_jpeg_that_header_checks_stored(tmp_path):
    good = write_image(tmp_path / "good.jpg", size=(64, 64))
    data = write_image(tmp_path / "whole.jpg", size=(64, 64), seed=3).read_bytes()
    (tmp_path / "cut.jpg").write_bytes(data[: len(data) * 2 // 3])
    df = pd.DataFrame({"split": "TRAIN", "image_uri": [str(good), str(tmp_path / "cut.jpg")], "label": 1})
    out = tmp_path / "out"
    result = tfrecorder.convert(df, str(out), progress=False, validate_images="header")
    assert result.splits["TRAIN"].written == 2  # headers only: the cut file passes
    assert tfrecorder.verify(str(out)).ok  # CRCs and parsing are fine
    report = tfrecorder.verify(str(out), images=True)
    stored = tfrecorder.read_tfr(str(out))["image_uri"].tolist()
    assert [p.record for p in report.problems] == [stored.index(str(tmp_path / "cut.jpg"))]  # its record number
    assert f"the image of '{tmp_path / 'cut.jpg'}' does not decode" in str(report.problems[0])


def test_floats_float32_would_change_are_stored_exactly(tmp_path):
    df = pd.DataFrame({"split": ["TRAIN"] * 3, "t": [1700000001.75, 1700000002.5, float("nan")],
                       "price": [0.1, 2.35, 19.99], "x": [0.5, 1.25, -3.0]})
    out = tmp_path / "out"
    tfrecorder.convert(df, str(out), progress=False)
    dtypes = {f.name: f.dtype for f in tfrecorder.read_manifest(str(out)).features}
    assert (dtypes["t"], dtypes["price"], dtypes["x"]) == ("float64", "float32", "float32")
    back = tfrecorder.read_tfr(str(out)).sort_values("price")  # the order of df (rows are stored by hash)
    assert back["t"].tolist()[:2] == [1700000001.75, 1700000002.5] and np.isnan(back["t"].iloc[2])
    assert back["price"].dtype == np.float64  # as given, holding the float32 values stored
    assert back["price"].astype(np.float32).astype(str).tolist() == ["0.1", "2.35", "19.99"]
    batch = next(iter(tfrecorder.load_dataset(str(out), split="TRAIN", batch_size=3)))
    t = dict(zip(batch["x"].numpy().tolist(), batch["t"].numpy().tolist()))
    assert batch["t"].dtype == tf.float64 and [t[0.5], t[1.25]] == [1700000001.75, 1700000002.5]
    assert np.isnan(t[-3.0])
    assert tfrecorder.verify(str(out)).ok
    rounded = tfrecorder.convert(df, str(tmp_path / "f32"), progress=False, float_precision="float32")
    assert tfrecorder.read_tfr(rounded.tfrecord_dir).sort_values("price")["t"].iloc[0] == 1700000000.0  # asked for
    with pytest.raises(tfrecorder.TFRecorderError, match="float_precision='half': use one of 'auto'"):
        tfrecorder.convert(df, str(tmp_path / "bad"), float_precision="half")
