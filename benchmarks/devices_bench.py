"""What each of the server's speed devices buys: the server with it against the server
without it, side by side in one run.

    python benchmarks/devices_bench.py [--seconds 3] [--pairs 4] [--only NAME ...]

Each device is measured on the workload it is for (add_sub JSON with wrk, health, or a
model of ``models_bench.py`` on that benchmark's repository), alternating rounds of the
two servers (the device on, then off), and reported as the ratio on / off of requests
per second: the mean and the range over the pairs. A device that can be turned off by a
flag is turned off so; the others are taken out by this script's launcher, which patches
the one function before the server starts (the server's code has no switch for them).
The devices, and where each lives, are listed in docs/design.md ("Where the speed comes
from").

wrk is required (``apt-get install -y wrk``).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

try:
    import models_bench
    from _common import ADD_BODY, machine, wrk
except ImportError:  # run as a module
    from benchmarks import models_bench
    from benchmarks._common import ADD_BODY, machine, wrk

from tritonhttp.server._launch import BundledServer
from tritonhttp.testing import _process

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "tests" / "models"
INFER = "/v2/models/add_sub/infer"
IN_PROCESS = "--python-isolation=in-process"


#: the launcher's patch that keeps the front from handing requests over unparsed
_NO_UNPARSED = (
    "async def _declined(*args):\n    return False\n_app.HttpFrontend._infer_unparsed = _declined\n"
)


@dataclass(frozen=True)
class Device:
    """A device, how the server runs without it, and the workloads it is for."""

    name: str
    what: str
    #: server flags for both runs, then the extra flags that turn the device off
    flags: tuple[str, ...]
    off_flags: tuple[str, ...] = ()
    #: Python run in the server process before it starts, to take the device out
    off_patch: str = ""
    #: (path, body or None for GET, connections)
    loads: tuple[tuple[str, str | None, int], ...] = ((INFER, ADD_BODY, 1), (INFER, ADD_BODY, 16))
    #: (model of models_bench.py, connections): loads on that benchmark's repository
    #: instead of ``loads``
    model_loads: tuple[tuple[str, int], ...] = ()


DEVICES = (
    Device(
        "reply",
        "a worker process writes the answer to the client itself (and so may parse it)",
        (),
        off_patch=(
            "from tritonhttp.server.front import _app\n"
            "_app.HttpFrontend._reply_link = staticmethod(lambda *a: None)\n" + _NO_UNPARSED
        ),
    ),
    Device(
        "worker-parse",
        "a worker process parses and checks a plain /infer body itself",
        (),
        off_patch="from tritonhttp.server.front import _app\n" + _NO_UNPARSED,
    ),
    Device(
        "worker-poll",
        "server and workers poll for each other's next message (busy-wait-us)",
        (),
        off_flags=("--backend-config=python,busy-wait-us=0",),
    ),
    Device(
        "send-ahead",
        "a busy worker with a quick model is sent its next request early",
        (),
        off_patch=(
            "from tritonhttp.server.backends.python._process import ProcessInstance\n"
            "ProcessInstance.takes_ahead = property(lambda self: False)\n"
        ),
        loads=((INFER, ADD_BODY, 16), (INFER, ADD_BODY, 64)),
    ),
    Device(
        "eager-handover",
        "a freed instance starts its next queued request inside the hand-over",
        (),
        off_patch=(
            "from tritonhttp.server.core._fifo import FifoScheduler\n"
            "FifoScheduler._start = lambda self, inst, item: self._spawn(\n"
            "    self._run_item(inst, item))\n"
        ),
        loads=((INFER, ADD_BODY, 16), (INFER, ADD_BODY, 64)),
    ),
    Device(
        "http-poll",
        "the HTTP server polls for a quick client's next request (--http-busy-wait-us)",
        (IN_PROCESS,),
        off_flags=("--http-busy-wait-us=0",),
        loads=((INFER, ADD_BODY, 1),),
    ),
    Device(
        "http-server",
        "the bundled HTTP server instead of uvicorn",
        (IN_PROCESS,),
        off_flags=("--http-server=uvicorn",),
    ),
    Device(
        "inline-execution",
        "an in-process model's quick execute runs on the event loop, not a thread",
        (IN_PROCESS,),
        off_flags=("--backend-config=python,inline-execution=never",),
    ),
    Device(
        "immediate-health",
        "health answered by the HTTP server without running the application",
        (),
        off_patch=(
            "from tritonhttp.server.front import _app\ndel _app.HttpFrontend.immediate_answer\n"
        ),
        loads=(("/v2/health/live", None, 1),),
    ),
    Device(
        "slow-model-nice",
        "a slow model's worker lowers its priority (slow-model-nice)",
        (),
        off_flags=("--backend-config=python,slow-model-nice=0",),
        model_loads=(("pipeline", 16), ("prep", 16), ("prep", 64)),
    ),
    Device(
        "body-reader",
        "the rest of a large request body is read from the socket straight into its buffer",
        (),
        off_patch=(
            "from tritonhttp.server.http import _connection\n_connection.RAW_BODY_MIN = 1 << 62\n"
        ),
        model_loads=(("prep", 1), ("prep", 16), ("pipeline", 1), ("pipeline", 16)),
    ),
    Device(
        "gc-freeze",
        "what start-up left is frozen out of the collector's scans (gc.freeze)",
        (),
        off_patch="import gc\ngc.freeze = lambda: None\n",
        loads=((INFER, ADD_BODY, 16),),
    ),
)


def _start(repo: Path, flags: tuple[str, ...], patch: str) -> BundledServer:
    """Our server on free ports; ``patch`` runs in it before it starts."""
    http, metrics = _process.free_ports(2)
    argv = ["tritonhttp.server", f"--model-repository={repo}", f"--http-port={http}",
            f"--metrics-port={metrics}", *flags]  # fmt: skip
    code = f"import runpy, sys\nsys.argv = {argv!r}\n{patch}\n"
    code += "runpy.run_module('tritonhttp.server', run_name='__main__', alter_sys=True)\n"
    log = Path(tempfile.gettempdir()) / f"tritonhttp-devices-{http}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=out, stderr=subprocess.STDOUT)
    server = BundledServer(proc, http, metrics, log, argv)
    _process.wait_until_up(server, "tritonhttp.server", wait_ready=True, timeout=60, poll=0.05)
    return server


def _loads(device: Device) -> list[tuple[str, Callable[[BundledServer, float], float]]]:
    """(what, one wrk run against a server for so many seconds: requests/s) per load."""
    if device.model_loads:
        bodies = models_bench.requests()

        def model_run(model: str, conns: int) -> Callable[[BundledServer, float], float]:
            return lambda s, secs: (
                models_bench.wrk_round(s.url, bodies[model], conns, secs, s.process.pid).rps
            )

        return [(f"{m} -c{c}", model_run(m, c)) for m, c in device.model_loads]

    def run(path: str, body: str | None, conns: int) -> Callable[[BundledServer, float], float]:
        return lambda s, secs: wrk(s.url, path, conns, secs, body)

    return [
        (f"{'health' if body is None else 'add_sub'} -c{conns}", run(path, body, conns))
        for path, body, conns in device.loads
    ]


def _measure(device: Device, repo: Path, seconds: float, pairs: int) -> list[str]:
    on = _start(repo, device.flags, "")
    off = _start(repo, (*device.flags, *device.off_flags), device.off_patch)
    lines = []
    try:
        for what, run in _loads(device):
            for s in (on, off):
                run(s, 1)  # warm-up
            ratios: list[float] = []
            for _ in range(pairs):
                ratios.append(run(on, seconds) / run(off, seconds))
            lines.append(
                f"{device.name} ({what}): on/off {statistics.mean(ratios):.3f} "
                f"[{min(ratios):.3f}-{max(ratios):.3f}] over {pairs} pairs"
            )
    finally:
        on.stop()
        off.stop()
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3, help="wrk duration per round")
    parser.add_argument("--pairs", type=int, default=4, help="alternating pairs per load")
    parser.add_argument("--only", nargs="*", default=None, help="device names to measure")
    args = parser.parse_args(argv)
    if shutil.which("wrk") is None:
        print("wrk not found (apt-get install -y wrk)")
        return 2
    print(machine())
    devices: list[Any] = [d for d in DEVICES if not args.only or d.name in args.only]
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "add_sub"
        shutil.copytree(MODELS / "add_sub", repo / "add_sub")
        models = Path(tmp) / "models"
        if any(d.model_loads for d in devices):
            models_bench.build_repository(models)
        for device in devices:
            print(f"# {device.name}: {device.what}", flush=True)
            where = models if device.model_loads else repo
            for line in _measure(device, where, args.seconds, args.pairs):
                print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
