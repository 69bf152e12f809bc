"""Queue policies of the dynamic batcher, differentially: maximum queue size, request
timeouts (REJECT and DELAY, overrides), priority levels with per-level policies."""

from __future__ import annotations

import time
from typing import Any

import pytest

from ._probe import Probe, counts, executions, info, metric_counts, outcome

pytestmark = pytest.mark.real_triton


def _both(probes: dict[str, Probe], scenario: Any) -> tuple[Any, Any]:
    results = {name: scenario(probe) for name, probe in probes.items()}
    return results["triton"], results["ours"]


def test_a_full_queue_refuses_with_503(probes: dict[str, Probe]) -> None:
    def scenario(p: Probe) -> Any:
        first, hold = p.send_held("dyn_qsize", "a")
        calls = {}
        for n, rid in enumerate("bc", 1):
            calls[rid] = p.send("dyn_qsize", rid)
            p.wait_pending("dyn_qsize", n)
        refused = [outcome(p.post("dyn_qsize", rid)) for rid in ("d", "")]
        hold.touch()
        replies = {"a": first.result(), **{r: c.result() for r, c in calls.items()}}
        return (
            refused,
            executions(replies),
            counts(p.stats("dyn_qsize")),
            metric_counts(p, "dyn_qsize"),
        )

    triton, ours = _both(probes, scenario)
    assert triton[0] == [
        (503, "application/json", b'{"error":"[request id: d] Exceeds maximum queue size"}'),
        (
            503,
            "application/json",
            b'{"error":"[request id: <id_unknown>] Exceeds maximum queue size"}',
        ),
    ]
    assert triton[1] == [["a"], ["b", "c"]]
    assert ours == triton


def test_timeouts_reject_queued_requests(probes: dict[str, Probe]) -> None:
    def scenario(p: Probe) -> Any:
        first, hold = p.send_held("dyn_reject", "a")
        calls = {
            "b": p.send("dyn_reject", "b"),  # the policy's 300 ms
            "c": p.send("dyn_reject", "c", params={"timeout": 100_000}),  # shorter: used
            "d": p.send("dyn_reject", "d", params={"timeout": 5_000_000}),  # longer: ignored
        }
        rejected = {rid: outcome(c.result()) for rid, c in calls.items()}  # a still runs
        hold.touch()
        first.result()
        served = p.post("dyn_reject", "e", params={"timeout": 50_000})
        return (
            rejected,
            info(served)["timeouts"],
            counts(p.stats("dyn_reject")),
            metric_counts(p, "dyn_reject"),
        )

    triton, ours = _both(probes, scenario)
    expired = (503, "text/plain", b'{"error":"Request timeout expired"}')
    assert triton[0] == {"b": expired, "c": expired, "d": expired}
    assert triton[1] == [50_000]  # the model sees the request's own timeout
    assert triton[3]["nv_inference_request_failure[REJECTED]"] == 3
    assert ours == triton


def test_delayed_requests_wait_behind_fresh_ones(probes: dict[str, Probe]) -> None:
    def scenario(p: Probe) -> Any:
        first, hold = p.send_held("dyn_delayact", "a")
        calls = {}
        for n, rid in enumerate("bc", 1):
            calls[rid] = p.send("dyn_delayact", rid)
            p.wait_pending("dyn_delayact", n)
        time.sleep(0.5)  # b and c are past their 300 ms
        calls["d"] = p.send("dyn_delayact", "d")
        p.wait_pending("dyn_delayact", 3)
        hold.touch()
        replies = {"a": first.result(), **{r: c.result() for r, c in calls.items()}}
        return executions(replies), counts(p.stats("dyn_delayact"))

    triton, ours = _both(probes, scenario)
    assert triton[0] == [["a"], ["d", "b", "c"]]
    assert ours == triton


def test_request_timeouts_need_a_policy_timeout(probes: dict[str, Probe]) -> None:
    def scenario(p: Probe) -> Any:
        first, hold = p.send_held("dyn_override", "a")
        late = p.send("dyn_override", "b", params={"timeout": 100_000})
        p.wait_pending("dyn_override", 1)
        time.sleep(0.3)
        hold.touch()
        return outcome(first.result()), outcome(late.result()), counts(p.stats("dyn_override"))

    triton, ours = _both(probes, scenario)
    assert triton[1][0] == 200
    assert ours == triton


def test_priority_levels_order_the_queue(probes: dict[str, Probe]) -> None:
    def scenario(p: Probe) -> Any:
        first, hold = p.send_held("dyn_prio", "a")
        calls = {}
        refused = None
        n = 0
        # 0 and out-of-range priorities mean the default level (2); level 1 holds one
        for rid, priority in [("b", 3), ("c", 2), ("d", 1), ("e", 1), ("f", 0), ("g", 7)]:
            if rid == "e":
                refused = outcome(p.post("dyn_prio", rid, params={"priority": priority}))
                continue
            calls[rid] = p.send("dyn_prio", rid, params={"priority": priority})
            n += 1
            p.wait_pending("dyn_prio", n)
        hold.touch()
        replies = {"a": first.result(), **{r: c.result() for r, c in calls.items()}}
        return refused, executions(replies), counts(p.stats("dyn_prio"))

    triton, ours = _both(probes, scenario)
    assert triton[0] == (
        503,
        "application/json",
        b'{"error":"[request id: e] Exceeds maximum queue size"}',
    )
    assert triton[1] == [["a"], ["d", "c", "f", "g"], ["b"]]
    assert ours == triton
