"""The tfrecorder command: its output, files and exit statuses through ``cli.main`` in this process (a subprocess
adds TensorFlow's start-up, seconds, to each), and in a subprocess, as a user runs it, where the process is what is
tested: TensorFlow's start-up lines, Ctrl-C and SIGTERM, exit statuses."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from tests.conftest import default_signals, write_image

ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def run(command):
    """``run(*args, check=True)``: the command in this process (tests/conftest.py's ``command``)."""
    def run(*args, check=True):
        proc = command(*args)
        if check:
            assert proc.returncode == 0, proc.stderr
        return proc

    return run


@pytest.fixture
def csv_file(tmp_path):
    lines = ["split,image_uri,label"]
    for i, split in enumerate(["TRAIN", "TRAIN", "TEST"]):
        path = write_image(tmp_path / f"{i}.jpg", seed=i)
        lines.append(f"{split},{path},{'ab'[i % 2]}")
    (tmp_path / "data.csv").write_text("\n".join(lines))
    return tmp_path / "data.csv"


def test_convert_then_info(csv_file, tmp_path, run):
    proc = run("convert", str(csv_file), str(tmp_path / "out"), "--no-progress", "--compression", "gzip")
    assert "TRAIN" in proc.stdout and "wrote" in proc.stdout
    info = json.loads(run("info", str(tmp_path / "out")).stdout)
    assert info["splits"]["TRAIN"]["records"] == 2 and info["labels"] == ["a", "b"]


def test_create_image_csv(tmp_path, run):
    write_image(tmp_path / "imgs" / "TRAIN" / "cat" / "1.png", "PNG")
    (tmp_path / "imgs" / "TRAIN" / "cat" / "notes.txt").write_text("not a row")
    proc = run("create-image-csv", str(tmp_path / "imgs"), str(tmp_path / "t.csv"))
    assert "wrote 1 rows" in proc.stdout
    assert (tmp_path / "t.csv").read_text().splitlines()[0] == "split,image_uri,label"
    # every file is a row or named, as convert names them (the command named none)
    assert "warning: 1 files under" in proc.stderr and "TRAIN/cat/notes.txt (not an image)" in proc.stderr


@pytest.mark.parametrize("args,message", [
    (["convert", "{tmp}/missing.csv", "{tmp}/out"], "tfrecorder: error: source '.*missing.csv' does not exist"),
    (["convert", "{tmp}/bad.csv", "{tmp}/out"], "tfrecorder: error: column 'split': 1 rows have values outside"),
    (["info", "{tmp}"], "tfrecorder: error: .* has no dataset.json and no TFRecord files"),
])
def test_errors_are_one_line_without_traceback(tmp_path, args, message, run):
    (tmp_path / "bad.csv").write_text("split,image_uri,label\nTRIAN,a.jpg,cat\n")
    proc = run(*[a.format(tmp=tmp_path) for a in args], check=False)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert "Traceback" not in proc.stderr
    assert re.search(message, lines[-1]), proc.stderr


@pytest.mark.parametrize("where", ["before", "after"])
def test_verbose_shows_the_traceback_before_or_after_the_command(tmp_path, where):
    """After the command it was read as a Beam pipeline option ("unrecognized arguments --verbose"). With --verbose
    the error leaves ``cli.main``: ``python -m tfrecorder`` ends with Python's traceback and exit status 1."""
    import tfrecorder
    from tfrecorder import cli

    args = ["convert", str(tmp_path / "missing.csv"), str(tmp_path / "out")]
    with pytest.raises(tfrecorder.TFRecorderError, match="does not exist"):
        cli.main(["--verbose", *args] if where == "before" else [*args, "--verbose"])


def test_version_is_the_packages(run):
    from tfrecorder import __version__

    assert run("--version").stdout == f"tfrecorder {__version__}\n"


def test_bad_flag_is_a_usage_error(tmp_path, run):
    proc = run("convert", "a.csv", "out", "--image-format", "tiff", check=False)
    assert proc.returncode == 2 and "invalid choice: 'tiff'" in proc.stderr
    assert run("--help").stdout.startswith("usage: tfrecorder")


def test_inspect_writes_images_and_csv(csv_file, tmp_path, run):
    run("convert", str(csv_file), str(tmp_path / "out"), "--no-progress")
    proc = run("inspect", str(tmp_path / "out"), "--split", "train", "--num-records", "2",
               "--output-dir", str(tmp_path / "look"))
    assert "wrote 2 record(s) of TRAIN" in proc.stdout
    assert sorted(p.name for p in (tmp_path / "look").iterdir()) == [
        ".tfrecorder-inspect", "00000.jpg", "00001.jpg", "data.csv"]  # the list of what it wrote, and it
    rows = (tmp_path / "look" / "data.csv").read_text().splitlines()
    assert len(rows) == 3 and "label_name" in rows[0] and any(",a," in row for row in rows[1:])


def test_unknown_flags_go_to_beam_and_need_a_beam_runner(csv_file, tmp_path, run):
    proc = run("convert", str(csv_file), str(tmp_path / "out"), "--max_num_workers=3", check=False)
    assert proc.returncode == 1 and "pipeline options need a Beam --runner" in proc.stderr
    proc = run("convert", str(csv_file), str(tmp_path / "out"), "--runner", "DirectRunner",
               "--direct_num_workers=1", "--direct-running-mode", "in_memory")
    assert "DirectRunner" in proc.stdout


def test_pipeline_flags_parsing():
    from tfrecorder.cli import pipeline_flags

    assert pipeline_flags(["--max_num_workers=20", "--use-public-ips", "false", "--streaming",
                           "--machine_type", "n2-standard-4"]) == {
        "max_num_workers": 20, "use_public_ips": False, "streaming": True, "machine_type": "n2-standard-4"}


def test_convert_flags_have_the_library_defaults_and_choices():
    """The CLI builds its flags from the library's constants: every flag's default is convert()'s."""
    import inspect

    from tfrecorder.cli import _parser
    from tfrecorder.write.convert import convert

    convert_parser = _parser()._subparsers._group_actions[0].choices["convert"]
    flags = {a.dest: a for a in convert_parser._actions if a.dest not in ("help", "source", "output_dir", "verbose")}
    defaults = {name: p.default for name, p in inspect.signature(convert).parameters.items()}
    # flags whose value is translated before the call (--append gives mode="append")
    renamed = {"no_progress": None, "no_statistics": None, "split_fractions": None, "append": None}
    for dest, action in flags.items():
        if dest in renamed:
            continue
        assert action.default == defaults[dest], dest
    library_only = {"source", "output_dir", "schema", "progress", "statistics", "pipeline_options", "dataflow_options",
                    "split_fractions", "mask_colors", "mode"}
    assert set(defaults) - library_only - set(flags) == set()  # every other keyword has a flag
    assert all(name in flags["runner"].help for name in ("DirectRunner", "DataflowRunner", "DaskRunner"))
    assert set(flags["image_format"].choices) >= {"keep", "jpeg", "png", "raw"}


def test_file_format_choices_are_the_formats_registered_when_the_parser_is_built(monkeypatch):
    """A file format defined after tfrecorder is imported (a plug-in's) is a --file-format choice."""
    from tfrecorder.cli import _parser
    from tfrecorder.dataset.file_formats import base

    monkeypatch.setitem(base._FORMATS, "lines", base._FORMATS["tfrecord"])  # registered as a subclass would be
    convert_parser = _parser()._subparsers._group_actions[0].choices["convert"]
    action = next(a for a in convert_parser._actions if a.dest == "file_format")
    assert "lines" in action.choices and action.choices == base.format_names()
    assert convert_parser.parse_args(["in.csv", "out", "--file-format", "lines"]).file_format == "lines"


def test_commands_print_no_tensorflow_start_up_lines(csv_file, tmp_path):
    """Without TF_CPP_MIN_LOG_LEVEL set, as a new user runs it: stderr has none of TensorFlow's C++ lines."""
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    out = str(tmp_path / "out")
    for args in (["convert", str(csv_file), out, "--no-progress"], ["info", out], ["verify", out],
                 ["inspect", out, "--output-dir", str(tmp_path / "look")]):
        proc = subprocess.run([sys.executable, "-m", "tfrecorder", *args], capture_output=True, text=True, env=env,
                              timeout=300)
        assert proc.returncode == 0 and proc.stderr == "", (args, proc.stderr)
    proc = subprocess.run([sys.executable, "-m", "tfrecorder", "info", str(tmp_path / "nowhere")],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 1 and proc.stderr.startswith("tfrecorder: error: ")  # our own lines still show


def test_ctrl_c_prints_one_line_saying_how_to_resume(tmp_path):
    import signal

    from tests.servers import http_server

    with http_server(tmp_path) as (base, hits):
        (tmp_path / "t.csv").write_text(f"split,image_uri,label\nTRAIN,{base}/silent/a.jpg,1\n")
        proc = subprocess.Popen([sys.executable, "-m", "tfrecorder", "convert", str(tmp_path / "t.csv"),
                                 str(tmp_path / "out"), "--no-progress"], stderr=subprocess.PIPE, text=True, env=ENV,
                                preexec_fn=default_signals)
        assert hits.arrived.wait(120)  # it is waiting on the image server
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130
    assert stderr == "tfrecorder: interrupted: run the same command again to resume where it stopped\n"


def test_the_signal_tests_pass_when_the_suite_starts_with_sigint_ignored(tmp_path):
    """``make test &`` in a script starts pytest with SIGINT ignored; the tests that signal a child still pass,
    and the command itself keeps the ignored SIGINT it inherits (what a background job asks for)."""
    import signal

    def ignore_sigint() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    tests = ["tests/test_cli.py::test_ctrl_c_prints_one_line_saying_how_to_resume",
             "tests/test_big_files.py::test_sigterm_stops_the_conversion_as_ctrl_c_does"]
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=", *tests],
                          cwd=ROOT, capture_output=True, text=True, preexec_fn=ignore_sigint, timeout=600)
    assert proc.returncode == 0 and "3 passed" in proc.stdout, proc.stdout[-3000:]


def test_a_command_started_with_sigint_ignored_keeps_ignoring_it(tmp_path):
    import signal

    from tests.servers import http_server

    def ignore_sigint() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    with http_server(tmp_path) as (base, hits):
        (tmp_path / "t.csv").write_text(f"split,image_uri,label\nTRAIN,{base}/silent/a.jpg,1\n")
        proc = subprocess.Popen([sys.executable, "-m", "tfrecorder", "convert", str(tmp_path / "t.csv"),
                                 str(tmp_path / "out"), "--no-progress"], stderr=subprocess.PIPE, text=True, env=ENV,
                                preexec_fn=ignore_sigint)
        assert hits.arrived.wait(120)
        proc.send_signal(signal.SIGINT)  # ignored, as a background job asks
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 143 and "stopped by SIGTERM" in stderr


@pytest.mark.parametrize("stop", ["SIGTERM", "Ctrl-C"])
def test_an_error_while_stopping_is_reported_as_the_stop(monkeypatch, capfd, stop):
    """An error raised by the clean-up after Ctrl-C or SIGTERM (a call the signal interrupted, a file it left
    half written) is the stop's consequence: the command says it was stopped, with the stop's exit status."""
    import errno

    from tfrecorder import cli

    def run(args, extra):
        try:
            raise cli.Terminated if stop == "SIGTERM" else KeyboardInterrupt
        finally:
            raise OSError(errno.EINTR, "Interrupted system call")

    monkeypatch.setattr(cli, "_run", run)
    status = cli.main(["convert", "table.csv", "out"])
    said = "stopped by SIGTERM" if stop == "SIGTERM" else "interrupted"
    assert (status, capfd.readouterr().err) == (
        143 if stop == "SIGTERM" else 130,
        f"tfrecorder: {said}: run the same command again to resume where it stopped\n")
