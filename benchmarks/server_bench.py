"""Our server vs real Triton 2.51.0, side by side on the same repository, in one run.

    python benchmarks/server_bench.py [--seconds 3] [--rounds 3] [--skip-real] [--with-uvicorn]

The repository holds three models (``add_sub``, ``identity_all``, ``identity_bytes``).
Measures (each server in turn, several alternating rounds, median kept):

* time from process start to ``/v2/health/ready`` (seconds) and the memory of the
  server's whole process tree right after that (MiB: the proportional set size of the
  server and every process it started, i.e. our worker processes or real Triton's
  Python-backend stubs; each shared page counted once), for our server with worker
  processes (the default) and with in-process models;
* with our server running its models in-process (``--python-isolation=in-process``):
  ``add_sub`` JSON inference with wrk at -c1 and -c16 (requests/s), ``/v2/health/live``
  with wrk at -c1 (requests/s), and a 64 MiB FP32 binary identity round trip (GB/s of
  payload, raw socket client, the best of 3 per round).

``benchmarks/backend_bench.py`` measures inference in both isolation modes, and a 16 MiB
round trip in both. ``--with-uvicorn`` adds our in-process server under stock uvicorn
(``--http-server=uvicorn``) to the in-process cases, to show what the bundled HTTP
server buys.

wrk is not installed by this script (``apt-get install -y wrk``); without it the wrk rows
are skipped with a note. Real Triton comes from ``tritonhttp.testing._real_triton``
(nvidia-pytriton in a cached venv). Prints ``name: ours X, reference Y, ratio R`` (for
times and memory the ratio is ours / reference too, so lower is better there).
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

try:
    from _common import ADD_BODY, binary_round_trip, machine, process_tree, wrk
except ImportError:  # run as a module
    from benchmarks._common import ADD_BODY, binary_round_trip, machine, process_tree, wrk

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "tests" / "models"
THREE = ("add_sub", "identity_all", "identity_bytes")


def _repo() -> Path:
    tmp = Path(tempfile.mkdtemp(prefix="tritonhttp-bench-"))
    for name in THREE:
        shutil.copytree(MODELS / name, tmp / name)
    return tmp


class Target:
    """A server configuration measured in turn with the others (``start(repo)`` starts it)."""

    def __init__(self, name: str, start: Callable[[Path], Any]) -> None:
        self.name = name
        self.start = start
        self.server: Any = None


REFERENCE = "reference"


def _start_ours(repo: Path, *flags: str) -> Any:
    from tritonhttp.server import _launch

    return _launch.start(repo, "--log-info=false", *flags)


def _start_in_process(repo: Path) -> Any:
    return _start_ours(repo, "--python-isolation=in-process")


def _start_ours_uvicorn(repo: Path) -> Any:
    return _start_ours(repo, "--python-isolation=in-process", "--http-server=uvicorn")


def _start_real(repo: Path) -> Any:
    from tritonhttp.testing import _real_triton as rt

    return rt.start(repo)


def _memory_mib(pid: int) -> float:
    """Proportional set size of ``pid``'s process tree in MiB (resident size where the
    kernel gives no ``smaps_rollup``)."""
    total_kib = 0
    for p, _ in process_tree(pid):
        for name, key in (("smaps_rollup", "Pss:"), ("status", "VmRSS:")):
            try:
                text = Path(f"/proc/{p}/{name}").read_text()
            except OSError:
                continue
            m = re.search(rf"(?m)^{key}\s+(\d+)\s+kB", text)
            if m:
                total_kib += int(m.group(1))
                break
    return total_kib / 1024


def _start_up(start: Callable[[Path], Any], repo: Path) -> tuple[float, float]:
    """(seconds from process start to ready, MiB of its process tree once ready)."""
    t0 = time.perf_counter()
    server = start(repo)
    elapsed = time.perf_counter() - t0
    try:
        return elapsed, _memory_mib(server.process.pid)
    finally:
        server.stop()


def _real_target(skip: bool) -> list[Target]:
    """Real Triton as a target, unless skipped or unavailable here."""
    if skip:
        return []
    from tritonhttp.testing import _real_triton as rt

    problem = rt.platform_problem()
    if problem:
        print(f"real Triton unavailable ({problem}): measuring ours only")
        return []
    rt.ensure_installed()
    return [Target(REFERENCE, _start_real)]


def _alternate(
    targets: list[Target], rounds: int, measure: Callable[[Target], float]
) -> dict[str, float]:
    """Median of ``rounds`` values of ``measure`` per target, the targets taking turns."""
    values: dict[str, list[float]] = {t.name: [] for t in targets}
    for _ in range(rounds):
        for t in targets:
            values[t.name].append(measure(t))
    return {name: statistics.median(v) for name, v in values.items()}


def _report(results: dict[str, dict[str, float]]) -> None:
    for case, by in results.items():
        ref = by.get(REFERENCE)
        for who, ours in by.items():
            if who == REFERENCE:
                continue
            if ref:
                print(f"{case}, {who}: ours {ours:.5g}, reference {ref:.5g}, "
                      f"ratio {ours / ref:.2f}")  # fmt: skip
            else:
                print(f"{case}, {who}: ours {ours:.5g}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=3, help="wrk duration per round")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds per case")
    parser.add_argument("--skip-real", action="store_true", help="measure our server only")
    parser.add_argument(
        "--with-uvicorn",
        action="store_true",
        help="also measure our server under --http-server=uvicorn (the HTTP stack it replaced)",
    )
    args = parser.parse_args(argv)
    print(machine())

    repo = _repo()
    real = _real_target(args.skip_real)
    targets = [Target("in-process", _start_in_process)]
    if args.with_uvicorn:
        targets.append(Target("in-process under uvicorn", _start_ours_uvicorn))
    targets += real
    results: dict[str, dict[str, float]] = {}
    try:
        start_targets = [Target("worker processes", _start_ours), targets[0], *real]
        starts: dict[str, list[tuple[float, float]]] = {t.name: [] for t in start_targets}
        for _ in range(args.rounds):
            for t in start_targets:
                starts[t.name].append(_start_up(t.start, repo))
        for case, i in (
            ("time to ready, 3 models (s)", 0),
            ("memory after load, 3 models (MiB)", 1),
        ):
            results[case] = {
                name: statistics.median(g[i] for g in got) for name, got in starts.items()
            }
        for t in targets:
            t.server = t.start(repo)
        cases: list[tuple[str, str, int, str | None]] = [
            ("add_sub JSON -c1 (req/s)", "/v2/models/add_sub/infer", 1, ADD_BODY),
            ("add_sub JSON -c16 (req/s)", "/v2/models/add_sub/infer", 16, ADD_BODY),
            ("health -c1 (req/s)", "/v2/health/live", 1, None),
        ]
        if shutil.which("wrk") is None:
            print("wrk not found (apt-get install -y wrk): skipping the wrk cases")
        else:
            for case, path, conns, body in cases:
                for t in targets:  # warm-up
                    wrk(t.server.url, path, conns, 1, body)
                results[case] = _alternate(
                    targets,
                    args.rounds,
                    lambda t: wrk(t.server.url, path, conns, args.seconds, body),  # noqa: B023
                )
        payload = np.random.default_rng(0).random(16 * 1024 * 1024, dtype=np.float32)
        for t in targets:
            binary_round_trip(t.server.url, payload)  # warm-up

        def gb_per_s(t: Target) -> float:
            best = min(binary_round_trip(t.server.url, payload) for _ in range(3))
            return payload.nbytes / best / 1e9

        results["64 MiB binary round trip (GB/s)"] = _alternate(targets, args.rounds, gb_per_s)
    finally:
        for t in targets:
            if t.server is not None:
                t.server.stop()
        shutil.rmtree(repo, ignore_errors=True)
    _report(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
