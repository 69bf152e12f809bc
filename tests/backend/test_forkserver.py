"""Workers forked from the zygote (``backends/python/_forkserver.py``): real processes.

The handle's ``poll``/``wait``/``kill``/``returncode`` as ``subprocess.Popen`` has them,
where a forked worker's output goes, its parent-death chain (the zygote's parent dies:
the zygote and its workers go), and the cases where the caller is told to start the
worker with Popen instead (None). Waits are bounded, never timed.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import triton_python_backend_utils
from tritonhttp.server import _launch
from tritonhttp.server.backends.python import _forkserver, _worker_process

from ._http import infer, output
from .conftest import until

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="workers are forked on Linux only"
)

PB_DIR = str(Path(triton_python_backend_utils.__file__).resolve().parent)
#: the longest any wait here lasts (a loaded machine may be slow; nothing is timed)
WAIT_S = 30.0


@pytest.fixture(autouse=True)
def _fresh_zygotes() -> Iterator[None]:
    """Every test starts without a zygote and leaves none behind."""
    _forkserver.close()
    yield
    _forkserver.close()


class Spawned:
    """A forked worker and the server's ends of its two sockets."""

    def __init__(
        self, handle: _forkserver.ForkedProcess, ctl: socket.socket, fds: socket.socket
    ) -> None:
        self.handle = handle
        self.ctl = ctl
        self.fds = fds

    def close(self) -> None:
        self.ctl.close()
        self.fds.close()


def _spawn(
    python: str = sys.executable,
    pb_dir: str = PB_DIR,
    env: dict[str, str] | None = None,
    codec: str | None = None,
) -> Spawned | None:
    ctl, ctl_child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    fds, fds_child = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        handle = _forkserver.spawn(
            python, pb_dir, ctl_child.fileno(), fds_child.fileno(), env, codec
        )
    finally:
        ctl_child.close()
        fds_child.close()
    if handle is None:
        ctl.close()
        fds.close()
        return None
    return Spawned(handle, ctl, fds)


def _ppid(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _gone(pid: int) -> bool:
    """The process no longer runs (a zombie nobody reaps counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state in ("Z", "X")


def test_a_forked_worker_runs_under_the_zygote_with_the_servers_output() -> None:
    w = _spawn()
    assert w is not None
    try:
        pid = w.handle.pid
        assert pid > 0 and w.handle.poll() is None and w.handle.returncode is None
        zygote = _ppid(pid)
        assert zygote != os.getpid() and _ppid(zygote) == os.getpid()
        cmdline = Path(f"/proc/{zygote}/cmdline").read_bytes().split(b"\0")
        assert cmdline[1:4] == [b"-I", _forkserver.BOOT.encode(), b"--zygote"]
        # stdout, stderr and the working directory are the server's at the spawn
        for fd in ("1", "2"):
            assert os.readlink(f"/proc/{pid}/fd/{fd}") == os.readlink(f"/proc/self/fd/{fd}")
        assert os.readlink(f"/proc/{pid}/cwd") == os.getcwd()
        w.close()  # the worker's channel closes: it exits, and the zygote reports how
        assert isinstance(w.handle.wait(WAIT_S), int)
        assert w.handle.poll() == w.handle.returncode
        assert until(lambda: _gone(pid), WAIT_S)
    finally:
        w.close()


def test_kill_and_the_returncode_popen_gives() -> None:
    w = _spawn()
    assert w is not None
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            w.handle.wait(0.05)
        pid = w.handle.pid
        w.handle.kill()
        assert w.handle.wait(WAIT_S) == -signal.SIGKILL
        assert w.handle.poll() == w.handle.returncode == -signal.SIGKILL
        w.handle.send_signal(signal.SIGTERM)  # (ended: nothing is signalled)
        w.handle.kill()
        assert _gone(pid)  # the zygote reaped it before reporting
    finally:
        w.close()


def test_workers_of_one_zygote_are_independent() -> None:
    first, second = _spawn(), _spawn()
    assert first is not None and second is not None
    try:
        assert _ppid(first.handle.pid) == _ppid(second.handle.pid)
        first.handle.kill()
        assert first.handle.wait(WAIT_S) == -signal.SIGKILL
        assert second.handle.poll() is None
        second.close()
        assert isinstance(second.handle.wait(WAIT_S), int)
    finally:
        first.close()
        second.close()


def test_workers_asked_with_a_reply_codec_run_whether_it_imports_or_not() -> None:
    """The zygote imports each codec named once (here: one that imports, one that
    does not); the workers run either way, as fresh ones would."""
    spawned = [_spawn(codec=c) for c in ("json", "tritonhttp.server.no_such_codec", "json")]
    try:
        for w in spawned:
            assert w is not None and w.handle.pid > 0
        assert all(w is not None and w.handle.poll() is None for w in spawned)
    finally:
        for w in spawned:
            if w is not None:
                w.close()
                w.handle.wait(WAIT_S)


def test_workers_die_with_the_zygote_and_a_new_one_takes_over() -> None:
    w = _spawn()
    assert w is not None
    try:
        pid = w.handle.pid
        zygote = _ppid(pid)
        os.kill(zygote, signal.SIGKILL)
        assert w.handle.wait(WAIT_S) == -signal.SIGKILL
        assert until(lambda: _gone(pid), WAIT_S)
        again = _spawn()
        assert again is not None
        try:
            assert _ppid(again.handle.pid) not in (zygote, os.getpid())
        finally:
            again.close()
    finally:
        w.close()


def test_close_ends_the_zygote_and_its_workers() -> None:
    w = _spawn()
    assert w is not None
    try:
        pid = w.handle.pid
        zygote = _ppid(pid)
        _forkserver.close(idle_only=True)  # (a worker runs: the zygote stays)
        assert w.handle.poll() is None and not _gone(zygote)
        _forkserver.close()
        assert w.handle.poll() == -signal.SIGKILL
        assert until(lambda: _gone(pid) and _gone(zygote), WAIT_S)
    finally:
        w.close()


_HOLDER = """
import os, socket, sys, time
from tritonhttp.server.backends.python import _forkserver
ctl, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
fds, fchild = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
handle = _forkserver.spawn(sys.executable, sys.argv[1], child.fileno(), fchild.fileno())
print(handle.pid if handle else 0, flush=True)
time.sleep(120)
"""


def test_an_idle_zygote_is_closed_on_request() -> None:
    w = _spawn()
    assert w is not None
    pid = w.handle.pid
    zygote = _ppid(pid)
    w.close()
    w.handle.wait(WAIT_S)
    _forkserver.close(idle_only=True)
    assert until(lambda: _gone(zygote), WAIT_S)


def test_the_zygote_and_its_workers_die_with_the_server() -> None:
    """SIGKILL the process that started the zygote: no clean-up code runs there, yet
    the zygote and its worker go (parent-death signals)."""
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, PB_DIR], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None
        pid = int(holder.stdout.readline() or 0)
        assert pid > 0
        zygote = _ppid(pid)
        assert _ppid(zygote) == holder.pid
        holder.kill()
        holder.wait(WAIT_S)
        assert until(lambda: _gone(zygote) and _gone(pid), WAIT_S)
    finally:
        if holder.poll() is None:
            holder.kill()
        holder.wait(WAIT_S)
        if holder.stdout is not None:
            holder.stdout.close()


def test_popen_is_used_where_no_fork_may_serve(monkeypatch: pytest.MonkeyPatch) -> None:
    """Another interpreter, an environment of the model's own, or the variable saying
    so: None (the caller starts the worker with Popen)."""
    assert _spawn(python=str(Path(sys.executable).parent / "no-such-python")) is None
    assert _spawn(env={"PATH": os.environ.get("PATH", "")}) is None
    monkeypatch.setenv(_forkserver.SPAWN_VARIABLE, "popen")
    assert _spawn() is None


def test_popen_is_used_when_the_zygote_cannot_start(capfd: pytest.CaptureFixture[str]) -> None:
    """A zygote that fails on its way up (here: no pb_utils where it is told to look)
    means Popen for this server thread from then on."""
    missing = str(Path(PB_DIR).parent / "no-such-pb-utils")
    assert _spawn(pb_dir=missing) is None
    assert _spawn(pb_dir=missing) is None
    capfd.readouterr()  # (the failed zygote's traceback)


def test_an_environment_change_the_zygote_cannot_take_means_popen(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Variables read at interpreter or numpy start stay the zygote's in a forked
    worker: when one of them changed, the worker starts fresh; other changes fork."""
    first = _spawn()
    assert first is not None
    first.close()
    monkeypatch.setenv("TRITONHTTP_TEST_FORK_VARIABLE", "any value")
    second = _spawn()
    assert second is not None
    second.close()
    monkeypatch.setenv("OMP_NUM_THREADS", os.environ.get("OMP_NUM_THREADS", "") + "7")
    assert _spawn() is None
    for w in (first, second):
        assert isinstance(w.handle.wait(WAIT_S), int)


# ----------------------------------------------------------------------------- a server


_PRINTER = """import os, sys
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        print("printer initialized in", os.getpid(), os.environ.get("TRITONHTTP_TEST_FORK"),
              flush=True)
        print("printer to stderr", file=sys.stderr, flush=True)

    def execute(self, requests):
        out = np.array([os.getpid(), os.getppid()], dtype=np.int64)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("PIDS", out)]) for _ in requests]
"""
_PRINTER_CONFIG = """backend: "python"
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "PIDS" data_type: TYPE_INT64 dims: [ 2 ] } ]
"""


@pytest.mark.skipif(
    not hasattr(_worker_process, "_forkserver"), reason="the server does not use the zygote yet"
)
def test_a_server_forks_its_workers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The server's workers come from one zygote, print to the server's log, answer,
    and go with the server when it is SIGKILLed."""
    for name in ("printer", "printer2"):
        (tmp_path / name / "1").mkdir(parents=True)
        (tmp_path / name / "1" / "model.py").write_text(_PRINTER)
        (tmp_path / name / "config.pbtxt").write_text(_PRINTER_CONFIG)
    monkeypatch.setenv("TRITONHTTP_TEST_FORK", "seen")
    server = _launch.start(tmp_path)
    try:
        answers = [infer(server.url, name, ("IN", "FP32", [1], [1.0]))
                   for name in ("printer", "printer2")]  # fmt: skip
        assert [r.status for r in answers] == [200, 200]
        (worker, zygote), (worker2, zygote2) = (output(r, "PIDS") for r in answers)
        assert zygote == zygote2 != server.process.pid and worker != worker2
        assert _ppid(zygote) == server.process.pid
        log = server.log()
        assert f"printer initialized in {worker} seen" in log
        assert "printer to stderr" in log
        server.process.kill()
        server.process.wait(WAIT_S)
        assert until(lambda: all(_gone(p) for p in (zygote, worker, worker2)), WAIT_S)
    finally:
        server.stop()
