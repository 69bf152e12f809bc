"""Transport behaviour with real sockets: failures, timeouts, keep-alive, retries, TLS.

Small scripted servers on 127.0.0.1 misbehave on purpose; tritonclient.http runs the
same scenario where its behaviour is the reference.
"""

from __future__ import annotations

import gc
import pickle
import re
import shutil
import socket
import ssl
import subprocess
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.http as ref_http

import tritonhttp
from tritonhttp import _errors

from ._scripted import (
    OK_JSON,
    ScriptedServer,
    answer_ok,
    closed_port,
    full_backlog_port,
    serving,
)

# -- unreachable servers and timeouts ----------------------------------------------------


def test_connection_refused_names_the_url_and_stays_catchable() -> None:
    url = f"127.0.0.1:{closed_port()}"
    with tritonhttp.InferenceServerClient(url) as client:
        assert client.is_server_live() is False  # tritonclient raises instead
        assert client.is_server_ready() is False
        assert client.is_model_ready("m") is False
        with pytest.raises(ConnectionRefusedError) as info:
            client.get_server_metadata()
        assert isinstance(info.value, tritonhttp.InferenceServerException)
        assert isinstance(info.value, _errors.ConnectError)
        assert f"http://{url}" in str(info.value)
    with ref_http.InferenceServerClient(url) as ref, pytest.raises(ConnectionRefusedError):
        ref.is_server_live()


def test_unresolvable_host_is_a_connect_error() -> None:
    with tritonhttp.InferenceServerClient("no-such-host.invalid:8000") as client:
        with pytest.raises(socket.gaierror) as info:
            client.get_server_metadata()
        assert isinstance(info.value, _errors.ConnectError)
        assert "no-such-host.invalid" in str(info.value)
        assert client.is_server_live() is False


def test_silent_server_times_out_instead_of_hanging() -> None:
    silence = 1.5

    def silent(conn: socket.socket, index: int, request: bytes) -> bool:
        time.sleep(silence)
        return False

    with serving(silent) as server:
        for module in (tritonhttp, ref_http):
            with module.InferenceServerClient(server.url, network_timeout=0.3) as client:
                start = time.monotonic()
                with pytest.raises(TimeoutError) as info:
                    client.get_server_metadata()
                elapsed = time.monotonic() - start
                # after its 0.3 s timeout, before the server's silence ended
                assert 0.3 * 0.9 <= elapsed < silence, (module, elapsed)
        assert isinstance(info.value, TimeoutError)
        with tritonhttp.InferenceServerClient(server.url, network_timeout=0.3) as client:
            with pytest.raises(_errors.ReadTimeout, match=re.escape(server.url)):
                client.get_server_metadata()
            assert client.is_server_live() is False


def syn_drop_time(port: int, timeout: float = 0.3) -> float:
    """How long a plain ``connect`` to ``port`` (a full backlog) takes to time out after
    ``timeout``: the baseline of the connect-timeout tests. Skips where the kernel
    answers the SYN (accepts or refuses) instead of dropping it: there is no timeout to
    test then."""
    probe = socket.socket()
    probe.settimeout(timeout)
    start = time.monotonic()
    try:
        probe.connect(("127.0.0.1", port))
    except TimeoutError:
        return time.monotonic() - start
    except OSError as e:
        pytest.skip(f"this kernel does not drop SYNs on a full backlog (connect: {e!r})")
    finally:
        probe.close()
    pytest.skip("this kernel does not drop SYNs on a full backlog (connect succeeded)")


def test_connect_timeout() -> None:
    with (
        full_backlog_port() as port,
        tritonhttp.InferenceServerClient(f"127.0.0.1:{port}", connection_timeout=0.3) as client,
    ):
        baseline = syn_drop_time(port)
        start = time.monotonic()
        with pytest.raises(_errors.ConnectTimeout):  # (any other error fails the test)
            client.get_server_metadata()
        elapsed = time.monotonic() - start
        assert elapsed >= 0.3 * 0.9  # the timeout had to pass
        assert elapsed < 5 * baseline  # ...and no retry loop nor hang after it


def test_use_after_close_is_a_runtime_error() -> None:
    with serving(answer_ok) as server:
        client = tritonhttp.InferenceServerClient(server.url)
        assert client.get_server_metadata() == {"name": "ok"}
        client.close()
        client.close()  # idempotent
        for call in (
            client.get_server_metadata,
            client.is_server_live,
            lambda: client.async_infer("m", []),
        ):
            with pytest.raises(RuntimeError) as info:
                call()
            assert isinstance(info.value, tritonhttp.InferenceServerException)


# -- keep-alive and retries --------------------------------------------------------------


def test_connections_are_kept_alive_and_bounded() -> None:
    with (
        serving(answer_ok) as server,
        tritonhttp.InferenceServerClient(server.url, concurrency=3) as client,
    ):
        for _ in range(20):
            client.get_server_metadata()
        assert server.connections == 1
        threads = [
            threading.Thread(target=lambda: [client.get_server_metadata() for _ in range(20)])
            for _ in range(8)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert 1 <= server.connections <= 3


def test_idle_connection_closed_by_the_server_is_replaced() -> None:
    """The server drops each connection after answering (without Connection: close)."""

    def one_per_connection(conn: socket.socket, index: int, request: bytes) -> bool:
        if request.startswith(b"POST"):
            header = (
                b'{"outputs":[{"name":"O","datatype":"INT32","shape":[1],'
                b'"parameters":{"binary_data_size":4}}]}'
            )
            body = header + b"\x07\x00\x00\x00"
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nInference-Header-Content-Length: %d\r\n"
                b"Content-Length: %d\r\n\r\n" % (len(header), len(body)) + body
            )
        else:
            conn.sendall(OK_JSON)
        return False

    inputs = [tritonhttp.InferInput("I", [1], "INT32").set_data_from_numpy(np.ones(1, np.int32))]
    with serving(one_per_connection) as server:
        with tritonhttp.InferenceServerClient(server.url) as client:
            for _ in range(3):
                assert client.get_server_metadata() == {"name": "ok"}
                time.sleep(0.05)
                assert client.infer("m", inputs).as_numpy("O").tolist() == [7]
                time.sleep(0.05)
        assert len(server.requests) == 6  # every request reached the server exactly once


def drop_second_request(conn: socket.socket, index: int, request: bytes) -> bool:
    """Answer the first request of a connection; read the second and hang up."""
    if index == 0:
        conn.sendall(OK_JSON)
        return True
    return False


def test_safe_requests_are_retried_once_on_a_fresh_connection() -> None:
    with serving(drop_second_request) as server:
        with tritonhttp.InferenceServerClient(server.url) as client:
            assert client.get_server_metadata() == {"name": "ok"}
            assert client.get_server_metadata() == {"name": "ok"}  # retried
        assert len(server.requests) == 3
        assert server.connections == 2


def test_posts_that_reached_the_server_are_not_retried() -> None:
    with serving(drop_second_request) as server:
        with tritonhttp.InferenceServerClient(server.url) as client:
            client.get_model_repository_index()  # 200 with a JSON body
            with pytest.raises(ConnectionResetError) as info:
                client.get_model_repository_index()
            assert isinstance(info.value, _errors.TransportError)
            assert server.url in str(info.value)
        assert len(server.requests) == 2  # not sent again


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        (b"NOT HTTP AT ALL\r\n\r\n", _errors.ProtocolError),
        (b'HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n{"partial', ConnectionResetError),
        (b"", ConnectionResetError),
    ],
)
def test_broken_answers(reply: bytes, error: type[Exception]) -> None:
    def broken(conn: socket.socket, index: int, request: bytes) -> bool:
        conn.sendall(reply)
        return False

    with serving(broken) as server, tritonhttp.InferenceServerClient(server.url) as client:
        with pytest.raises(error) as info:
            client.get_server_metadata()
        assert isinstance(info.value, tritonhttp.InferenceServerException)


def test_chunked_and_interim_responses() -> None:
    def chunked(conn: socket.socket, index: int, request: bytes) -> bool:
        conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
        conn.sendall(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            b'5\r\n{"a":\r\n3\r\n12}\r\n0\r\n\r\n'
        )
        return True

    with serving(chunked) as server:
        with tritonhttp.InferenceServerClient(server.url) as client:
            assert client.get_server_metadata() == {"a": 12}
            assert client.get_server_metadata() == {"a": 12}
        assert server.connections == 1


def test_close_delimited_body() -> None:
    def until_close(conn: socket.socket, index: int, request: bytes) -> bool:
        conn.sendall(b'HTTP/1.0 200 OK\r\n\r\n{"b": [1, 2]}')
        return False

    with serving(until_close) as server, tritonhttp.InferenceServerClient(server.url) as client:
        assert client.get_server_metadata() == {"b": [1, 2]}
        assert client.get_server_metadata() == {"b": [1, 2]}


def test_invalid_header_values_fail_before_sending() -> None:
    with serving(answer_ok) as server:
        with tritonhttp.InferenceServerClient(server.url) as client:
            with pytest.raises(ValueError, match="invalid value") as info:
                client.get_server_metadata(headers={"X-Bad": "a\r\nInjected: 1"})
            assert isinstance(info.value, tritonhttp.InferenceServerException)
            with pytest.raises(ValueError, match="field name"):
                client.get_server_metadata(headers={"Bad Name": "1"})
            with pytest.raises(ValueError, match="model version"):
                client.get_model_metadata("m", "1 HTTP/1.1")
        assert server.requests == []


# -- exceptions, lifecycle ---------------------------------------------------------------


def test_exceptions_pickle() -> None:
    url = f"127.0.0.1:{closed_port()}"
    raised = []
    with tritonhttp.InferenceServerClient(url) as client:
        with pytest.raises(tritonhttp.InferenceServerException) as info:
            client.get_server_metadata()
        raised.append(info.value)
    raised += [
        _errors.server_error(404, "not found", "details"),
        tritonhttp.InferenceServerException("plain", "400", "d"),
        tritonhttp.InferenceServerException(msg="no status"),
        _errors.transport_error(TimeoutError("timed out"), "http://h:1", connecting=False),
    ]
    for exc in raised:
        copy = pickle.loads(pickle.dumps(exc))
        assert type(copy) is type(exc)
        assert (str(copy), copy.status(), copy.message(), copy.debug_details()) == (
            str(exc),
            exc.status(),
            exc.message(),
            exc.debug_details(),
        )
    assert "not found" in repr(raised[1])


def test_no_io_in_del_and_a_resource_warning_when_left_open() -> None:
    with pytest.raises(tritonhttp.InferenceServerException, match="scheme"):
        tritonhttp.InferenceServerClient("http://localhost:8000")
    gc.collect()  # a half-built client must not complain from __del__
    with serving(answer_ok) as server:
        client = tritonhttp.InferenceServerClient(server.url)
        client.get_server_metadata()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            del client
            gc.collect()
        assert any(issubclass(w.category, ResourceWarning) for w in caught)


# -- TLS ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make a test certificate")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            "-keyout", str(key), "-out", str(cert), "-subj", "/CN=localhost",
            "-addext", "subjectAltName=DNS:localhost",
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key


@pytest.fixture
def tls_server(certificate: tuple[Path, Path]) -> Iterator[ScriptedServer]:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*certificate)
    with serving(answer_ok, tls=context) as server:
        yield server


def _tls_outcome(module: Any, url: str, **kw: Any) -> Any:
    try:
        with module.InferenceServerClient(url, ssl=True, **kw) as client:
            return client.get_server_metadata()
    except ssl.SSLError as e:
        return ("ssl-error", isinstance(e, tritonhttp.InferenceServerException))


def test_tls_options_behave_like_tritonclient(
    tls_server: ScriptedServer, certificate: tuple[Path, Path]
) -> None:
    cert = str(certificate[0])
    by_ip = tls_server.url  # the certificate names "localhost", not 127.0.0.1
    by_name = f"localhost:{tls_server.port}"

    def factory(cafile: str | None = None) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=cert)

    cases: list[tuple[str, dict[str, Any]]] = [
        (by_name, {"ssl_options": {"ca_certs": cert}}),
        (by_ip, {"ssl_options": {"ca_certs": cert}}),
        (by_ip, {"ssl_options": {"ca_certs": cert}, "insecure": True}),
        (by_name, {"ssl_context_factory": factory}),
        (by_name, {}),  # unknown CA
    ]
    for url, kw in cases:
        ours = _tls_outcome(tritonhttp, url, **kw)
        ref = _tls_outcome(ref_http, url, **kw)
        if isinstance(ref, tuple):
            assert ours == ("ssl-error", True), (url, kw)
        else:
            assert ours == ref == {"name": "ok"}, (url, kw)
    with tritonhttp.InferenceServerClient(
        by_ip, ssl=True, ssl_options={"cert_reqs": ssl.CERT_NONE}
    ) as client:
        assert client.get_server_metadata() == {"name": "ok"}
        assert client.is_server_live() is True


def test_an_early_error_answer_is_shown_instead_of_a_broken_pipe() -> None:
    """The server refuses a large body after its head (client#866): show its answer."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]

    def refuse() -> None:
        conn, _ = listener.accept()
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            body = b'{"error":"request entity too large"}'
            conn.sendall(
                b"HTTP/1.1 413 Payload Too Large\r\nContent-Length: %d\r\n\r\n" % len(body) + body
            )
            conn.shutdown(socket.SHUT_WR)
            time.sleep(0.2)
            # closing with unread data makes the kernel reset the connection

    thread = threading.Thread(target=refuse)
    thread.start()
    big = np.zeros(32 << 20, np.uint8)
    try:
        with tritonhttp.InferenceServerClient(f"127.0.0.1:{port}") as client:
            inputs = [tritonhttp.InferInput("I", [big.size], "UINT8").set_data_from_numpy(big)]
            with pytest.raises(tritonhttp.InferenceServerException) as info:
                client.infer("m", inputs)
        assert str(info.value) == "[413] request entity too large"
    finally:
        thread.join(5)
        listener.close()
