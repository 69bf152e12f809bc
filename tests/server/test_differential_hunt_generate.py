"""Generate, decoupled models and ensembles, against real Triton 2.51
(``tests/repos/hunt_generate``): what an ensemble's statistics count when its decoupled
step sends an error response, and what model code meets when it misuses the response
sender."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from ._wire import compare, exchange

ARGS = ("--exit-on-error=false",)

pytestmark = pytest.mark.real_triton


@pytest.fixture(scope="module")
def servers(real_triton_factory: Any, bundled_server_factory: Any, model_repo: Any) -> Any:
    repo = model_repo("hunt_generate")
    return real_triton_factory(repo, *ARGS), bundled_server_factory(repo, *ARGS)


def _counts(url: str, model: str) -> dict[str, int]:
    stats = json.loads(exchange(url, "GET", f"/v2/models/{model}/stats").body)
    s = stats["model_stats"][0]
    return {
        "inference_count": s["inference_count"],
        "execution_count": s["execution_count"],
        **{k: v["count"] for k, v in s["inference_stats"].items()},
    }


def _delta(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {k: after[k] - before[k] for k in after if after[k] != before[k]}


def _settled_delta(url: str, before: dict[str, int], fails: int) -> dict[str, int]:
    """The statistics' change once ``fails`` failures are counted (or after 2 s): Triton
    may count the second failure of a step's error after the answer has gone out."""
    deadline = time.monotonic() + 2.0
    while True:
        delta = _delta(_counts(url, "ens_dec"), before)
        if delta.get("fail", 0) >= fails or time.monotonic() > deadline:
            return delta
        time.sleep(0.02)


@pytest.mark.parametrize(
    ("mode", "fails"),
    [(3, 1), (11, 1), (8, 2)],
    ids=["error-then-data-final", "error-then-error-final", "error-final"],
)
@pytest.mark.parametrize("endpoint", ["generate", "generate_stream"])
def test_ensemble_counts_a_decoupled_steps_error_as_triton(
    servers: Any, endpoint: str, mode: int, fails: int
) -> None:
    """A decoupled step's error response fails the ensemble request: Triton 2.51 counts
    that failure twice when the error came with FINAL (the step request is done), once
    when the step request was still in flight (an error response without FINAL)."""
    real, ours = servers
    path = f"/v2/models/ens_dec/{endpoint}"
    body = json.dumps({"MODE": mode})
    deltas = []
    for server in (real, ours):
        before = _counts(server.url, "ens_dec")
        reply = exchange(server.url, "POST", path, body)
        deltas.append((reply, _settled_delta(server.url, before, fails)))
    (r, real_delta), (o, ours_delta) = deltas
    compare(o, r)
    assert ours_delta == real_delta
    assert ours_delta["fail"] == fails
