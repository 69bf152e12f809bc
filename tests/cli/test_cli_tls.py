"""``--ssl``, ``--insecure`` and ``--ca-certs`` through a TLS-terminating proxy in front of
each server (both serve plain HTTP): the client commands, ``generate`` and the ``bench``
loop mode each have their own TLS path."""

from __future__ import annotations

import contextlib
import shutil
import socket
import ssl
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_helpers import Run, run_script
from conftest import Server

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")


def _pump(source: socket.socket, target: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            target.sendall(data)
    with contextlib.suppress(OSError):
        target.shutdown(socket.SHUT_WR)


class TLSProxy:
    """Accepts TLS on 127.0.0.1 and forwards the plain bytes to ``backend``."""

    def __init__(self, backend: tuple[str, int], cert: Path, key: Path) -> None:
        self._backend = backend
        self._context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._context.load_cert_chain(cert, key)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._threads: list[threading.Thread] = []
        self._sockets: list[socket.socket] = []
        self._accepting = threading.Thread(target=self._accept, daemon=True)
        self._accepting.start()

    def _accept(self) -> None:
        while True:
            try:
                raw, _ = self._listener.accept()
            except OSError:
                return
            try:
                client = self._context.wrap_socket(raw, server_side=True)
            except (OSError, ssl.SSLError):
                raw.close()
                continue
            backend = socket.create_connection(self._backend)
            self._sockets += [client, backend]
            for a, b in ((client, backend), (backend, client)):
                thread = threading.Thread(target=_pump, args=(a, b), daemon=True)
                thread.start()
                self._threads.append(thread)

    def close(self) -> None:
        # shutdown() wakes the thread blocked in accept(); close() alone does not.
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        self._accepting.join(5)
        for s in self._sockets:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()
        for thread in self._threads:
            thread.join(5)


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost,IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


@pytest.fixture(scope="module")
def proxy(triton: Server, certificate: tuple[Path, Path]) -> Iterator[TLSProxy]:
    server = TLSProxy(("127.0.0.1", triton.http_port), *certificate)
    try:
        yield server
    finally:
        server.close()


def cli(proxy: TLSProxy, *args: str, host: str = "localhost") -> Run:
    return run_script(["--url", f"https://{host}:{proxy.port}", *args])


ADD_SUB = ["infer", "add_sub", "-i", "INPUT0=1,2,3,4", "-i", "INPUT1=10,20,30,40", "--json"]


def test_untrusted_certificate_is_refused(proxy: TLSProxy) -> None:
    done = cli(proxy, "model", "list")
    assert done.code == 1 and "CERTIFICATE_VERIFY_FAILED" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_insecure_and_ca_certs(proxy: TLSProxy, certificate: tuple[Path, Path]) -> None:
    insecure = cli(proxy, "--insecure", *ADD_SUB)
    assert insecure.code == 0, insecure.stderr
    assert insecure.json()["outputs"][0]["data"] == [11.0, 22.0, 33.0, 44.0]
    trusted = cli(proxy, "--ca-certs", str(certificate[0]), *ADD_SUB)
    assert trusted.code == 0, trusted.stderr
    assert cli(proxy, "--ca-certs", str(certificate[0]), "health", "ready").code == 0


def test_generate_over_tls(proxy: TLSProxy) -> None:
    done = cli(proxy, "--insecure", "generate", "text_stream", "-t", "a b c", "--stream")
    assert (done.code, done.stdout) == (0, "a b c\n")


@pytest.mark.parametrize("load", [["-c", "2"], ["-r", "100"]])
def test_bench_loop_mode_over_tls(proxy: TLSProxy, load: list[str]) -> None:
    done = cli(
        proxy,
        "--insecure",
        "--json",
        "bench",
        "add_sub",
        *load,
        "-n",
        "40",
        "--warmup",
        "0",
        "--mode",
        "loop",
    )
    assert done.code == 0, done.stderr
    level = done.json()["levels"][0]
    assert (level["requests"], level["errors"]) == (40, 0)
