"""The cores a process may use (tfrecorder.machine): a cgroup's CPU quota and the CPU affinity bound the writer
processes and reading threads, not the machine's count of cores (a container on a large host)."""

from __future__ import annotations

import os
import sys

import pytest

from tfrecorder import machine


def _tree(root, files: dict[str, str]):
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_a_cgroup_v2_quota_and_its_parents_bound_the_cores(tmp_path):
    _tree(tmp_path, {"self": "0::/kubepods/pod1/box\n", "fs/kubepods/cpu.max": "400000 100000\n",
                     "fs/kubepods/pod1/cpu.max": "max 100000\n", "fs/kubepods/pod1/box/cpu.max": "150000 100000\n"})
    assert machine.cpu_quota(str(tmp_path / "fs"), str(tmp_path / "self")) == 1.5
    (tmp_path / "fs/kubepods/pod1/box/cpu.max").write_text("max 100000\n")
    assert machine.cpu_quota(str(tmp_path / "fs"), str(tmp_path / "self")) == 4.0  # the parent's


def test_a_cgroup_v1_quota_is_read_where_a_container_sees_its_own_cgroup(tmp_path):
    # the membership names the host's path; the container's cpu controller shows its own cgroup at the mount
    _tree(tmp_path, {"self": "4:memory:/docker/abc\n1:cpu,cpuacct:/docker/abc\n0::/\n",
                     "fs/cpu,cpuacct/cpu.cfs_quota_us": "200000\n", "fs/cpu,cpuacct/cpu.cfs_period_us": "100000\n"})
    assert machine.cpu_quota(str(tmp_path / "fs"), str(tmp_path / "self")) == 2.0


@pytest.mark.parametrize("files", [{}, {"self": "1:cpu:/\n0::/\n", "fs/cpu/cpu.cfs_quota_us": "-1\n",
                                        "fs/cpu/cpu.cfs_period_us": "100000\n"},
                                   {"self": "0::/\n", "fs/cpu.max": "max 100000\n"},
                                   {"self": "0::/\n", "fs/cpu.max": "garbage\n"}])
def test_no_quota_is_none(tmp_path, files):
    _tree(tmp_path, files)
    assert machine.cpu_quota(str(tmp_path / "fs"), str(tmp_path / "self")) is None


def test_the_writers_are_as_many_as_the_quota_allows(monkeypatch):
    """A container limited to 1.2 CPUs of a 64-core host: two busy cores at most, so two writer processes and
    two reading threads a shard, not 64."""
    from tfrecorder.write.record import shard
    from tfrecorder.write.runners import local
    from tfrecorder.write.settings import ImageSettings, WriteOptions

    machine.cores.cache_clear()
    monkeypatch.setattr(machine, "cpu_quota", lambda: 1.2)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(64)), raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    try:
        assert machine.cores() == 2
        options = WriteOptions(ImageSettings(), None, "report")
        how = local.parallelism([50_000] * 8, options, images=False, remote=False, workers=None)
        assert how.processes == (2 if sys.platform == "linux" else 1)  # forked writers: Linux only
        assert shard.default_workers(remote=False) == 2
    finally:
        machine.cores.cache_clear()
