"""A server child process on loopback ports: what the bundled server's launcher
(``tritonhttp.server._launch``) and real Triton's (``_real_triton``) have in common.

Free ports, the ``--model-repository`` flags, the log, and waiting until the server is
live (and ready); each launcher keeps its own command line and its own way to stop.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeAlias, TypeVar

__all__ = [
    "Repositories",
    "ServerProcess",
    "free_port",
    "free_ports",
    "http_status",
    "repository_flags",
    "stopping",
    "wait_until_up",
]

#: one model repository or several
Repositories: TypeAlias = "str | os.PathLike[str] | Sequence[str | os.PathLike[str]]"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """``count`` different TCP ports on 127.0.0.1 that were free a moment ago (all held
    until every one is picked: separate :func:`free_port` calls may return one twice)."""
    with contextlib.ExitStack() as stack:
        ports = []
        for _ in range(count):
            s = stack.enter_context(socket.socket())
            s.bind(("127.0.0.1", 0))
            ports.append(int(s.getsockname()[1]))
        return ports


def http_status(url: str) -> int | None:
    """The status of a GET on ``url``, or None when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return int(e.code)
    except OSError:
        return None


def repository_flags(model_repository: Repositories) -> list[str]:
    """``--model-repository=<absolute path>`` for each repository."""
    repos = (
        [model_repository]
        if isinstance(model_repository, (str, os.PathLike))
        else list(model_repository)
    )
    return [f"--model-repository={Path(r).resolve()}" for r in repos]


@dataclass
class ServerProcess:
    """A server child process whose HTTP endpoint is 127.0.0.1:``http_port``."""

    process: subprocess.Popen[bytes]
    http_port: int
    metrics_port: int
    log_path: Path
    args: list[str]

    @property
    def url(self) -> str:
        """``host:port`` as tritonclient expects it."""
        return f"127.0.0.1:{self.http_port}"

    @property
    def metrics_url(self) -> str:
        return f"127.0.0.1:{self.metrics_port}"

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def stop(self, timeout: float = 15.0) -> int | None:
        """Stop the process (each launcher knows how); returns the exit status if known."""
        raise NotImplementedError


Server = TypeVar("Server", bound=ServerProcess)


def wait_until_up(
    server: ServerProcess, what: str, *, wait_ready: bool, timeout: float, poll: float
) -> None:
    """Wait until ``server`` is live (and ready); on exit or timeout, stop it and raise
    RuntimeError with the end of its log (``what`` names it)."""
    deadline = time.monotonic() + timeout
    base = f"http://{server.url}/v2/health/"
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            server.stop()  # what it started (real Triton's stubs) may outlive it
            raise RuntimeError(
                f"{what} exited with {server.process.returncode}:\n{server.log()[-4000:]}"
            )
        # (403: health is a restricted API; both servers open the port only once their
        # startup models are loaded, so an answer is as good as a ready one)
        live = http_status(base + "live") in (200, 403)
        if live and (not wait_ready or http_status(base + "ready") in (200, 403)):
            return
        time.sleep(poll)
    server.stop()
    raise RuntimeError(f"{what} did not become ready in {timeout}s:\n{server.log()[-4000:]}")


@contextlib.contextmanager
def stopping(server: Server) -> Iterator[Server]:
    """Hand ``server`` to a ``with`` block and always stop it afterwards."""
    try:
        yield server
    finally:
        server.stop()
