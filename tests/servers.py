"""Real servers on 127.0.0.1 for the tests: a GCS emulator (gcp-storage-emulator) in its own process."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until_up(url: str, seconds: float = 30.0) -> None:
    """Poll ``url`` until it answers (bounded), so tests start only once the server listens."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            urllib.request.urlopen(url, timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


@contextmanager
def gcs_emulator(bucket: str):
    """Run gcp-storage-emulator (in memory) with ``bucket``; yields its http://127.0.0.1:PORT address."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "gcp_storage_emulator", "start", "--host", "127.0.0.1", "--port", str(port),
         "--in-memory", "--default-bucket", bucket, "-q"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,  # never a pipe nobody drains
    )
    address = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(f"{address}/storage/v1/b")
        yield address
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def use_emulator(address: str) -> None:
    """Point gcsfs (and child processes such as Beam workers) at the emulator."""
    os.environ["STORAGE_EMULATOR_HOST"] = address
    import fsspec

    fsspec.filesystem("gs").clear_instance_cache()
