"""Our server vs real Triton 2.51.0, side by side on the same repository, in one run.

    python benchmarks/server_bench.py [--seconds 3] [--rounds 3] [--skip-real]

Our server runs its Python models in-process (``--python-isolation=in-process``, the
configuration the server issue's targets name); ``benchmarks/backend_bench.py`` measures
the default process isolation.

Measures (each server in turn, several alternating rounds, median kept):

* ``add_sub`` JSON inference with wrk at -c1 and -c16 (requests/s),
* ``/v2/health/live`` with wrk at -c1 (requests/s),
* a 64 MiB FP32 binary identity round trip (GB/s of payload, raw socket client; the
  best of 3 per round),
* time from process start to ``/v2/health/ready`` with three models (seconds).

``--with-uvicorn`` adds our server under stock uvicorn (``--http-server=uvicorn``) as a
third contender, to show what the bundled HTTP server buys.

wrk is not installed by this script (``apt-get install -y wrk``); without it the wrk rows
are skipped with a note. Real Triton comes from ``tritonhttp.testing._real_triton``
(nvidia-pytriton in a cached venv). Prints ``name: ours X, reference Y, ratio R``.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

try:
    from _common import ADD_BODY, machine
except ImportError:  # run as a module
    from benchmarks._common import ADD_BODY, machine

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "tests" / "models"
THREE = ("add_sub", "identity_all", "identity_bytes")


def _repo() -> Path:
    tmp = Path(tempfile.mkdtemp(prefix="tritonhttp-bench-"))
    for name in THREE:
        shutil.copytree(MODELS / name, tmp / name)
    return tmp


def _wrk(url: str, path: str, connections: int, seconds: float, post: str | None) -> float:
    args = ["wrk", "-t1", f"-c{connections}", f"-d{max(1, round(seconds))}s"]
    with tempfile.TemporaryDirectory() as tmp:
        if post is not None:
            script = Path(tmp) / "post.lua"
            script.write_text(
                f'wrk.method = "POST"\nwrk.body = {json.dumps(post)}\n'
                'wrk.headers["Content-Type"] = "application/json"\n'
            )
            args += ["-s", str(script)]
        cmd = [*args, f"http://{url}{path}"]
        out = subprocess.run(cmd, capture_output=True, text=True).stdout
    m = re.search(r"Requests/sec:\s+([\d.]+)", out)
    if not m or "Non-2xx" in out:
        raise RuntimeError(f"wrk failed against {url}{path}:\n{out}")
    return float(m.group(1))


def _recv_exact(sock: socket.socket, view: memoryview) -> None:
    got = 0
    while got < len(view):
        n = sock.recv_into(view[got:])
        if not n:
            raise ConnectionError("connection closed")
        got += n


def _round_trip(url: str, payload: np.ndarray[Any, Any]) -> float:
    """Seconds for one binary identity request of ``payload`` (FP32) over a raw socket."""
    host, port = url.split(":")
    blob = memoryview(payload).cast("B")
    head = json.dumps({
        "inputs": [{"name": "IN_FP32", "datatype": "FP32", "shape": [payload.size],
                    "parameters": {"binary_data_size": blob.nbytes}}],
        "outputs": [{"name": "OUT_FP32", "parameters": {"binary_data": True}}],
    }).encode()  # fmt: skip
    request = (
        f"POST /v2/models/identity_all/infer HTTP/1.1\r\nHost: {url}\r\n"
        f"Inference-Header-Content-Length: {len(head)}\r\n"
        f"Content-Length: {len(head) + blob.nbytes}\r\n\r\n"
    ).encode() + head
    with socket.create_connection((host, int(port))) as sock:
        t0 = time.perf_counter()
        sock.sendall(request)
        sock.sendall(blob)
        buf = b""
        while b"\r\n\r\n" not in buf:
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError("no response")
            buf += chunk
        header, _, rest = buf.partition(b"\r\n\r\n")
        status = header.split(b" ", 2)[1]
        length = int(re.search(rb"(?im)^content-length:\s*(\d+)", header).group(1))  # type: ignore[union-attr]
        body = np.empty(length, dtype=np.uint8).data  # (a bytearray would be zero-filled)
        body[: len(rest)] = rest
        _recv_exact(sock, body[len(rest) :])
        elapsed = time.perf_counter() - t0
    if status != b"200":
        raise RuntimeError(f"64 MiB round trip failed on {url}: {bytes(body[:300])!r}")
    ihcl = int(re.search(rb"(?i)inference-header-content-length:\s*(\d+)", header).group(1))  # type: ignore[union-attr]
    if bytes(body[ihcl : ihcl + 64]) != blob[:64].tobytes() or len(body) - ihcl != blob.nbytes:
        raise RuntimeError("64 MiB round trip returned different bytes")
    return elapsed


class Target:
    def __init__(self, name: str, start: Callable[[Path], Any]) -> None:
        self.name = name
        self.start = start
        self.server: Any = None


def _start_ours(repo: Path, *flags: str) -> Any:
    from tritonhttp.server import _launch

    return _launch.start(repo, "--log-info=false", "--python-isolation=in-process", *flags)


def _start_ours_uvicorn(repo: Path) -> Any:
    return _start_ours(repo, "--http-server=uvicorn")


def _start_real(repo: Path) -> Any:
    from tritonhttp.testing import _real_triton as rt

    return rt.start(repo)


def _time_to_ready(start: Callable[[Path], Any], repo: Path) -> float:
    t0 = time.perf_counter()
    server = start(repo)
    elapsed = time.perf_counter() - t0
    server.stop()
    return elapsed


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
    targets = [Target("ours", _start_ours)]
    if args.with_uvicorn:
        targets.append(Target("uvicorn", _start_ours_uvicorn))
    if not args.skip_real:
        from tritonhttp.testing import _real_triton as rt

        problem = rt.platform_problem()
        if problem:
            print(f"real Triton unavailable ({problem}): measuring ours only")
        else:
            rt.ensure_installed()
            targets.append(Target("reference", _start_real))
    results: dict[str, dict[str, float]] = {}

    def record(case: str, who: str, values: list[float]) -> None:
        results.setdefault(case, {})[who] = statistics.median(values)

    try:
        startup: dict[str, list[float]] = {t.name: [] for t in targets}
        for _ in range(args.rounds):
            for t in targets:
                startup[t.name].append(_time_to_ready(t.start, repo))
        for t in targets:
            record("time to ready, 3 models (s)", t.name, startup[t.name])
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
                values: dict[str, list[float]] = {t.name: [] for t in targets}
                for t in targets:  # warm-up
                    _wrk(t.server.url, path, conns, 1, body)
                for _ in range(args.rounds):
                    for t in targets:
                        values[t.name].append(_wrk(t.server.url, path, conns, args.seconds, body))
                for t in targets:
                    record(case, t.name, values[t.name])
        payload = np.random.default_rng(0).random(16 * 1024 * 1024, dtype=np.float32)
        trips: dict[str, list[float]] = {t.name: [] for t in targets}
        for t in targets:
            _round_trip(t.server.url, payload)  # warm-up
        for _ in range(args.rounds):
            for t in targets:
                best = min(_round_trip(t.server.url, payload) for _ in range(3))
                trips[t.name].append(payload.nbytes / best / 1e9)
        for t in targets:
            record("64 MiB binary round trip (GB/s)", t.name, trips[t.name])
    finally:
        for t in targets:
            if t.server is not None:
                t.server.stop()
        shutil.rmtree(repo, ignore_errors=True)

    for case, by in results.items():
        ours = by["ours"]
        if "reference" in by:
            ref = by["reference"]
            print(f"{case}: ours {ours:.5g}, reference {ref:.5g}, ratio {ours / ref:.2f}")
        else:
            print(f"{case}: ours {ours:.4g}")
        if "uvicorn" in by:
            base = by.get("reference", ours)
            print(f"  under uvicorn: {by['uvicorn']:.5g}, ratio {by['uvicorn'] / base:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
