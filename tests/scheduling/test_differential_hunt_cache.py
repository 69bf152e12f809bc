"""How many responses a small response cache holds, side by side with real Triton 2.51 on
``tests/repos/hunt_cache``: entry sizes, the cache's own bookkeeping bytes and the room
an entry needs decide which requests are answered from the cache, what the statistics
count and what the ``nv_cache_*`` gauges say."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests._real import skip_without_real_triton
from tritonhttp.server import _launch
from tritonhttp.testing import _real_triton as rt

from ._probe import SETTLE

pytestmark = pytest.mark.real_triton

#: the server-wide cache gauges (Triton refreshes them every metrics interval)
GAUGES = ("nv_cache_util", "nv_cache_num_entries", "nv_cache_num_lookups", "nv_cache_num_evictions")


def _flags(size: int) -> tuple[str, ...]:
    caches = rt.ensure_installed().server_dir / "caches"
    return (
        f"--cache-directory={caches}",
        f"--cache-config=local,size={size}",
        "--model-control-mode=explicit",
        "--load-model=kv",
        "--metrics-interval-ms=100",
    )


@pytest.fixture(scope="module", params=[400, 1024], ids=lambda size: f"size{size}")
def pair(request: pytest.FixtureRequest, model_repo: Any) -> Iterator[tuple[int, Any, Any]]:
    """``(size, real Triton, ours)`` with a ``size``-byte cache."""
    skip_without_real_triton(rt.platform_problem())
    flags = _flags(request.param)
    repo = model_repo("hunt_cache")
    with rt.running(repo, *flags) as real, _launch.running(repo, *flags) as ours:
        yield request.param, real, ours


def _get(url: str, path: str) -> bytes:
    from server._wire import exchange

    reply = exchange(url, "GET", path)
    assert reply.status == 200
    return reply.body


def _ask(url: str, value: float, output: str) -> int:
    """CALL of the execution that computed the answer (asks for ``output`` and CALL)."""
    from server._wire import exchange

    doc = {
        "inputs": [{"name": "A", "datatype": "FP32", "shape": [1], "data": [value]}],
        "outputs": [{"name": output}] if output == "CALL" else [{"name": output}, {"name": "CALL"}],
    }
    reply = exchange(url, "POST", "/v2/models/kv/versions/1/infer", json.dumps(doc))
    assert reply.status == 200, reply.body
    outputs = json.loads(reply.body)["outputs"]
    return int(next(o["data"][0] for o in outputs if o["name"] == "CALL"))


def _settled(server: Any, lookups: int) -> tuple[dict[str, int], dict[str, str]]:
    """Statistics and gauges once both count all ``lookups`` (Triton counts a hit after
    answering it and refreshes the gauges every interval), or after 10 s."""
    deadline = time.monotonic() + 10
    while True:
        doc = json.loads(_get(server.url, "/v2/models/kv/versions/1/stats"))
        stats = doc["model_stats"][0]["inference_stats"]
        counts = {k: v["count"] for k, v in stats.items()}
        text = _get(server.metrics_url, "/metrics").decode()
        gauges = {
            line.split()[0]: line.split()[1]
            for line in text.splitlines()
            if line.split(" ")[0] in GAUGES
        }
        done = counts["success"] == lookups and gauges.get("nv_cache_num_lookups") == str(lookups)
        if done or time.monotonic() > deadline:
            return counts, gauges
        time.sleep(SETTLE)


def _scenario(server: Any, steps: list[tuple[float, str]]) -> Any:
    calls = [_ask(server.url, value, output) for value, output in steps]
    return calls, *_settled(server, len(steps))


def test_which_entries_a_small_cache_keeps(pair: tuple[int, Any, Any]) -> None:
    """Entries of 80 (CALL asked for) and 112 bytes (SUM and CALL) after 128 bytes of the
    cache's own, each needing 16 more bytes free: in 400 bytes three small entries fit,
    and a large one evicts only as many as it needs room for; in 1024 bytes eleven small
    entries fit and the twelfth evicts the least recently used."""
    size, real, ours = pair
    steps: list[tuple[float, str]] = [(0, "CALL"), (1, "CALL"), (2, "CALL"), (0, "CALL")]
    steps += [(3, "SUM"), (0, "CALL"), (2, "CALL"), (1, "CALL")]
    steps += [(float(i), "CALL") for i in range(4, 14)] + [(13, "CALL"), (4, "CALL")]
    triton = _scenario(real, steps)
    assert _scenario(ours, steps) == triton
    calls = triton[0]
    if size == 400:  # 3 evicted 1 and 2, not 0
        assert calls[:8] == [1, 2, 3, 1, 4, 1, 5, 6]
    else:  # 0 to 3 all fit; 10 evicts 3 and takes all 112 bytes of its place (32 would
        # be too small a piece to leave), so 11 to 13 evict 0, 2 and 1
        assert calls[:8] == [1, 2, 3, 1, 4, 1, 3, 2]
        assert (triton[2]["nv_cache_num_entries"], triton[2]["nv_cache_num_evictions"]) == (
            "10",
            "4",
        )


def _big(url: str, value: float, length: int) -> None:
    """A TXT-only response of ``length`` characters: ``60 + length`` bytes serialised."""
    from server._wire import exchange

    doc = {
        "inputs": [
            {"name": "A", "datatype": "FP32", "shape": [1], "data": [value]},
            {"name": "S", "datatype": "BYTES", "shape": [1], "data": ["x" * length]},
        ],
        "outputs": [{"name": "TXT"}],
    }
    reply = exchange(url, "POST", "/v2/models/kv/versions/1/infer", json.dumps(doc))
    assert reply.status == 200, reply.body
    assert len(json.loads(reply.body)["outputs"][0]["data"][0]) == length


def test_responses_larger_than_the_room_for_entries(pair: tuple[int, Any, Any]) -> None:
    """A response no larger than the cache (up to 8 bytes over) but larger than the room
    entries can have is not kept, and every entry is evicted before that is known; a
    larger one is refused at once and evicts nothing."""
    size, real, ours = pair

    def scenario(server: Any) -> list[list[int]]:
        rounds = []
        for base, length in ((100, size - 52), (200, size - 51)):
            calls = [_ask(server.url, base + v, "CALL") for v in (0, 1)]
            _big(server.url, base + 9, length)
            rounds.append(calls + [_ask(server.url, base + v, "CALL") for v in (0, 1)])
        return rounds

    triton = scenario(real)
    assert scenario(ours) == triton
    evicted, kept = triton
    assert evicted[2:] != evicted[:2] and kept[2:] == kept[:2]


CACHE_TOO_SMALL = (
    "error: creating server: Internal - Failed to initialize LocalCache: Could not "
    "initialize buffer in basic_managed_external_buffer constructor"
)


@pytest.mark.parametrize("start", [rt.start, _launch.start], ids=["triton", "ours"])
def test_a_cache_under_192_bytes_stops_the_start(start: Any, model_repo: Any) -> None:
    """A local cache of 191 bytes (or 0) cannot hold its own bookkeeping: the server
    exits with status 1 and tritonserver's words; 192 bytes start."""
    skip_without_real_triton(rt.platform_problem())
    repo = model_repo("hunt_cache")
    for size in (0, 191):
        with pytest.raises(RuntimeError) as failed:
            start(repo, *_flags(size)).stop()
        assert "exited with 1" in str(failed.value)
        assert CACHE_TOO_SMALL in str(failed.value)
    start(repo, *_flags(192)).stop()
