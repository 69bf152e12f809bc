"""Ensembles at their edges, on real Triton and on our server side by side
(``tests/repos/ensemble_edges``, ``--model-control-mode=explicit``): what a config may not
hold (refused while polling or when loading, with Triton's texts), the batch dimension
between an ensemble and its steps when one batches and the other does not, an ensemble
input that is also an output, a step that leaves out one of its outputs, and how many
failures a request that fails in its steps counts."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from ._wire import exchange, infer_body
from .test_ensemble_differential import ARGS, Step, _play, _poll_failures

pytestmark = pytest.mark.real_triton

#: ensembles refused while polling (the log says why)
POLL_REFUSED = [
    "with_backend", "with_instances", "with_optimization", "with_warmup", "no_steps",
    "one_tensor_twice",
]  # fmt: skip
#: ensembles refused when loading (the load answer says why)
LOAD_REFUSED = [
    "version_zero", "unmapped_input", "decoupled_and_input", "output_type_first",
    "nobatch_step_shape",
]  # fmt: skip
LOADED = ["nobatch_ensemble", "nobatch_step", "input_as_output"]

IN4 = ("IN", "FP32", [1, 4], [1, 2, 3, 4])


def test_config_checks_as_triton(
    real_triton_factory: Any, bundled_server_factory: Any, model_repo: Any
) -> None:
    repo = model_repo("ensemble_edges")
    real = real_triton_factory(repo, *ARGS)
    ours = bundled_server_factory(repo, *ARGS)
    steps: list[Step] = [
        *[("POST", f"/v2/repository/models/{m}/load", "") for m in POLL_REFUSED],
        *[("POST", f"/v2/repository/models/{m}/load", "") for m in LOAD_REFUSED + LOADED],
        ("POST", "/v2/repository/index", ""),
        *[("GET", f"/v2/models/{m}", "") for m in LOADED],
    ]
    problems = _play(real, ours, steps)
    assert not problems, "\n".join(problems)
    logs = [_poll_failures(server.log()) for server in (real, ours)]
    assert {m: logs[1].get(m) for m in POLL_REFUSED} == {m: logs[0].get(m) for m in POLL_REFUSED}
    assert logs[0]["with_instances"] == (
        "instance group should not be specified for ensemble 'with_instances'"
    )


def test_batch_dimension_and_outputs_between_steps(
    real_triton_factory: Any, bundled_server_factory: Any, model_repo: Any
) -> None:
    """A tensor gains a batch dimension of 1 on its way to a step that batches from an
    ensemble that does not (and loses it on the way back), and the reverse; an ensemble
    input may be one of its outputs; an output a step leaves out is absent from the
    response, and a step reading it runs without it."""
    repo = model_repo("ensemble_edges")
    names = [*LOADED, "left_out", "left_out_read"]
    args = (*ARGS, *(f"--load-model={n}" for n in names))
    real = real_triton_factory(repo, *args)
    ours = bundled_server_factory(repo, *args)

    def infer(model: str, *tensors: Any, **kw: Any) -> Step:
        return ("POST", f"/v2/models/{model}/infer", infer_body(*tensors, **kw))

    steps: list[Step] = [
        infer("nobatch_ensemble", ("IN", "FP32", [4], [1, 2, 3, 4])),
        infer("nobatch_ensemble", IN4),
        infer("nobatch_step", IN4),
        infer("nobatch_step", ("IN", "FP32", [2, 4], list(range(8)))),
        infer("input_as_output", IN4),
        infer("input_as_output", IN4, outputs=[{"name": "IN"}]),
        infer("input_as_output", IN4, parameters={"binary_data_output": True}),
        infer("left_out", IN4),
        infer("left_out", IN4, outputs=[{"name": "ZZ"}, {"name": "OUT"}]),
        infer("left_out_read", IN4),
        *[("GET", f"/v2/models/{m}/stats", "") for m in [*names, "ident", "ident_nb"]],
    ]
    problems = _play(real, ours, steps)
    assert not problems, "\n".join(problems)


def test_a_failure_counts_once_while_other_steps_run(
    real_triton_factory: Any, bundled_server_factory: Any, model_repo: Any
) -> None:
    """Triton 2.51 counts a request that fails in its steps twice on the ensemble, but
    once when another of its step requests is still running as the error comes."""
    repo = model_repo("ensemble_edges")
    names = ("fails_while_other_runs", "fails_last")
    args = (*ARGS, *(f"--load-model={n}" for n in names))
    counted = []
    for server in (real_triton_factory(repo, *args), bundled_server_factory(repo, *args)):
        added = []
        for name in names:
            reply = exchange(
                server.url,
                "POST",
                f"/v2/models/{name}/infer",
                infer_body(("IN", "FP32", [1, 4], [-1, 2, 3, 4])),
            )
            time.sleep(0.8)  # (the slow step ends; Triton counts a moment after it answers)
            doc = json.loads(exchange(server.url, "GET", f"/v2/models/{name}/stats").body)
            added.append((reply.status, doc["model_stats"][0]["inference_stats"]["fail"]["count"]))
        counted.append(added)
    assert counted[1] == counted[0] == [(500, 1), (500, 2)]


def test_a_step_reloaded_to_no_longer_fit_unloads_its_ensemble(model_repo: Any) -> None:
    """``ident`` reloaded with another ``Y`` shape: ``nobatch_ensemble`` stops serving
    (``unloaded``, 404 for its requests), and serves again once ``ident`` fits again."""
    from tests._real import skip_without_real_triton
    from tritonhttp.server import _launch
    from tritonhttp.testing import _real_triton as rt

    skip_without_real_triton(rt.platform_problem())
    repo = model_repo("ensemble_edges")
    args = (*ARGS, "--load-model=nobatch_ensemble")
    answers = []
    for start in (rt.start, _launch.start):
        server = start(repo, *args)
        try:
            good = exchange(server.url, "GET", "/v2/models/ident/config").json()
            bad = {**good, "output": [{**good["output"][0], "dims": [5]}]}
            seen = []
            for body in (bad, good):
                load = {"parameters": {"config": json.dumps(bad if body is bad else good)}}
                seen.append(
                    exchange(
                        server.url, "POST", "/v2/repository/models/ident/load", json.dumps(load)
                    ).status
                )
                time.sleep(0.5)
                index = exchange(server.url, "POST", "/v2/repository/index").json()
                seen.append([m for m in index if m["name"] == "nobatch_ensemble"])
                r = exchange(
                    server.url,
                    "POST",
                    "/v2/models/nobatch_ensemble/infer",
                    infer_body(("IN", "FP32", [4], [1, 2, 3, 4])),
                )
                seen.append((r.status, r.body))
            load = exchange(server.url, "POST", "/v2/repository/models/nobatch_ensemble/load")
            seen.append(load.status)
            answers.append(seen)
        finally:
            server.stop()
    real, ours = answers
    assert real[1] == [{"name": "nobatch_ensemble", "version": "1", "state": "UNAVAILABLE",
                        "reason": "unloaded"}]  # fmt: skip
    assert real[2][0] == 404
    assert real[4] == [{"name": "nobatch_ensemble", "version": "1", "state": "READY"}]
    assert real[-1] == 200
    assert ours == real
