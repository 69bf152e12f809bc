"""The statistics extension side by side with real Triton 2.51 on ``tests/repos/hunt_stats``:
what BLS calls (plain, async, decoupled, to sequence and response-cached models, failing
ones), decoupled models, sequences whose ``execute`` fails and sequences that idle out add
to every model's ``/v2/models/stats`` counts; ``last_inference``; the endpoint's answers
for versions, unknown and unavailable models."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests._real import skip_without_real_triton
from tritonhttp.server import _launch
from tritonhttp.testing import _real_triton as rt

from ._wire import Reply, exchange

pytestmark = pytest.mark.real_triton


@pytest.fixture(scope="module")
def pair(model_repo: Any) -> Iterator[tuple[Any, Any]]:
    skip_without_real_triton(rt.platform_problem())
    caches = rt.ensure_installed().server_dir / "caches"
    flags = (
        "--exit-on-error=false",
        "--strict-readiness=false",  # (``broken`` fails to load)
        f"--cache-directory={caches}",
        "--cache-config=local,size=1048576",
    )
    repo = model_repo("hunt_stats")
    with rt.running(repo, *flags) as real, _launch.running(repo, *flags) as ours:
        yield real, ours


def _all_stats(url: str) -> dict[str, dict[str, Any]]:
    reply = exchange(url, "GET", "/v2/models/stats")
    assert reply.status == 200, reply.body
    return {s["name"] + "/" + s["version"]: s for s in json.loads(reply.body)["model_stats"]}


def _counts(s: dict[str, Any]) -> dict[str, Any]:
    """A model version's statistics without timings."""
    out: dict[str, Any] = {
        "inference_count": s["inference_count"],
        "execution_count": s["execution_count"],
        "response_stats": s["response_stats"],
        "memory_usage": s["memory_usage"],
        **{k: v["count"] for k, v in s["inference_stats"].items()},
    }
    for b in s["batch_stats"]:
        out[f"batch_{b['batch_size']}"] = b["compute_infer"]["count"]
    return out


def _settled(url: str) -> dict[str, dict[str, Any]]:
    """Every model's counts once they stopped moving (Triton may answer a request a
    moment before it has counted it)."""
    last = None
    while True:
        now = {m: _counts(s) for m, s in _all_stats(url).items()}
        if now == last:
            return now
        last = now
        time.sleep(0.15)


def _delta(after: dict[str, dict[str, Any]], before: dict[str, dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for model, now in after.items():
        was = before.get(model, {})
        d = {
            k: (v - was.get(k, 0) if isinstance(v, int) else v)
            for k, v in now.items()
            if v != was.get(k, 0)
        }
        if d:
            out[model] = d
    return out


def _infer(name: str, value: int, shape: list[int], rid: str = "", **params: Any) -> str:
    doc: dict[str, Any] = {
        "inputs": [{"name": name, "datatype": "INT32", "shape": shape, "data": [value]}]
    }
    if rid:
        doc["id"] = rid
    if params:
        doc["parameters"] = params
    return json.dumps(doc)


def _traffic(url: str, steps: list[tuple[str, str]]) -> list[tuple[Reply, dict[str, Any]]]:
    """Each step's reply and what it added to the statistics."""
    out = []
    for path, body in steps:
        before = _settled(url)
        reply = exchange(url, "POST", path, body, timeout=30)
        time.sleep(0.1)
        out.append((reply, _delta(_settled(url), before)))
    return out


def _compare(real: Any, ours: Any, steps: list[tuple[str, str]]) -> None:
    for (path, body), (r, r_delta), (o, o_delta) in zip(
        steps, _traffic(real.url, steps), _traffic(ours.url, steps), strict=True
    ):
        assert o.key() == r.key(), (path, body)
        assert o_delta == r_delta, (path, body)


#: the BLS caller's MODEs (tests/repos/hunt_stats/bls/1/model.py); 11 (a decoupled callee
#: sending a response, then an error response with FINAL) is left out: 2.51 never returns
BLS_MODES = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 13, 14, 15, 16, 17, 18, 19, 20, 20, 21]


def test_bls_calls_count_as_triton_counts_them(pair: tuple[Any, Any]) -> None:
    """The caller counts one request, its callees each call they ran (successes, failing
    executions, error responses, async and decoupled calls, sequence calls, cache hits);
    calls refused before they reach a model count nowhere; a caller raising after a
    call fails while its callee's call still counts."""
    steps = [("/v2/models/bls/infer", _infer("MODE", m, [1])) for m in BLS_MODES]
    _compare(*pair, steps)


def test_decoupled_counts(pair: tuple[Any, Any]) -> None:
    """Decoupled models over /infer, /generate and /generate_stream: several responses,
    only a FINAL flag, error responses, a raising ``execute``, FINAL sent from a thread
    after ``execute`` returned, a decoupled BLS caller; ``response_stats`` stays empty."""
    steps = []
    for endpoint in ("infer", "generate", "generate_stream"):
        for n in (3, 1, 0, -1, -2, -3, -4, -5):
            body = _infer("IN", n, [1]) if endpoint == "infer" else json.dumps({"IN": n})
            steps.append((f"/v2/models/dec/{endpoint}", body))
        if endpoint != "infer":
            for mode in (0, 1, 2):
                steps.append((f"/v2/models/bls_dec/{endpoint}", json.dumps({"MODE": mode})))
    _compare(*pair, steps)


def test_sequences_with_failures_count_as_triton_counts_them(pair: tuple[Any, Any]) -> None:
    """A sequence whose ``execute`` raises or answers an error goes on; requests refused
    by the sequence batcher (no START, no id, an ended sequence) count nowhere."""

    def seq(rid: str, value: int, **params: Any) -> tuple[str, str]:
        return "/v2/models/seq_raise/infer", json.dumps(
            {
                "id": rid,
                "parameters": params,
                "inputs": [{"name": "IN", "datatype": "INT32", "shape": [1, 1], "data": [value]}],
            }
        )

    steps = [
        seq("a1", 1, sequence_id=31, sequence_start=True),
        seq("a2", -1, sequence_id=31),
        seq("a3", 2, sequence_id=31),
        seq("a4", -2, sequence_id=31),
        seq("a5", 3, sequence_id=31, sequence_end=True),
        seq("a6", 1, sequence_id=31),
        seq("a7", -1, sequence_id=32, sequence_start=True),
        seq("a8", 1, sequence_id=32, sequence_end=True),
        seq("a9", 1),
    ]
    _compare(*pair, steps)


def _seq(url: str, rid: str, value: int, **params: Any) -> Reply:
    body = {
        "id": rid,
        "parameters": params,
        "inputs": [{"name": "IN", "datatype": "INT32", "shape": [1, 1], "data": [value]}],
    }
    return exchange(url, "POST", "/v2/models/seq/infer", json.dumps(body))


def _wait(path: Path) -> None:
    deadline = time.monotonic() + 20
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.01)


def _batched_sequence_failure(url: str, scratch: Path) -> tuple[Any, ...]:
    """Two sequences in one ``execute`` that raises (one held request before it)."""
    before = _settled(url)
    mark, hold = scratch / "mark", scratch / "hold"
    replies: dict[str, int] = {}

    def send(rid: str, value: int, **params: Any) -> threading.Thread:
        body = _infer("IN", value, [1, 1], rid, **params)
        path = "/v2/models/seq_raise/infer"
        t = threading.Thread(
            target=lambda: replies.setdefault(rid, exchange(url, "POST", path, body).status)
        )
        t.start()
        return t

    threads = [send("c1", 1, sequence_id=41, sequence_start=True, mark=str(mark), hold=str(hold))]
    _wait(mark)
    threads.append(send("c2", -1, sequence_id=41))
    time.sleep(0.2)
    threads.append(send("c3", 5, sequence_id=42, sequence_start=True))
    time.sleep(0.3)
    hold.touch()
    for t in threads:
        t.join()
    after = [
        exchange(url, "POST", "/v2/models/seq_raise/infer", body).body
        for body in (
            _infer("IN", 1, [1, 1], sequence_id=42, sequence_end=True),
            _infer("IN", 1, [1, 1], sequence_id=41, sequence_end=True),
        )
    ]
    return replies, after, _delta(_settled(url), before)


def test_a_failing_batch_of_sequences(pair: tuple[Any, Any], tmp_path: Path) -> None:
    results = []
    for server, name in zip(pair, ("real", "ours"), strict=True):
        (tmp_path / name).mkdir()
        results.append(_batched_sequence_failure(server.url, tmp_path / name))
    assert results[0][0] == {"c1": 200, "c2": 500, "c3": 500}
    assert results[1] == results[0]


def _backlog_and_idle(url: str) -> tuple[Any, ...]:
    """Two slots, a third sequence in the backlog, sequences that idle out (1 s)."""
    before = _settled(url)
    statuses = [
        _seq(url, "b1", 1, sequence_id=21, sequence_start=True).status,
        _seq(url, "b2", 1, sequence_id=22, sequence_start=True).status,
    ]
    waiting: dict[str, int] = {}
    t = threading.Thread(
        target=lambda: waiting.setdefault(
            "b3", _seq(url, "b3", 1, sequence_id=23, sequence_start=True).status
        )
    )
    t.start()
    time.sleep(0.3)
    statuses.append(_seq(url, "b4", 1, sequence_id=22, sequence_end=True).status)
    t.join()
    time.sleep(1.6)  # 21 and 23 idle out
    statuses.append(_seq(url, "b5", 1, sequence_id=21).status)
    statuses.append(_seq(url, "b6", 1, sequence_id=23, sequence_end=True).status)
    return statuses, waiting, _delta(_settled(url), before)


def test_backlog_and_idle_sequences(pair: tuple[Any, Any]) -> None:
    real, ours = (_backlog_and_idle(s.url) for s in pair)
    assert real[:2] == ([200, 200, 200, 400, 400], {"b3": 200})
    assert ours == real


STATS_PATHS = [
    "/v2/models/stats",
    "/v2/models/stats?x=1",
    "/v2/models/multi/stats",
    "/v2/models/multi/versions/3/stats",
    "/v2/models/multi/versions/2/stats",
    "/v2/models/multi/versions/01/stats",
    "/v2/models/multi/versions/0/stats",
    "/v2/models/multi/versions/-1/stats",
    "/v2/models/multi/versions/x/stats",
    "/v2/models/broken/stats",
    "/v2/models/nope/stats",
    "/v2/models/nope/versions/1/stats",
    "/v2/models//stats",
]


@pytest.mark.parametrize("path", STATS_PATHS)
def test_stats_endpoint_answers(pair: tuple[Any, Any], path: str) -> None:
    """Which versions are listed, in which order, with which keys; the errors for
    versions not loaded, unknown and unavailable models."""

    def key(reply: Reply) -> Any:
        if reply.status != 200:
            return reply.key()
        stats = json.loads(reply.body)["model_stats"]
        return reply.content_type, [(s["name"], s["version"], sorted(s)) for s in stats]

    real, ours = (exchange(s.url, "GET", path) for s in pair)
    assert key(ours) == key(real)


def test_versions_count_apart(pair: tuple[Any, Any]) -> None:
    """Requests to a version, and to the model (its latest version), count per version."""
    steps = [
        ("/v2/models/multi/versions/1/infer", _infer("IN", 1, [1])),
        ("/v2/models/multi/versions/3/infer", _infer("IN", 1, [1])),
        ("/v2/models/multi/infer", _infer("IN", 1, [1])),
        ("/v2/models/multi/versions/1/infer", _infer("IN", -1, [1])),
        ("/v2/models/multi/versions/3/infer", _infer("IN", -2, [1])),
    ]
    _compare(*pair, steps)


def _last_inference(url: str, model: str) -> int:
    reply = exchange(url, "GET", f"/v2/models/{model}/stats")
    value: int = json.loads(reply.body)["model_stats"][0]["last_inference"]
    return value


def _last_inference_moves(url: str, scratch: Path) -> tuple[Any, ...]:
    """Whether ``last_inference`` stays while a request is held, is set (in epoch ms)
    when it ends, and moves for a cache hit and for a cache miss."""
    mark, hold = scratch / "mark", scratch / "hold"
    before = _last_inference(url, "callee")
    body = _infer("IN", 1, [1, 1], mark=str(mark), hold=str(hold))
    t = threading.Thread(target=exchange, args=(url, "POST", "/v2/models/callee/infer", body))
    t.start()
    _wait(mark)
    started = time.time() * 1000
    during = _last_inference(url, "callee") == before
    time.sleep(0.5)
    hold.touch()
    t.join()
    held = _last_inference(url, "callee") - started >= 250  # the end of the execution
    cached = []
    for value in (3, 3, 4):
        exchange(url, "POST", "/v2/models/cached/infer", _infer("IN", value, [1]))
        cached.append(_last_inference(url, "cached"))
        time.sleep(0.3)
    return during, held, cached[1] == cached[0], cached[2] - cached[1] >= 250


def test_a_cache_hit_leaves_last_inference(pair: tuple[Any, Any], tmp_path: Path) -> None:
    """Triton 2.51 sets ``last_inference`` when an execution ends; a response-cache hit
    (no execution) leaves it as it was."""
    results = []
    for server, name in zip(pair, ("real", "ours"), strict=True):
        (tmp_path / name).mkdir()
        results.append(_last_inference_moves(server.url, tmp_path / name))
    assert results[0] == (True, True, True, True)
    assert results[1] == results[0]


def test_failures_only(pair: tuple[Any, Any]) -> None:
    """Models that saw nothing but a raising ``execute`` (plain and decoupled) or a
    request refused before the model: the counts, and whether ``last_inference`` is set."""
    steps = [
        ("/v2/models/lone_raise/infer", _infer("IN", -1, [1])),
        ("/v2/models/lone_invalid/infer", _infer("NOPE", 1, [1])),
        ("/v2/models/lone_dec/generate_stream", json.dumps({"IN": -2})),
    ]
    results = []
    for server in pair:
        replies = [exchange(server.url, "POST", path, body).key() for path, body in steps]
        _settled(server.url)
        stats = _all_stats(server.url)
        results.append(
            (
                replies,
                {
                    m: (_counts(stats[m + "/1"]), stats[m + "/1"]["last_inference"] > 0)
                    for m in ("lone_raise", "lone_invalid", "lone_dec")
                },
            )
        )
    assert results[0][1]["lone_invalid"][1] is False
    assert results[0][1]["lone_raise"][1] is True
    assert results[1] == results[0]
