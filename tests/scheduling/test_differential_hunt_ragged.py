"""Ragged batching, ``batch_input`` and ``batch_output`` on Python models, compared with
real Triton 2.51 (repository ``tests/repos/hunt_ragged``).

Triton's Python backend never hands a model the batch-input tensors: ``execute`` sees each
request's own inputs only, ragged requests batched together included. What the fields do
change is the load: Triton checks them (after the model's auto-completion, or while
polling when auto-completion is off) and refuses a batch input without a data type
before the model's own code runs.

Not covered: a ``batch_output`` without ``target_name`` makes Triton 2.51 crash (a
segmentation fault in the Python backend while the model loads); ours loads it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from server._wire import exchange

from tritonhttp.testing._load_log import load_failures

from ._probe import Call, Probe, counts, info, metric_counts, wait_for
from .conftest import ProbePair

pytestmark = pytest.mark.real_triton

REPO = "hunt_ragged"
ARGS = ("--model-control-mode=explicit", "--exit-on-error=false")
NO_AUTO = (*ARGS, "--disable-auto-complete-config")
INDEX = "/v2/repository/index"


def _names(repo: Path, prefix: str = "") -> list[str]:
    return sorted(p.name for p in repo.iterdir() if p.is_dir() and p.name.startswith(prefix))


def _load_each(server: Any, names: list[str]) -> dict[str, Any]:
    """Each model's load reply and printed configuration, the index, the load failures
    the log gives."""
    seen: dict[str, Any] = {}
    for name in names:
        load = exchange(server.url, "POST", f"/v2/repository/models/{name}/load")
        config = exchange(server.url, "GET", f"/v2/models/{name}/config")
        seen[name] = (load.status, load.body, config.status, config.body)
    seen["index"] = exchange(server.url, "POST", INDEX).body
    failures = load_failures(server.log().splitlines())
    seen["log"] = {name: failures.get(name) for name in names}
    return seen


def _compare_loads(
    factories: tuple[Any, Any], repo: Path, names: list[str], args: tuple[str, ...]
) -> dict[str, Any]:
    real_triton_factory, bundled_server_factory = factories
    real = _load_each(real_triton_factory(repo, *args), names)
    ours = _load_each(bundled_server_factory(repo, *args), names)
    differ = [name for name in [*names, "index", "log"] if ours[name] != real[name]]
    assert not differ, {name: (real[name], ours[name]) for name in differ}
    return real


def _reason(seen: dict[str, Any], name: str) -> str:
    status, body = seen[name][:2]
    assert status == 400, (name, status, body)
    error: str = json.loads(body)["error"]
    return error.partition("UNAVAILABLE state: ")[2]


def test_batch_fields_load_and_print_as_triton(
    real_triton_factory: Any, bundled_server_factory: Any, model_repo: Any
) -> None:
    """Every model loaded on its own: batch inputs and outputs refused with Triton's
    words and in Triton's order (a missing data type after the instance groups' checks,
    before ``FORCE_CPU_ONLY_INPUT_TENSORS`` and the model's auto-completion; the rest
    after auto-completion and the inputs' and outputs' checks, before ``initialize``),
    the others printed as Triton prints them."""
    repo: Path = model_repo(REPO)
    factories = (real_triton_factory, bundled_server_factory)
    real = _compare_loads(factories, repo, _names(repo), ARGS)
    for name in _names(repo, "ok_") + _names(repo, "hr_"):
        assert real[name][0] == 200, name
    assert _reason(real, "bad_unknown_src") == (
        "Invalid argument: unknown source input name 'NOPE' for bad_unknown_src;\n"
    )
    assert _reason(real, "bad_invalid_dt_before_force_cpu") == (
        "Invalid argument: unexpected batch input data type 'TYPE_INVALID';\n"
    )
    assert _reason(real, "bad_gpu_before_invalid_dt").startswith("Invalid argument: instance")
    assert _reason(real, "bad_force_cpu_first").startswith("Unsupported: Incorrect value")
    assert _reason(real, "bad_auto_fails_first").startswith("Internal: ValueError")


def test_batch_fields_refused_while_polling_without_auto_completion(
    real_triton_factory: Any, bundled_server_factory: Any, model_repo: Any
) -> None:
    """With auto-completion off the repository checks the fields while polling (a
    missing data type with the others' words, an input the model would have added
    unknown); the log names each failure."""
    repo: Path = model_repo(REPO)
    names = [*_names(repo, "bad_"), "ok_auto_source"]
    factories = (real_triton_factory, bundled_server_factory)
    real = _compare_loads(factories, repo, names, NO_AUTO)
    assert real["bad_no_dt"][0] == 500
    assert real["log"]["bad_no_dt"] == [
        "batch input data type must be TYPE_INT32 or TYPE_FP32 for bad_no_dt"
    ]
    assert real["log"]["ok_auto_source"] == ["unknown source input name 'IN' for ok_auto_source"]


# ----------------------------------------------------------------------------- execution


@pytest.fixture(scope="module")
def ragged_probes(probe_pair: ProbePair) -> dict[str, Probe]:
    probes = probe_pair(REPO, *ARGS, tag="ragged")
    for probe in probes.values():
        for name in ("hr_ragged", "hr_fixed", "hr_mixed", "hr_nobatch"):
            reply = exchange(probe.url, "POST", f"/v2/repository/models/{name}/load")
            assert reply.status == 200, reply.body
    return probes


def _request(rid: str, rows: list[list[float]], extra: list[int] | None = None) -> str:
    """An infer body: ``IN`` (FP32, one row a batch row), ``IN2`` (INT32, ``extra`` as
    each row) when given."""
    doc: dict[str, Any] = {"id": rid}
    inputs = [
        {
            "name": "IN",
            "datatype": "FP32",
            "shape": [len(rows), len(rows[0])],
            "data": [x for row in rows for x in row],
        }
    ]
    if extra is not None:
        shape = [len(rows), len(extra)]
        inputs.append(
            {"name": "IN2", "datatype": "INT32", "shape": shape, "data": extra * len(rows)}
        )
    doc["inputs"] = inputs
    return json.dumps(doc)


def _batched(
    p: Probe, model: str, requests: list[tuple[str, str]], extra: list[int] | None = None
) -> Any:
    """Hold the instance with a first request (``IN2``: ``extra``), queue ``requests``
    (id, body) one by one, release: what each execution received, the counts."""
    params, mark, hold = p.gate()
    held = json.loads(_request("held", [[0.0]], extra))
    held["parameters"] = params
    path = f"/v2/models/{model}/infer"
    calls = {"held": Call(p.url, path, json.dumps(held))}
    wait_for(mark.exists, f"{p.name}: the first request never started")
    for n, (rid, data) in enumerate(requests, 1):
        calls[rid] = Call(p.url, path, data)
        p.wait_pending(model, n)
    hold.touch()
    seen = {}
    for rid, call in calls.items():
        doc = info(call.result())
        seen[rid] = (doc["exec"], doc["batch"])
    return seen, counts(p.stats(model)), metric_counts(p, model)


def _both(probes: dict[str, Probe], scenario: Any) -> tuple[Any, Any]:
    results = {name: scenario(probe) for name, probe in probes.items()}
    return results["triton"], results["ours"]


RAGGED = [
    ("r0", _request("r0", [[1.0, 2.0, 3.0]])),
    ("r1", _request("r1", [[4.0, 5.0], [6.0, 7.0]])),
    ("r2", _request("r2", [[8.0]])),
]


def test_ragged_requests_batch_without_batch_inputs(ragged_probes: dict[str, Probe]) -> None:
    """Requests of different shapes run as one batch of size 4; ``execute`` gets each
    request's own ``IN`` and none of the configured batch inputs."""
    triton, ours = _both(ragged_probes, lambda p: _batched(p, "hr_ragged", RAGGED))
    seen, stats = triton[0], triton[1]
    assert seen["r0"] == seen["r1"] == seen["r2"]
    batch = seen["r0"][1]
    assert [r["id"] for r in batch] == ["r0", "r1", "r2"]
    assert [[t[0] for t in r["inputs"]] for r in batch] == [["IN"]] * 3
    assert batch[1]["inputs"][0] == ["IN", "float32", [2, 2], [4.0, 5.0, 6.0, 7.0]]
    assert stats["batches"] == {1: 1, 4: 1}
    assert ours == triton


def test_without_ragged_flag_shapes_split_batches(ragged_probes: dict[str, Probe]) -> None:
    """The same requests to a model without ``allow_ragged_batch`` run one by one."""
    triton, ours = _both(ragged_probes, lambda p: _batched(p, "hr_fixed", RAGGED))
    assert sorted({v[0] for v in triton[0].values()}) == [1, 2, 3, 4]
    assert ours == triton


def test_ragged_input_beside_a_variable_one(ragged_probes: dict[str, Probe]) -> None:
    """Only the input that is not ragged must agree in shape: a request whose ``IN2``
    differs starts a batch of its own."""
    requests = [
        ("a", _request("a", [[1.0, 2.0, 3.0]], [1, 2])),
        ("b", _request("b", [[4.0]], [3, 4])),
        ("c", _request("c", [[5.0, 6.0]], [5, 6, 7])),
    ]
    triton, ours = _both(ragged_probes, lambda p: _batched(p, "hr_mixed", requests, [0]))
    seen = triton[0]
    assert seen["a"] == seen["b"] != seen["c"]
    assert ours == triton


def test_model_without_batching_sees_no_batch_inputs(ragged_probes: dict[str, Probe]) -> None:
    """``max_batch_size: 0`` with batch inputs: the model gets its input only."""

    def scenario(p: Probe) -> Any:
        body = json.dumps(
            {
                "id": "n",
                "inputs": [{"name": "IN", "datatype": "FP32", "shape": [2], "data": [1, 2]}],
            }
        )
        reply = exchange(p.url, "POST", "/v2/models/hr_nobatch/infer", body)
        return reply.status, reply.body

    triton, ours = _both(ragged_probes, scenario)
    assert triton[0] == 200
    assert ours == triton
