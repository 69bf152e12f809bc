"""The Python-backend runtime against real Triton 2.51.0, side by side in one run.

    python benchmarks/backend_bench.py [--seconds 2] [--rounds 3] [--skip-real]
                                       [--python PATH ...]

Cases (every server in turn, alternating rounds; medians, with the spread of the rounds):

* ``add_sub`` JSON inference at -c1, -c16 and -c64 (requests/s): our server with process
  isolation (the default: a worker process per instance), with in-process isolation, and
  real Triton;
* a 16 MiB FP32 binary-data round trip through an identity model (``identity_all``,
  served by the same servers; GB/s of payload, raw socket client, the best of 3 per
  round);
* a CPU-bound model (a pure-Python loop that holds the GIL) with ``count: 2`` against
  ``count: 1``, four clients (requests/s; their ratio shows the parallelism of worker
  processes; in-process isolation is shown for contrast).

The server runs on the interpreter that runs this script, and so does real Triton's
Python-backend stub (it loads this interpreter's libpython). ``--python PATH`` adds our
server under another interpreter to the add_sub and round-trip rounds: the interpreter's
build (PGO, LTO) moves our figures markedly, and real Triton's hardly
(docs/performance.md).

Load comes from wrk when it is installed (``apt-get install -y wrk``), else from a small
keep-alive load generator of this script. Prints ``name: ours X, reference Y, ratio R``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

try:
    from _common import ADD_BODY, binary_round_trip, describe_interpreter, machine, wrk
except ImportError:  # run as a module
    from benchmarks._common import ADD_BODY, binary_round_trip, describe_interpreter, machine, wrk

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "tests" / "models"
#: the add_sub concurrencies measured
CONNECTIONS = (1, 16, 64)
#: FP32 elements of the identity round trip (16 MiB)
ROUND_TRIP_ELEMENTS = 4 * 1024 * 1024
CPU_BODY = json.dumps(
    {"inputs": [{"name": "N", "datatype": "INT64", "shape": [1], "data": [200_000]}]},
    separators=(",", ":"),
)
CPU_MODEL = """import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for request in requests:
            n = int(pb_utils.get_input_tensor_by_name(request, "N").as_numpy()[0])
            total = 0
            for i in range(n):
                total += i * i % 7
            out.append(pb_utils.InferenceResponse(
                [pb_utils.Tensor("OUT", np.array([total], dtype=np.int64))]))
        return out
"""


def _repos(tmp: Path) -> tuple[Path, Path, Path]:
    add = tmp / "add"
    for name in ("add_sub", "identity_all"):
        shutil.copytree(MODELS / name, add / name)
    cpu = []
    for count in (1, 2):
        model = tmp / f"cpu{count}" / "cpu_bound"
        (model / "1").mkdir(parents=True)
        (model / "1" / "model.py").write_text(CPU_MODEL)
        (model / "config.pbtxt").write_text(
            'backend: "python"\n'
            'input [ { name: "N" data_type: TYPE_INT64 dims: [ 1 ] } ]\n'
            'output [ { name: "OUT" data_type: TYPE_INT64 dims: [ 1 ] } ]\n'
            f"instance_group [ {{ count: {count} kind: KIND_CPU }} ]\n"
        )
        cpu.append(model.parent)
    return add, cpu[0], cpu[1]


# ----------------------------------------------------------------------------- load


def _wrk(url: str, path: str, body: str, connections: int, seconds: float) -> float:
    return wrk(url, path, connections, seconds, body)


async def _client(host: str, port: int, request: bytes, stop: float, counts: list[int]) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    try:
        while time.perf_counter() < stop:
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            m = re.search(rb"(?i)content-length:\s*(\d+)", head)
            await reader.readexactly(int(m.group(1)) if m else 0)
            if not head.startswith(b"HTTP/1.1 200"):
                raise RuntimeError(f"request failed: {head[:80]!r}")
            counts[0] += 1
    finally:
        writer.close()


def _python_load(url: str, path: str, body: str, connections: int, seconds: float) -> float:
    """Requests/s of ``connections`` keep-alive clients (when wrk is not installed)."""
    host, port = url.split(":")
    request = (
        f"POST {path} HTTP/1.1\r\nHost: {url}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n{body}"
    ).encode()

    async def run() -> float:
        counts = [0]
        start = time.perf_counter()
        stop = start + seconds
        await asyncio.gather(
            *(_client(host, int(port), request, stop, counts) for _ in range(connections))
        )
        return counts[0] / (time.perf_counter() - start)

    return asyncio.run(run())


# ----------------------------------------------------------------------------- servers


def _ours(*flags: str, python: str | None = None) -> Callable[[Path], Any]:
    def start(repo: Path) -> Any:
        from tritonhttp.server import _launch

        return _launch.start(repo, "--log-info=false", *flags, python=python)

    return start


def _real(repo: Path) -> Any:
    from tritonhttp.testing import _real_triton as rt

    return rt.start(repo)


@contextlib.contextmanager
def _serving(cases: dict[str, tuple[Callable[[Path], Any], Path]]) -> Iterator[dict[str, Any]]:
    """Every case's server started (name -> server), all stopped on the way out."""
    servers: dict[str, Any] = {}
    try:
        for name, (start, repo) in cases.items():
            servers[name] = start(repo)
        yield servers
    finally:
        for s in servers.values():
            s.stop()


def _turns(
    servers: dict[str, Any], rounds: int, measure: Callable[[Any], float]
) -> dict[str, list[float]]:
    """``rounds`` values of ``measure(server)`` per server, the servers taking turns."""
    results: dict[str, list[float]] = {name: [] for name in servers}
    for _ in range(rounds):
        for name, s in servers.items():
            results[name].append(measure(s))
    return results


def _load_rounds(
    servers: dict[str, Any],
    path: str,
    body: str,
    connections: int,
    seconds: float,
    rounds: int,
    load: Callable[..., float],
) -> dict[str, list[float]]:
    """Requests/s of each server under ``connections`` clients, the servers taking turns."""
    for s in servers.values():  # warm up
        load(s.url, path, body, connections, 1)
    return _turns(servers, rounds, lambda s: load(s.url, path, body, connections, seconds))


def _trip_rounds(servers: dict[str, Any], rounds: int) -> dict[str, list[float]]:
    """GB/s of the identity round trip on each server (best of 3 per round), in turns."""
    payload = np.random.default_rng(0).random(ROUND_TRIP_ELEMENTS, dtype=np.float32)
    for s in servers.values():  # warm up
        binary_round_trip(s.url, payload)

    def rate(s: Any) -> float:
        return payload.nbytes / min(binary_round_trip(s.url, payload) for _ in range(3)) / 1e9

    return _turns(servers, rounds, rate)


def _measure(
    cases: dict[str, tuple[Callable[[Path], Any], Path]],
    path: str,
    body: str,
    connections: int,
    seconds: float,
    rounds: int,
    load: Callable[..., float],
) -> dict[str, list[float]]:
    with _serving(cases) as servers:
        return _load_rounds(servers, path, body, connections, seconds, rounds, load)


def _fmt(values: list[float], digits: int = 0) -> str:
    med = statistics.median(values)
    spread = (max(values) - min(values)) / med * 100 if med else 0.0
    each = ", ".join(f"{v:.{digits}f}" for v in values)
    return f"{med:.{digits}f} (rounds {each}; spread {spread:.0f}%)"


def _print_case(title: str, res: dict[str, list[float]], real_ok: bool, digits: int = 0) -> None:
    """The rounds of every server, then each of ours against real Triton's median."""
    print(f"{title}:")
    for name, values in res.items():
        print(f"  {name}: {_fmt(values, digits)}")
    if not real_ok:
        return
    ref = statistics.median(res["triton"])
    for name in res:
        if name != "triton":
            ours = statistics.median(res[name])
            print(f"{title.split(' (')[0]}, {name}: ours {ours:.{digits}f}, reference "
                  f"{ref:.{digits}f}, ratio {ours / ref:.2f}")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2, help="duration of each round")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds per case")
    parser.add_argument("--skip-real", action="store_true", help="measure our server only")
    parser.add_argument(
        "--python", action="append", default=[], metavar="PATH",
        help="also run our server under this interpreter (with tritonhttp[server] "
        "installed), in the same rounds; repeatable",
    )  # fmt: skip
    args = parser.parse_args(argv)
    print(machine())
    load = _wrk if shutil.which("wrk") else _python_load
    if load is _python_load:
        print("wrk not found (apt-get install -y wrk): using this script's load generator")
    real_ok = not args.skip_real
    if real_ok:
        from tritonhttp.testing import _real_triton as rt

        problem = rt.platform_problem()
        if problem:
            print(f"real Triton unavailable ({problem}): measuring ours only")
            real_ok = False
        else:
            rt.ensure_installed()
    tmp = Path(tempfile.mkdtemp(prefix="tritonhttp-backend-bench-"))
    try:
        add, cpu1, cpu2 = _repos(tmp)
        cases: dict[str, tuple[Callable[[Path], Any], Path]] = {
            "process": (_ours(), add),
            "in-process": (_ours("--python-isolation=in-process"), add),
        }
        for python in args.python:
            print(f"also: {describe_interpreter(python)}")
            cases[f"process [{python}]"] = (_ours(python=python), add)
            cases[f"in-process [{python}]"] = (
                _ours("--python-isolation=in-process", python=python),
                add,
            )
        if real_ok:
            cases["triton"] = (_real, add)
        with _serving(cases) as servers:
            for connections in CONNECTIONS:
                res = _load_rounds(servers, "/v2/models/add_sub/infer", ADD_BODY, connections,
                                   args.seconds, args.rounds, load)  # fmt: skip
                _print_case(f"add_sub JSON -c{connections} (req/s)", res, real_ok)
            res = _trip_rounds(servers, args.rounds)
            _print_case("16 MiB binary round trip (GB/s)", res, real_ok, digits=3)
        cpu_cases: dict[str, tuple[Callable[[Path], Any], Path]] = {
            "count 1": (_ours(), cpu1),
            "count 2": (_ours(), cpu2),
            "count 2 in-process": (_ours("--python-isolation=in-process"), cpu2),
        }
        res = _measure(cpu_cases, "/v2/models/cpu_bound/infer", CPU_BODY, 4, args.seconds,
                       args.rounds, load)  # fmt: skip
        print("CPU-bound model, 4 clients (req/s):")
        for name, values in res.items():
            print(f"  {name}: {_fmt(values)}")
        one = statistics.median(res["count 1"])
        for name in ("count 2", "count 2 in-process"):
            value = statistics.median(res[name])
            print(f"cpu_bound {name} vs count 1: ours {value:.0f}, reference {one:.0f}, "
                  f"ratio {value / one:.2f}")  # fmt: skip
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
