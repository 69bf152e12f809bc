"""What tracing costs per request: our server and real Triton 2.51.0, each without
tracing and with ``--trace-config level=TIMESTAMPS --trace-config rate=1`` (Triton's
trace file mode, every request traced), side by side in one run.

    python benchmarks/trace_bench.py [--seconds 5] [--rounds 3] [--connections 1]
                                     [--skip-real]

Load: wrk posting the add_sub JSON request of ``tests/models`` on ``--connections``
keep-alive connections. The four servers (ours and Triton, tracing off and on) take
turns for ``--rounds`` rounds; the figures are medians. The cost of tracing per request
is ``1/rps(on) - 1/rps(off)`` in microseconds of wall time per request at that
concurrency. Each traced server writes its trace file to a temporary folder (deleted
afterwards); the number of traces it wrote is printed, to show every request was traced.

Prints ``name: ours X, reference Y, ratio R`` (ratio: reference / ours for costs, ours /
reference for throughput).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ADD_BODY, REPO, line, machine, wrk

TRACE_FLAGS = ("--trace-config=level=TIMESTAMPS", "--trace-config=rate=1")
PATH = "/v2/models/add_sub/infer"


def _ours(*flags: str) -> Any:
    from tritonhttp.server import _launch

    return _launch.start(REPO, "--log-info=false", *flags)


def _real(*flags: str) -> Any:
    from tritonhttp.testing import _real_triton as rt

    rt.ensure_installed()
    return rt.start(REPO, *flags)


def _traces(folder: Path) -> int:
    """How many traces the files in ``folder`` hold (distinct ids)."""
    ids: set[int] = set()
    for path in folder.iterdir():
        ids.update(o["id"] for o in json.loads(path.read_text()))
    return len(ids)


def _measure(
    contenders: dict[str, Callable[[], Any]], rounds: int, seconds: float, connections: int
) -> dict[str, float]:
    """Median requests per second of each contender, in alternating rounds."""
    servers = {name: start() for name, start in contenders.items()}
    rates: dict[str, list[float]] = {name: [] for name in servers}
    try:
        for server in servers.values():  # warm-up
            wrk(server.url, PATH, connections, 1, ADD_BODY)
        for _ in range(rounds):
            for name, server in servers.items():
                rates[name].append(wrk(server.url, PATH, connections, seconds, ADD_BODY))
    finally:
        for server in servers.values():
            server.stop()
    return {name: statistics.median(values) for name, values in rates.items()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--connections", type=int, default=1)
    p.add_argument("--skip-real", action="store_true", help="measure our server alone")
    args = p.parse_args(argv)
    print(machine())
    with tempfile.TemporaryDirectory() as tmp:
        folders = {name: Path(tmp) / name for name in ("ours", "real")}
        for folder in folders.values():
            folder.mkdir()

        def traced(start: Callable[..., Any], folder: Path) -> Callable[[], Any]:
            return lambda: start(
                f"--trace-config=triton,file={folder / 'trace.json'}", *TRACE_FLAGS
            )

        contenders: dict[str, Callable[[], Any]] = {
            "ours off": _ours,
            "ours on": traced(_ours, folders["ours"]),
        }
        if not args.skip_real:
            contenders["real off"] = _real
            contenders["real on"] = traced(_real, folders["real"])
        rps = _measure(contenders, args.rounds, args.seconds, args.connections)
        counts = {name: _traces(folder) for name, folder in folders.items()}
    c = args.connections
    ours_cost = (1 / rps["ours on"] - 1 / rps["ours off"]) * 1e6
    if args.skip_real:
        print(f"add_sub -c{c} rps: off {rps['ours off']:,.0f}, traced {rps['ours on']:,.0f}")
        print(f"tracing cost per request -c{c}: {ours_cost:.1f} us ({counts['ours']} traces)")
        return 0
    real_cost = (1 / rps["real on"] - 1 / rps["real off"]) * 1e6
    print(line(f"add_sub traced -c{c}", rps["ours on"], rps["real on"], "req/s"))
    print(line(f"add_sub untraced -c{c}", rps["ours off"], rps["real off"], "req/s"))
    print(line(f"tracing cost per request -c{c}", ours_cost, real_cost, "us", False))
    print(f"traces written: ours {counts['ours']}, reference {counts['real']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
