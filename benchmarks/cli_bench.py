"""triton-cli measured side by side with its references, against REAL Triton.

1. Start-up: ``triton-cli health ready`` (start to exit) against
   ``python -c "import tritonhttp"`` plus one readiness request, run alternately
   (median of ``--runs``). Target: ratio < 2.
2. Throughput, the wrk cross-check: ``triton-cli bench add_sub -c 16`` against
   ``wrk -c 16`` sending the very request bench sends (the same inputs given with
   ``-i``, the body made by tritonhttp's ``generate_request_body``, posted by a Lua
   script with the same headers), once with binary tensors and once as JSON. Each round
   runs wrk with one and with two threads and then bench, back to back; the round's
   ratio is bench's throughput over the better wrk, and the ratios of ``--rounds``
   rounds are printed as min / median / max. Target: bench within 10% of wrk (ratio
   0.9-1.1) in ``loop`` mode. ``sync`` and ``async`` modes are shown beside it.
   Run against the bundled server and real Triton (``--server``).

Usage: ``python benchmarks/cli_bench.py [--server bundled|real|both] [--url HOST:PORT]
[--duration 5] [--rounds 5]``; ``--url`` uses a running server serving ``tests/models``
instead of starting one. Needs ``wrk`` on PATH (``apt-get install -y wrk``); the
throughput part is skipped without it.
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

#: The inputs bench sends (given with -i) and wrk posts.
ADD_SUB_INPUTS = {"INPUT0": [1.0, 2.0, 3.0, 4.0], "INPUT1": [10.0, 20.0, 30.0, 40.0]}


def request_body(binary: bool) -> tuple[bytes, int | None]:
    """The /infer body bench sends for ADD_SUB_INPUTS, and its JSON header length."""
    import numpy as np

    import tritonhttp

    inputs = [
        tritonhttp.InferInput(name, [4], "FP32").set_data_from_numpy(
            np.array(values, dtype=np.float32), binary_data=binary
        )
        for name, values in ADD_SUB_INPUTS.items()
    ]
    outputs = [
        tritonhttp.InferRequestedOutput(n, binary_data=binary) for n in ("OUTPUT0", "OUTPUT1")
    ]
    return tritonhttp.InferenceServerClient.generate_request_body(inputs, outputs)


def wrk_script(binary: bool) -> str:
    """A wrk Lua script posting :func:`request_body` (bytes escaped for Lua)."""
    body, json_size = request_body(binary)
    escaped = "".join(f"\\{b:03d}" for b in body)
    if json_size is None:
        header = 'wrk.headers["Content-Type"] = "application/json"'
    else:
        header = f'wrk.headers["Inference-Header-Content-Length"] = "{json_size}"'
    return f'wrk.method = "POST"\n{header}\nwrk.body = "{escaped}"\n'


@contextlib.contextmanager
def server(kind: str, url: str | None) -> Iterator[str]:
    """A server serving tests/models: the one at ``url``, or a fresh one of ``kind``."""
    if url:
        yield url
        return
    if kind == "bundled":
        from tritonhttp.server import _launch

        bundled = _launch.start(ROOT / "tests" / "models")
        try:
            yield bundled.url
        finally:
            bundled.stop()
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
            *[f"-i{name}={','.join(map(str, v))}" for name, v in ADD_SUB_INPUTS.items()],
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
    """Per round and body: wrk -t1, wrk -t2 and bench's loop mode back to back, the ratio
    taken against the better wrk of that round; then the sync and async modes once."""
    if shutil.which("wrk") is None:
        print("bench vs wrk: skipped (wrk is not installed: apt-get install -y wrk)")
        return
    loop = {True: ["--mode", "loop"], False: ["--mode", "loop", "--no-binary"]}
    others = {"sync": ["--mode", "sync"], "async": ["--mode", "async"]}
    with tempfile.TemporaryDirectory() as tmp:
        scripts = {}
        for binary in (True, False):
            scripts[binary] = Path(tmp) / f"add_sub_{'binary' if binary else 'json'}.lua"
            scripts[binary].write_text(wrk_script(binary))
        pairs: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
        other_rates: dict[str, list[float]] = {name: [] for name in others}
        for _ in range(rounds):
            for binary, script in scripts.items():
                wrk = max(run_wrk(url, duration, threads, script) for threads in (1, 2))
                pairs[binary].append((run_bench(url, duration, *loop[binary]), wrk))
            for name, extra in others.items():
                other_rates[name].append(run_bench(url, duration, *extra))
    for binary, measured in pairs.items():
        kind = "binary" if binary else "JSON"
        ratios = [ours / wrk for ours, wrk in measured]
        print(
            f"bench --mode loop, {kind}, c=16 against wrk -c16 (better of -t1/-t2 in the "
            f"same round), {rounds} rounds: ours {spread([o for o, _ in measured], 0)} req/s, "
            f"wrk {spread([w for _, w in measured], 0)} req/s, "
            f"ratio {spread(ratios, 2)} (target 0.9-1.1)"
        )
    reference = statistics.median(w for _, w in pairs[True])
    for name, rates in other_rates.items():
        print(
            f"bench --mode {name}, binary, c=16: ours {spread(rates, 0)} req/s, "
            f"ratio to the median wrk {statistics.median(rates) / reference:.2f} "
            "(shown for comparison)"
        )


def spread(values: list[float], digits: int) -> str:
    """min / median / max"""
    low, mid, high = min(values), statistics.median(values), max(values)
    return f"{low:,.{digits}f} / {mid:,.{digits}f} / {high:,.{digits}f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="a running server serving tests/models")
    parser.add_argument(
        "--server",
        choices=["bundled", "real", "both"],
        default="both",
        help="which server to start (without --url)",
    )
    parser.add_argument("--runs", type=int, default=15, help="start-up runs per side")
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per load run")
    parser.add_argument("--rounds", type=int, default=5, help="alternating load rounds")
    args = parser.parse_args()
    kinds = ["bundled", "real"] if args.server == "both" else [args.server]
    for kind in kinds if not args.url else ["given"]:
        print(f"== {kind} server")
        with server(kind, args.url) as url:
            startup(url, args.runs)
            throughput(url, args.duration, args.rounds)


if __name__ == "__main__":
    main()
