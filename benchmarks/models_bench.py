"""Realistic Python models with dynamic batching: our server against real Triton 2.51.0.

    python benchmarks/models_bench.py [--seconds 3] [--rounds 5]
                                      [--models mlp,prep,tok,pipeline]
                                      [--concurrency 1,16,64] [--skip-real]
                                      [--python PATH ...]

Three models whose ``execute`` does real work, each batched by the server, and an
ensemble of them:

* ``mlp``: an onnxruntime MLP (64 -> 256 -> 10, ReLU), ``max_batch_size: 64``, dynamic
  batching, one instance; the ONNX file is generated here (fixed seed), nothing is
  downloaded. JSON requests of 64 FP32 values.
* ``prep``: image pre-processing in numpy (per-channel normalisation, then a 2x2 mean
  pool from [3, 224, 224] to [3, 112, 112] FP32), ``max_batch_size: 16``, dynamic
  batching, ``count: 2``. Binary-data requests (588 KiB in, 147 KiB out).
* ``tok``: a tokenizer-style BYTES model (lower-case, split on whitespace, hash each word
  to an INT64 id; outputs of varying length), ``max_batch_size: 32``, dynamic batching.
* ``pipeline``: an ensemble of ``prep`` -> ``embed`` (numpy: [3, 112, 112] pooled to 64
  features, dynamic batching, one instance) -> ``mlp``, ``max_batch_size: 16``; the
  request is ``prep``'s, the answer the MLP's 10 scores. Its batch sizes are reported per
  step.

Every server serves the same repository; load comes from wrk (one thread, keep-alive
connections, ``apt-get install -y wrk``) at each concurrency, the servers taking turns for
``--rounds`` rounds. Per round: requests/s, p50 and p99 latency (wrk's), and the server's
CPU per request (user + system time of the server's whole process tree -- our worker
processes, real Triton's Python stubs -- over the round, divided by the requests wrk
completed; beside it, the part of the server's own process), and the batch sizes each
server executed over the measured rounds of that concurrency (from the statistics
extension), side by side. Before measuring, one request to each model must give the same
outputs on every server.

``--python PATH`` adds our server under another interpreter to the same rounds (its
ratios are printed with ``[PATH]``): the bundled server spends most of its CPU in the
interpreter, whose build (PGO, LTO) moves its figures; real Triton's stub keeps this
script's interpreter.

The models run under onnxruntime and numpy in both servers: real Triton's Python stub
uses its own environment (nvidia-pytriton's venv, numpy 1.x), so this script installs
onnxruntime there when it is missing.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

try:
    from _common import cpu_seconds, describe_interpreter, machine, process_tree
except ImportError:  # run as a module
    from benchmarks._common import cpu_seconds, describe_interpreter, machine, process_tree

MLP_CONFIG = """name: "mlp"
backend: "python"
max_batch_size: 64
input [ { name: "X" data_type: TYPE_FP32 dims: [ 64 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 10 ] } ]
dynamic_batching { }
instance_group [ { count: 1 kind: KIND_CPU } ]
"""

MLP_MODEL = """import os

import numpy as np
import onnxruntime as ort
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        path = os.path.join(os.path.dirname(__file__), "mlp.onnx")
        self.session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])

    def execute(self, requests):
        parts = [pb_utils.get_input_tensor_by_name(r, "X").as_numpy() for r in requests]
        y = self.session.run(None, {"X": np.concatenate(parts)})[0]
        out, at = [], 0
        for part in parts:
            n = len(part)
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", y[at : at + n])]))
            at += n
        return out
"""

PREP_CONFIG = """name: "prep"
backend: "python"
max_batch_size: 16
input [ { name: "IMAGE" data_type: TYPE_FP32 dims: [ 3, 224, 224 ] } ]
output [ { name: "PIXELS" data_type: TYPE_FP32 dims: [ 3, 112, 112 ] } ]
dynamic_batching { }
instance_group [ { count: 2 kind: KIND_CPU } ]
"""

PREP_MODEL = """import numpy as np
import triton_python_backend_utils as pb_utils

MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32).reshape(1, 3, 1, 1)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32).reshape(1, 3, 1, 1)


class TritonPythonModel:
    def execute(self, requests):
        parts = [pb_utils.get_input_tensor_by_name(r, "IMAGE").as_numpy() for r in requests]
        x = (np.concatenate(parts) - MEAN) / STD
        n = x.shape[0]
        y = x.reshape(n, 3, 112, 2, 112, 2).mean(axis=(3, 5), dtype=np.float32)
        out, at = [], 0
        for part in parts:
            k = len(part)
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("PIXELS", y[at : at + k])]))
            at += k
        return out
"""

TOK_CONFIG = """name: "tok"
backend: "python"
max_batch_size: 32
input [ { name: "TEXT" data_type: TYPE_STRING dims: [ 1 ] } ]
output [ { name: "IDS" data_type: TYPE_INT64 dims: [ -1 ] } ]
dynamic_batching { }
instance_group [ { count: 1 kind: KIND_CPU } ]
"""

TOK_MODEL = """import zlib

import numpy as np
import triton_python_backend_utils as pb_utils

VOCABULARY = 30_000


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for request in requests:
            texts = pb_utils.get_input_tensor_by_name(request, "TEXT").as_numpy()
            rows = [
                [zlib.crc32(w) % VOCABULARY for w in bytes(t[0]).lower().split()] for t in texts
            ]
            width = max(len(r) for r in rows)
            ids = np.zeros((len(rows), width), dtype=np.int64)
            for i, row in enumerate(rows):
                ids[i, : len(row)] = row
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("IDS", ids)]))
        return out
"""

EMBED_CONFIG = """name: "embed"
backend: "python"
max_batch_size: 16
input [ { name: "PIXELS" data_type: TYPE_FP32 dims: [ 3, 112, 112 ] } ]
output [ { name: "X" data_type: TYPE_FP32 dims: [ 64 ] } ]
dynamic_batching { }
instance_group [ { count: 1 kind: KIND_CPU } ]
"""

EMBED_MODEL = """import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        parts = [pb_utils.get_input_tensor_by_name(r, "PIXELS").as_numpy() for r in requests]
        x = np.concatenate(parts)
        features = x.reshape(x.shape[0], 64, -1).mean(axis=2, dtype=np.float32)
        out, at = [], 0
        for part in parts:
            k = len(part)
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("X", features[at : at + k])]))
            at += k
        return out
"""

#: (d) the pre-processing, a pooling step and the MLP as one ensemble: prep -> embed -> mlp
PIPELINE_CONFIG = """name: "pipeline"
platform: "ensemble"
max_batch_size: 16
input [ { name: "IMAGE" data_type: TYPE_FP32 dims: [ 3, 224, 224 ] } ]
output [ { name: "SCORES" data_type: TYPE_FP32 dims: [ 10 ] } ]
ensemble_scheduling {
  step [
    {
      model_name: "prep"
      model_version: -1
      input_map { key: "IMAGE" value: "IMAGE" }
      output_map { key: "PIXELS" value: "pixels" }
    },
    {
      model_name: "embed"
      model_version: -1
      input_map { key: "PIXELS" value: "pixels" }
      output_map { key: "X" value: "features" }
    },
    {
      model_name: "mlp"
      model_version: -1
      input_map { key: "X" value: "features" }
      output_map { key: "Y" value: "SCORES" }
    }
  ]
}
"""

#: the models whose executed batch sizes a request's figures report (an ensemble: its steps)
STEPS = {"pipeline": ("prep", "embed", "mlp")}

SENTENCE = (
    "The quick brown fox jumps over the lazy dog while Triton serves Python models "
    "with dynamic batching and every request carries a sentence of moderate length"
)


def _mlp_onnx(path: Path) -> None:
    """Write the MLP (64 -> 256 -> 10, ReLU between) with fixed random weights."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(7)
    weights = {
        "W1": rng.standard_normal((64, 256), dtype=np.float32) * 0.1,
        "B1": rng.standard_normal(256, dtype=np.float32) * 0.1,
        "W2": rng.standard_normal((256, 10), dtype=np.float32) * 0.1,
        "B2": rng.standard_normal(10, dtype=np.float32) * 0.1,
    }
    nodes = [
        helper.make_node("MatMul", ["X", "W1"], ["H0"]),
        helper.make_node("Add", ["H0", "B1"], ["H1"]),
        helper.make_node("Relu", ["H1"], ["H2"]),
        helper.make_node("MatMul", ["H2", "W2"], ["Y0"]),
        helper.make_node("Add", ["Y0", "B2"], ["Y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 64])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["N", 10])],
        [numpy_helper.from_array(v, k) for k, v in weights.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # readable by older onnxruntime builds too
    onnx.save(model, str(path))


def build_repository(root: Path) -> Path:
    """The models and the ensemble under ``root``; returns ``root``."""
    for name, config, code in (
        ("mlp", MLP_CONFIG, MLP_MODEL),
        ("prep", PREP_CONFIG, PREP_MODEL),
        ("tok", TOK_CONFIG, TOK_MODEL),
        ("embed", EMBED_CONFIG, EMBED_MODEL),
    ):
        (root / name / "1").mkdir(parents=True)
        (root / name / "config.pbtxt").write_text(config)
        (root / name / "1" / "model.py").write_text(code)
    _mlp_onnx(root / "mlp" / "1" / "mlp.onnx")
    (root / "pipeline" / "1").mkdir(parents=True)  # an ensemble's version holds no file
    (root / "pipeline" / "config.pbtxt").write_text(PIPELINE_CONFIG)
    return root


# ----------------------------------------------------------------------------- requests


@dataclass
class Request:
    """One pre-built request of a model: its headers and body bytes."""

    model: str
    body: bytes
    headers: dict[str, str] = field(default_factory=lambda: {"Content-Type": "application/json"})

    @property
    def path(self) -> str:
        return f"/v2/models/{self.model}/infer"


def _json_request(model: str, inputs: list[dict[str, Any]]) -> Request:
    return Request(model, json.dumps({"inputs": inputs}, separators=(",", ":")).encode())


def requests() -> dict[str, Request]:
    """The request each model is driven with."""
    rng = np.random.default_rng(3)
    x = [round(float(v), 4) for v in rng.standard_normal(64)]
    image = rng.random((1, 3, 224, 224), dtype=np.float32)
    head = json.dumps({
        "inputs": [{"name": "IMAGE", "datatype": "FP32", "shape": [1, 3, 224, 224],
                    "parameters": {"binary_data_size": image.nbytes}}],
        "outputs": [{"name": "PIXELS", "parameters": {"binary_data": True}}],
    }, separators=(",", ":")).encode()  # fmt: skip
    prep = Request("prep", head + image.tobytes(), {
        "Content-Type": "application/octet-stream",
        "Inference-Header-Content-Length": str(len(head)),
    })  # fmt: skip
    pipe_head = head.replace(b'"PIXELS"', b'"SCORES"')
    pipeline = Request("pipeline", pipe_head + image.tobytes(), {
        "Content-Type": "application/octet-stream",
        "Inference-Header-Content-Length": str(len(pipe_head)),
    })  # fmt: skip
    return {
        "mlp": _json_request("mlp", [
            {"name": "X", "datatype": "FP32", "shape": [1, 64], "data": x}]),
        "prep": prep,
        "tok": _json_request("tok", [
            {"name": "TEXT", "datatype": "BYTES", "shape": [1, 1], "data": [SENTENCE]}]),
        "pipeline": pipeline,
    }  # fmt: skip


def _post(url: str, request: Request) -> tuple[dict[str, str], bytes]:
    http = urllib.request.Request(
        f"http://{url}{request.path}", data=request.body, headers=request.headers
    )
    with urllib.request.urlopen(http, timeout=60) as answer:
        return dict(answer.headers), answer.read()


def answer_digest(url: str, request: Request) -> str:
    """The outputs of one request as comparable text (binary outputs as their values)."""
    headers, body = _post(url, request)
    lowered = {k.lower(): v for k, v in headers.items()}
    size = lowered.get("inference-header-content-length")
    if size is None:
        doc = json.loads(body)
        return json.dumps([(o["name"], o["shape"], o["data"]) for o in doc["outputs"]])
    doc = json.loads(body[: int(size)])
    values = np.frombuffer(body[int(size) :], dtype=np.float32)
    return json.dumps([(o["name"], o["shape"], values.round(4).tolist()) for o in doc["outputs"]])


# ----------------------------------------------------------------------------- measuring


@dataclass
class Round:
    """One wrk round against one server."""

    rps: float
    p50_ms: float
    p99_ms: float
    cpu_ms: float  # server CPU per request (the whole process tree)
    main_cpu_ms: float  # of which the server's own process (not its workers or stubs)


def _tree_cpu(pid: int) -> tuple[float, float]:
    """User + system seconds of ``pid`` and all its descendants, and of ``pid`` alone."""
    own = cpu_seconds(pid)
    return own + sum(cpu_seconds(p) for p, depth in process_tree(pid) if depth), own


_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3}


def _latency_ms(out: str, percent: str) -> float:
    m = re.search(rf"^\s+{percent}%\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
    return float(m.group(1)) * _UNITS[m.group(2)] if m else float("nan")


def wrk_round(url: str, request: Request, connections: int, seconds: float, pid: int) -> Round:
    """One wrk run of ``request`` with ``connections`` connections, and the server's CPU."""
    with tempfile.TemporaryDirectory() as tmp:
        body = Path(tmp) / "body"
        body.write_bytes(request.body)
        script = Path(tmp) / "post.lua"
        lines = ['wrk.method = "POST"', f'local f = io.open("{body}", "rb")',
                 "wrk.body = f:read('*all')", "f:close()"]  # fmt: skip
        lines += [f'wrk.headers["{k}"] = "{v}"' for k, v in request.headers.items()]
        script.write_text("\n".join(lines) + "\n")
        args = ["wrk", "-t1", f"-c{connections}", f"-d{max(1, round(seconds))}s", "--latency"]
        before = _tree_cpu(pid)
        out = subprocess.run(
            [*args, "-s", str(script), f"http://{url}{request.path}"],
            capture_output=True, text=True,
        ).stdout  # fmt: skip
        after = _tree_cpu(pid)
    done = re.search(r"(\d+) requests in", out)
    rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
    if not done or not rps or "Non-2xx" in out:
        raise RuntimeError(f"wrk failed against {url}{request.path}:\n{out}")
    count = max(int(done.group(1)), 1)
    return Round(float(rps.group(1)), _latency_ms(out, "50"), _latency_ms(out, "99"),
                 (after[0] - before[0]) / count * 1e3,
                 (after[1] - before[1]) / count * 1e3)  # fmt: skip


def batch_histogram(url: str, model: str) -> dict[int, int]:
    """Executed batch size -> executions, from the statistics extension."""
    with urllib.request.urlopen(f"http://{url}/v2/models/{model}/stats", timeout=30) as r:
        stats = json.load(r)["model_stats"][0]
    return {int(b["batch_size"]): int(b["compute_infer"]["count"]) for b in stats["batch_stats"]}


def _diff(after: dict[int, int], before: dict[int, int]) -> dict[int, int]:
    return {k: v - before.get(k, 0) for k, v in sorted(after.items()) if v > before.get(k, 0)}


# ----------------------------------------------------------------------------- servers


@contextmanager
def serving(repo: Path, real: bool, pythons: Sequence[str] = ()) -> Iterator[dict[str, Any]]:
    """Our server (worker processes, the default), ours under each of ``pythons`` (named
    ``ours [PATH]``) and, with ``real``, real Triton."""
    from tritonhttp.server import _launch
    from tritonhttp.testing import _real_triton as rt

    servers: dict[str, Any] = {}
    try:
        servers["ours"] = _launch.start(repo, "--log-info=false")
        for python in pythons:
            servers[f"ours [{python}]"] = _launch.start(repo, "--log-info=false", python=python)
        if real:
            servers["triton"] = rt.start(repo)
        yield servers
    finally:
        for s in servers.values():
            s.stop()


def ensure_reference_onnxruntime() -> None:
    """onnxruntime in real Triton's Python environment (installed once)."""
    from tritonhttp.testing import _real_triton as rt

    python = rt.ensure_installed().venv / "bin" / "python"
    if subprocess.run([str(python), "-c", "import onnxruntime"], capture_output=True).returncode:
        subprocess.run([str(python), "-m", "pip", "install", "-q", "onnxruntime"], check=True)


def _summary(rounds: list[Round]) -> str:
    def span(values: list[float], digits: int) -> str:
        med, low, high = statistics.median(values), min(values), max(values)
        return f"{med:.{digits}f} [{low:.{digits}f}-{high:.{digits}f}]"

    return (
        f"{span([r.rps for r in rounds], 0)} req/s, p50 {span([r.p50_ms for r in rounds], 2)} ms, "
        f"p99 {span([r.p99_ms for r in rounds], 2)} ms, "
        f"CPU {span([r.cpu_ms for r in rounds], 3)} ms/req "
        f"(server process {span([r.main_cpu_ms for r in rounds], 3)})"
    )


def measure_model(
    servers: dict[str, Any], request: Request, concurrency: list[int], seconds: float, rounds: int
) -> None:
    """Every concurrency in turn, the servers alternating; prints each and the ratios."""
    for c in concurrency:
        for s in servers.values():  # warm up
            wrk_round(s.url, request, c, 1, s.process.pid)
        counted = STEPS.get(request.model, (request.model,))
        before = {
            (name, m): batch_histogram(s.url, m) for name, s in servers.items() for m in counted
        }
        results: dict[str, list[Round]] = {name: [] for name in servers}
        for _ in range(rounds):
            for name, s in servers.items():
                results[name].append(wrk_round(s.url, request, c, seconds, s.process.pid))
        print(f"{request.model} -c{c}:")
        for name, res in results.items():
            print(f"  {name}: {_summary(res)}")
        for name, s in servers.items():
            for m in counted:
                executed = _diff(batch_histogram(s.url, m), before[(name, m)])
                step = "" if m == request.model else f" (step {m})"
                print(f"  {name} executed batch sizes{step} (size: executions): {executed}")
        if "triton" in results:
            for name in results:
                if name == "triton":
                    continue
                pairs = zip(results[name], results["triton"], strict=True)
                ratios = [o.rps / t.rps for o, t in pairs]
                which = name.removeprefix("ours")  # "" or " [PATH]"
                print(f"{request.model} -c{c}{which}: ratio per round "
                      f"{', '.join(f'{r:.2f}' for r in ratios)} (min {min(ratios):.2f}, "
                      f"median {statistics.median(ratios):.2f})")  # fmt: skip


def run(
    models: list[str],
    concurrency: list[int],
    seconds: float,
    rounds: int,
    real: bool,
    pythons: Sequence[str] = (),
) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="tritonhttp-models-bench-"))
    try:
        repo = build_repository(tmp / "models")
        reqs = requests()
        with serving(repo, real, pythons) as servers:
            for model in models:
                digests = {n: answer_digest(s.url, reqs[model]) for n, s in servers.items()}
                if len(set(digests.values())) != 1:
                    raise RuntimeError(f"{model}: the servers' outputs differ: {digests}")
            for model in models:
                measure_model(servers, reqs[model], concurrency, seconds, rounds)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3, help="duration of each round")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds per case")
    parser.add_argument("--models", default="mlp,prep,tok,pipeline", help="comma-separated subset")
    parser.add_argument("--concurrency", default="1,16,64", help="comma-separated levels")
    parser.add_argument("--skip-real", action="store_true", help="measure our server only")
    parser.add_argument(
        "--python", action="append", default=[], metavar="PATH",
        help="also run our server under this interpreter (with tritonhttp[server], onnx "
        "and onnxruntime installed), in the same rounds; repeatable",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if not shutil.which("wrk"):
        print("wrk is required: apt-get install -y wrk", file=sys.stderr)
        return 2
    print(machine())
    for python in args.python:
        print(f"also: {describe_interpreter(python)}")
    real = not args.skip_real
    if real:
        from tritonhttp.testing import _real_triton as rt

        problem = rt.platform_problem()
        if problem:
            print(f"real Triton unavailable ({problem}): measuring ours only")
            real = False
        else:
            ensure_reference_onnxruntime()
    run(args.models.split(","), [int(c) for c in args.concurrency.split(",")],
        args.seconds, args.rounds, real, args.python)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
