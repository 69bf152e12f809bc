"""Dynamic batching, differentially: which requests share an ``execute``, and the
statistics and metrics that follow, on real Triton 2.51 and on our server."""

from __future__ import annotations

import time
from typing import Any

import pytest

from ._probe import Probe, counts, executions, info, metric_counts, outcome, wait_for

pytestmark = pytest.mark.real_triton


def _both(probes: dict[str, Probe], scenario: Any) -> tuple[Any, Any]:
    results = {name: scenario(probe) for name, probe in probes.items()}
    return results["triton"], results["ours"]


def _queue_behind(
    p: Probe, model: str, rids: str, batches: list[int] | None = None, **kw: Any
) -> dict[str, Any]:
    """Hold the instance with request 'a', queue ``rids`` one by one, then release."""
    first, hold = p.send_held(model, "a")
    calls = {}
    for n, rid in enumerate(rids, 1):
        calls[rid] = p.send(model, rid, batch=(batches[n - 1] if batches else 1), **kw)
        p.wait_pending(model, n)
    hold.touch()
    replies = {"a": first.result(), **{rid: c.result() for rid, c in calls.items()}}
    return replies


def test_queued_requests_fill_batches_up_to_the_maximum(probes: dict[str, Probe]) -> None:
    def scenario(p: Probe) -> Any:
        replies = _queue_behind(p, "dyn_default", "bcdefg", [1, 2, 1, 3, 1, 2])
        sizes = {rid: info(r)["sizes"] for rid, r in replies.items()}
        return executions(replies), sizes["b"], counts(p.stats("dyn_default"))

    triton, ours = _both(probes, scenario)
    assert triton[0] == [["a"], ["b", "c", "d", "e", "f"], ["g"]]
    assert triton[1] == [1, 2, 1, 3, 1]  # each request keeps its own batch dimension
    assert ours == triton


def test_preferred_batch_sizes_shape_the_batches(probes: dict[str, Probe]) -> None:
    def scenario(p: Probe) -> Any:
        replies = _queue_behind(p, "dyn_pref", "bcdefgh")
        return executions(replies), counts(p.stats("dyn_pref")), metric_counts(p, "dyn_pref")

    triton, ours = _both(probes, scenario)
    # while the instance is busy a payload closes as soon as it reaches a preferred
    # size (2); the next one is formed when a slot frees, and takes the largest (4)
    expected = [["a"], ["b", "c"], ["d", "e", "f", "g"], ["h"]]
    assert ours[0] == expected
    assert ours[1]["batches"] == {1: 2, 2: 1, 4: 1}
    if triton[0] == expected:
        assert ours == triton
    else:
        # real Triton's batcher sometimes races the release of the held request (seen
        # once in a clean-clone CI run: [d] alone, then [e, f, g, h]); its batches still keep
        # the arrival order
        assert [rid for batch in triton[0] for rid in batch] == list("abcdefgh")


def test_queue_delay_waits_for_a_preferred_batch(probes: dict[str, Probe]) -> None:
    def scenario(p: Probe) -> Any:
        first = p.send("dyn_delay", "a")
        p.wait_pending("dyn_delay", 1)
        second = p.send("dyn_delay", "b")
        groups1 = executions({"a": first.result(), "b": second.result()})
        calls = {}
        for n, rid in enumerate("cde", 1):
            calls[rid] = p.send("dyn_delay", rid)
            p.wait_pending("dyn_delay", n)
        calls["f"] = p.send("dyn_delay", "f")  # the fourth makes a preferred batch
        replies = {rid: c.result() for rid, c in calls.items()}
        late = p.post("dyn_delay", "g")  # alone: waits out the delay
        return groups1, executions(replies), info(late)["ids"], counts(p.stats("dyn_delay"))

    triton, ours = _both(probes, scenario)
    assert triton[:3] == ([["a", "b"]], [["c", "d", "e", "f"]], ["g"])
    assert ours == triton


def test_requests_of_different_shapes_are_not_batched(probes: dict[str, Probe]) -> None:
    def scenario(p: Probe) -> Any:
        first, hold = p.send_held("dyn_pref", "a", width=3)
        calls = {}
        for n, (rid, width) in enumerate(zip("bcdef", [1, 1, 2, 2, 1], strict=True), 1):
            calls[rid] = p.send("dyn_pref", rid, width=width)
            p.wait_pending("dyn_pref", n)
        hold.touch()
        replies = {"a": first.result(), **{r: c.result() for r, c in calls.items()}}
        return executions(replies)

    triton, ours = _both(probes, scenario)
    expected = [["a"], ["b", "c"], ["d", "e"], ["f"]]
    assert ours == expected
    if triton != expected:
        # real Triton's batcher sometimes races the release of the held request (as in
        # test_preferred_batch_sizes_shape_the_batches; seen: [d] and [e] apart); its
        # batches still keep the arrival order and never mix the shapes
        widths = dict(zip("abcdef", [3, 1, 1, 2, 2, 1], strict=True))
        assert [rid for batch in triton for rid in batch] == list("abcdef")
        assert all(len({widths[rid] for rid in batch}) == 1 for batch in triton)


def test_without_dynamic_batching_each_request_runs_alone(probes: dict[str, Probe]) -> None:
    def scenario(p: Probe) -> Any:
        first, hold1 = p.send_held("plain_b2", "a")
        second, hold2 = p.send_held("plain_b2", "b")  # the second instance
        calls = {}
        for n, rid in enumerate("cd", 1):
            # a request timeout means nothing without a dynamic batcher
            calls[rid] = p.send("plain_b2", rid, params={"timeout": 1000, "priority": 9})
            p.wait_pending("plain_b2", n)
        hold1.touch()
        hold2.touch()
        replies = {"a": first.result(), "b": second.result()}
        replies.update((r, c.result()) for r, c in calls.items())
        instances = {info(r)["instance"] for r in replies.values()}
        return (
            sorted(executions(replies)),
            sorted(instances),
            counts(p.stats("plain_b2")),
            metric_counts(p, "plain_b2"),
        )

    triton, ours = _both(probes, scenario)
    assert triton[0] == [["a"], ["b"], ["c"], ["d"]]
    assert triton[1] == ["plain_b2_0_0", "plain_b2_0_1"]
    assert ours == triton


def test_failures_inside_a_batch(probes: dict[str, Probe]) -> None:
    def scenario(p: Probe) -> Any:
        first, hold = p.send_held("dyn_default", "x1")
        calls = {}
        # -2: an error response (counts as a success); -1: execute raises
        for n, (rid, value) in enumerate([("x2", 5), ("x3", -2), ("x4", 6)], 1):
            calls[rid] = p.send("dyn_default", rid, value)
            p.wait_pending("dyn_default", n)
        hold.touch()
        replies = {"x1": first.result(), **{r: c.result() for r, c in calls.items()}}
        boom = p.post("dyn_default", "y2", -1)
        return (
            {rid: outcome(r) for rid, r in replies.items()},
            executions({r: x for r, x in replies.items() if r != "x3"}),
            outcome(boom)[:2],
            boom.body.split(b"\\n")[0],
            counts(p.stats("dyn_default")),
            metric_counts(p, "dyn_default"),
        )

    triton, ours = _both(probes, scenario)
    assert triton[0]["x3"][0] == 500
    assert triton[1] == [["x1"], ["x2", "x3", "x4"]]
    assert triton[2] == (500, "text/plain")
    assert ours[:3] == triton[:3]
    assert ours[4:] == triton[4:]
    assert ours[3].replace(b"dyn_default_0_0", b"dyn_default_0") == triton[3].replace(
        b"dyn_default_0_0", b"dyn_default_0"
    )


def test_rescheduling_without_iterative_sequences_is_an_error(probes: dict[str, Probe]) -> None:
    # real Triton logs "Failed to release request: Request is released with
    # TRITONSERVER_REQUEST_RELEASE_RESCHEDULE, ..." and never answers; we answer with it
    ours = probes["ours"]
    for model, batch in (("resched_dyn", 1), ("resched_plain", None)):
        reply = ours.post(model, "r1", -3, batch)
        assert outcome(reply) == (
            500,
            "text/plain",
            b'{"error":"Request is released with TRITONSERVER_REQUEST_RELEASE_RESCHEDULE, '
            b'while the model is not configured to handle such a flag."}',
        )
        assert ours.post(model, "r2", 4, batch).status == 200


def _compute_ns(stats: dict[str, Any], size: int) -> tuple[list[int], list[int]]:
    """Compute input, infer and output ns: over requests, and of batches of ``size``."""
    stages = ("compute_input", "compute_infer", "compute_output")
    batch = next((b for b in stats["batch_stats"] if b["batch_size"] == size), None)
    per_batch = [batch[k]["ns"] if batch else 0 for k in stages]
    return [stats["inference_stats"][k]["ns"] for k in stages], per_batch


def test_each_request_of_a_batch_counts_the_whole_execution(probes: dict[str, Probe]) -> None:
    """Four requests run as one held execution: each counts the execution's whole compute
    times in the statistics and in the metrics' counters, so the requests' totals grow by
    four times the batch's own entry."""

    def scenario(p: Probe) -> Any:
        before = _compute_ns(p.raw_stats("dyn_delay"), 4)
        metric_before = p.model_metrics("dyn_delay")["nv_inference_compute_infer_duration_us"]
        params, mark, hold = p.gate()
        calls = [p.send("dyn_delay", rid, params=params) for rid in "abcd"]
        wait_for(mark.exists, f"{p.name}: the batch never started")
        time.sleep(0.1)
        hold.touch()
        groups = executions({rid: c.result() for rid, c in zip("abcd", calls, strict=True)})
        after = _compute_ns(p.stats("dyn_delay"), 4)
        metric = p.model_metrics("dyn_delay")["nv_inference_compute_infer_duration_us"]
        requests, batch = (
            [a - b for a, b in zip(x, y, strict=True)] for x, y in zip(after, before, strict=True)
        )
        return groups, requests, batch, metric - metric_before

    for name, (groups, requests, batch, metric_us) in zip(
        ("triton", "ours"), _both(probes, scenario), strict=True
    ):
        assert [sorted(g) for g in groups] == [["a", "b", "c", "d"]], name
        assert batch[1] >= 100_000_000, name  # held 0.1 s
        assert requests == [4 * ns for ns in batch], name
        assert abs(metric_us - requests[1] / 1000) <= 4, name
