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


class Hits(dict):
    """Requests by path; ``arrived`` is set once any request has come (to wait on, instead of sleeping)."""

    def __init__(self):
        super().__init__()
        import threading

        self.arrived = threading.Event()


@contextmanager
def http_server(root):
    """Serve files under ``root`` on 127.0.0.1; ``/status/404/...`` answers 404 (403 likewise),
    ``/flaky/<n>/<file>`` answers 503 to its first n requests, then serves the file, ``/endless/...`` sends a
    body without end (until the client hangs up, 4 GiB at most), ``/silent/...`` never answers (until the
    server stops, 60 s at most) and ``/drip/...`` sends its headers, then a byte every 0.2 s (until the client
    hangs up, 120 s at most). Yields (base URL, hits)."""
    import http.server
    import threading
    from pathlib import Path

    hits = Hits()
    stopping = threading.Event()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            hits[self.path] = hits.get(self.path, 0) + 1
            hits.arrived.set()
            parts = self.path.split("?")[0].lstrip("/").split("/")
            if parts[0] == "status":
                return self._send(int(parts[1]), b"")
            if parts[0] == "silent":
                stopping.wait(60)
                return None
            if parts[0] == "endless":
                return self._endless()
            if parts[0] == "drip":
                return self._drip()
            if parts[0] == "flaky":
                if hits[self.path] <= int(parts[1]):
                    return self._send(503, b"busy")
                parts = parts[2:]
            path = Path(root, *parts)
            self._send(200, path.read_bytes()) if path.is_file() else self._send(404, b"")

        def _send(self, status, body):
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _endless(self):
            self.send_response(200)
            self.end_headers()  # no Content-Length: the body ends when the connection does
            chunk = b"\xff" * (1 << 20)
            try:
                for _ in range(4096):
                    if stopping.is_set():
                        return
                    self.wfile.write(chunk)
            except OSError:  # the client hung up: what the test wants
                return

        def _drip(self):
            self.send_response(200)
            self.send_header("Content-Length", "1000000")
            self.end_headers()
            try:
                for _ in range(600):  # each silence is short: only a bound on the whole read ends it
                    if stopping.wait(0.2):
                        return
                    self.wfile.write(b"\xff")
                    self.wfile.flush()
            except OSError:  # the client hung up: what the test wants
                return

        def log_message(self, *args):  # keep test output clean
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", hits
    finally:
        stopping.set()
        server.shutdown()
        server.server_close()
