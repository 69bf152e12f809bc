"""Start the bundled server as a child process on free loopback ports (tests, benchmarks)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from ..testing import _process

__all__ = ["BundledServer", "running", "start"]


class BundledServer(_process.ServerProcess):
    """A running ``python -m tritonhttp.server`` child process."""

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
    model_repository: _process.Repositories,
    *extra_args: str,
    wait_ready: bool = True,
    timeout: float = 60.0,
    log_path: str | os.PathLike[str] | None = None,
    python: str | None = None,
) -> BundledServer:
    """Start the server on free ports and wait until it is live (and ready).

    ``python``: the interpreter to run it with (default: this one's)."""
    http, metrics = _process.free_ports(2)
    args = [python or sys.executable, "-m", "tritonhttp.server"]
    args += _process.repository_flags(model_repository)
    args += [f"--http-port={http}", f"--metrics-port={metrics}", *extra_args]
    log = (
        Path(log_path)
        if log_path
        else Path(tempfile.gettempdir()) / f"tritonhttp-server-{http}.log"
    )
    with open(log, "wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
    server = BundledServer(proc, http, metrics, log, args)
    _process.wait_until_up(
        server, "tritonhttp.server", wait_ready=wait_ready, timeout=timeout, poll=0.05
    )
    return server


@contextlib.contextmanager
def running(
    model_repository: _process.Repositories, *extra_args: str, **kw: object
) -> Iterator[BundledServer]:
    """Context manager around :func:`start` that always stops the server."""
    with _process.stopping(start(model_repository, *extra_args, **kw)) as server:  # type: ignore[arg-type]
        yield server
