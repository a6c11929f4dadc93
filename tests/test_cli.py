"""The tfrecorder command, run as a user would: in a subprocess."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from tests.conftest import write_image

ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}


def run(*args, check=True):
    proc = subprocess.run([sys.executable, "-m", "tfrecorder", *args], capture_output=True, text=True, env=ENV,
                          timeout=300)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


@pytest.fixture
def csv_file(tmp_path):
    lines = ["split,image_uri,label"]
    for i, split in enumerate(["TRAIN", "TRAIN", "TEST"]):
        path = write_image(tmp_path / f"{i}.jpg", seed=i)
        lines.append(f"{split},{path},{'ab'[i % 2]}")
    (tmp_path / "data.csv").write_text("\n".join(lines))
    return tmp_path / "data.csv"


def test_convert_then_info(csv_file, tmp_path):
    proc = run("convert", str(csv_file), str(tmp_path / "out"), "--no-progress", "--compression", "gzip")
    assert "TRAIN" in proc.stdout and "wrote" in proc.stdout
    info = json.loads(run("info", str(tmp_path / "out")).stdout)
    assert info["splits"]["TRAIN"]["records"] == 2 and info["labels"] == ["a", "b"]


def test_create_image_csv(tmp_path):
    write_image(tmp_path / "imgs" / "TRAIN" / "cat" / "1.png", "PNG")
    proc = run("create-image-csv", str(tmp_path / "imgs"), str(tmp_path / "t.csv"))
    assert "wrote 1 rows" in proc.stdout
    assert (tmp_path / "t.csv").read_text().splitlines()[0] == "split,image_uri,label"


@pytest.mark.parametrize("args,message", [
    (["convert", "{tmp}/missing.csv", "{tmp}/out"], "tfrecorder: error: source '.*missing.csv' does not exist"),
    (["convert", "{tmp}/bad.csv", "{tmp}/out"], "tfrecorder: error: column 'split': 1 rows have values outside"),
    (["info", "{tmp}"], "tfrecorder: error: .* has no dataset.json"),
])
def test_errors_are_one_line_without_traceback(tmp_path, args, message):
    (tmp_path / "bad.csv").write_text("split,image_uri,label\nTRIAN,a.jpg,cat\n")
    proc = run(*[a.format(tmp=tmp_path) for a in args], check=False)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert "Traceback" not in proc.stderr
    assert re.search(message, lines[-1]), proc.stderr


def test_bad_flag_is_a_usage_error(tmp_path):
    proc = run("convert", "a.csv", "out", "--image-format", "tiff", check=False)
    assert proc.returncode == 2 and "invalid choice: 'tiff'" in proc.stderr
    assert run("--help").stdout.startswith("usage: tfrecorder")
