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
    from tfrecorder.dataset.gcs import BoundedGCSFileSystem

    BoundedGCSFileSystem.clear_instance_cache()


class Hits(dict):
    """Requests by path; ``arrived`` is set once any request has come (to wait on, instead of sleeping)."""

    def __init__(self):
        super().__init__()
        import threading

        self.arrived = threading.Event()
        self._changed = threading.Condition()

    def count(self, path: str) -> int:
        """One more request for ``path``; how many so far. Handlers run on threads of their own: two requests
        at once for one path both count."""
        with self._changed:
            self[path] = self.get(path, 0) + 1
            self.arrived.set()
            self._changed.notify_all()
            return self[path]

    def reach(self, path: str, n: int, seconds: float = 60.0) -> int:
        """The requests for ``path`` once there are ``n`` (or ``seconds`` have passed). A client that gave up on
        a request (its timeout) may be done before the server's thread for it has counted it."""
        with self._changed:
            self._changed.wait_for(lambda: self.get(path, 0) >= n, seconds)
            return self.get(path, 0)


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
            seen = hits.count(self.path)
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
                if seen <= int(parts[1]):
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


class Relay:
    """A TCP relay on 127.0.0.1 in front of ``upstream`` (host, port) that injects the faults of a network and a
    store: ``refuse()`` (nothing listens: connection refused), ``flaky(fail, reset, seed)`` (that fraction of
    requests answers 503, that fraction is reset: a read in the middle of its answer, a write before it reaches
    the store), ``after(n, fault)`` (from the n-th request on, "refuse" or "silent": connections are accepted,
    the requests read, and nothing ever answers; or "stall": request n only never answers) and ``heal()``.
    ``held`` is set once a request is being held without an answer (to wait on, instead of sleeping);
    ``requests`` counts requests seen.

    The emulator answers one request per connection (HTTP/1.0), so a connection is a request: the upstream
    connection is opened only once the request's first bytes have come."""

    def __init__(self, upstream: tuple[str, int]):
        import random
        import threading

        self.upstream = upstream
        self.requests = 0
        self.failed = 0  # requests answered 503 or reset by flaky()
        self.held = threading.Event()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._fault: tuple = ("pass",)
        self._pending: tuple | None = None  # (from request n on, fault)
        self._stalls = 0
        self._random = random.Random(0)
        self._sockets: set = set()
        self._listener = None
        self.port = free_port()
        self._listen()

    @property
    def address(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _listen(self) -> None:
        import threading

        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def _accept(self, listener) -> None:
        import threading

        while True:
            try:
                client, _ = listener.accept()
            except OSError:  # closed: refuse() or close()
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def refuse(self) -> None:
        with self._lock:
            self._fault = ("refuse",)
        self._stop_listening()

    def flaky(self, fail: float, reset: float, seed: int = 0) -> None:
        import random

        with self._lock:
            self._fault = ("flaky", fail, reset)
            self._random = random.Random(seed)

    def after(self, n: int, fault: str) -> None:
        """From request number ``n`` on (counting from 1), ``fault`` ("refuse", "silent"; "stall": request n
        only)."""
        with self._lock:
            self._pending = (n, fault)

    def heal(self) -> None:
        with self._lock:
            self._fault, self._pending, self._stalls = ("pass",), None, 0
            self.held.clear()
            listening = self._listener is not None
        self._drop_all()
        if not listening:
            self._listen()

    def close(self) -> None:
        self._stop.set()
        self._stop_listening()

    def _stop_listening(self) -> None:
        """Close the listening socket (new connections are refused) and every connection open."""
        with self._lock:
            listener, self._listener = self._listener, None
        if listener is not None:
            _close(listener)
        self._drop_all()

    def _drop_all(self) -> None:
        with self._lock:
            sockets, self._sockets = list(self._sockets), set()
        for s in sockets:
            _close(s)

    def _serve(self, client) -> None:
        import struct

        with self._lock:
            self._sockets.add(client)
        try:
            first = client.recv(65536)
            if not first:
                return
            with self._lock:
                self.requests += 1
                if self._pending and self.requests >= self._pending[0]:
                    if self._pending[1] == "stall":
                        self._stalls += 1
                    else:
                        self._fault = (self._pending[1],)
                    self._pending = None
                fault = self._fault
                stalled = fault[0] == "pass" and self._stalls > 0
                self._stalls -= stalled
                draw = self._random.random()
            if fault[0] == "refuse":  # this request, and every later one, finds nothing listening
                self.refuse()
                return
            if fault[0] in ("silent", "refuse") or stalled:
                self.held.set()
                while not self._stop.is_set() and client.recv(65536):  # read and drop; the client hangs up
                    pass
                return
            if fault[0] == "flaky" and draw < fault[1]:
                self.failed += 1
                client.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                return
            reset = fault[0] == "flaky" and draw < fault[1] + fault[2]
            self.failed += reset
            if reset and not first.startswith(b"GET "):
                # a write is reset before it reaches the emulator: the emulator forgets an upload once it is
                # complete, so a resent last block would be a 404 there (GCS itself answers it with the object)
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                client.close()
                return
            self._pipe(client, first, reset)
        except (OSError, ValueError):  # its socket was closed under it (refuse(), close()): select() says -1
            return
        finally:
            with self._lock:
                self._sockets.discard(client)
            _close(client)

    def _pipe(self, client, first: bytes, reset: bool) -> None:
        import select
        import struct

        upstream = socket.create_connection(self.upstream)
        try:
            upstream.sendall(first)
            answered = 0
            while True:
                ready, _, _ = select.select([client, upstream], [], [], 5)
                if self._stop.is_set():
                    return
                for s in ready:
                    data = s.recv(65536)
                    if not data:
                        return
                    if s is upstream:
                        if reset and answered + len(data) > 16:  # part of the answer, then a reset
                            client.sendall(data[:16])
                            client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                            client.close()  # with no linger, a reset (not a shutdown's orderly end)
                            return
                        answered += len(data)
                        client.sendall(data)
                    else:
                        upstream.sendall(data)
        finally:
            _close(upstream)


def _close(s) -> None:
    """Close a socket so that a thread blocked on it wakes: shutdown() first (close() alone does not)."""
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    s.close()
