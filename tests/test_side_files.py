"""Files beside the shards (a shard's .tfindex, a label map, dataset.json, the TFDS files) are opened as the shards
are: only a regular file inside the dataset folder, bounded in size, and their text is never quoted in a message.
A link out of the folder, a FIFO or a device is refused in one line by every reader, and named by verify."""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import tfrecorder
from tests.test_foreign_od import DATUMARO
from tfrecorder.dataset.foreign import distinct_names

SECRET = "root:x:0:0:root:/root:/bin/bash\n"


@pytest.fixture
def secret(tmp_path) -> Path:
    """A file outside every dataset folder, whose text must never appear in a message."""
    path = tmp_path / "elsewhere" / "passwd"
    path.parent.mkdir()
    path.write_text(SECRET)
    return path


def export_with_label_map(tmp_path: Path, make) -> str:
    """A copy of the Datumaro export whose label_map.pbtxt is made by ``make(path)`` (a link, a FIFO, ...)."""
    folder = tmp_path / "export"
    shutil.copytree(DATUMARO, folder)
    os.remove(folder / "label_map.pbtxt")
    make(folder / "label_map.pbtxt")
    return str(folder)


def test_a_label_map_linked_out_of_the_folder_is_refused_by_every_reader_and_never_quoted(tmp_path, secret):
    export = export_with_label_map(tmp_path, lambda p: p.symlink_to(secret))
    for read in (tfrecorder.info, tfrecorder.read_tfr, lambda d: tfrecorder.load_dataset(d, "TRAIN"),
                 tfrecorder.label_names):
        with pytest.raises(tfrecorder.TFRecorderError, match="label_map.pbtxt is a link out of the dataset "
                                                             "folder: not read") as caught:
            read(export)
        assert "root:" not in str(caught.value)
    with pytest.raises(tfrecorder.TFRecorderError, match="is a link out of the dataset folder"):
        tfrecorder.convert(f"{export}/*.tfrecord", str(tmp_path / "out"), progress=False)


def test_a_label_map_outside_that_parses_supplies_no_names(tmp_path):
    """One that parses silently supplied the class names: it is refused as any other link out."""
    outside = tmp_path / "other_labels.pbtxt"
    outside.write_text("item { id: 1 name: 'stolen' }\nitem { id: 2 name: 'names' }\nitem { id: 3 name: 'x' }\n")
    export = export_with_label_map(tmp_path, lambda p: p.symlink_to(outside))
    with pytest.raises(tfrecorder.TFRecorderError, match="link out of the dataset folder"):
        tfrecorder.label_names(export)


def test_a_label_map_that_does_not_parse_is_named_by_line_not_quoted(tmp_path):
    export = export_with_label_map(tmp_path, lambda p: p.write_text(SECRET))
    with pytest.raises(tfrecorder.TFRecorderError, match=r"label_map.pbtxt is not a label map .*\(line 1, column "
                                                         r"\d+ is not an item") as caught:
        tfrecorder.info(export)
    assert "root:x" not in str(caught.value) and "bash" not in str(caught.value)


def test_a_link_to_a_label_map_inside_the_folder_is_read(tmp_path):
    def inside(path: Path) -> None:
        (path.parent / "maps").mkdir()
        shutil.copy(os.path.join(DATUMARO, "label_map.pbtxt"), path.parent / "maps" / "real.pbtxt")
        path.symlink_to(path.parent / "maps" / "real.pbtxt")

    assert tfrecorder.label_names(export_with_label_map(tmp_path, inside)) == ["red", "green", "blue"]


def _shard_index(dataset: Path) -> Path:
    return Path(sorted(glob.glob(str(dataset / "train-*.tfindex")))[0])


@pytest.fixture
def dataset(tmp_path, image_table) -> Path:
    out = tmp_path / "dataset"
    tfrecorder.convert(image_table, str(out), progress=False)
    return out


def test_an_index_linked_out_of_the_folder_is_refused_by_data_source_and_named_by_verify(dataset, secret):
    index = _shard_index(dataset)
    index.unlink()
    index.symlink_to(secret)
    with pytest.raises(tfrecorder.TFRecorderError, match=r"\.tfindex is a link out of the dataset folder") as caught:
        tfrecorder.data_source(str(dataset), "TRAIN")[0]
    assert "root:" not in str(caught.value)
    report = tfrecorder.verify(str(dataset))
    assert not report.ok
    problems = [p for p in report.problems if p.file == index.name]
    assert [p.message for p in problems] == ["the index file is a link out of the dataset folder: not read"]
    assert "root:x" not in str(report)


def test_tfds_files_linked_out_or_not_regular_are_named_by_verify(dataset, secret):
    (dataset / "features.json").unlink()
    (dataset / "features.json").symlink_to(secret)
    (dataset / "dataset_info.json").unlink()
    (dataset / "dataset_info.json").mkdir()  # a FIFO waited for ever: _run_child's test
    found = {p.file: p.message for p in tfrecorder.verify(str(dataset)).problems}
    assert found == {"features.json": "is a link out of the dataset folder: not read",
                     "dataset_info.json": "is not a regular file (a FIFO, a device or a folder): not read"}


def test_a_dataset_json_linked_out_of_the_folder_is_refused(dataset, tmp_path):
    elsewhere = tmp_path / "elsewhere.json"
    shutil.move(dataset / "dataset.json", elsewhere)
    (dataset / "dataset.json").symlink_to(elsewhere)
    with pytest.raises(tfrecorder.TFRecorderError, match="dataset.json is a link out of the dataset folder"):
        tfrecorder.info(str(dataset))
    with pytest.raises(tfrecorder.TFRecorderError, match="dataset.json is a link out of the dataset folder"):
        tfrecorder.verify(str(dataset))


def test_an_index_larger_than_its_shard_can_need_is_not_read(dataset):
    index = _shard_index(dataset)
    records = len(index.read_text().splitlines())
    index.write_text("0 20\n" * (records + 200))  # more lines than any index of these records can hold
    with pytest.raises(tfrecorder.TFRecorderError, match=r"\.tfindex has \d+ bytes, more than such a file may"):
        tfrecorder.data_source(str(dataset), "TRAIN")[0]


# Calls that waited for ever on a FIFO (or read /dev/zero without bound) run in a child with a time limit.
_CHILD = textwrap.dedent("""
    import sys, tfrecorder
    calls = {
        "info": lambda d: tfrecorder.info(d),
        "read_tfr": lambda d: tfrecorder.read_tfr(d),
        "load_dataset": lambda d: next(iter(tfrecorder.load_dataset(d, "TRAIN"))),
        "data_source": lambda d: tfrecorder.data_source(d, "TRAIN")[0],
        "verify": lambda d: "; ".join(p.message for p in tfrecorder.verify(d).problems),
        "convert": lambda d: tfrecorder.convert(d + "/*.tfrecord", d + "-out", progress=False),
    }
    for number, (folder, names) in enumerate(zip(sys.argv[1::2], sys.argv[2::2])):
        for name in names.split(","):
            try:
                said = calls[name](folder)
                print(number, name, said if isinstance(said, str) else "ok")
            except tfrecorder.TFRecorderError as e:
                print(number, name, "refused:", str(e).splitlines()[0])
""")


def _run_child(*folders_and_calls: tuple[Path | str, str]) -> list[dict[str, str]]:
    """What each (folder, "call,call") pair's calls said, one dict per pair: all in one child (a Python that
    imports TensorFlow once, not a child per folder)."""
    args = [str(part) for pair in folders_and_calls for part in pair]
    done = subprocess.run([sys.executable, "-c", _CHILD, *args], capture_output=True, text=True,
                          timeout=240, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert done.returncode == 0, done.stderr[-3000:]
    said: list[dict[str, str]] = [{} for _ in folders_and_calls]
    for line in done.stdout.splitlines():
        number, name, text = (line.split(" ", 2) + ["", ""])[:3]
        if number.isdigit() and int(number) < len(said) and name in folders_and_calls[int(number)][1].split(","):
            said[int(number)][name] = text
    return said


@pytest.mark.slow  # a subprocess
def test_a_fifo_or_a_device_beside_the_shards_is_refused_at_once(tmp_path, dataset):
    export = export_with_label_map(tmp_path, os.mkfifo)
    index = _shard_index(dataset)
    index.unlink()
    os.mkfifo(index)
    zero = export_with_label_map(tmp_path / "zero", lambda p: p.symlink_to("/dev/zero"))
    fifo_map, fifo_index, zero_map = _run_child((export, "info,read_tfr,load_dataset,convert"),
                                                (dataset, "data_source,verify"), (zero, "info"))
    assert set(fifo_map) == {"info", "read_tfr", "load_dataset", "convert"}
    assert all(s.startswith("refused:") and "label_map.pbtxt is not a regular file" in s
               for s in fifo_map.values()), fifo_map
    assert "is not a regular file" in fifo_index["data_source"]
    assert "the index file is not a regular file" in fifo_index["verify"]
    assert "is a link out of the dataset folder" in zero_map["info"]


def test_class_names_are_told_apart_in_linear_time():
    """40,000 names took 35 s (each checked against every name before it); the rule is unchanged."""
    names = {i: "cat" for i in range(1, 200_001)}
    found = distinct_names(names)
    assert found[1] == "cat" and found[2] == "cat (2)" and len(set(found.values())) == len(names)
    assert distinct_names({1: "cat", 2: "cat", 3: "cat (2)"}) == {1: "cat", 2: "cat (2)", 3: "cat (2) (3)"}


def test_a_label_map_of_many_names_is_read_once_per_open(tmp_path, monkeypatch):
    from tfrecorder.dataset import foreign

    export = export_with_label_map(tmp_path, lambda p: p.write_text(
        "".join(f"item {{ id: {i} name: 'c{i % 7}' }}\n" for i in range(1, 4001))))
    calls = []
    parse = foreign.parse_label_map
    monkeypatch.setattr(foreign, "parse_label_map", lambda text: calls.append(1) or parse(text))
    info = tfrecorder.info(export)
    assert len(calls) == 1 and info.label_counts
    assert json.dumps(tfrecorder.label_names(export)[:3]) == '["c1", "c2", "c3"]'
