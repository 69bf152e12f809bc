"""Ensembles on our server alone, with the answers real Triton 2.51 gives pinned (the
differential tests in test_ensemble_differential.py compare them live where real Triton
runs): load errors, the pruning deadlock, output order and response parameters, a
decoupled step streaming through generate_stream, unloading a step."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from _repos import ECHO_MODEL

from ._wire import exchange, infer_body

#: (a flag of its own: the differential tests play their script on a server started with
#: just the control mode, and the pool would hand this module the same one)
ARGS = ("--model-control-mode=explicit", "--exit-timeout-secs=7")
IN4 = ("IN", "FP32", [1, 4], [1, 2, 3, 4])


def _error(reply: Any) -> str:
    message: str = json.loads(reply.body)["error"]
    return message


def test_load_errors(bundled_server_factory: Any, model_repo: Any) -> None:
    url = bundled_server_factory(model_repo("ensemble_basic"), *ARGS).url
    expected = {
        "ens_missing": (
            400,
            "load failed for model 'ens_missing': ensemble ens_missing contains models that "
            "are not available or ambiguous: nope\n",
        ),
        "ens_ghost": (500, "failed to load 'ens_ghost', failed to poll from model repository"),
        "ens_dtype": (
            400,
            "load failed for model 'ens_dtype': in ensemble ens_dtype, ensemble tensor IN: "
            "inconsistent data type: TYPE_INT32 is inferred from model ens_dtype while "
            "TYPE_FP32 is inferred from model pre\n",
        ),
        "ens_shape": (
            400,
            "load failed for model 'ens_shape': in ensemble ens_shape, ensemble tensor IN: "
            "inconsistent shape: [-1,3] is inferred from model ens_shape while [-1,4] is "
            "inferred from model pre\n",
        ),
        "ens_batch": (
            400,
            "load failed for model 'ens_batch': ensemble ens_batch allows maximum batch size "
            "16, but it contains model pre which only allows maximum batch size to be 8\n",
        ),
        "ens_badver": (
            400,
            "load failed for model 'ens_badver': ensemble 'ens_badver' depends on 'scale' "
            "whose required version 7 is not loaded.\n",
        ),
    }
    for name, (status, text) in expected.items():
        reply = exchange(url, "POST", f"/v2/repository/models/{name}/load")
        assert (reply.status, _error(reply)) == (status, text), name
    index = json.loads(exchange(url, "POST", "/v2/repository/index").body)
    for name in expected:
        assert {"name": name} in index  # (by name only: no version was attempted)


def test_inference(bundled_server_factory: Any, model_repo: Any) -> None:
    url = bundled_server_factory(model_repo("ensemble_basic"), *ARGS, "--load-model=ens").url
    reply = exchange(url, "POST", "/v2/models/ens/infer", infer_body(IN4))
    assert reply.status == 200
    assert reply.body.startswith(
        b'{"model_name":"ens","model_version":"1","parameters":{"sequence_id":0,'
        b'"sequence_start":false,"sequence_end":false,"sequence_id":0,"sequence_start":false,'
        b'"sequence_end":false},"outputs":[{"name":"MID"'
    )
    doc = json.loads(reply.body)
    assert [o["data"] for o in doc["outputs"]] == [[2, 4, 6, 8], [3, 5, 7, 9]]
    reply = exchange(
        url, "POST", "/v2/models/ens/infer", infer_body(IN4, id="r1", outputs=[{"name": "OUT"}])
    )
    assert (reply.status, reply.content_type, _error(reply)) == (
        400,
        "text/plain",
        "in ensemble 'ens', [request id: r1] unexpected deadlock, at least one output is not "
        "set while no more ensemble steps can be made",
    )
    reply = exchange(
        url, "POST", "/v2/models/ens/infer", infer_body(("IN", "FP32", [1, 4], [-1, 2, 3, 4]))
    )
    assert (reply.status, _error(reply)) == (500, "in ensemble 'ens', negative input to post")


def test_decoupled_step_streams(bundled_server_factory: Any, model_repo: Any) -> None:
    url = bundled_server_factory(model_repo("ensemble_basic"), *ARGS, "--load-model=ens_stream").url
    reply = exchange(
        url, "POST", "/v2/models/ens_stream/infer", infer_body(("COUNT", "INT32", [1], [3]))
    )
    assert reply.status == 501
    reply = exchange(url, "POST", "/v2/models/ens_stream/generate_stream", '{"COUNT":[3]}')
    events = [json.loads(line[6:]) for line in reply.body.decode().split("\n\n") if line]
    assert [e["OUT"] for e in events] == [0, 10, 20]


def test_unloading_a_step(bundled_server_factory: Any, model_repo: Any) -> None:
    url = bundled_server_factory(model_repo("ensemble_basic"), *ARGS, "--load-model=ens_pinned").url

    def state() -> tuple[str, str] | None:
        index = json.loads(exchange(url, "POST", "/v2/repository/index").body)
        for m in index:
            if m["name"] == "ens_pinned" and "state" in m:
                return m["state"], m.get("reason", "")
        return None

    assert state() == ("READY", "")
    assert exchange(url, "POST", "/v2/repository/models/post/unload").status == 200
    deadline = time.monotonic() + 20
    while state() != ("UNAVAILABLE", "unloaded") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert state() == ("UNAVAILABLE", "unloaded")
    assert exchange(url, "POST", "/v2/repository/models/post/load").status == 200
    assert state() == ("READY", "")
    reply = exchange(url, "POST", "/v2/models/ens_pinned/infer", infer_body(IN4))
    assert reply.status == 200


def _ensemble_of(name: str, step: str) -> str:
    return (
        f'name: "{name}"\nplatform: "ensemble"\nmax_batch_size: 8\n'
        'input [ { name: "IN" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
        'output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
        f'ensemble_scheduling {{ step [ {{ model_name: "{step}" model_version: -1 '
        'input_map { key: "IN" value: "IN" } output_map { key: "OUT" value: "OUT" } } ] }\n'
    )


def test_ensembles_in_a_circle_are_refused(bundled_server_factory: Any, tmp_path: Path) -> None:
    """Ensembles that use each other (or themselves) fail to load with Triton's text; one
    that uses such an ensemble quotes its load error, as Triton does for a step that fails
    to load (real Triton 2.51 crashes there)."""
    for name, step in (("e1", "e2"), ("e2", "e1"), ("e3", "e3"), ("e7", "e1")):
        (tmp_path / name / "1").mkdir(parents=True)
        (tmp_path / name / "config.pbtxt").write_text(_ensemble_of(name, step))
    url = bundled_server_factory(tmp_path, *ARGS).url
    expected = {
        "e1": "circular dependency between ensembles: e1 -> ... -> e2 -> e1",
        "e3": "circular dependency between ensembles: e3 -> ... -> e3 -> e3",
        "e7": "ensemble 'e7' depends on 'e1' which has no loaded version. Model 'e1' "
        "loading failed with error: circular dependency between ensembles: e1 -> ... -> e2 -> e1",
    }
    for name, text in expected.items():
        reply = exchange(url, "POST", f"/v2/repository/models/{name}/load")
        assert (reply.status, _error(reply)) == (400, f"load failed for model '{name}': {text}\n")
    assert exchange(url, "GET", "/v2/health/live").status == 200


def _echo_step(root: Path, name: str, batching: str) -> None:
    (root / name / "1").mkdir(parents=True)
    (root / name / "config.pbtxt").write_text(
        f'name: "{name}"\nbackend: "python"\nmax_batch_size: 8\n'
        'input [ { name: "IN" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
        'output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
        f"{batching}\ninstance_group [ {{ count: 1 kind: KIND_CPU }} ]\n"
    )
    (root / name / "1" / "model.py").write_text(ECHO_MODEL)


def test_a_steps_batch_reaches_the_next_step_as_one_batch(
    bundled_server_factory: Any, tmp_path: Path
) -> None:
    """Four requests that step ``a`` ran as one batch reach the idle step ``b`` together:
    ``b`` runs them as one batch, in its worker process, rather than the first alone and
    then the other three. (Real Triton 2.51's batcher thread wakes while they are being
    queued: in 4 of 7 runs of 4 or 8 requests it formed one batch, in the others it split
    them, 1 + 3, 2 + 6 or 3 + 5.)"""
    _echo_step(tmp_path, "a", "dynamic_batching { preferred_batch_size: [ 4 ] "
               "max_queue_delay_microseconds: 5000000 }")  # fmt: skip
    _echo_step(tmp_path, "b", "dynamic_batching { }")
    (tmp_path / "e" / "1").mkdir(parents=True)
    chain = _ensemble_of("e", "a").replace('value: "OUT" } } ] }', 'value: "x" } }, ')
    chain += '{ model_name: "b" model_version: -1 input_map { key: "IN" value: "x" } '
    chain += 'output_map { key: "OUT" value: "OUT" } } ] }\n'
    (tmp_path / "e" / "config.pbtxt").write_text(chain)
    url = bundled_server_factory(tmp_path).url
    with ThreadPoolExecutor(4) as pool:
        bodies = [infer_body(("IN", "FP32", [1, 4], [n] * 4)) for n in range(4)]
        replies = list(pool.map(lambda b: exchange(url, "POST", "/v2/models/e/infer", b), bodies))
    assert [json.loads(r.body)["outputs"][0]["data"] for r in replies] == [
        [n] * 4 for n in range(4)
    ]
    for model in ("a", "b"):
        stats = json.loads(exchange(url, "GET", f"/v2/models/{model}/stats").body)
        batches = stats["model_stats"][0]["batch_stats"]
        assert [(b["batch_size"], b["compute_infer"]["count"]) for b in batches] == [(4, 1)]
