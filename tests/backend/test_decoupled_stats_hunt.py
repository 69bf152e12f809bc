"""A decoupled model's ``execute`` that raises after some (or all) of its requests sent
FINAL, against real Triton 2.51 (both isolation modes): the replies, and what
``/v2/models/M/stats`` counts. Triton 2.51 fails every request of such a batch, those
already answered included: no inference, no success, a ``fail`` per request."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest

from ._http import exchange
from .conftest import Start

ARGS = ("--exit-on-error=false",)

pytestmark = pytest.mark.real_triton


@pytest.fixture(scope="module")
def repo(model_repo: Any) -> Any:
    return model_repo("hunt_generate")


@pytest.fixture(scope="module")
def real_server(real_triton_factory: Any, repo: Any) -> Any:
    return real_triton_factory(repo, *ARGS)


def _counts(url: str, model: str) -> dict[str, int]:
    s = json.loads(exchange(url, "GET", f"/v2/models/{model}/stats").body)["model_stats"][0]
    out = {
        "inference_count": s["inference_count"],
        "execution_count": s["execution_count"],
        **{k: v["count"] for k, v in s["inference_stats"].items()},
    }
    for b in s["batch_stats"]:
        out[f"batch_{b['batch_size']}"] = b["compute_infer"]["count"]
    return out


def _delta(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}


def _run(url: str, model: str, endpoint: str, modes: list[int]) -> tuple[list[Any], Any]:
    """Send one request per mode at once (the batcher gathers them into one batch); the
    replies, in mode order, and the statistics' delta."""
    before = _counts(url, model)
    replies: list[Any] = [None] * len(modes)

    def send(i: int) -> None:
        body = json.dumps({"MODE": modes[i]})
        replies[i] = exchange(url, "POST", f"/v2/models/{model}/{endpoint}", body)

    threads = [threading.Thread(target=send, args=(i,)) for i in range(len(modes))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # (Triton counts a decoupled request when its execute returns: maybe after the reply)
    # and its counts need not all land at once: read until two reads agree
    deadline = time.monotonic() + 10
    last: dict[str, int] | None = None
    while True:
        delta = _delta(_counts(url, model), before)
        if delta.get("success", 0) + delta.get("fail", 0) >= len(modes) and delta == last:
            return replies, delta
        assert time.monotonic() < deadline, delta
        last = delta
        time.sleep(0.05)


def _key(r: Any) -> Any:
    return (r.status, r.headers.get("content-type"), r.body)


@pytest.mark.parametrize(
    ("model", "modes"),
    [
        ("gen_dec", [13]),
        ("dec_batch", [1]),
        ("dec_batch", [1, 2, 2]),
        ("dec_batch", [0, 1, 2]),
        ("dec_batch", [1, 1, 1]),
        ("dec_batch", [0, 0, 0]),
        ("dec_batch", [3, 2]),
        ("dec_batch", [3, 0]),
    ],
)
@pytest.mark.parametrize("endpoint", ["generate_stream", "generate"])
def test_raise_after_final_stats_match_triton(
    real_server: Any, ours: Start, repo: Any, endpoint: str, model: str, modes: list[int]
) -> None:
    """``gen_dec`` 13 and ``dec_batch`` 1 send FINAL then raise; a ``dec_batch`` batch
    (MODE per request: 0 FINAL, 1 FINAL and raise at the end, 2 nothing, 3 FINAL and
    return a list) fails as a whole when one request of it asks so: Triton 2.51 counts
    the execution and its batch size, and a ``fail`` per request, the answered ones
    included (no inference, success, queue or compute counts)."""
    real_replies, real_delta = _run(real_server.url, model, endpoint, modes)
    ours_replies, ours_delta = _run(ours(repo, *ARGS).url, model, endpoint, modes)
    assert [_key(r) for r in ours_replies] == [_key(r) for r in real_replies]
    assert ours_delta == real_delta
