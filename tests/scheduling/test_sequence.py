"""The sequence batcher, differentially: control inputs, correlation ids and their
errors, slots and the backlog, idle expiry, the direct and oldest strategies,
iterative sequences."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from server._wire import exchange

from ._probe import Probe, counts, info, metric_counts, outcome, wait_for

pytestmark = pytest.mark.real_triton


def _both(probes: dict[str, Probe], scenario: Any) -> tuple[Any, Any]:
    results = {name: scenario(probe) for name, probe in probes.items()}
    return results["triton"], results["ours"]


def _seen(reply: Any) -> Any:
    """What the model saw, with the data of null requests masked (Triton leaves it
    uninitialised)."""
    if reply.status != 200:
        return outcome(reply)
    doc = info(reply)
    for entry in doc["batch"]:
        if entry["id"] == "" and entry["cid"] == 0:
            entry["inputs"]["IN"][2] = None
    return reply.json()["outputs"][0]["data"], doc["batch"]


def test_controls_ids_and_errors(probes: dict[str, Probe]) -> None:
    def scenario(p: Probe) -> Any:
        both = {"sequence_start": True, "sequence_end": True}
        steps = [
            ("seq_direct", "a1", 1, {"sequence_id": 1, "sequence_start": True}),
            ("seq_direct", "a2", 2, {"sequence_id": 1}),
            ("seq_direct", "b1", 10, {"sequence_id": "abc", "sequence_start": True}),
            ("seq_direct", "x1", 1, {}),
            ("seq_direct", "x2", 1, {"sequence_id": 77}),
            ("seq_direct", "x3", 1, {"sequence_id": 0, "sequence_start": True}),
            ("seq_direct", "x4", 1, {"sequence_id": "", "sequence_start": True}),
            ("seq_direct", "b2", 5, {"sequence_id": "abc", "sequence_end": True}),
            ("seq_direct", "b3", 5, {"sequence_id": "abc"}),
            ("seq_direct", "a3", 3, {"sequence_id": 1, "sequence_end": True}),
            ("seq_direct", "z1", 4, {"sequence_id": 5, **both}),
            ("seq_int32", "i1", 1, {"sequence_id": 2**40 + 3, "sequence_start": True}),
            ("seq_int32", "i2", 2, {"sequence_id": 2**40 + 3, "sequence_end": True}),
            ("seq_int32", "i3", 1, {"sequence_id": "str9", **both}),
        ]  # fmt: skip
        out = []
        for model, rid, value, params in steps:
            batch = 1 if model == "seq_direct" else None
            out.append((rid, _seen(p.post(model, rid, value, batch, params=params))))
        return out

    triton, ours = _both(probes, scenario)
    seen = dict(triton)
    assert seen["a2"][0] == [3]
    a1 = seen["a1"][1][0]
    assert a1["order"] == ["READY", "CORRID", "END", "START", "IN"]
    assert a1["inputs"]["START"] == ["int32", [1, 1], [1]]
    assert a1["inputs"]["END"] == ["bool", [1, 1], [False]]
    assert [e["id"] for e in seen["b1"][1]] == ["", "b1"]  # padded to the second slot
    assert seen["b1"][1][1]["inputs"]["CORRID"][2] == [27974191445704707]  # "abc"
    assert seen["x2"] == (
        400,
        "application/json",
        b'{"error":"inference request for sequence 77 to model \'seq_direct\' must specify '
        b'the START flag on the first request of the sequence"}',
    )
    assert seen["i1"][1][0]["inputs"]["CORRID"] == ["int32", [1], [3]]
    assert ours == triton


def test_slots_backlog_and_idle_expiry(probes: dict[str, Probe]) -> None:
    def scenario(p: Probe) -> Any:
        results = []
        start = {"sequence_start": True}
        results.append(_seen(p.post("seq_direct", "s1", 1, params={"sequence_id": 11, **start})))
        results.append(_seen(p.post("seq_direct", "s2", 1, params={"sequence_id": 12, **start})))
        waiting = p.send("seq_direct", "s3", 1, params={"sequence_id": 13, **start})
        time.sleep(0.3)
        results.append(waiting.done())  # both slots are taken
        results.append(
            _seen(p.post("seq_direct", "s4", 1, params={"sequence_id": 12, "sequence_end": True}))
        )
        results.append(_seen(waiting.result()))  # took the freed slot
        results.append(_seen(p.post("seq_direct", "s5", 1, params={"sequence_id": 11})))
        time.sleep(2.5)  # both sequences idle past 2 s
        results.append(_seen(p.post("seq_direct", "s6", 1, params={"sequence_id": 11})))
        results.append(_seen(p.post("seq_direct", "s7", 1, params={"sequence_id": 13})))
        # one slot only (max_batch_size 0): the second sequence waits for the first to idle out
        results.append(
            _seen(p.post("seq_plain", "q1", 1, None, params={"sequence_id": 1, **start}))
        )
        results.append(
            _seen(p.post("seq_plain", "q2", 1, None, params={"sequence_id": 2, **start}))
        )
        results.append(_seen(p.post("seq_plain", "q3", 1, None, params={"sequence_id": 1})))
        return results

    triton, ours = _both(probes, scenario)
    assert triton[2] is False
    assert [e["id"] for e in triton[4][1]] == ["", "s3"]
    assert triton[6][0] == 400 and triton[7][0] == 400
    assert triton[10][0] == 400
    assert ours == triton


def test_direct_batches_one_request_per_slot(probes: dict[str, Probe]) -> None:
    def scenario(p: Probe) -> Any:
        start = {"sequence_start": True}
        p.post("seq_direct", "t1", 1, params={"sequence_id": 21, **start})
        p.post("seq_direct", "t2", 1, params={"sequence_id": 22, **start})
        first, hold = p.send_held("seq_direct", "t3", 1, params={"sequence_id": 21})
        calls = {}
        for n, (rid, cid) in enumerate([("t4", 21), ("t5", 22), ("t6", 22)], 1):
            calls[rid] = p.send("seq_direct", rid, 1, params={"sequence_id": cid})
            p.wait_pending("seq_direct", n)
        hold.touch()
        groups = [_seen(first.result())]
        groups += [_seen(c.result()) for c in calls.values()]
        for cid in (21, 22):
            p.post("seq_direct", "end", 0, params={"sequence_id": cid, "sequence_end": True})
        return [[e["id"] for e in g[1]] for g in groups], counts(p.stats("seq_direct"))

    triton, ours = _both(probes, scenario)
    assert triton[0] == [["t3"], ["t4", "t5"], ["t4", "t5"], ["", "t6"]]
    assert ours == triton


def test_oldest_batches_across_sequences(probes: dict[str, Probe]) -> None:
    def scenario(p: Probe) -> Any:
        start = {"sequence_start": True}
        p.post("seq_oldest", "o1", 1, params={"sequence_id": 1, **start})
        p.post("seq_oldest", "o2", 1, params={"sequence_id": 2, **start})
        first, hold = p.send_held("seq_oldest", "p1", 1, params={"sequence_id": 1})
        calls = {}
        # (a request of the sequence that is executing would race the instance for the
        # next payload on real Triton; none is sent while the instance is held)
        plan = [("p2", 2, {}), ("p3", 3, start), ("p5", 2, {}), ("p6", 2, {})]
        for n, (rid, cid, extra) in enumerate(plan, 1):
            calls[rid] = p.send("seq_oldest", rid, 1, params={"sequence_id": cid, **extra})
            p.wait_pending("seq_oldest", n)
        hold.touch()
        replies = {"p1": first.result(), **{r: c.result() for r, c in calls.items()}}
        for cid in (1, 2, 3):
            end = {"sequence_id": cid, "sequence_end": True}
            replies[f"e{cid}"] = p.post("seq_oldest", f"e{cid}", 0, params=end)
        seen = {rid: _seen(r) for rid, r in replies.items()}
        assert all(r.status == 200 for r in replies.values()), seen
        groups = sorted({tuple(e["id"] for e in s[1]) for s in seen.values()})
        return groups, {rid: s[0] for rid, s in seen.items()}, counts(p.stats("seq_oldest"))

    triton, ours = _both(probes, scenario)
    assert triton[0] == [("e1",), ("e2",), ("e3",), ("p1",), ("p2", "p3"), ("p5",), ("p6",)]
    assert ours == triton


def test_iterative_sequences_reschedule(probes: dict[str, Probe]) -> None:
    def scenario(p: Probe) -> Any:
        results = []
        reply = p.post("seq_iter", "it1", 2, None)
        results.append(
            (
                reply.json()["outputs"][0]["data"],
                [(e["cid"], e["flags"]) for e in info(reply)["batch"]],
            )
        )
        reply = p.post(
            "seq_iter", "it2", 1, None, params={"sequence_id": 9, "sequence_start": True}
        )
        results.append(
            (
                reply.json()["outputs"][0]["data"],
                [(e["cid"], e["flags"]) for e in info(reply)["batch"]],
            )
        )
        # the sequence ended with its request
        results.append(outcome(p.post("seq_iter", "it3", 0, None, params={"sequence_id": 9})))
        calls = [p.send("seq_iter", rid, 1, None) for rid in ("it4", "it5")]
        wait_for(lambda: all(c.done() for c in calls), "iterative requests never finished")
        results.append(sorted(c.result().status for c in calls))
        return results, counts(p.stats("seq_iter")), metric_counts(p, "seq_iter")

    triton, ours = _both(probes, scenario)
    assert triton[0][0] == ([2], [(1, 0)])
    assert triton[2]["nv_inference_request_failure[CANCELED]"] == 4
    assert ours == triton


def test_sequences_spread_over_instances(probes: dict[str, Probe]) -> None:
    def scenario(p: Probe) -> Any:
        start, end = {"sequence_start": True}, {"sequence_end": True}
        steps = [("s1", 1, start), ("s2", 2, start), ("e1", 1, end), ("s3", 3, start)]
        steps += [("e2", 2, end), ("e3", 3, end)]
        out = []
        for rid, cid, extra in steps:
            reply = p.post("seq_two", rid, 1, None, params={"sequence_id": cid, **extra})
            out.append((rid, info(reply)["instance"]))
        return out

    triton, ours = _both(probes, scenario)

    # which instance comes first is not fixed in Triton (instances load in parallel):
    # compare who shares an instance
    def shape(run: list[tuple[str, str]]) -> dict[str, int]:
        first: dict[str, int] = {}
        return {rid: first.setdefault(inst, len(first)) for rid, inst in run}

    assert shape(triton) == {"s1": 0, "s2": 1, "e1": 0, "s3": 0, "e2": 1, "e3": 0}
    assert shape(ours) == shape(triton)


@pytest.mark.parametrize("model", ["seq_plain", "seq_iter"])
def test_a_sequence_has_ended_once_its_last_answer_arrived(
    probes: dict[str, Probe], model: str
) -> None:
    """The answer that ends a sequence reaches the client only after the sequence is
    released: a request sent right after it, without START, is refused every time (a
    worker process writing that answer itself raced the server's release)."""
    error = (
        f"inference request for sequence 31 to model '{model}' must specify the START flag "
        "on the first request of the sequence"
    )
    refused = (400, "application/json", b'{"error":"' + error.encode() + b'"}')
    for name, probe in probes.items():
        for n in range(40 if name == "ours" else 5):
            last = {"sequence_id": 31, "sequence_start": True, "sequence_end": True}
            assert probe.post(model, f"a{n}", 0, None, params=last).status == 200, name
            reply = probe.post(model, f"b{n}", 0, None, params={"sequence_id": 31})
            assert outcome(reply) == refused, (name, n)


def test_control_and_state_inputs_in_triton_order(probes: dict[str, Probe]) -> None:
    """The inputs the batcher adds (controls by kind, then implicit states) reach the
    model in the order of Triton's map of them, whatever their names; the request's own
    inputs follow in request order. A Python model's state keeps its initial value."""

    def scenario(p: Probe) -> Any:
        out = []
        for rid, names, params in [
            ("n1", ["IN", "X"], {"sequence_id": 3, "sequence_start": True}),
            ("n2", ["X", "IN"], {"sequence_id": 3, "sequence_end": True}),
        ]:
            inputs = [
                {"name": n, "datatype": "INT32", "shape": [1], "data": [i + 4]}
                for i, n in enumerate(names)
            ]
            doc = {"id": rid, "parameters": params, "inputs": inputs}
            reply = exchange(p.url, "POST", "/v2/models/seq_names/infer", json.dumps(doc))
            out.append(_seen(reply))
        start = {"sequence_id": 4, "sequence_start": True}
        for rid, params in [("t1", start), ("t2", {"sequence_id": 4, "sequence_end": True})]:
            seen = _seen(p.post("seq_state", rid, 2, params=params))
            for entry in seen[1]:
                entry["inputs"]["STATE"][2] = None  # (no initial state: Triton's is garbage)
            out.append(seen)
        return out, counts(p.stats("seq_names")), counts(p.stats("seq_state"))

    triton, ours = _both(probes, scenario)
    n1 = triton[0][0][1][0]
    assert n1["order"] == [
        "S2", "corr", "ready_flag", "seq_end", "INPUT_STATE", "seq_start", "IN", "X"
    ]  # fmt: skip
    assert n1["inputs"]["INPUT_STATE"] == ["int32", [2], [0, 0]]
    assert triton[0][1][1][0]["order"][-2:] == ["X", "IN"]
    assert triton[0][2][1][0]["inputs"]["STATE"] == ["int32", [1, 2], None]
    assert ours == triton


def test_state_and_control_settings(probe_pair: Any) -> None:
    """Initial states that cannot load fail the model with Triton's words; a state's
    variable dimension reaches the model as 1; one control tensor for START and END
    carries END's value."""
    # One load thread: tritonserver 2.51 sometimes dies of SIGSEGV when two models'
    # initial states fail to load at the same time (2 of 10 start-ups here).
    pair = probe_pair(
        "sched_states",
        "--exit-on-error=false",
        "--strict-readiness=false",
        "--model-load-thread-count=1",
    )

    def scenario(p: Probe) -> Any:
        index = exchange(p.url, "POST", "/v2/repository/index", "{}").json()
        out: list[Any] = [sorted((m["name"], m["state"], m.get("reason", "")) for m in index)]
        for model in ("state_var", "ctl_shared", "state_file"):
            for rid, params in [
                ("a", {"sequence_id": 8, "sequence_start": True}),
                ("b", {"sequence_id": 8, "sequence_end": True}),
            ]:
                out.append(_seen(p.post(model, rid, 1, params=params)))
        return out

    triton, ours = _both(pair, scenario)
    assert ("state_twice", "UNAVAILABLE", (
        "Invalid argument: initial_state field for state input 'S' must contain exactly one "
        "or zero element. Found '2' elements."
    )) in triton[0]  # fmt: skip
    assert triton[1][1][0]["inputs"]["S"] == ["int32", [1, 1, 2], [0, 0]]
    assert [s[1][0]["inputs"]["FLAG"][2] for s in triton[3:5]] == [[10], [11]]
    # a data_file state: the file's first bytes
    assert triton[5][1][0]["inputs"]["S"] == ["int32", [1, 2], [11, -3]]
    assert {name for name, state, _ in triton[0] if state != "READY"} >= {
        "state_file_missing",
        "state_file_short",
    }
    assert ours == triton
