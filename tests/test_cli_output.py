"""What the tfrecorder command says and where it writes: help with defaults, info without TensorFlow, inspect's
own folder, verify's account of what it checked."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

import tfrecorder
from tests.conftest import write_image

ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}


@pytest.fixture
def dataset(tmp_path):
    """A small labelled dataset converted in-process (the commands below read it)."""
    import pandas as pd

    paths = [str(write_image(tmp_path / f"{i}.jpg", seed=i)) for i in range(4)]
    df = pd.DataFrame({"split": ["TRAIN", "TRAIN", "TRAIN", "TEST"], "image_uri": paths, "label": list("abab")})
    tfrecorder.convert(df, str(tmp_path / "out"), progress=False)
    return tmp_path / "out"


def test_info_imports_no_tensorflow(dataset):
    """``tfrecorder info`` reads dataset.json and counts labels with plain Python: TensorFlow's import (seconds)
    is not on its path."""
    script = ("import json, sys, tfrecorder.cli as cli; code = cli.main(['info', sys.argv[1]]); "
              "print(json.dumps({'code': code, 'tf': 'tensorflow' in sys.modules}))")
    proc = subprocess.run([sys.executable, "-c", script, str(dataset)], capture_output=True, text=True, env=ENV,
                          timeout=300)
    *printed, last = proc.stdout.strip().splitlines()
    assert last == '{"code": 0, "tf": false}', proc.stderr
    assert '"a": 2' in "\n".join(printed)  # the label counts are still there


@pytest.fixture
def run(command):
    """``run(*args)``: the stdout of the command, which must succeed."""
    def run(*args):
        proc = command(*args)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    return run


def test_verify_names_only_what_it_checked(dataset, tmp_path, run):
    """gzip shards have no TFDS files beside them: verify says so instead of "TFDS files checked"."""
    import pandas as pd

    df = pd.DataFrame({"split": ["TRAIN"], "image_uri": [str(write_image(tmp_path / "z.jpg"))], "label": ["a"]})
    tfrecorder.convert(df, str(tmp_path / "gz"), compression="gzip", progress=False)
    lines = run("verify", str(tmp_path / "gz")).splitlines()
    assert lines[0] == f"{tmp_path / 'gz'}: OK (1 shard, 1 record, {tfrecorder.verify(str(tmp_path / 'gz')).bytes} " \
                       f"bytes read)"
    assert lines[1] == ("  checked: record CRCs, record counts, file checksums, index files, parsing with "
                        "dataset.json's features")
    assert lines[2:] == ["  not checked: image pixels: images=True (--images) decodes every image",
                         "  not checked: TFDS files, there are none: TFDS reads uncompressed TFRecord files only "
                         "(these are gzip)"]
    checked = run("verify", "--images", str(dataset)).splitlines()[1]
    assert checked.endswith("index files, parsing with dataset.json's features, image decoding, TFDS files")


def test_inspect_writes_a_folder_of_its_own_and_replaces_only_its_earlier_files(dataset, tmp_path, monkeypatch,
                                                                                capsys):
    """Without --output-dir: ./inspect-<dataset>-<split>/, named in the output line; a second run leaves none of the
    first run's images beside its own, and deletes nothing it did not write."""
    work = tmp_path / "work"
    work.mkdir()

    def inspect(*args):  # the command in this process (its output line and files; a subprocess is TF's start-up)
        from tfrecorder import cli

        monkeypatch.chdir(work)
        capsys.readouterr()
        assert cli.main(["inspect", str(dataset), *args]) == 0
        return capsys.readouterr().out

    folder = work / "inspect-out-train"
    assert inspect("--num-records", "3") == f"wrote 3 record(s) of TRAIN to {folder}{os.sep} (images and data.csv)\n"
    assert sorted(p.name for p in folder.iterdir() if p.name != ".tfrecorder-inspect") == [
        "00000.jpg", "00001.jpg", "00002.jpg", "data.csv"]
    (folder / "notes.txt").write_text("mine")
    (folder / "00007.jpg").write_bytes(b"mine too: not in the earlier data.csv")
    assert inspect("--num-records", "9").startswith("wrote 3 record(s)")  # the split has 3: it says 3, not 9
    assert inspect().startswith(f"wrote 1 record(s) of TRAIN to {folder}")
    assert sorted(p.name for p in folder.iterdir() if p.name != ".tfrecorder-inspect") == [
        "00000.jpg", "00007.jpg", "data.csv", "notes.txt"]
    assert inspect("--split", "test").startswith(f"wrote 1 record(s) of TEST to {work / 'inspect-out-test'}")
    assert (folder / "00000.jpg").exists()  # another split's look has a folder of its own


def test_paths_of_the_wrong_kind_are_one_line_naming_them(dataset, tmp_path):
    """Each was a raw [Errno 20], [Errno 2], [Errno 21] or [Errno 17] from deep inside."""
    table = tmp_path / "t.csv"
    table.write_text("x\n1\n")
    images = write_image(tmp_path / "imgs" / "cat" / "a.png", "PNG").parents[1]
    cases = [
        (lambda: tfrecorder.convert(str(table), str(table), progress=False), r"output_dir '.*t.csv' is a file"),
        (lambda: tfrecorder.create_image_csv(str(tmp_path / "nothing"), str(tmp_path / "o.csv")),
         r"image folder '.*nothing' does not exist"),
        (lambda: tfrecorder.create_image_csv(str(images), str(tmp_path)), r"is a folder: give the path of the CSV"),
        (lambda: tfrecorder.inspect(dataset, output_dir=str(table)), r"output_dir '.*t.csv' is a file"),
        (lambda: tfrecorder.inspect(dataset, num_records=-2, output_dir=str(tmp_path / "look")),
         r"num_records=-2: give a positive whole number"),  # it wrote nothing without a word
    ]
    for call, message in cases:
        with pytest.raises(tfrecorder.TFRecorderError, match=message):
            call()


def test_inspect_never_writes_over_a_users_own_data_csv(dataset, tmp_path, command, monkeypatch):
    """--output-dir . in a folder holding the user's table: refused with one line, the table untouched (a
    data.csv with an image_file column is not taken for an earlier inspect's list either)."""
    table = "split,image_uri,label,image_file\nTRAIN,a.jpg,cat,00000.jpg\n"
    (tmp_path / "data.csv").write_text(table)
    (tmp_path / "00000.jpg").write_bytes(b"my own picture")
    monkeypatch.chdir(tmp_path)
    proc = command("inspect", str(dataset), "--output-dir", ".")
    assert proc.returncode == 1
    assert proc.stderr.strip().endswith("exists and was not written by inspect; choose another output folder "
                                        "(it is never written over)"), proc.stderr
    assert (tmp_path / "data.csv").read_text() == table and (tmp_path / "00000.jpg").read_bytes() == b"my own picture"


def test_every_flag_says_its_default():
    """Each option of each command has a help line ending in its default, read from the library's constant."""
    import argparse

    from tfrecorder.cli import _parser
    from tfrecorder.write.options import LOCAL
    from tfrecorder.write.settings import DEFAULT_ON_ERROR, DEFAULT_VALIDATE

    parser = _parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    switches = (argparse._StoreTrueAction, argparse._HelpAction, argparse._VersionAction)
    for name, command in [("", parser), *commands.items()]:
        for action in command._actions:
            if action.option_strings and not isinstance(action, switches):
                shown = command._get_formatter()._expand_help(action) if action.help else ""
                assert "default" in shown, (name, action.option_strings, shown)
    shown = " ".join(commands["convert"].format_help().split())
    for flag, default in (("--validate-images {full,header}", DEFAULT_VALIDATE), ("--on-error {report,raise}",
                          DEFAULT_ON_ERROR), ("--compression {gzip,zlib}", "none"), ("--runner RUNNER", LOCAL)):
        assert re.search(rf"{re.escape(flag)}[^-]* \w[^-]*\(default: {default}\)", shown), flag


def test_the_command_names_its_flags_where_the_library_names_keywords(dataset, tmp_path, command):
    """A refused re-run and a reused one, as the command prints them: --overwrite and --num-shards 2, not the
    keywords overwrite=True and num_shards=2 a shell user cannot type."""
    from tfrecorder.cli import as_flags

    assert as_flags("(num_shards=None there, 2 here); choose an empty folder or pass overwrite=True") == (
        "(--num-shards None there, 2 here); choose an empty folder or pass --overwrite")
    assert as_flags("give images_dir= the folder") == "give --images-dir the folder"
    table = tmp_path / "t.csv"
    table.write_text("split,x,label\nTRAIN,1,a\nTRAIN,2,b\n")

    def convert(*args):
        return command("convert", str(table), str(tmp_path / "o"), "--no-progress", *args)

    assert convert().returncode == 0
    assert "already holds this conversion (same input and options): nothing written; --overwrite writes it again" \
        in convert().stdout
    refused = convert("--num-shards", "2")
    assert refused.returncode == 1 and "(--num-shards None there, 2 here)" in refused.stderr
    assert refused.stderr.strip().endswith("choose an empty folder or pass --overwrite")


def test_a_reader_that_goes_away_stops_the_command_quietly(dataset):
    """`tfrecorder info out/ | head -1`: when the reader has closed the pipe, no 'Broken pipe' error (the pipe is
    closed here before the command, which takes a moment to start, writes a byte)."""
    proc = subprocess.Popen([sys.executable, "-m", "tfrecorder", "info", str(dataset)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=ENV)
    proc.stdout.close()
    _, stderr = proc.communicate(timeout=300)
    assert stderr.decode() == "" and proc.returncode == 141  # 128 + SIGPIPE, as cat ends


def test_an_interrupted_inspect_leaves_files_the_next_one_replaces(dataset, tmp_path, monkeypatch):
    """Stopped after its first image (Ctrl-C), inspect has already listed it as its own: the next run into the
    folder replaces it instead of refusing it as someone else's."""
    import tfrecorder.read.inspect as inspect_module

    real = inspect_module._write_image
    calls = []

    def stopped_after_one(*args):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args)

    monkeypatch.setattr(inspect_module, "_write_image", stopped_after_one)
    with pytest.raises(KeyboardInterrupt):
        inspect_module.inspect(str(dataset), num_records=3, output_dir=str(tmp_path / "look"))
    monkeypatch.setattr(inspect_module, "_write_image", real)
    folder = inspect_module.inspect(str(dataset), num_records=3, output_dir=str(tmp_path / "look"))
    assert len([p for p in os.listdir(folder) if p[0].isdigit()]) == 3
