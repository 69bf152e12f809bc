"""Dynamic batcher and queue policy corner cases, compared with real Triton 2.51
(repository ``tests/repos/hunt_batcher``)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from ._probe import Probe, counts, executions, metric_counts, outcome, wait_for
from .conftest import ProbePair

pytestmark = pytest.mark.real_triton


@pytest.fixture(scope="module")
def hunt_probes(probe_pair: ProbePair) -> dict[str, Probe]:
    return probe_pair("hunt_batcher", tag="batcher")  # (its own gate file names)


def _both(probes: dict[str, Probe], scenario: Any) -> tuple[Any, Any]:
    results = {name: scenario(probe) for name, probe in probes.items()}
    return results["triton"], results["ours"]


def test_preserve_ordering_holds_later_answers(hunt_probes: dict[str, Probe]) -> None:
    """Two instances: 'b' and then 'c' run and finish while 'a' is held on the other
    instance; their answers wait for 'a's."""

    def scenario(p: Probe) -> Any:
        m = "hb_order"
        first, hold_a = p.send_held(m, "a")
        second, hold_b = p.send_held(m, "b")
        third = p.send(m, "c")
        p.wait_pending(m, 1)
        executed = p.raw_stats(m)["execution_count"]
        hold_b.touch()
        # b's and c's executions end (counted) while their answers wait
        wait_for(lambda: p.raw_stats(m)["execution_count"] >= executed + 2, "no execution")
        time.sleep(0.2)
        waiting = (second.done(), third.done(), p.pending(m))
        hold_a.touch()
        replies = {"a": first.result(), "b": second.result(), "c": third.result()}
        return waiting, sorted(executions(replies)), counts(p.stats(m)), metric_counts(p, m)

    triton, ours = _both(hunt_probes, scenario)
    assert triton[0] == (False, False, 0)
    assert triton[1] == [["a"], ["b"], ["c"]]
    assert ours == triton


def test_preserve_ordering_holds_failures_too(hunt_probes: dict[str, Probe]) -> None:
    """An error response and a failed execution behind a held request wait as well."""

    def scenario(p: Probe) -> Any:
        m = "hb_order"
        first, hold_a = p.send_held(m, "a")
        executed = p.raw_stats(m)["execution_count"]
        second = p.send(m, "b", -2)  # an error response
        wait_for(lambda: p.raw_stats(m)["execution_count"] > executed, "no execution")
        third = p.send(m, "c", -1)  # execute raises
        wait_for(lambda: p.model_metrics(m)["nv_inference_exec_count"] > executed + 1, "no exec")
        time.sleep(0.2)
        waiting = (second.done(), third.done())
        hold_a.touch()
        answers = [outcome(c.result()) for c in (first, second)]
        failed = outcome(third.result())[:2]  # (the message names the instance)
        return waiting, answers, failed, counts(p.stats(m)), metric_counts(p, m)

    triton, ours = _both(hunt_probes, scenario)
    assert triton[0] == (False, False)
    assert ours == triton
