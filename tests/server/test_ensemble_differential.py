"""Ensembles on real Triton and on our server, side by side (``tests/repos/ensemble_basic``,
both in ``--model-control-mode=explicit``): loading with its checks, config and metadata,
inference (JSON, binary, requested outputs, step errors), generate and generate_stream
through a decoupled step, a BLS call to an ensemble, statistics, unloading a step and an
ensemble, dynamic batching of a step fed by an ensemble, and shared memory on an
ensemble. Every answer is compared byte for byte (statistics with their times masked)."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ._wire import Reply, exchange, infer_body
from .test_differential_lifecycle import _same, _settle
from .test_differential_state import _mask

pytestmark = pytest.mark.real_triton

ARGS = ("--model-control-mode=explicit",)

IN4 = ("IN", "FP32", [1, 4], [1, 2, 3, 4])
A2 = ("A", "INT32", [2], [1, 2])
ONE = ("IN", "INT32", [1], [1])

GOOD = [
    "ens", "ens_stream", "ens_nobatch", "ens_pinned", "bls_ens", "ens_optional", "bls_stream",
    "ens_echo", "ens_multi",
]  # fmt: skip
#: ensembles whose graph (poll) or steps (load) Triton refuses, each with its own text
BAD = [
    "ens_missing", "ens_ghost", "ens_cycle", "ens_dtype", "ens_shape", "ens_noout",
    "ens_batch", "ens_badver", "ens_nosteps",
]  # fmt: skip

Step = tuple[str, str, str]

LOADING: list[Step] = [
    ("POST", "/v2/repository/index", ""),
    *[("POST", f"/v2/repository/models/{m}/load", "") for m in GOOD + BAD],
    ("POST", "/v2/repository/index", ""),
    ("POST", "/v2/repository/index", '{"ready":true}'),
    *[("GET", f"/v2/models/{m}", "") for m in GOOD + BAD[:2]],
    *[("GET", f"/v2/models/{m}/ready", "") for m in GOOD + BAD[:2]],
    *[("GET", f"/v2/models/{m}/config", "") for m in GOOD],
]

INFERENCE: list[Step] = [
    ("POST", "/v2/models/ens/infer", infer_body(IN4)),
    ("POST", "/v2/models/ens/infer", infer_body(("IN", "FP32", [2, 4], list(range(8))), id="x")),
    ("POST", "/v2/models/ens/infer", infer_body(IN4, parameters={"binary_data_output": True})),
    (
        "POST",
        "/v2/models/ens/infer",
        infer_body(IN4, outputs=[{"name": "OUT"}, {"name": "MID"}]),
    ),
    (
        "POST",
        "/v2/models/ens/infer",
        infer_body(
            IN4, outputs=[{"name": "MID"}, {"name": "OUT", "parameters": {"binary_data": True}}]
        ),
    ),
    # a subset of the outputs: Triton prunes the steps, and these requests find no way
    ("POST", "/v2/models/ens/infer", infer_body(IN4, id="r1", outputs=[{"name": "OUT"}])),
    ("POST", "/v2/models/ens/infer", infer_body(IN4, outputs=[{"name": "MID"}])),
    ("POST", "/v2/models/ens_pinned/infer", infer_body(IN4)),
    ("POST", "/v2/models/ens_pinned/infer", infer_body(IN4, outputs=[{"name": "Y"}])),
    ("POST", "/v2/models/ens_pinned/infer", infer_body(IN4, outputs=[{"name": "COUNT"}])),
    ("POST", "/v2/models/ens_nobatch/infer", infer_body(("V", "INT32", [3], [1, 2, 3]))),
    # five outputs from four steps: their order in the response
    ("POST", "/v2/models/ens_multi/infer", infer_body(IN4)),
    (
        "POST",
        "/v2/models/ens_multi/infer",
        infer_body(IN4, outputs=[{"name": n} for n in ("Y2", "P1", "Y1", "C1", "P2")]),
    ),
    # step errors: an error response, then an exception in the step's model
    ("POST", "/v2/models/ens/infer", infer_body(("IN", "FP32", [1, 4], [-1, 2, 3, 4]))),
    ("POST", "/v2/models/ens/infer", infer_body(("IN", "FP32", [1, 4], [-200, 2, 3, 4]))),
    # the ensemble's own admission
    ("POST", "/v2/models/ens/infer", infer_body(IN4, outputs=[{"name": "NOPE"}])),
    ("POST", "/v2/models/ens/infer", infer_body(("IN", "FP32", [9, 4], [0] * 36))),
    ("POST", "/v2/models/ens/infer", infer_body(("IN", "INT32", [1, 4], [1, 2, 3, 4]))),
    ("POST", "/v2/models/ens/infer", infer_body(("IN", "FP32", [1, 3], [1, 2, 3]))),
    ("POST", "/v2/models/ens/infer", infer_body(("X", "FP32", [1, 4], [1, 2, 3, 4]))),
    # a decoupled step: the ensemble is decoupled
    ("POST", "/v2/models/ens_stream/infer", infer_body(("COUNT", "INT32", [1], [3]))),
    ("POST", "/v2/models/ens_stream/generate", json.dumps({"COUNT": [3]})),
    ("POST", "/v2/models/ens_stream/generate_stream", json.dumps({"COUNT": [3]})),
    ("POST", "/v2/models/ens_stream/generate_stream", json.dumps({"COUNT": [0]})),
    ("POST", "/v2/models/ens/generate", json.dumps({"IN": [[1, 2, 3, 4]]})),
    # BLS: the model asks the ensemble for both outputs, then for one of them
    ("POST", "/v2/models/bls_ens/infer", infer_body(IN4)),
    ("POST", "/v2/models/bls_ens/infer", infer_body(IN4, parameters={"subset": True})),
    # what a step's request carries of the ensemble's (id, parameters, sequence, timeout)
    ("POST", "/v2/models/ens_echo/infer", infer_body(ONE)),
    (
        "POST",
        "/v2/models/ens_echo/infer",
        infer_body(ONE, id="abc", parameters={"custom": "x", "n": 5, "flag": True}),
    ),
    (
        "POST",
        "/v2/models/ens_echo/infer",
        infer_body(ONE, parameters={"sequence_id": 7, "sequence_start": True, "timeout": 1234}),
    ),
    (
        "POST",
        "/v2/models/ens_echo/infer",
        infer_body(ONE, parameters={"sequence_id": "s1", "sequence_end": True}),
    ),
    # BLS streaming from the decoupled ensemble
    ("POST", "/v2/models/bls_stream/infer", infer_body(("COUNT", "INT32", [1], [4]))),
    ("POST", "/v2/models/bls_stream/infer", infer_body(("COUNT", "INT32", [1], [0]))),
    # an optional ensemble input left out: the step runs without it
    ("POST", "/v2/models/ens_optional/infer", infer_body(A2, ("B", "INT32", [2], [10, 20]))),
    ("POST", "/v2/models/ens_optional/infer", infer_body(A2)),
    ("POST", "/v2/models/ens_optional/infer", infer_body(("B", "INT32", [2], [1, 2]))),
    ("POST", "/v2/models/ens_optional/infer", infer_body()),
    *[
        ("GET", f"/v2/models/{m}/stats", "")
        for m in [*GOOD, "pre", "post", "repeat", "scale", "opt_step"]
    ],
]


def _seq(value: int, **params: Any) -> str:
    return infer_body(("V", "INT32", [1, 1], [value]), parameters=params)


def _ens_config(step_model: str) -> str:
    """A load request whose config override is ``ens``'s with its first step replaced."""
    config = {
        "name": "ens",
        "platform": "ensemble",
        "max_batch_size": 8,
        "input": [{"name": "IN", "data_type": "TYPE_FP32", "dims": [4]}],
        "output": [
            {"name": "OUT", "data_type": "TYPE_FP32", "dims": [4]},
            {"name": "MID", "data_type": "TYPE_FP32", "dims": [4]},
        ],
        "ensemble_scheduling": {
            "step": [
                {"model_name": step_model, "model_version": -1,
                 "input_map": {"IN": "IN"}, "output_map": {"PRE": "MID"}},
                {"model_name": "post", "model_version": -1,
                 "input_map": {"X": "MID"}, "output_map": {"Y": "OUT"}},
            ]
        },
    }  # fmt: skip
    return json.dumps({"parameters": {"config": json.dumps(config)}})


#: sequences through an ensemble, ensembles as steps, a reload that loses a step (after
#: the statistics: Triton counts some failures of nested ensembles twice)
MORE: list[Step] = [
    *[("POST", f"/v2/repository/models/{m}/load", "") for m in ("ens_seq", "ens_nested")],
    ("POST", "/v2/repository/models/ens_nested2/load", ""),
    ("POST", "/v2/models/ens_seq/infer", _seq(1, sequence_id=5, sequence_start=True)),
    ("POST", "/v2/models/ens_seq/infer", _seq(2, sequence_id=5)),
    ("POST", "/v2/models/ens_seq/infer", _seq(3, sequence_id=5, sequence_end=True)),
    ("POST", "/v2/models/ens_seq/infer", _seq(3, sequence_id=5)),
    ("POST", "/v2/models/ens_seq/infer", _seq(3)),
    ("GET", "/v2/models/ens_nested2/config", ""),
    ("POST", "/v2/models/ens_nested/infer", infer_body(("A", "FP32", [1, 4], [1, 2, 3, 4]))),
    ("POST", "/v2/models/ens_nested2/infer", infer_body(("A", "FP32", [1, 4], [1, 2, 3, 4]))),
    ("POST", "/v2/models/ens_nested2/infer", infer_body(("A", "FP32", [1, 4], [-1, 2, 3, 4]))),
    ("POST", "/v2/repository/models/ens/load", _ens_config("pre")),
    ("GET", "/v2/models/ens/config", ""),
    ("POST", "/v2/repository/models/ens/load", _ens_config("nope")),
    ("POST", "/v2/repository/index", ""),
    ("GET", "/v2/models/ens_nested2/ready", ""),
    # (a plain load here: Triton 2.51 refuses it, see docs/server.md#ensembles)
    ("POST", "/v2/repository/models/ens/load", _ens_config("pre")),
    ("POST", "/v2/repository/index", ""),
    ("POST", "/v2/models/ens_nested2/infer", infer_body(("A", "FP32", [1, 4], [1, 2, 3, 4]))),
]

LIFECYCLE: list[Step] = [
    ("POST", "/v2/repository/models/ens/unload", ""),
    ("POST", "/v2/repository/index", ""),
    ("POST", "/v2/repository/models/ens/load", ""),
    ("POST", "/v2/repository/models/pre/unload", ""),
    ("POST", "/v2/repository/index", ""),
    ("GET", "/v2/models/ens/ready", ""),
    ("GET", "/v2/models/ens", ""),
    ("POST", "/v2/models/ens/infer", infer_body(IN4)),
    ("POST", "/v2/repository/models/pre/load", ""),
    ("POST", "/v2/repository/index", ""),
    ("POST", "/v2/models/ens/infer", infer_body(IN4)),
    ("POST", "/v2/repository/models/ens/unload", '{"parameters":{"unload_dependents":true}}'),
    ("POST", "/v2/repository/index", ""),
    ("POST", "/v2/repository/models/ens/load", ""),
    ("POST", "/v2/repository/models/post/unload", '{"parameters":{"unload_dependents":true}}'),
    ("POST", "/v2/repository/index", ""),
]


def _play(real: Any, ours: Any, steps: list[Step]) -> list[str]:
    problems = []
    for i, (method, path, body) in enumerate(steps):
        if "unload" in path or path.endswith(("/index", "/ready", "/load")):
            _settle(real.url)
            _settle(ours.url)
        r = exchange(real.url, method, path, body)
        o = exchange(ours.url, method, path, body)
        if path.endswith("/config") and r.status == o.status == 200:
            # map entries (input_map, output_map) come in hash order on real Triton
            if json.loads(o.body) != json.loads(r.body):
                problems.append(f"#{i} {path}: {o.body[:600]!r}\n   vs {r.body[:600]!r}")
            continue
        if path.endswith("/stats") and r.status == o.status == 200:
            if _mask(json.loads(o.body)) != _mask(json.loads(r.body)):
                problems.append(f"#{i} {path}: {o.body[:600]!r}\n   vs {r.body[:600]!r}")
            continue
        diff = _same(o, r)
        if diff:
            problems.append(f"#{i} {method} {path} {body[:100]}\n   {diff}")
    return problems


_COUNTERS = (
    "nv_inference_request_success",
    "nv_inference_request_failure",
    "nv_inference_count",
    "nv_inference_exec_count",
    "nv_inference_pending_request_count",
)


def _counters(server: Any) -> dict[tuple[str, str], float]:
    """The request counters of every model, by (family, labels)."""
    with urllib.request.urlopen(f"http://{server.metrics_url}/metrics", timeout=10) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        name, _, rest = line.partition("{")
        if name in _COUNTERS:
            labels, _, value = rest.rpartition("} ")
            out[(name, ",".join(sorted(labels.split(","))))] = float(value)
    return out


def test_ensemble_script(
    real_triton_factory: Any, bundled_server_factory: Any, model_repo: Any
) -> None:
    repo = model_repo("ensemble_basic")
    real = real_triton_factory(repo, *ARGS)
    ours = bundled_server_factory(repo, *ARGS)
    problems = _play(real, ours, LOADING + INFERENCE)
    counters = _counters(real)
    assert counters[("nv_inference_request_success", 'model="ens",version="1"')] > 0
    assert _counters(ours) == counters
    problems += _play(real, ours, MORE + LIFECYCLE)
    assert not problems, "\n".join(problems)


def test_step_batches_ensemble_requests(
    real_triton_factory: Any, bundled_server_factory: Any, model_repo: Any
) -> None:
    """Requests to an ensemble reach its dynamic-batching step through the step's batcher:
    concurrent ensemble requests arrive at ``pre`` as fewer executions than requests."""
    repo = model_repo("ensemble_basic")
    outcomes = []
    for server in (
        real_triton_factory(repo, *ARGS, "--load-model=ens"),
        bundled_server_factory(repo, *ARGS, "--load-model=ens"),
    ):
        before = json.loads(exchange(server.url, "GET", "/v2/models/pre/stats").body)
        replies: list[Reply] = []
        threads = [
            threading.Thread(
                target=lambda s=server, k=k, out=replies: out.append(
                    exchange(s.url, "POST", "/v2/models/ens/infer", infer_body(
                        ("IN", "FP32", [1, 4], [k] * 4)
                    ))
                )
            )
            for k in range(6)
        ]  # fmt: skip
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        after = json.loads(exchange(server.url, "GET", "/v2/models/pre/stats").body)
        inferences = (
            after["model_stats"][0]["inference_count"] - before["model_stats"][0]["inference_count"]
        )
        executions = (
            after["model_stats"][0]["execution_count"] - before["model_stats"][0]["execution_count"]
        )
        outcomes.append((sorted(r.status for r in replies), inferences, executions < inferences))
    assert outcomes[1] == outcomes[0] == ([200] * 6, 6, True)


def test_shared_memory_on_an_ensemble(
    real_triton_factory: Any, bundled_server_factory: Any, model_repo: Any
) -> None:
    """Inputs read from and outputs written to system shared memory by an ensemble
    request: the same bytes land in the output region on both servers."""
    import tritonclient.http as httpclient
    import tritonclient.utils.shared_memory as shm

    repo = model_repo("ensemble_basic")
    results = []
    for tag, server in (
        ("real", real_triton_factory(repo, *ARGS, "--load-model=ens")),
        ("ours", bundled_server_factory(repo, *ARGS, "--load-model=ens")),
    ):
        client = httpclient.InferenceServerClient(server.url)
        key_in, key_out = f"/ens_in_{tag}_{time.monotonic_ns()}", f"/ens_out_{tag}"
        h_in = shm.create_shared_memory_region(f"in_{tag}", key_in, 16)
        h_out = shm.create_shared_memory_region(f"out_{tag}", key_out + "x", 32)
        try:
            shm.set_shared_memory_region(h_in, [np.array([[1, 2, 3, 4]], np.float32)])
            client.register_system_shared_memory(f"in_{tag}", key_in, 16)
            client.register_system_shared_memory(f"out_{tag}", key_out + "x", 32)
            inp = httpclient.InferInput("IN", [1, 4], "FP32")
            inp.set_shared_memory(f"in_{tag}", 16)
            outs = [httpclient.InferRequestedOutput(n) for n in ("OUT", "MID")]
            outs[0].set_shared_memory(f"out_{tag}", 16)
            outs[1].set_shared_memory(f"out_{tag}", 16, offset=16)
            result = client.infer("ens", [inp], outputs=outs)
            got = shm.get_contents_as_numpy(h_out, np.float32, [8]).tolist()
            results.append((result.get_response()["outputs"], got))
            client.unregister_system_shared_memory()
        finally:
            shm.destroy_shared_memory_region(h_in)
            shm.destroy_shared_memory_region(h_out)
            client.close()
    assert results[1] == results[0]
    assert results[0][1] == [3, 5, 7, 9, 2, 4, 6, 8]


@pytest.mark.parametrize("mode", ["none", "poll"])
def test_repository_loaded_at_start(
    real_triton_factory: Any, bundled_server_factory: Any, model_repo: Any, mode: str
) -> None:
    """Every model of the repository at start (ensembles, their steps, the refused ones):
    the same index, the same answers."""
    repo = model_repo("ensemble_basic")
    args = (f"--model-control-mode={mode}", "--exit-on-error=false", "--strict-readiness=false")
    real = real_triton_factory(repo, *args)
    ours = bundled_server_factory(repo, *args)
    steps: list[Step] = [
        ("POST", "/v2/repository/index", ""),
        ("GET", "/v2/health/ready", ""),
        ("POST", "/v2/models/ens/infer", infer_body(IN4)),
        ("POST", "/v2/models/ens_nobatch/infer", infer_body(("V", "INT32", [2], [1, 2]))),
        ("POST", "/v2/models/bls_ens/infer", infer_body(IN4)),
    ]
    problems = _play(real, ours, steps)
    assert not problems, "\n".join(problems)


def test_response_cache_on_an_ensemble(
    real_triton_factory: Any, bundled_server_factory: Any, model_repo: Any
) -> None:
    """``response_cache`` on the ensemble itself: a hit answers without running the steps
    (and without the response parameters, as Triton keeps only outputs); hits and misses
    are counted on the ensemble."""
    from tritonhttp.testing import _real_triton as rt

    caches = rt.ensure_installed().server_dir / "caches"
    args = (*ARGS, "--load-model=ens_cached", f"--cache-directory={caches}")
    args += ("--cache-config=local,size=1048576",)
    repo = model_repo("ensemble_basic")
    real = real_triton_factory(repo, *args)
    ours = bundled_server_factory(repo, *args)
    steps: list[Step] = [
        ("POST", "/v2/models/ens_cached/infer", infer_body(("IN", "FP32", [1, 4], [v, 2, 3, 4])))
        for v in (1, 1, 2, 1, -1)
    ]
    problems = _play(real, ours, steps)
    assert not problems, "\n".join(problems)
    counted = []
    for server in (real, ours):
        doc = json.loads(exchange(server.url, "GET", "/v2/models/ens_cached/stats").body)
        stats = doc["model_stats"][0]
        inference = stats["inference_stats"]
        counted.append(
            (
                stats["inference_count"],
                stats["execution_count"],
                inference["success"]["count"],
                inference["cache_hit"]["count"],
                inference["cache_miss"]["count"],
                inference["fail"]["count"],  # (Triton counts a failure in the steps twice)
            )
        )
    assert counted[1] == counted[0] == (2, 2, 4, 2, 2, 2)


def _poll_failures(log: str) -> dict[str, str]:
    found = {}
    for line in log.splitlines():
        _, sep, rest = line.partition("Poll failed for model directory '")
        if sep:
            name, _, message = rest.partition("': ")
            found[name] = message.rstrip('"')
    return found


def test_graph_errors_logged_as_triton(
    real_triton_factory: Any, bundled_server_factory: Any, model_repo: Any
) -> None:
    """What the log says about an ensemble graph refused while polling."""
    repo = model_repo("ensemble_basic")
    refused = ["ens_ghost", "ens_cycle", "ens_noout", "ens_nosteps"]
    logs = []
    for server in (real_triton_factory(repo, *ARGS), bundled_server_factory(repo, *ARGS)):
        for name in refused:
            reply = exchange(server.url, "POST", f"/v2/repository/models/{name}/load")
            assert reply.status == 500
        found = _poll_failures(server.log())
        logs.append({name: found.get(name) for name in refused})
    assert logs[1] == logs[0]
    assert logs[0]["ens_ghost"] == (
        "output 'OUT' for ensemble 'ens_ghost' is not written: at least one of its "
        "depending tensors, 'GHOST', is not connected"
    )


def test_explicit_start_with_ensembles_sharing_steps(
    real_triton_factory: Any, bundled_server_factory: Any, model_repo: Any
) -> None:
    """Ensembles named at start load their steps (shared ones once), an ensemble used as
    a step included."""
    repo = model_repo("ensemble_basic")
    names = ("ens_pinned", "ens_nested2", "ens", "ens_nobatch", "ens_stream")
    args = (*ARGS, *(f"--load-model={n}" for n in names))
    real = real_triton_factory(repo, *args)
    ours = bundled_server_factory(repo, *args)
    steps: list[Step] = [
        ("POST", "/v2/repository/index", '{"ready":true}'),
        ("POST", "/v2/models/ens_nested2/infer", infer_body(("A", "FP32", [1, 4], [1, 2, 3, 4]))),
    ]
    problems = _play(real, ours, steps)
    assert not problems, "\n".join(problems)


def test_failures_as_triton_counts_them(
    real_triton_factory: Any, bundled_server_factory: Any, model_repo: Any
) -> None:
    """What each kind of failed request adds to the ensemble's ``fail`` count: nothing
    when its admission refuses it, two when it fails in the steps (Triton 2.51's count)."""
    cases = [
        infer_body(IN4, outputs=[{"name": "OUT"}]),  # the pruning deadlock
        infer_body(IN4, outputs=[{"name": "NOPE"}]),
        infer_body(("IN", "INT32", [1, 4], [1, 2, 3, 4])),
        infer_body(("IN", "FP32", [9, 4], [0] * 36)),
        infer_body(("IN", "FP32", [1, 4], [-1, 2, 3, 4])),  # an error response of a step
        infer_body(("IN", "FP32", [1, 4], [-200, 2, 3, 4])),  # a step that raised
        infer_body(IN4),
    ]
    repo = model_repo("ensemble_basic")
    added = []
    for server in (
        real_triton_factory(repo, *ARGS, "--load-model=ens", "--exit-timeout-secs=8"),
        bundled_server_factory(repo, *ARGS, "--load-model=ens", "--exit-timeout-secs=8"),
    ):

        def fail(s: Any = server) -> int:
            doc = json.loads(exchange(s.url, "GET", "/v2/models/ens/stats").body)
            count: int = doc["model_stats"][0]["inference_stats"]["fail"]["count"]
            return count

        deltas = []
        for body in cases:
            before = fail()
            exchange(server.url, "POST", "/v2/models/ens/infer", body)
            time.sleep(0.2)  # (Triton counts a moment after it answers)
            deltas.append(fail() - before)
        added.append(deltas)
    assert added[1] == added[0] == [2, 0, 0, 0, 2, 2, 0]


def test_ensembles_in_a_circle(
    real_triton_factory: Any, bundled_server_factory: Any, tmp_path: Path
) -> None:
    """Loading ensembles that use each other, or themselves: the same refusals. (An
    ensemble that uses such a circle crashes real Triton 2.51: test_ensemble_server.py
    pins ours.)"""
    from .test_ensemble_server import _ensemble_of

    for name, step in (("e1", "e2"), ("e2", "e1"), ("e3", "e3")):
        (tmp_path / name / "1").mkdir(parents=True)
        (tmp_path / name / "config.pbtxt").write_text(_ensemble_of(name, step))
    answers = []
    for server in (real_triton_factory(tmp_path, *ARGS), bundled_server_factory(tmp_path, *ARGS)):
        replies = [
            exchange(server.url, "POST", f"/v2/repository/models/{name}/load")
            for name in ("e1", "e3")
        ]
        answers.append([(r.status, json.loads(r.body)) for r in replies])
    assert answers[1] == answers[0]
    assert answers[0][0][1]["error"].endswith("e1 -> ... -> e2 -> e1\n")
