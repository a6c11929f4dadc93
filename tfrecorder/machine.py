"""What this machine lets the process use: ``cores()``, the one count every thread pool and writer process is
sized by. ``os.cpu_count()`` counts the machine's cores, also inside a container that may use two of them."""

from __future__ import annotations

import functools
import math
import os

CGROUP_ROOT = "/sys/fs/cgroup"


@functools.lru_cache(maxsize=1)
def cores() -> int:
    """The cores this process may keep busy: those it may run on (its CPU affinity: a container's cpuset,
    ``taskset``), fewer where a cgroup's CPU quota allows less (``docker --cpus``, a Kubernetes limit), at least
    one. Read once a process."""
    try:
        allowed = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # macOS, Windows: no affinity
        allowed = os.cpu_count() or 1
    quota = cpu_quota()
    return max(1, min(allowed, math.ceil(quota)) if quota is not None else allowed)


def cpu_quota(root: str = CGROUP_ROOT, membership: str = "/proc/self/cgroup") -> float | None:
    """The CPUs a cgroup quota allows this process (cgroup v2's ``cpu.max``, v1's ``cpu.cfs_quota_us`` over its
    period), the smallest of its cgroup's and every parent's; None where none is set or none can be read."""
    try:
        with open(membership) as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    quotas = []
    for line in lines:
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if controllers == "":  # v2: one hierarchy, mounted at the root
            quotas += [_v2(folder) for folder in _folders(root, path)]
        elif "cpu" in controllers.split(","):
            mount = next((os.path.join(root, name) for name in (controllers, "cpu", "cpu,cpuacct")
                          if os.path.isdir(os.path.join(root, name))), None)
            if mount is not None:
                quotas += [_v1(folder) for folder in _folders(mount, path)]
    found = [q for q in quotas if q is not None]
    return min(found) if found else None


def _folders(mount: str, path: str) -> list[str]:
    """The cgroup ``path``'s folder under ``mount`` and its parents'; the mount itself too (a container sees its
    own cgroup there while its membership file names the host's path)."""
    parts = [p for p in path.strip("/").split("/") if p]
    folders = [os.path.join(mount, *parts[:i]) for i in range(len(parts), 0, -1)]
    return [f for f in folders if os.path.isdir(f)] + [mount]


def _v2(folder: str) -> float | None:
    try:
        with open(os.path.join(folder, "cpu.max")) as f:
            quota, period = f.read().split()[:2]
        return None if quota == "max" or int(period) <= 0 else int(quota) / int(period)
    except (OSError, ValueError):
        return None


def _v1(folder: str) -> float | None:
    try:
        with open(os.path.join(folder, "cpu.cfs_quota_us")) as f:
            quota = int(f.read())
        with open(os.path.join(folder, "cpu.cfs_period_us")) as f:
            period = int(f.read())
    except (OSError, ValueError):
        return None
    return quota / period if quota > 0 and period > 0 else None
