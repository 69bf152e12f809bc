"""Sequence batcher corner cases found by comparing with real Triton 2.51,
differentially (repository ``tests/repos/hunt_sequences``)."""

from __future__ import annotations

from typing import Any

import pytest

from ._probe import Call, Probe, counts, info, metric_counts, outcome
from .conftest import ProbePair

pytestmark = pytest.mark.real_triton

_START = {"sequence_start": True}
_END = {"sequence_end": True}


@pytest.fixture(scope="module")
def hunt_probes(probe_pair: ProbePair) -> dict[str, Probe]:
    return probe_pair("hunt_sequences")


def _seen(reply: Any) -> Any:
    """The answer: the error, or the sum and what the model saw (ids, flags, controls)."""
    if reply.status != 200:
        return outcome(reply)
    batch = [
        (e["id"], e["cid"], e["flags"], {k: v for k, v in e["inputs"].items() if k != "IN"})
        for e in info(reply)["batch"]
    ]
    return reply.json()["outputs"][0]["data"], batch


def test_a_sequence_request_must_have_batch_size_one(hunt_probes: dict[str, Probe]) -> None:
    """A batch of more than one request is refused before the correlation id is looked
    at, counted nowhere, and is no step of its sequence."""

    def scenario(p: Probe) -> Any:
        steps = [
            ("g1", 2, {"sequence_id": 0}),
            ("g2", 2, {"sequence_id": 44}),
            ("g3", 3, {"sequence_id": 45, **_START}),
            ("g4", 1, {"sequence_id": 45, **_START}),
            ("g5", 2, {"sequence_id": 45}),
            ("g6", 4, {"sequence_id": 45, **_END}),
            ("g7", 1, {"sequence_id": 45, **_END}),
        ]
        out = [(rid, _seen(p.post("seq_b4", rid, 1, batch, params=params)))
               for rid, batch, params in steps]  # fmt: skip
        return out, counts(p.stats("seq_b4")), metric_counts(p, "seq_b4")

    results = {name: scenario(probe) for name, probe in hunt_probes.items()}
    triton, ours = results["triton"], results["ours"]
    refused = (
        400,
        "application/json",
        b'{"error":"inference request to model \'seq_b4\' must specify batch-size 1 due to '
        b'requirements of sequence batcher"}',
    )
    seen = dict(triton[0])
    assert [seen[r] for r in ("g1", "g2", "g3", "g5", "g6")] == [refused] * 5
    assert seen["g4"][0] == [1]
    assert seen["g7"][0] == [2]  # (g5 and g6 were no steps of it)
    assert triton[1]["success"] == 2 and triton[1]["fail"] == 0
    assert ours == triton


def test_oldest_keeps_an_ending_sequence_slot_until_its_end_is_answered(
    hunt_probes: dict[str, Probe],
) -> None:
    """With every candidate slot taken, a new sequence waits until the END request of
    another has run: it does not join the batch that END request waits in."""

    def scenario(p: Probe) -> Any:
        calls: dict[str, Call] = {}

        def send(rid: str, cid: int, flags: dict[str, bool], pending: int) -> None:
            calls[rid] = p.send("seq_old2", rid, 1, params={"sequence_id": cid, **flags})
            if pending:
                p.wait_pending("seq_old2", pending)

        send("o1", 1, _START, 1)
        send("o2", 2, _START, 0)  # the preferred batch of 2: runs
        calls["o2"].result()
        send("o3", 3, _START, 1)  # no candidate slot left
        send("o4", 1, _END, 2)  # waits in the batcher, seq 3 still waits for a slot
        send("o5", 2, _END, 0)  # [o4, o5]; then seq 3 takes a slot, o3 waits alone
        calls["o5"].result()
        p.wait_pending("seq_old2", 1)
        send("o6", 4, _START, 0)  # [o3, o6]
        calls["o6"].result()
        send("o7", 3, _END, 1)
        send("o8", 4, _END, 0)
        seen = {rid: _seen(c.result()) for rid, c in calls.items()}
        groups = sorted({tuple(e[0] for e in s[1]) for s in seen.values()})
        return groups, {rid: s[0] for rid, s in seen.items()}, counts(p.stats("seq_old2"))

    results = {name: scenario(probe) for name, probe in hunt_probes.items()}
    triton, ours = results["triton"], results["ours"]
    assert triton[0] == [("o1", "o2"), ("o3", "o6"), ("o4", "o5"), ("o7", "o8")]
    assert ours == triton


def test_direct_waits_for_the_minimum_slot_utilization(hunt_probes: dict[str, Probe]) -> None:
    """``direct`` with ``minimum_slot_utilization`` 0.5 of 4 slots (and a delay longer
    than the test): a batch runs once 2 slots have a request ready, the others wait."""

    def scenario(p: Probe) -> Any:
        calls: dict[str, Call] = {}
        waited = []

        def send(rid: str, cid: int, flags: dict[str, bool], pending: int) -> None:
            calls[rid] = p.send("seq_util", rid, 1, params={"sequence_id": cid, **flags})
            if pending:
                p.wait_pending("seq_util", pending)
                waited.append(calls[rid].done())

        send("r1", 1, _START, 1)
        send("r2", 2, _START, 0)  # [r1, r2]
        calls["r2"].result()
        send("r3", 3, _START, 1)
        send("r4", 1, {}, 0)  # [r4, null, r3]
        calls["r4"].result()
        send("e1", 1, _END, 1)
        send("e2", 2, _END, 0)  # [e1, e2]
        calls["e2"].result()
        send("e3", 3, _END, 1)
        send("s4", 4, {**_START, **_END}, 0)  # [s4, null, e3]
        seen = {rid: _seen(c.result()) for rid, c in calls.items()}
        groups = sorted({tuple(e[0] for e in s[1]) for s in seen.values()})
        return waited, groups, counts(p.stats("seq_util"))

    results = {name: scenario(probe) for name, probe in hunt_probes.items()}
    triton, ours = results["triton"], results["ours"]
    assert triton[0] == [False] * 4
    assert triton[1] == [("e1", "e2"), ("r1", "r2"), ("r4", "", "r3"), ("s4", "", "e3")]
    assert ours == triton
