"""The release: the wheel and sdist `python -m build` makes, the wheel installed into a fresh virtual environment
outside the source tree, and used there as a user would."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest

import tfrecorder

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_wheel_installs_and_runs_outside_the_source_tree(tmp_path):
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(dist), str(ROOT)],
                   check=True, capture_output=True, cwd=tmp_path)
    version = tfrecorder.__version__
    wheel = dist / f"tfrecorder-{version}-py3-none-any.whl"
    sdist = dist / f"tfrecorder-{version}.tar.gz"
    with zipfile.ZipFile(wheel) as built:
        names = built.namelist()
    assert "tfrecorder/py.typed" in names and "tfrecorder/cli.py" in names
    assert not any(n.startswith(("tests/", "benchmarks/")) for n in names)
    with tarfile.open(sdist) as built:
        members = [m.split("/", 1)[1] for m in built.getnames() if "/" in m]
    assert "tests/test_release.py" in members and "tfrecorder/py.typed" in members
    assert not any(m.startswith("benchmarks/data") or m.endswith(".tfrecord") for m in members)

    # A fresh virtual environment, its dependencies borrowed from this one's site-packages through a .pth
    # file (installing TensorFlow again would take minutes): tfrecorder itself only from the wheel.
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    Path(purelib, "borrowed.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps",
                    str(wheel)], check=True, capture_output=True)
    user = tmp_path / "user"  # the user's folder: no source tree in sight
    user.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    run = dict(check=True, capture_output=True, text=True, cwd=user, env=env)
    shown = subprocess.run([str(venv / "bin" / "tfrecorder"), "--version"], **run)
    assert shown.stdout.strip().endswith(version)
    (user / "data.csv").write_text("split,x,label\nTRAIN,1.5,a\nTRAIN,2.5,b\nTEST,3.5,a\n")
    subprocess.run([str(venv / "bin" / "tfrecorder"), "convert", "data.csv", "out", "--no-progress"], **run)
    loaded = subprocess.run([str(python), "-c", (
        "import tfrecorder, os; assert not tfrecorder.__file__.startswith(" + repr(str(ROOT)) + "); "
        "print(os.path.relpath(tfrecorder.__file__, " + repr(purelib) + ")); "
        "print(sum(1 for _ in tfrecorder.load_dataset('out', 'TRAIN')))")], **run)
    where, count = loaded.stdout.split()
    assert where == os.path.join("tfrecorder", "__init__.py") and count == "2"
