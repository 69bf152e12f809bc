"""Triton's rate limiter (``--rate-limit``, ``--rate-limit-resource`` and the instance
groups' ``rate_limiter``), compared with real Triton 2.51 (repository
``tests/repos/hunt_rate_limit``).

Under ``execution_count`` an instance executes only while it holds the resources its
group names: ``rl_a``, ``rl_b``, ``rl_batch``, the ``rl_p*`` models (priority 1 or 4) and
the sequence models ``rl_seq_direct`` and ``rl_seq_oldest`` need the one unit of the
global ``R``, the two instances of ``rl_dev`` the one unit of ``D`` on their device.
Executions are held with gate files, so that what may not start is seen not to start.
"""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path
from typing import Any

import pytest
from server._wire import exchange

from tests._real import skip_without_real_triton
from tritonhttp.server import _launch
from tritonhttp.testing import _real_triton as rt

from ._probe import Probe, counts, info, metric_counts, wait_for
from .conftest import ProbePair

pytestmark = pytest.mark.real_triton

#: how long a request that may not start is watched not starting
WATCH = 0.5

LIMITED = ("--rate-limit=execution_count",)


@pytest.fixture(scope="module")
def limited(probe_pair: ProbePair) -> dict[str, Probe]:
    return probe_pair("hunt_rate_limit", *LIMITED, tag="ratelimit")


@pytest.fixture(scope="module")
def unlimited(probe_pair: ProbePair) -> dict[str, Probe]:
    return probe_pair("hunt_rate_limit", "--rate-limit=OFF", tag="ratelimit-off")


def _both(probes: dict[str, Probe], scenario: Any) -> tuple[Any, Any]:
    results = {name: scenario(probe) for name, probe in probes.items()}
    return results["triton"], results["ours"]


def _held(p: Probe, model: str, rid: str) -> tuple[Any, Path, Path]:
    """Send a request that waits for its hold file once it executes (not waiting for
    it to start): the call, its start marker, its hold file."""
    params, mark, hold = p.gate()
    return p.send(model, rid, batch=None if model != "rl_batch" else 1, params=params), mark, hold


def _overlap(p: Probe, first: str, second: str, serialized: bool) -> tuple[bool, float, list[Any]]:
    """Whether a request to ``second`` starts while one to ``first`` executes, the
    pending count of ``second`` meanwhile, and both answers' statuses. ``serialized``:
    the request is expected to wait (it is watched not starting once it is pending),
    else to start (waited for)."""
    call_a, mark_a, hold_a = _held(p, first, "a")
    wait_for(mark_a.exists, f"{p.name}: {first} never started")
    call_b, mark_b, hold_b = _held(p, second, "b")
    if serialized:
        wait_for(
            lambda: mark_b.exists() or p.pending(second) == 1, f"{p.name}: {second} not pending"
        )
        time.sleep(WATCH)
    else:
        wait_for(mark_b.exists, f"{p.name}: {second} did not start alongside {first}")
    overlapped = mark_b.exists()
    pending = p.pending(second)
    hold_a.touch()
    wait_for(mark_b.exists, f"{p.name}: {second} never started")
    hold_b.touch()
    statuses = [call_a.result().status, call_b.result().status]
    return overlapped, pending, statuses


@pytest.mark.parametrize(
    ("first", "second"),
    [("rl_a", "rl_b"), ("rl_b", "rl_batch"), ("rl_dev", "rl_dev"), ("rl_free", "rl_free")],
)
def test_executions_wait_for_resources(
    limited: dict[str, Probe], unlimited: dict[str, Probe], first: str, second: str
) -> None:
    """Two executions needing the one unit of a resource never overlap (the second
    waits, pending) under ``execution_count``; they do with ``--rate-limit=off`` and
    without ``rate_limiter``."""

    serialized = first != "rl_free"

    def scenario(p: Probe, serialized: bool = serialized) -> Any:
        result = _overlap(p, first, second, serialized)
        return result, counts(p.stats(second)), metric_counts(p, second)

    triton, ours = _both(limited, scenario)
    assert triton[0] == (not serialized, 1.0 if serialized else 0.0, [200, 200])
    assert ours == triton
    triton, ours = _both(unlimited, lambda p: scenario(p, False))
    assert triton[0] == (True, 0.0, [200, 200])
    assert ours == triton


def test_released_resources_go_to_the_model_that_waited(limited: dict[str, Probe]) -> None:
    """``rl_a`` holds ``R`` while ``rl_b`` waits for it and a second ``rl_a`` request
    queues: when ``rl_a`` ends, ``rl_b`` (waiting for the resource, and of the better
    priority) executes first."""

    def scenario(p: Probe) -> Any:
        call_a1, mark_a1, hold_a1 = _held(p, "rl_a", "a1")
        wait_for(mark_a1.exists, f"{p.name}: a1 never started")
        call_b, mark_b, hold_b = _held(p, "rl_b", "b")
        p.wait_pending("rl_b", 1)
        call_a2, mark_a2, hold_a2 = _held(p, "rl_a", "a2")
        p.wait_pending("rl_a", 1)
        hold_a1.touch()
        wait_for(lambda: mark_b.exists() or mark_a2.exists(), f"{p.name}: nothing started")
        time.sleep(WATCH)
        started = (mark_b.exists(), mark_a2.exists())
        hold_b.touch()
        hold_a2.touch()
        statuses = [c.result().status for c in (call_a1, call_b, call_a2)]
        return started, statuses, counts(p.stats("rl_a")), counts(p.stats("rl_b"))

    triton, ours = _both(limited, scenario)
    assert triton[0] == (True, False)
    assert ours == triton


def _held_sequence(p: Probe, model: str, rid: str, **params: Any) -> tuple[Any, Path, Path]:
    gate, mark, hold = p.gate()
    batch = None if model == "rl_seq_direct" else 1
    return p.send(model, rid, batch=batch, params={**gate, **params}), mark, hold


@pytest.mark.parametrize("model", ["rl_seq_direct", "rl_seq_oldest"])
def test_sequence_models_wait_for_resources(limited: dict[str, Probe], model: str) -> None:
    """A sequence-batching model (``direct`` and ``oldest``) is rate limited like the
    others: its request waits, pending, while ``rl_a`` holds ``R``, and holds ``R`` while
    it executes (``rl_b`` waits meanwhile)."""

    def scenario(p: Probe) -> Any:
        call_a, mark_a, hold_a = _held(p, "rl_a", "a")
        wait_for(mark_a.exists, f"{p.name}: a never started")
        call_s, mark_s, hold_s = _held_sequence(p, model, "s1", sequence_id=7, sequence_start=True)
        wait_for(lambda: mark_s.exists() or p.pending(model) == 1, f"{p.name}: s1 not pending")
        time.sleep(WATCH)
        waited = (mark_s.exists(), p.pending(model))
        hold_a.touch()
        wait_for(mark_s.exists, f"{p.name}: s1 never started")
        call_b, mark_b, hold_b = _held(p, "rl_b", "b")
        wait_for(lambda: mark_b.exists() or p.pending("rl_b") == 1, f"{p.name}: b not pending")
        time.sleep(WATCH)
        held = (mark_b.exists(), p.pending("rl_b"))
        hold_s.touch()
        wait_for(mark_b.exists, f"{p.name}: b never started")
        hold_b.touch()
        statuses = [c.result().status for c in (call_a, call_s, call_b)]
        batch = None if model == "rl_seq_direct" else 1
        end = p.post(model, "s2", batch=batch, params={"sequence_id": 7, "sequence_end": True})
        return waited, held, statuses, end.status, counts(p.stats(model)), metric_counts(p, model)

    triton, ours = _both(limited, scenario)
    assert triton[:4] == ((False, 1.0), (False, 1.0), [200, 200, 200], 200)
    assert ours == triton


def _contest(p: Probe, waiters: list[str]) -> list[str]:
    """``rl_a`` holds ``R`` while a request to each of ``waiters`` queues (in that
    order); the order in which they then execute (each held until the next is seen
    not to start)."""
    call_a, mark_a, hold_a = _held(p, "rl_a", "a")
    wait_for(mark_a.exists, f"{p.name}: a never started")
    calls = {}
    for model in waiters:
        calls[model] = _held(p, model, model)
        p.wait_pending(model, 1)
    hold_a.touch()
    order = []
    while calls:
        wait_for(lambda: any(m.exists() for _, m, _ in calls.values()), f"{p.name}: none ran")
        time.sleep(WATCH)
        started = [model for model, (_, mark, _) in calls.items() if mark.exists()]
        assert len(started) == 1, started
        order.append(started[0])
        call, _, hold = calls.pop(started[0])
        hold.touch()
        assert call.result().status == 200
    assert call_a.result().status == 200
    return order


def _holder_or_waiter(p: Probe, holder: str, waiter: str) -> str:
    """``holder`` executes one request holding ``R`` while ``waiter`` and then a second
    ``holder`` request queue: which of them executes when the first ends."""
    call_1, mark_1, hold_1 = _held(p, holder, "h1")
    wait_for(mark_1.exists, f"{p.name}: h1 never started")
    call_w, mark_w, hold_w = _held(p, waiter, "w")
    p.wait_pending(waiter, 1)
    call_2, mark_2, hold_2 = _held(p, holder, "h2")
    p.wait_pending(holder, 1)
    hold_1.touch()
    wait_for(lambda: mark_w.exists() or mark_2.exists(), f"{p.name}: neither ran")
    time.sleep(WATCH)
    first = {(True, False): "waiter", (False, True): "holder"}.get(
        (mark_w.exists(), mark_2.exists()), "both"
    )
    hold_2.touch()
    hold_w.touch()
    assert [c.result().status for c in (call_1, call_w, call_2)] == [200, 200, 200]
    return first


def test_released_resources_go_by_priority_across_models(limited: dict[str, Probe]) -> None:
    """Instances of several models waiting for ``R`` execute by score (priority times
    executions plus two), not in the order they began to wait; equal scores leave a
    binary heap in its order (the first to wait goes first only among two), and an
    instance that ends with work queued competes for the resource it gives back."""

    def scenario(p: Probe) -> Any:
        # (scores 8, 8, 2, 2)
        first = _contest(p, ["rl_p4b", "rl_p4", "rl_p1b", "rl_p1"])
        # (scores 12, 12, 3: each executed once)
        second = _contest(p, ["rl_p4", "rl_p4b", "rl_p1"])
        # (rl_p1 after h1: 5; rl_p4: 16)
        third = _holder_or_waiter(p, "rl_p1", "rl_p4")
        return first, second, third

    triton, ours = _both(limited, scenario)
    assert triton == (
        ["rl_p1b", "rl_p1", "rl_p4", "rl_p4b"],
        ["rl_p1", "rl_p4b", "rl_p4"],
        "holder",
    )
    assert ours == triton


def test_in_process_isolation_serializes_the_same(
    limited: dict[str, Probe], bundled_server_factory: Any, model_repo: Any, sched_scratch: Path
) -> None:
    """With ``--python-isolation=in-process`` our server keeps two executions needing
    the one unit of ``R`` apart, as Triton does."""
    server = bundled_server_factory(
        model_repo("hunt_rate_limit"), *LIMITED, "--python-isolation=in-process"
    )
    inline = Probe(server, sched_scratch, "ours-inline")
    triton = _overlap(limited["triton"], "rl_a", "rl_b", True)
    assert triton == (False, 1.0, [200, 200])
    assert _overlap(inline, "rl_a", "rl_b", True) == triton


def _sequence(p: Probe, model: str, n: int) -> list[str]:
    """The instance that executed each of ``n`` requests sent one after the other (each
    once the previous execution is counted, its instance free again)."""
    done = p.raw_stats(model)["execution_count"]
    chosen = []
    for i in range(n):
        chosen.append(info(p.post(model, str(i), batch=None))["instance"])
        wait_for(lambda i=i: p.raw_stats(model)["execution_count"] > done + i, "not counted")
        time.sleep(0.05)  # (Triton counts an execution a moment before its instance is free)
    return chosen


def test_priority_shares_executions(limited: dict[str, Probe], unlimited: dict[str, Probe]) -> None:
    """``rl_prio``'s group ``high`` (priority 1) executes about four times as often as
    ``low`` (priority 4) under ``execution_count`` (an instance's turn comes by its
    priority times its executions plus two); with the limiter off they take turns."""
    triton, ours = _both(limited, lambda p: _sequence(p, "rl_prio", 12))
    assert triton.count("low_0") == 2, triton
    assert ours == triton, (ours, triton)
    # (off, Triton's first choice is either instance: then they take turns)
    for chosen in _both(unlimited, lambda p: _sequence(p, "rl_prio", 6)):
        assert all(a != b for a, b in itertools.pairwise(chosen)), chosen


def test_config_shows_rate_limiter(limited: dict[str, Probe]) -> None:
    """The model configuration endpoint prints each group's ``rate_limiter``."""

    def scenario(p: Probe) -> Any:
        groups = {}
        for model in ("rl_prio", "rl_dev", "rl_free"):
            reply = exchange(p.url, "GET", f"/v2/models/{model}/config")
            groups[model] = json.loads(reply.body)["instance_group"]
        return groups

    triton, ours = _both(limited, scenario)
    assert triton["rl_dev"][0]["rate_limiter"] == {
        "resources": [{"name": "D", "global": False, "count": 1}],
        "priority": 0,
    }
    assert ours == triton


def test_resources_the_flags_do_not_give_are_none(probe_pair: ProbePair) -> None:
    """Once ``--rate-limit-resource`` names a resource, those it does not name have no
    units: models needing them (or more than given) fail to load with Triton's reason;
    a count without a device serves global resources and every device, one with a
    device only that device."""
    flags = (
        *LIMITED,
        "--rate-limit-resource=R:1:5",
        "--rate-limit-resource=B:1",
        "--rate-limit-resource=D:2:1",
        "--exit-on-error=false",
        "--strict-readiness=false",
    )
    probes = probe_pair("hunt_rate_limit", *flags, tag="ratelimit-flags")

    def scenario(p: Probe) -> Any:
        index = json.loads(exchange(p.url, "POST", "/v2/repository/index", "{}").body)
        return sorted((m["name"], m.get("state"), m.get("reason")) for m in index)

    triton, ours = _both(probes, scenario)
    states = {name: state for name, state, _ in triton}
    assert states["rl_a"] == "READY" and states["rl_big"] == "UNAVAILABLE", triton
    assert ours == triton


#: rate limiter flag values tritonserver refuses, with the line it says why
REFUSED = [
    ("--rate-limit=bogus", "invalid argument for --rate-limit"),
    ("--rate-limit=", "invalid argument for --rate-limit"),
    ("--rate-limit= off", "invalid argument for --rate-limit"),
    (
        "--rate-limit-resource=R",
        "--rate-limit-resource option format is '<resource_name>:<count>:<device>' or "
        "'<resource_name>:<count>'. Got R",
    ),
    (
        "--rate-limit-resource=R:2:0:1",
        "--rate-limit-resource option format is '<resource_name>:<count>:<device>' or "
        "'<resource_name>:<count>'. Got R:2:0:1",
    ),
    ("--rate-limit-resource=R:x", "Invalid option value. Got x"),
    ("--rate-limit-resource=R:2:x", "Invalid option value. Got x"),
    ("--rate-limit-resource=R:99999999999", "Provided option value is out of bound. Got 9"),
]

#: values it takes (any case; numbers read as ``std::stoi`` reads them)
TAKEN = [
    "--rate-limit=off",
    "--rate-limit=Execution_Count",
    "--rate-limit-resource=R:2",
    "--rate-limit-resource=:2",
    "--rate-limit-resource=R: 3x:0",
]


def _starts(start: Any, repo: Path, flag: str) -> tuple[bool, str]:
    log = repo / f"{start.__module__}.log"
    try:
        server = start(repo, flag, timeout=60, log_path=log)
    except RuntimeError as e:
        return False, str(e).splitlines()[0] + "\n" + log.read_text(errors="replace")
    server.stop()
    return True, ""


@pytest.mark.parametrize(
    ("flag", "message"),
    [*REFUSED, *((f, None) for f in TAKEN)],
    ids=[*(f for f, _ in REFUSED), *TAKEN],
)
def test_rate_limit_flag_values(tmp_path: Path, flag: str, message: str | None) -> None:
    skip_without_real_triton(rt.platform_problem())
    rt.ensure_installed()
    real = _starts(rt.start, tmp_path, flag)
    ours = _starts(_launch.start, tmp_path, flag)
    assert (real[0], ours[0]) == (message is None, message is None), (
        real[1][-600:],
        ours[1][-600:],
    )
    if message is not None:
        assert "exited with 1" in real[1] and "exited with 1" in ours[1]
        assert message in real[1] and message in ours[1], ours[1][-600:]
