"""Provision and run the genuine ``tritonserver`` shipped inside ``nvidia-pytriton``.

Used by the differential test tier and by the benchmarks: both need the real Triton
Inference Server (2.51.0, with its Python backend) next to ours. The server lives in a
virtual environment of its own (``nvidia-pytriton`` pins ``numpy<2``), created once and
cached under ``$TRITONHTTP_CACHE`` (default ``~/.cache/tritonhttp``).

Nothing here is imported by the client or the server at run time.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import platform
import shutil
import signal
import subprocess
import sys
import sysconfig
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from ._process import (
    Repositories,
    ServerProcess,
    free_ports,
    repository_flags,
    stopping,
    wait_until_up,
)

#: nvidia-pytriton 0.7.0 bundles tritonserver 2.51.0 (Triton release 24.10).
PYTRITON_VERSION = "0.7.0"
TRITON_VERSION = "2.51.0"
_MIN_GLIBC = (2, 35)  # the wheel is tagged manylinux_2_35_x86_64


def cache_dir() -> Path:
    """Folder holding the cached real-Triton environment."""
    return Path(os.environ.get("TRITONHTTP_CACHE", Path.home() / ".cache" / "tritonhttp"))


def platform_problem() -> str | None:
    """Why this platform cannot run real Triton, or None when it can."""
    if sys.platform != "linux":
        return f"real tritonserver runs on Linux only (this is {sys.platform})"
    if platform.machine() not in ("x86_64", "AMD64"):
        return f"nvidia-pytriton ships x86_64 binaries only (this is {platform.machine()})"
    libc, ver = platform.libc_ver()
    if libc != "glibc":
        return f"nvidia-pytriton needs glibc (found {libc or 'unknown libc'})"
    try:
        glibc = tuple(int(x) for x in ver.split(".")[:2])
    except ValueError:
        glibc = (0, 0)
    if glibc < _MIN_GLIBC:
        return f"nvidia-pytriton needs glibc >= 2.35 (found {ver})"
    if not (3, 8) <= sys.version_info[:2] <= (3, 13):
        return f"no Python-backend stub for Python {sys.version_info[0]}.{sys.version_info[1]}"
    return None


@dataclass(frozen=True)
class RealTritonInstall:
    """Paths of a provisioned real-Triton environment."""

    venv: Path
    server_dir: Path  # .../site-packages/pytriton/tritonserver

    @property
    def binary(self) -> Path:
        return self.server_dir / "bin" / "tritonserver"

    @property
    def backends(self) -> Path:
        return self.server_dir / "backends"

    def environ(self) -> dict[str, str]:
        """Environment in which tritonserver finds its libraries and a numpy-1 Python."""
        env = dict(os.environ)
        libs = self.server_dir.parent.parent / "nvidia_pytriton.libs"
        pylib = sysconfig.get_config_var("LIBDIR") or ""
        env["PATH"] = f"{self.venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        ld = [str(libs), pylib, env.get("LD_LIBRARY_PATH", "")]
        env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in ld if p)
        env.pop("PYTHONPATH", None)
        env.pop("VIRTUAL_ENV", None)
        return env


def _base_python() -> str:
    """The base interpreter of the running one (a venv's python would nest venvs)."""
    ver = f"{sys.version_info[0]}.{sys.version_info[1]}"
    for cand in (
        Path(sys.base_prefix) / "bin" / f"python{ver}",
        Path(sys.base_prefix) / "bin" / "python3",
    ):
        if cand.exists():
            return str(cand)
    return sys.executable


def ensure_installed(log: Sequence[str] | None = None) -> RealTritonInstall:
    """Create (once, under a file lock) the venv with nvidia-pytriton and return its paths."""
    problem = platform_problem()
    if problem:
        raise RuntimeError(problem)
    ver = f"{sys.version_info[0]}.{sys.version_info[1]}"
    root = cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    venv = root / f"pytriton-{PYTRITON_VERSION}-py{ver}"
    server_dir = venv / "lib" / f"python{ver}" / "site-packages" / "pytriton" / "tritonserver"
    install = RealTritonInstall(venv=venv, server_dir=server_dir)
    stub_dst = server_dir / "backends" / "python" / "triton_python_backend_stub"
    with open(root / ".pytriton.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stub_dst.exists() and install.binary.exists():
            return install
        if venv.exists():
            shutil.rmtree(venv)
        subprocess.run([_base_python(), "-m", "venv", str(venv)], check=True)
        pip = [
            str(venv / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
        ]
        subprocess.run([*pip, f"nvidia-pytriton=={PYTRITON_VERSION}"], check=True)
        stub_src = server_dir / "python_backend_stubs" / ver / "triton_python_backend_stub"
        shutil.copy2(stub_src, stub_dst)
    return install


@dataclass(kw_only=True)
class RealTriton(ServerProcess):
    """A running tritonserver process bound to 127.0.0.1."""

    grpc_port: int

    def stop(self, timeout: float = 15.0) -> None:
        """Stop the server and every stub it started (stubs ignore SIGTERM)."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGINT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(5)


def start(
    model_repository: Repositories,
    *extra_args: str,
    log_path: str | os.PathLike[str] | None = None,
    wait_ready: bool = True,
    timeout: float = 120.0,
) -> RealTriton:
    """Start real tritonserver on free loopback ports and wait until it is live.

    With ``wait_ready`` (default) it also waits for ``/v2/health/ready`` to answer 200
    unless ``--strict-readiness`` trickery makes that impossible; then being live suffices
    once ``timeout`` has passed half-way.
    """
    install = ensure_installed()
    http, grpc, metrics = free_ports(3)
    log = Path(log_path) if log_path else Path(cache_dir()) / "logs" / f"tritonserver-{http}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    args = [str(install.binary), *repository_flags(model_repository)]
    args += [
        f"--backend-directory={install.backends}",
        "--http-address=127.0.0.1",
        f"--http-port={http}",
        "--grpc-address=127.0.0.1",
        f"--grpc-port={grpc}",
        "--metrics-address=127.0.0.1",
        f"--metrics-port={metrics}",
        *extra_args,
    ]
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            args,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=install.environ(),
            start_new_session=True,
        )
    server = RealTriton(
        process=proc, http_port=http, metrics_port=metrics, grpc_port=grpc, log_path=log, args=args
    )
    wait_until_up(server, "tritonserver", wait_ready=wait_ready, timeout=timeout, poll=0.1)
    return server


@contextlib.contextmanager
def running(model_repository: Repositories, *extra_args: str, **kw: object) -> Iterator[RealTriton]:
    """Context manager around :func:`start` that always stops the server."""
    with stopping(start(model_repository, *extra_args, **kw)) as server:  # type: ignore[arg-type]
        yield server
