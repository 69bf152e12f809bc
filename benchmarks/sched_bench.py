"""Scheduler overhead: this checkout's server vs a baseline git ref, side by side.

    python benchmarks/sched_bench.py [--baseline-ref main] [--seconds 3] [--rounds 3]

Both servers serve the same repository: ``add_sub`` (no dynamic batching: the FIFO
fast path) and ``add_sub_dyn`` (the same model with ``max_batch_size: 8`` and
``dynamic_batching {}``). wrk posts JSON requests at -c1 and -c16, rounds alternate
between the servers, medians are kept; the baseline is the ``tritonhttp`` package of
``--baseline-ref`` (extracted with ``git archive``). Prints ``name: ours X, baseline Y,
ratio R`` (requests/s; ratio > 1 means this checkout is faster). Needs ``wrk``.

It also times the core alone, in-process (no HTTP): ``ModelVersion.infer`` on a model
without dynamic batching whose instance answers at once — the per-request cost of
admission-to-answer scheduling, which wrk on a shared machine cannot resolve.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from _common import ADD_BODY  # noqa: E402
from server_bench import _wrk  # noqa: E402

DYN_BODY = json.dumps({"inputs": [
    {"name": "INPUT0", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]},
    {"name": "INPUT1", "datatype": "FP32", "shape": [1, 4], "data": [1, 1, 1, 1]},
]}, separators=(",", ":"))  # fmt: skip


def _repo(tmp: Path) -> Path:
    repo = tmp / "repo"
    shutil.copytree(ROOT / "tests" / "models" / "add_sub", repo / "add_sub")
    dyn = repo / "add_sub_dyn"
    shutil.copytree(ROOT / "tests" / "models" / "add_sub", dyn)
    config = (dyn / "config.pbtxt").read_text().replace('name: "add_sub"', 'name: "add_sub_dyn"')
    (dyn / "config.pbtxt").write_text(config + "max_batch_size: 8\ndynamic_batching { }\n")
    return repo


def _baseline(ref: str, tmp: Path) -> Path:
    """The ``tritonhttp`` package of ``ref``, extracted under ``tmp``."""
    data = subprocess.run(
        ["git", "-C", str(ROOT), "archive", ref, "tritonhttp"], check=True, capture_output=True
    ).stdout
    target = tmp / "baseline"
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(target, filter="data")
    return target


@contextlib.contextmanager
def _server(repo: Path, pythonpath: Path | None) -> Iterator[Any]:
    from tritonhttp.server import _launch

    old = os.environ.get("PYTHONPATH")
    if pythonpath is not None:
        os.environ["PYTHONPATH"] = str(pythonpath)
    try:
        server = _launch.start(repo, "--log-info=false")
    finally:
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old
    try:
        yield server
    finally:
        server.stop()


_CORE_SCRIPT = """
import asyncio, time
import numpy as np
from google.protobuf import text_format
from tritonhttp.server.core._config import normalize
from tritonhttp.server.core._model import ModelVersion
from tritonhttp.server.core._types import InferRequest, InferResponse, InputTensor
from tritonhttp.server.core.model_config_pb2 import ModelConfig

class Instant:
    name = "instant"
    async def execute(self, requests, times):
        return [InferResponse() for _ in requests]
    async def finalize(self):
        pass

cfg = ModelConfig()
text_format.Parse('name: "m" backend: "python" '
                  'input [ { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] } ] '
                  'output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]', cfg)
normalize(cfg, "m", [])
mv = ModelVersion("m", 1)
mv.activate(cfg, [Instant()])
arr = np.zeros([1], np.int32)

async def main():
    best = 1e9
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(100_000):
            tensor = InputTensor("IN", "INT32", [1], array=arr)
            await mv.infer(InferRequest(id="", inputs={"IN": tensor}))
        best = min(best, (time.perf_counter() - t0) / 100_000)
    print(best)

asyncio.run(main())
"""


def _core_us(pythonpath: Path | None) -> float:
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    out = subprocess.run(
        [sys.executable, "-c", _CORE_SCRIPT], env=env, check=True, capture_output=True, text=True
    ).stdout
    return float(out.strip()) * 1e6


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--baseline-ref", default="main")
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="tritonhttp-sched-core-") as tmpdir:
        base = _baseline(args.baseline_ref, Path(tmpdir))
        ours_us = statistics.median(_core_us(None) for _ in range(args.rounds))
        base_us = statistics.median(_core_us(base) for _ in range(args.rounds))
    print(
        f"core infer (in-process, us/request): ours {ours_us:.2f}, baseline {base_us:.2f}, "
        f"ratio {base_us / ours_us:.2f}"
    )
    if shutil.which("wrk") is None:
        print("wrk is not installed (apt-get install -y wrk): no HTTP measurements")
        return
    cases = [
        ("add_sub JSON -c1", "/v2/models/add_sub/infer", 1, ADD_BODY),
        ("add_sub JSON -c16", "/v2/models/add_sub/infer", 16, ADD_BODY),
        ("dynamic batching JSON -c1", "/v2/models/add_sub_dyn/infer", 1, DYN_BODY),
        ("dynamic batching JSON -c16", "/v2/models/add_sub_dyn/infer", 16, DYN_BODY),
    ]
    results: dict[str, dict[str, list[float]]] = {c[0]: {"ours": [], "base": []} for c in cases}
    with tempfile.TemporaryDirectory(prefix="tritonhttp-sched-bench-") as tmpdir:
        tmp = Path(tmpdir)
        repo = _repo(tmp)
        base = _baseline(args.baseline_ref, tmp)
        with _server(repo, None) as ours, _server(repo, base) as baseline:
            for _name, path, conns, body in cases:  # warm-up
                for server in (ours, baseline):
                    _wrk(server.url, path, conns, 1, body)
            for _ in range(args.rounds):
                for name, path, conns, body in cases:
                    for key, server in (("ours", ours), ("base", baseline)):
                        rate = _wrk(server.url, path, conns, args.seconds, body)
                        results[name][key].append(rate)
    for name, r in results.items():
        ours_rate, base_rate = statistics.median(r["ours"]), statistics.median(r["base"])
        print(
            f"{name}: ours {ours_rate:,.0f}, baseline {base_rate:,.0f}, "
            f"ratio {ours_rate / base_rate:.2f}"
        )


if __name__ == "__main__":
    main()
