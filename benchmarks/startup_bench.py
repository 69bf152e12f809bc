"""Start-up time and memory of our server with Python models in worker processes, against
real Triton 2.51.0, side by side in one run.

    python benchmarks/startup_bench.py [--rounds 5] [--requests 20] [--spawn fork|popen|both]
                                       [--skip-real]

Repository: three Python models of ``tests/models`` (``add_sub``, ``identity_all``,
``identity_bytes``), each instance in a process of its own: our default isolation
(worker processes) and Triton's Python-backend stubs.

Cases (every server in turn, alternating rounds; medians):

* time from starting the server process to ``/v2/health/ready`` answering 200 (seconds;
  polled every few milliseconds on a raw socket);
* memory once ready and ``--requests`` inferences per model were answered: the sum over
  the server process and all its descendants (our workers and their zygote; Triton's
  stubs) of PSS (``/proc/<pid>/smaps_rollup``: shared pages split between the processes
  sharing them, the fair total) and of RSS (shared pages counted in each process), MiB.

``--spawn`` chooses how our server starts its workers (``TRITONHTTP_WORKER_SPAWN`` in its
environment): ``fork`` from a warm zygote, ``popen`` as a fresh interpreter each, or
``both`` (two contenders). Each row says how the server really started them (a server
that has no zygote starts every worker fresh whatever the variable says). Ratios are
reference / ours: above 1, ours is faster or smaller.

Real Triton comes from ``tritonhttp.testing._real_triton`` (nvidia-pytriton in a cached
venv). Prints ``name: ours X, reference Y, ratio R``.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

try:
    from _common import ADD_BODY, machine, process_tree
except ImportError:  # run as a module
    from benchmarks._common import ADD_BODY, machine, process_tree

from tritonhttp.testing import _process

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "tests" / "models"
#: the spawn mode variable of our server (``tritonhttp.server.backends.python._forkserver``)
SPAWN_VARIABLE = "TRITONHTTP_WORKER_SPAWN"
#: one request per model of the repository: (path, JSON body)
REQUESTS = {
    "add_sub": ADD_BODY,
    "identity_all": json.dumps({"inputs": [
        {"name": "IN_FP32", "datatype": "FP32", "shape": [4], "data": [1, 2, 3, 4]}]}),
    "identity_bytes": json.dumps({"inputs": [
        {"name": "INPUT0", "datatype": "BYTES", "shape": [2], "data": ["ab", "cd"]}]}),
}  # fmt: skip
#: how often the ready endpoint is polled while a server starts (seconds)
POLL_S = 0.005
READY_TIMEOUT_S = 120.0
MIB = 1024 * 1024


def _repo() -> Path:
    tmp = Path(tempfile.mkdtemp(prefix="tritonhttp-startup-"))
    for name in REQUESTS:
        shutil.copytree(MODELS / name, tmp / name)
    return tmp


# ----------------------------------------------------------------------------- servers


@dataclass
class Started:
    """A server process started by this script, and what was measured of it."""

    name: str
    process: subprocess.Popen[bytes]
    port: int
    log: Path
    stop: Callable[[subprocess.Popen[bytes]], None]
    ready_s: float = 0.0
    memory: dict[str, float] = field(default_factory=dict)


def _stop_ours(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def _stop_real(proc: subprocess.Popen[bytes]) -> None:
    """Triton runs in a session of its own: SIGINT, then SIGKILL, to its whole group
    (its stubs ignore SIGTERM)."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGINT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(30)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(5)


def _ours_command(repo: Path, http: int, metrics: int) -> list[str]:
    return [sys.executable, "-m", "tritonhttp.server", *_process.repository_flags(repo),
            f"--http-port={http}", f"--metrics-port={metrics}"]  # fmt: skip


@dataclass
class Command:
    """How to start one server: its command line, environment, and how to stop it."""

    args: list[str]
    env: dict[str, str]
    port: int
    new_session: bool
    stop: Callable[[subprocess.Popen[bytes]], None]


def _command(repo: Path, spawn: str | None) -> Command:
    """Our server (``spawn``: its spawn mode), or real Triton (None), on free ports."""
    if spawn is None:
        from tritonhttp.testing import _real_triton as rt

        install = rt.ensure_installed()
        http, grpc, metrics = _process.free_ports(3)
        args = [str(install.binary), *_process.repository_flags(repo),
                f"--backend-directory={install.backends}", "--http-address=127.0.0.1",
                f"--http-port={http}", "--grpc-address=127.0.0.1", f"--grpc-port={grpc}",
                "--metrics-address=127.0.0.1", f"--metrics-port={metrics}"]  # fmt: skip
        return Command(args, install.environ(), http, True, _stop_real)
    http, metrics = _process.free_ports(2)
    return Command(_ours_command(repo, http, metrics), {**os.environ, SPAWN_VARIABLE: spawn},
                   http, False, _stop_ours)  # fmt: skip


def _ready_status(port: int) -> int | None:
    """The status of ``GET /v2/health/ready`` (None: nothing answers yet)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
            sock.sendall(b"GET /v2/health/ready HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            head = sock.recv(64)
    except OSError:
        return None
    parts = head.split(b" ", 2)
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None


def _wait_ready(server: Started, t0: float) -> float:
    """Seconds from ``t0`` until the server answers ready."""
    while time.perf_counter() - t0 < READY_TIMEOUT_S:
        if server.process.poll() is not None:
            raise RuntimeError(f"{server.name} exited:\n{server.log.read_text()[-3000:]}")
        if _ready_status(server.port) == 200:
            return time.perf_counter() - t0
        time.sleep(POLL_S)
    raise RuntimeError(f"{server.name} not ready in {READY_TIMEOUT_S} s")


def _requests(server: Started, n: int) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        for _ in range(n):
            for model, body in REQUESTS.items():
                conn.request("POST", f"/v2/models/{model}/infer", body,
                             {"Content-Type": "application/json"})  # fmt: skip
                r = conn.getresponse()
                answer = r.read()
                if r.status != 200:
                    raise RuntimeError(f"{server.name}: {model} answered {r.status}: {answer!r}")
    finally:
        conn.close()


# ----------------------------------------------------------------------------- memory


def _rollup(pid: int) -> dict[str, int]:
    """``Rss`` and ``Pss`` of one process, bytes (empty once it is gone)."""
    values = {}
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return {}
    for row in text.splitlines():
        key, _, rest = row.partition(":")
        if key in ("Rss", "Pss"):
            values[key] = int(rest.split()[0]) * 1024
    return values


def _memory(server: Started) -> dict[str, float]:
    tree = process_tree(server.process.pid)
    total = {"Rss": 0, "Pss": 0}
    for pid, _ in tree:
        for key, value in _rollup(pid).items():
            total[key] += value
    return {
        "pss": total["Pss"] / MIB,
        "rss": total["Rss"] / MIB,
        "processes": float(len(tree)),
        "deepest": float(max(depth for _, depth in tree)),
    }


# ----------------------------------------------------------------------------- rounds


def _round(name: str, repo: Path, spawn: str | None, requests: int) -> Started:
    command = _command(repo, spawn)
    log = Path(tempfile.gettempdir()) / f"tritonhttp-startup-{name.replace(' ', '-')}.log"
    with open(log, "wb") as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(command.args, stdout=out, stderr=subprocess.STDOUT,
                                env=command.env, start_new_session=command.new_session)  # fmt: skip
    server = Started(name, proc, command.port, log, command.stop)
    try:
        server.ready_s = _wait_ready(server, t0)
        _requests(server, requests)
        time.sleep(0.5)  # (let lazily started threads and allocations settle)
        server.memory = _memory(server)
    finally:
        server.stop(server.process)
    return server


def _how(spawn: str, deepest: float) -> str:
    if deepest >= 2:
        return "workers forked from a zygote"
    return "workers started as fresh interpreters" + (" (no zygote)" if spawn == "fork" else "")


def _report(results: dict[str, list[Started]], spawns: list[str]) -> None:
    reference = results.get("reference")
    cases = [("time to ready, 3 models (s)", lambda s: s.ready_s),
             ("memory after load, PSS (MiB)", lambda s: s.memory["pss"]),
             ("memory after load, RSS (MiB)", lambda s: s.memory["rss"])]  # fmt: skip
    for spawn in spawns:
        ours = results[f"ours {spawn}"]
        deepest = statistics.median(s.memory["deepest"] for s in ours)
        processes = statistics.median(s.memory["processes"] for s in ours)
        print(f"ours, {SPAWN_VARIABLE}={spawn}: {_how(spawn, deepest)}, {processes:.0f} processes")
        for case, value in cases:
            mine = statistics.median(value(s) for s in ours)
            if reference is None:
                print(f"{case} [{spawn}]: ours {mine:.4g}")
                continue
            ref = statistics.median(value(s) for s in reference)
            print(f"{case} [{spawn}]: ours {mine:.4g}, reference {ref:.4g}, ratio {ref / mine:.2f}")
    if reference is not None:
        processes = statistics.median(s.memory["processes"] for s in reference)
        print(f"reference: tritonserver and its stubs, {processes:.0f} processes")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds per server")
    parser.add_argument("--requests", type=int, default=20, help="inferences per model")
    parser.add_argument("--spawn", choices=("fork", "popen", "both"), default="fork",
                        help="how our server starts its workers")  # fmt: skip
    parser.add_argument("--skip-real", action="store_true", help="measure our server only")
    args = parser.parse_args(argv)
    if not sys.platform.startswith("linux"):
        print("this benchmark reads /proc (Linux only)")
        return 1
    print(machine())
    spawns = ["fork", "popen"] if args.spawn == "both" else [args.spawn]
    contenders: list[tuple[str, str | None]] = [(f"ours {s}", s) for s in spawns]
    if not args.skip_real:
        from tritonhttp.testing import _real_triton as rt

        problem = rt.platform_problem()
        if problem:
            print(f"real Triton unavailable ({problem}): measuring ours only")
        else:
            rt.ensure_installed()
            contenders.append(("reference", None))
    repo = _repo()
    results: dict[str, list[Started]] = {name: [] for name, _ in contenders}
    try:
        for _ in range(args.rounds):
            for name, spawn in contenders:
                results[name].append(_round(name, repo, spawn, args.requests))
    finally:
        shutil.rmtree(repo, ignore_errors=True)
    _report(results, spawns)
    return 0


if __name__ == "__main__":
    sys.exit(main())
