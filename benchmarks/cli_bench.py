"""triton-cli measured side by side with its references, against REAL Triton.

1. Start-up: ``triton-cli health ready`` (start to exit) against
   ``python -c "import tritonhttp"`` plus one readiness request, run alternately
   (median of ``--runs``). Target: ratio < 2.
2. Throughput: ``triton-cli bench add_sub --concurrency 16`` against ``wrk -c 16``
   posting the add_sub JSON body (a Lua script) to the same server and model, run
   alternately (best of ``--rounds``). Target: ratio >= 0.9. ``bench`` is measured in
   each ``--mode``, and with ``--no-binary`` (the same JSON body wrk sends).

Usage: ``python benchmarks/cli_bench.py [--url HOST:PORT] [--duration 5] [--rounds 2]``;
without ``--url`` it starts real Triton on ``tests/models``. Needs ``wrk`` on PATH
(``apt-get install -y wrk``); the throughput part is skipped without it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLI = Path(sys.executable).with_name("triton-cli")

ADD_SUB_JSON = json.dumps(
    {
        "inputs": [
            {"name": "INPUT0", "shape": [4], "datatype": "FP32", "data": [1, 2, 3, 4]},
            {"name": "INPUT1", "shape": [4], "datatype": "FP32", "data": [10, 20, 30, 40]},
        ],
        "outputs": [{"name": "OUTPUT0"}, {"name": "OUTPUT1"}],
    }
)
WRK_SCRIPT = f"""
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{ADD_SUB_JSON}'
"""


@contextlib.contextmanager
def server(url: str | None) -> Iterator[str]:
    if url:
        yield url
        return
    from tritonhttp.testing import _real_triton as rt

    with rt.running(ROOT / "tests" / "models") as triton:
        yield triton.url


def wall(command: list[str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{command} failed ({done.returncode}): {done.stderr}")
    return elapsed


def startup(url: str, runs: int) -> None:
    ours = [str(CLI), "--url", url, "health", "ready"]
    reference = [
        sys.executable,
        "-c",
        "import tritonhttp\n"
        f"c = tritonhttp.InferenceServerClient({url!r})\n"
        "assert c.is_server_ready()\n"
        "c.close()",
    ]
    wall(ours), wall(reference)  # warm the page cache
    ours_s, ref_s = [], []
    for _ in range(runs):
        ours_s.append(wall(ours))
        ref_s.append(wall(reference))
    o, r = statistics.median(ours_s), statistics.median(ref_s)
    print(
        f"health ready start-to-exit: ours {o * 1000:.0f} ms, "
        f"reference (import tritonhttp + 1 request) {r * 1000:.0f} ms, ratio {o / r:.2f}"
        " (target < 2)"
    )


def run_wrk(url: str, duration: float, threads: int, script: Path) -> float:
    done = subprocess.run(
        [
            "wrk",
            f"-t{threads}",
            "-c16",
            f"-d{duration:g}s",
            "-s",
            str(script),
            f"http://{url}/v2/models/add_sub/infer",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    match = re.search(r"Requests/sec:\s+([\d.]+)", done.stdout)
    if match is None or "Non-2xx" in done.stdout:
        raise SystemExit(f"wrk failed:\n{done.stdout}{done.stderr}")
    return float(match.group(1))


def run_bench(url: str, duration: float, *extra: str) -> float:
    done = subprocess.run(
        [
            str(CLI),
            "--url",
            url,
            "--json",
            "bench",
            "add_sub",
            "-c",
            "16",
            "-d",
            f"{duration:g}",
            *extra,
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    level = json.loads(done.stdout)["levels"][0]
    if level["errors"]:
        raise SystemExit(f"bench had errors: {level['first_error']}")
    return float(level["throughput"]["requests_per_s"])


def throughput(url: str, duration: float, rounds: int) -> None:
    if shutil.which("wrk") is None:
        print("bench vs wrk: skipped (wrk is not installed: apt-get install -y wrk)")
        return
    variants = {
        "bench --mode loop (binary)": ["--mode", "loop"],
        "bench --mode loop --no-binary (wrk's JSON body)": ["--mode", "loop", "--no-binary"],
        "bench --mode sync (16 threads, one client)": ["--mode", "sync"],
        "bench --mode async (async_infer)": ["--mode", "async"],
    }
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "add_sub.lua"
        script.write_text(WRK_SCRIPT)
        best_wrk = 0.0
        best = dict.fromkeys(variants, 0.0)
        for _ in range(rounds):
            for threads in (1, 2):
                best_wrk = max(best_wrk, run_wrk(url, duration, threads, script))
            for name, extra in variants.items():
                best[name] = max(best[name], run_bench(url, duration, *extra))
    print(f"wrk -c16 (best of -t1/-t2, {rounds} rounds): {best_wrk:.0f} req/s")
    for name, value in best.items():
        print(
            f"{name}, c=16: ours {value:.0f} req/s, reference wrk {best_wrk:.0f} req/s, "
            f"ratio {value / best_wrk:.2f} (target >= 0.9)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="a running Triton serving tests/models")
    parser.add_argument("--runs", type=int, default=15, help="start-up runs per side")
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per load run")
    parser.add_argument("--rounds", type=int, default=2, help="alternating load rounds")
    args = parser.parse_args()
    with server(args.url) as url:
        startup(url, args.runs)
        throughput(url, args.duration, args.rounds)


if __name__ == "__main__":
    main()
