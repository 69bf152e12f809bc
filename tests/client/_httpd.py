"""Small real servers on loopback sockets for the several-server, retry and trace tests.

* :class:`Recorder`: a threaded HTTP/1.1 server that records every request (method,
  path, headers) and answers from a script: ``answers`` is a list of
  ``(status, headers, body)`` used in order (the last one repeats), or a callable.
  Its health, metadata and infer answers are Triton-shaped, so the clients parse them.
* :func:`unreachable`: a listening socket whose backlog is full, so that connecting to
  it times out (a server that does not answer on connect).
* :func:`refusing_port`: a loopback port with nothing listening (connection refused).
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

Answer = tuple[int, dict[str, str], bytes]


def infer_answer(model: str = "m", value: int = 7) -> Answer:
    """A JSON-only Triton infer answer with one INT32 output ``OUT`` = [value]."""
    doc = {
        "model_name": model,
        "model_version": "1",
        "outputs": [{"name": "OUT", "datatype": "INT32", "shape": [1], "data": [value]}],
    }
    return 200, {"Content-Type": "application/json"}, json.dumps(doc).encode()


def json_answer(doc: Any, status: int = 200, **headers: str) -> Answer:
    return status, {"Content-Type": "application/json", **headers}, json.dumps(doc).encode()


def error_answer(status: int, text: str, **headers: str) -> Answer:
    return json_answer({"error": text}, status, **headers)


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Recorder:
    """A running recording server (see the module docstring)."""

    server: ThreadingHTTPServer
    seen: list[Seen] = field(default_factory=list)
    answers: list[Answer] | Callable[[Seen], Answer] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    connections: list[socket.socket] = field(default_factory=list)
    stopped: bool = False

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    @property
    def url(self) -> str:
        return f"127.0.0.1:{self.port}"

    def answer(self, seen: Seen) -> Answer:
        with self.lock:
            self.seen.append(seen)
            if callable(self.answers):
                return self.answers(seen)
            if not self.answers:
                if seen.path.endswith("/infer"):
                    return infer_answer()
                if seen.path.endswith("/generate_stream"):
                    event = b'data: {"model_name":"m","model_version":"1","OUT":7}\n\n'
                    return 200, {"Content-Type": "text/event-stream"}, event
                return json_answer({"name": "recorder", "version": "0", "extensions": []})
            if len(self.answers) > 1:
                return self.answers.pop(0)
            return self.answers[0]

    def stop(self) -> None:
        """Stop listening and close every open connection (a server that went down)."""
        if self.stopped:
            return
        self.stopped = True
        self.server.shutdown()
        self.server.server_close()
        with self.lock:
            connections = list(self.connections)
        for conn in connections:
            with suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()

    def count(self, suffix: str = "") -> int:
        with self.lock:
            return sum(1 for s in self.seen if s.path.endswith(suffix))


def _handler(recorder_box: list[Recorder]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def setup(self) -> None:
            super().setup()
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with recorder_box[0].lock:
                recorder_box[0].connections.append(self.connection)

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            seen = Seen(self.command, self.path, dict(self.headers.items()), body)
            status, headers, payload = recorder_box[0].answer(seen)
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = _serve
        do_POST = _serve

    return Handler


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away (a test's timeout or cancellation) is not an error."""


@contextmanager
def recorder(
    answers: list[Answer] | Callable[[Seen], Answer] | None = None, port: int = 0
) -> Iterator[Recorder]:
    """A :class:`Recorder` serving on 127.0.0.1 (``port``: 0 for any free one)."""
    box: list[Recorder] = []
    server = _Server(("127.0.0.1", port), _handler(box))
    rec = Recorder(server, answers=answers if answers is not None else [])
    box.append(rec)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.daemon = True
    thread.start()
    try:
        yield rec
    finally:
        rec.stop()
        thread.join(5)


@contextmanager
def unreachable() -> Iterator[str]:
    """``host:port`` of a listener whose backlog is full: connecting times out."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    for _ in range(3):
        s = socket.socket()
        s.setblocking(False)
        with suppress(BlockingIOError):
            s.connect(("127.0.0.1", port))
        fillers.append(s)
    try:
        _check_syns_dropped(port)
        yield f"127.0.0.1:{port}"
    finally:
        for s in fillers:
            s.close()
        listener.close()


def _check_syns_dropped(port: int) -> None:
    """Skip the test where this kernel answers a SYN on a full backlog (accepts or
    refuses) instead of dropping it: connecting cannot time out there."""
    probe = socket.socket()
    probe.settimeout(0.3)
    try:
        probe.connect(("127.0.0.1", port))
    except TimeoutError:
        return
    except OSError as e:
        pytest.skip(f"this kernel does not drop SYNs on a full backlog (connect: {e!r})")
    finally:
        probe.close()
    pytest.skip("this kernel does not drop SYNs on a full backlog (connect succeeded)")


def refusing_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = int(s.getsockname()[1])
    s.close()
    return port
