"""``close()`` of the sync client ends every call in progress at once.

A call another thread makes on a server that never answers (``network_timeout=None``:
it would wait for ever), one sending a body the server does not read, one waiting for a
free connection or out a retry back-off, and a ``generate_stream`` being read: each
raises ``ClientClosedError`` soon after ``close()``, which returns soon too. The bounds
asserted (5 s) are far from the hang they guard against. Outstanding ``async_infer``
requests are waited for first, as tritonclient's ``close()`` does.

tritonclient 2.73 leaves such a call waiting: its ``close()`` returns, the call goes on
until the server answers or goes away (``test_tritonclient_close_leaves_the_call_waiting``).
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.http as ref_http
from aio._servers import SSE_HEAD, event

import tritonhttp
from tritonhttp._errors import ClientClosedError
from tritonhttp.errors import ConnectError, ConnectTimeout

from ._scripted import OK_JSON, ScriptedServer, serving
from .test_transport import certificate  # noqa: F401  (fixture)

PROMPT = 5.0  # seconds: far below the hang (for ever) and far above a prompt return


def _inputs(size: int = 1) -> list[tritonhttp.InferInput]:
    x = tritonhttp.InferInput("IN", [size], "INT32")
    x.set_data_from_numpy(np.zeros(size, dtype=np.int32))
    return [x]


def _busy(conn: socket.socket) -> None:
    conn.sendall(
        b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 30\r\n"
        b'Content-Length: 16\r\n\r\n{"error":"busy"}'
    )


@contextlib.contextmanager
def silent(answered: Callable[[bytes], bool] = lambda request: False) -> Iterator[ScriptedServer]:
    """A server that reads each request and never answers it (those for which
    ``answered(request)`` holds get ``OK_JSON``), until the test ends."""
    stop = threading.Event()

    def handler(conn: socket.socket, index: int, request: bytes) -> bool:
        if answered(request):
            conn.sendall(OK_JSON)
            return True
        stop.wait()
        return False

    with serving(handler) as server:
        try:
            yield server
        finally:
            stop.set()


@contextlib.contextmanager
def never_accepting() -> Iterator[str]:
    """A port that takes connections (the kernel's backlog) but never reads them."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield f"127.0.0.1:{listener.getsockname()[1]}"


class Call:
    """``fn()`` in a thread of its own; what it returned or raised."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.outcome: list[Any] = []

        def run() -> None:
            try:
                self.outcome.append(fn())
            except BaseException as e:
                self.outcome.append(e)

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def ended_by_close(self) -> bool:
        self.thread.join(PROMPT)
        assert not self.thread.is_alive(), "the call still waits after close()"
        assert len(self.outcome) == 1
        assert isinstance(self.outcome[0], ClientClosedError), self.outcome[0]
        return True


def _wait_until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, "the scripted server saw nothing"
        time.sleep(0.01)


def _close_promptly(client: tritonhttp.InferenceServerClient) -> None:
    closer = threading.Thread(target=client.close, daemon=True)
    closer.start()
    closer.join(PROMPT)
    assert not closer.is_alive(), "close() waits"


CONFIGS = {
    "one server": lambda url: {"url": url},
    "two servers": lambda url: {"url": [url, url]},
    "retries": lambda url: {"url": url, "retries": tritonhttp.Retry(3)},
}


@pytest.mark.parametrize("config", sorted(CONFIGS))
@pytest.mark.parametrize(
    "method",
    [
        lambda c: c.get_server_metadata(),
        lambda c: c.is_server_ready(),
        lambda c: c.infer("m", _inputs()),
        lambda c: c.generate("m", {"text_input": "x"}),
    ],
    ids=["get_server_metadata", "is_server_ready", "infer", "generate"],
)
def test_close_ends_a_call_waiting_for_its_answer(
    config: str, method: Callable[[Any], Any]
) -> None:
    """The call waited for ever (network_timeout=None) after close() had returned."""
    with silent() as server:
        client = tritonhttp.InferenceServerClient(
            **CONFIGS[config](server.url), network_timeout=None
        )
        call = Call(lambda: method(client))
        _wait_until(lambda: len(server.requests) == 1)  # the call waits for its answer
        _close_promptly(client)
        assert call.ended_by_close()
        assert len(server.take()) == 1  # not sent again


def test_close_ends_a_call_waiting_for_its_answer_over_tls(
    certificate: tuple[Path, Path],  # noqa: F811
) -> None:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*certificate)
    stop = threading.Event()

    def handler(conn: socket.socket, index: int, request: bytes) -> bool:
        stop.wait()
        return False

    with serving(handler, tls=context) as server:
        try:
            client = tritonhttp.InferenceServerClient(
                server.url,
                ssl=True,
                ssl_options={"ca_certs": str(certificate[0])},
                insecure=True,
                network_timeout=None,
            )
            call = Call(client.get_server_metadata)
            _wait_until(lambda: len(server.requests) == 1)
            _close_promptly(client)
            assert call.ended_by_close()
        finally:
            stop.set()


def test_close_ends_a_call_sending_a_body_the_server_does_not_read() -> None:
    with never_accepting() as url:
        client = tritonhttp.InferenceServerClient(url, network_timeout=None)
        call = Call(lambda: client.infer("m", _inputs(16 << 20)))  # 64 MiB
        time.sleep(0.2)  # most likely blocked in sendmsg by now (either way it must end)
        _close_promptly(client)
        assert call.ended_by_close()


def test_close_ends_a_call_still_connecting() -> None:
    """A server whose backlog is full drops the handshake: the call waited out its
    connection timeout (60 s) after close() had returned."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        address = listener.getsockname()
        with socket.create_connection(address):  # the backlog's one place, taken
            url = f"127.0.0.1:{address[1]}"
            client = tritonhttp.InferenceServerClient(url, connection_timeout=60.0)
            call = Call(client.is_server_live)
            time.sleep(0.3)  # in the handshake by now (either way it must end)
            _close_promptly(client)
            assert call.ended_by_close()


def test_a_handshake_that_times_out_or_is_refused_reads_as_before() -> None:
    """The connect errors keep their types and words: a timeout, a refusal."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        address = listener.getsockname()
        with socket.create_connection(address):
            url = f"127.0.0.1:{address[1]}"
            slow = tritonhttp.InferenceServerClient(url, connection_timeout=0.2)
            with slow, pytest.raises(ConnectTimeout, match="timed out"):
                slow.get_server_metadata()
    refused = tritonhttp.InferenceServerClient(url)
    with refused, pytest.raises(ConnectError, match="Connection refused"):
        refused.get_server_metadata()


def test_close_ends_every_thread_on_the_wire_or_waiting_for_a_connection() -> None:
    with silent() as server:
        client = tritonhttp.InferenceServerClient(server.url, concurrency=2, network_timeout=None)
        calls = [Call(client.get_server_metadata) for _ in range(5)]
        _wait_until(lambda: len(server.requests) == 2)  # two on the wire, three waiting
        _close_promptly(client)
        assert all(call.ended_by_close() for call in calls)


def test_close_ends_a_call_waiting_for_the_connection_a_stream_holds() -> None:
    """Every connection is held by a generate_stream nobody reads: a call waiting for
    one waited for ever."""
    stop = threading.Event()

    def handler(conn: socket.socket, index: int, request: bytes) -> bool:
        conn.sendall(SSE_HEAD + event(b'{"n":1}'))
        stop.wait()
        return False

    with serving(handler) as server:
        client = tritonhttp.InferenceServerClient(server.url, network_timeout=None)
        try:
            events = client.generate_stream("m", {"text_input": "x"})
            assert next(events) == {"n": 1}
            call = Call(client.get_server_metadata)
            time.sleep(0.1)  # waits for the connection (either way it must end)
            _close_promptly(client)
            assert call.ended_by_close()
            with pytest.raises(ClientClosedError):
                next(events)
        finally:
            stop.set()


def test_close_ends_a_generate_stream_being_read() -> None:
    stop = threading.Event()

    def handler(conn: socket.socket, index: int, request: bytes) -> bool:
        conn.sendall(SSE_HEAD + event(b'{"n":1}'))
        stop.wait()
        return False

    with serving(handler) as server:
        client = tritonhttp.InferenceServerClient(server.url, network_timeout=None)
        seen: list[Any] = []
        first = threading.Event()

        def read() -> None:
            for item in client.generate_stream("m", {"text_input": "x"}):
                seen.append(item)
                first.set()

        try:
            call = Call(read)
            assert first.wait(10)
            _close_promptly(client)
            assert call.ended_by_close()
            assert seen == [{"n": 1}]
        finally:
            stop.set()


def _infer_sent_inline(request: bytes) -> bool:
    return b"/infer" not in request.split(b"\r\n", 1)[0]


@pytest.mark.parametrize("path", ["from the caller's thread", "by a thread"])
def test_close_waits_for_async_infer_answers_as_tritonclient_does(path: str) -> None:
    """close() first waits for the outstanding async_infer requests (tritonclient's
    close() does too): each keeps its answer; one that never comes ends at the request's
    network_timeout, not later."""
    answers = threading.Event()

    def handler(conn: socket.socket, index: int, request: bytes) -> bool:
        if b"/infer" in request.split(b"\r\n", 1)[0]:
            answers.wait(10)
        conn.sendall(OK_JSON)
        return True

    with serving(handler) as server:
        client = tritonhttp.InferenceServerClient(server.url, network_timeout=30)
        if path == "from the caller's thread":
            client.get_server_metadata()  # an idle connection: the request goes out inline
        requests = [client.async_infer("m", _inputs()) for _ in range(2)]
        assert (requests[0]._flight is not None) == (path == "from the caller's thread")
        _wait_until(lambda: any(b"/infer" in r for r in server.requests))
        closer = threading.Thread(target=client.close, daemon=True)
        closer.start()
        closer.join(0.3)
        assert closer.is_alive(), "close() did not wait for the outstanding requests"
        answers.set()
        closer.join(PROMPT)
        assert not closer.is_alive()
        for request in requests:
            assert request.get_result(block=False).get_response() == {"name": "ok"}

    with silent(answered=_infer_sent_inline) as server:
        client = tritonhttp.InferenceServerClient(server.url, network_timeout=1.0)
        if path == "from the caller's thread":
            client.get_server_metadata()
        request = client.async_infer("m", _inputs())
        _wait_until(lambda: any(b"/infer" in r for r in server.requests))
        _close_promptly(client)  # the answer never comes: network_timeout ends the wait
        with pytest.raises(TimeoutError):
            request.get_result(block=False)


def test_close_ends_an_async_infer_waiting_out_a_back_off() -> None:
    """A retried async_infer request waiting out its back-off (Retry-After: 30) ends at
    once with ClientClosedError, and so does close()."""

    def handler(conn: socket.socket, index: int, request: bytes) -> bool:
        _busy(conn)
        return True

    with serving(handler) as server:
        retries = tritonhttp.Retry(3, backoff_max=30.0, methods={"infer"})
        client = tritonhttp.InferenceServerClient(server.url, retries=retries)
        request = client.async_infer("m", _inputs())
        _wait_until(lambda: any(b"/infer" in r for r in server.requests))
        time.sleep(0.1)  # the 503 is read: the request waits out its back-off
        waiting = Call(request.get_result)
        _close_promptly(client)
        assert waiting.ended_by_close()
        with pytest.raises(ClientClosedError):
            request.get_result(block=False)
        assert sum(b"/infer" in r for r in server.take()) == 1


def test_close_twice_with_nothing_in_flight_and_calls_after_close() -> None:
    with serving(lambda conn, index, request: conn.sendall(OK_JSON) or True) as server:
        client = tritonhttp.InferenceServerClient(server.url, concurrency=2)
        assert client.get_server_metadata() == {"name": "ok"}
        for _ in range(2):
            _close_promptly(client)
        for method in (
            lambda: client.get_server_metadata(),
            lambda: client.is_server_live(),
            lambda: client.infer("m", _inputs()),
            lambda: client.async_infer("m", _inputs()),
            lambda: client.generate_stream("m", {"text_input": "x"}),
        ):
            with pytest.raises(ClientClosedError):
                method()
        with contextlib.closing(tritonhttp.InferenceServerClient(server.url)) as other:
            assert other.get_server_metadata() == {"name": "ok"}  # the server is fine


def _infer_ok(conn: socket.socket, index: int, request: bytes) -> bool:
    body = (
        b'{"model_name":"m","outputs":[{"name":"OUT","datatype":"INT32","shape":[1],"data":[7]}]}'
    )
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    return True


def test_an_async_infer_answered_before_close_keeps_its_result() -> None:
    with serving(_infer_ok) as server:
        client = tritonhttp.InferenceServerClient(server.url)
        client.get_server_metadata()
        inline = client.async_infer("m", _inputs())
        assert inline._flight is not None
        result = inline.get_result()
        _close_promptly(client)
        assert inline.get_result(block=False) is result
        assert result.as_numpy("OUT").tolist() == [7]


def test_tritonclient_close_leaves_the_call_waiting() -> None:
    """The reference, for the docs: tritonclient 2.73's close() returns at once, and the
    call another thread makes goes on waiting until its network_timeout."""
    with silent() as server:
        client = ref_http.InferenceServerClient(server.url, network_timeout=2.0)
        call = Call(client.get_server_metadata)
        _wait_until(lambda: len(server.requests) == 1)
        closer = threading.Thread(target=client.close, daemon=True)
        closer.start()
        closer.join(PROMPT)
        assert not closer.is_alive()
        call.thread.join(0.5)
        assert call.thread.is_alive()  # still waiting for its answer
        call.thread.join(PROMPT + 2.0)
        assert not call.thread.is_alive()
        assert isinstance(call.outcome[0], TimeoutError)  # its network_timeout
