"""The response cache, differentially: hits and misses, what they count in statistics
and metrics, least-recently-used eviction; and where this server deliberately differs
(errors are not cached, shapes and parameters are part of the key)."""

from __future__ import annotations

from typing import Any

import pytest

from ._probe import Probe, counts, info, metric_counts, outcome

pytestmark = pytest.mark.real_triton

#: room for two 40 kB responses, not three
SMALL_CACHE = 100_000
WIDE = 10_000


def _both(probes: dict[str, Probe], scenario: Any) -> tuple[Any, Any]:
    results = {name: scenario(probe) for name, probe in probes.items()}
    return results["triton"], results["ours"]


def _answer(reply: Any) -> Any:
    if reply.status != 200:
        return outcome(reply)
    doc = info(reply)
    return reply.json()["id"], doc["ids"]  # the id answered, the request that computed it


def test_hits_and_misses(probes: dict[str, Probe]) -> None:
    def scenario(p: Probe) -> Any:
        answers = [
            _answer(p.post("cache_plain", rid, value, None))
            for rid, value in [("x", 5), ("y", 5), ("z", 6), ("w", 5), ("v", 6)]
        ]
        answers += [
            _answer(p.post("cache_dyn", rid, value, batch))
            for rid, value, batch in [("d1", 5, 1), ("d2", 5, 1), ("d3", 5, 2), ("d4", 5, 2)]
        ]
        return (
            answers,
            counts(p.stats("cache_plain")),
            counts(p.stats("cache_dyn")),
            metric_counts(p, "cache_plain"),
            metric_counts(p, "cache_dyn"),
            metric_counts(p, "seq_two"),
        )

    triton, ours = _both(probes, scenario)
    assert triton[0] == [
        ("x", ["x"]),
        ("y", ["x"]),  # answered from the cache: computed for x
        ("z", ["z"]),
        ("w", ["x"]),
        ("v", ["z"]),
        ("d1", ["d1"]),
        ("d2", ["d1"]),
        ("d3", ["d3"]),
        ("d4", ["d3"]),
    ]
    plain = triton[1]
    assert (plain["cache_hit"], plain["cache_miss"], plain["success"], plain["queue"]) == (
        3,
        2,
        5,
        5,
    )
    assert (plain["inference_count"], plain["execution_count"], plain["compute_infer"]) == (2, 2, 2)
    assert triton[3]["nv_cache_num_hits_per_model"] == 3
    assert "nv_cache_num_hits_per_model" not in triton[5]  # only for models using the cache
    assert ours == triton


def test_metric_families_with_a_cache(probes: dict[str, Probe]) -> None:
    triton, ours = (probes[name].families() for name in ("triton", "ours"))
    assert triton[-8:] == [
        "nv_cache_util",
        "nv_cache_num_entries",
        "nv_cache_num_hits",
        "nv_cache_num_misses",
        "nv_cache_num_lookups",
        "nv_cache_num_evictions",
        "nv_cache_lookup_duration",
        "nv_cache_insertion_duration",
    ]
    assert ours == triton


def test_where_our_cache_differs(probes: dict[str, Probe]) -> None:
    ours = probes["ours"]
    # errors are not stored (Triton 2.51 stores an error as an empty success)
    first = ours.post("cache_x_plain", "e1", -2, None)
    again = ours.post("cache_x_plain", "e2", -2, None)
    assert outcome(first) == outcome(again) == (500, "text/plain", b'{"error":"probe error"}')
    # same bytes, other shape: another entry (Triton 2.51 hashes bytes only)
    flat = ours.post("cache_x_dyn", "s1", 7, 1, width=2)
    tall = ours.post("cache_x_dyn", "s2", 7, 2, width=1)
    assert (info(flat)["ids"], info(tall)["ids"]) == (["s1"], ["s2"])
    assert tall.json()["outputs"][0]["shape"] == [2, 1]
    # request parameters are part of the key (Triton 2.51 ignores them)
    one = ours.post("cache_x_plain", "p1", 9, None, params={"mode": "a"})
    two = ours.post("cache_x_plain", "p2", 9, None, params={"mode": "b"})
    three = ours.post("cache_x_plain", "p3", 9, None, params={"mode": "a"})
    assert [info(r)["ids"] for r in (one, two, three)] == [["p1"], ["p2"], ["p1"]]


@pytest.fixture(scope="module")
def small_probes(probe_pair: Any) -> dict[str, Probe]:
    from .conftest import server_args

    args = (*server_args()[:1], f"--cache-config=local,size={SMALL_CACHE}")
    return probe_pair("sched_cache", *args, tag="-lru")


def test_least_recently_used_entries_are_evicted(small_probes: dict[str, Probe]) -> None:
    def scenario(p: Probe) -> Any:
        steps = [("a1", 1), ("b1", 2), ("a2", 1), ("c1", 3), ("a3", 1), ("b2", 2), ("c2", 3)]
        answers = [_answer(p.post("lru", rid, value, None, width=WIDE)) for rid, value in steps]
        # larger than the whole cache: never stored
        answers += [_answer(p.post("lru", rid, 4, None, width=3 * WIDE)) for rid in ("h1", "h2")]
        return answers, counts(p.stats("lru")), metric_counts(p, "lru")

    triton, ours = _both(small_probes, scenario)
    assert triton[0] == [
        ("a1", ["a1"]),
        ("b1", ["b1"]),
        ("a2", ["a1"]),
        ("c1", ["c1"]),  # evicts b (least recently used), not a
        ("a3", ["a1"]),
        ("b2", ["b2"]),
        ("c2", ["c2"]),
        ("h1", ["h1"]),
        ("h2", ["h2"]),
    ]
    assert ours == triton
