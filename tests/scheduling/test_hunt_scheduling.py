"""Scheduling corner cases found by comparing with real Triton 2.51, differentially."""

from __future__ import annotations

import time
from typing import Any

import pytest

from ._probe import Probe, counts, info, metric_counts, outcome
from .conftest import ProbePair, server_args

pytestmark = pytest.mark.real_triton

_REJECTED = "nv_inference_request_failure[REJECTED]"


@pytest.fixture(scope="module")
def own_probes(probe_pair: ProbePair) -> dict[str, Probe]:
    """A pair of servers of this module's own (``--log-verbose=0`` only tells them apart
    from the session's): other tests count what the shared pair's models did."""
    return probe_pair("sched_models", *server_args(), "--log-verbose=0", tag="hunt")


def test_a_few_microsecond_timeout_is_rejected_even_on_an_idle_instance(
    own_probes: dict[str, Probe],
) -> None:
    """Triton's batcher looks at a request some microseconds after queueing it, so a
    REJECT deadline of 1-2 µs has passed by then, idle instance or not (100 µs never
    has: that request runs)."""

    def scenario(p: Probe) -> Any:
        before = metric_counts(p, "dyn_reject")
        fails = counts(p.stats("dyn_reject"))["fail"]
        answers = [
            outcome(p.post("dyn_reject", rid, params={"timeout": t}))
            for rid, t in (("t1", 1), ("t2", 2), ("t3", 1))
        ]
        served = info(p.post("dyn_reject", "ok", params={"timeout": 100_000}))["timeouts"]
        # (a server may count a request just after its answer went out: wait until the
        # four requests are counted, at most 3 s)
        deadline = time.monotonic() + 3
        while True:
            after = metric_counts(p, "dyn_reject")
            delta = {k: after[k] - before.get(k, 0) for k in after}
            done = delta["nv_inference_request_success"] + delta[_REJECTED]
            if done >= 4 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        return answers, served, delta, counts(p.stats("dyn_reject"))["fail"] - fails

    results = {name: scenario(probe) for name, probe in own_probes.items()}
    triton, ours = results["triton"], results["ours"]
    expired = (503, "text/plain", b'{"error":"Request timeout expired"}')
    assert triton[0] == [expired] * 3
    assert triton[1] == [100_000]
    assert triton[2]["nv_inference_request_failure[REJECTED]"] == 3
    assert triton[2]["nv_inference_request_success"] == 1
    assert triton[3] == 3
    assert ours == triton
