"""Start the bundled server as a child process on free loopback ports (tests, benchmarks)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["BundledServer", "running", "start"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _status(url: str) -> int | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return int(e.code)
    except OSError:
        return None


@dataclass
class BundledServer:
    """A running ``python -m tritonhttp.server`` child process."""

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
        """SIGTERM, wait, then SIGKILL if needed; returns the exit status."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        return self.process.returncode


def start(
    model_repository: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *extra_args: str,
    wait_ready: bool = True,
    timeout: float = 60.0,
    log_path: str | os.PathLike[str] | None = None,
) -> BundledServer:
    """Start the server on free ports and wait until it is live (and ready)."""
    repos = (
        [model_repository]
        if isinstance(model_repository, (str, os.PathLike))
        else list(model_repository)
    )
    http, metrics = _free_port(), _free_port()
    args = [sys.executable, "-m", "tritonhttp.server"]
    args += [f"--model-repository={Path(r).resolve()}" for r in repos]
    args += [f"--http-port={http}", f"--metrics-port={metrics}", *extra_args]
    log = (
        Path(log_path)
        if log_path
        else Path(tempfile.gettempdir()) / f"tritonhttp-server-{http}.log"
    )
    with open(log, "wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
    server = BundledServer(proc, http, metrics, log, args)
    deadline = time.monotonic() + timeout
    base = f"http://127.0.0.1:{http}/v2/health/"
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(
                f"tritonhttp.server exited with {proc.returncode}:\n{server.log()[-4000:]}"
            )
        if _status(base + "live") == 200 and (not wait_ready or _status(base + "ready") == 200):
            return server
        time.sleep(0.05)
    server.stop()
    raise RuntimeError(
        f"tritonhttp.server did not become ready in {timeout}s:\n{server.log()[-4000:]}"
    )


@contextlib.contextmanager
def running(
    model_repository: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *extra_args: str,
    **kw: object,
) -> Iterator[BundledServer]:
    """Context manager around :func:`start` that always stops the server."""
    server = start(model_repository, *extra_args, **kw)  # type: ignore[arg-type]
    try:
        yield server
    finally:
        server.stop()
