"""The metrics port side by side with real Triton 2.51 on ``tests/repos/hunt_metrics``
(plain, failing, batched with queue-full and timeout rejections, ensemble, decoupled,
response-cached and custom-metric models): the text of ``/metrics`` before and after the
same traffic, and the flags that shape it."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests._real import skip_without_real_triton
from tritonhttp.server import _launch
from tritonhttp.testing import _real_triton as rt

from ._wire import exchange

pytestmark = pytest.mark.real_triton

#: sample lines whose values are this machine's or each server's own (timings, CPU and
#: memory, the pinned pool real Triton could allocate, the cache's byte bookkeeping)
OWN_VALUES = re.compile(
    r"^(\S*_duration\S*|nv_cpu_\S+|nv_pinned_memory_pool_total_bytes|nv_cache_util) "
)


def _body(value: int, batched: bool = False, **params: Any) -> str:
    shape, data = ([1, 1], [[value]]) if batched else ([1], [value])
    doc: dict[str, Any] = {
        "inputs": [{"name": "IN", "datatype": "INT32", "shape": shape, "data": data}]
    }
    if params:
        doc["parameters"] = params
    return json.dumps(doc)


def _traffic(url: str, scratch: Path) -> list[int]:
    """Successes and failures of each kind on every model; the statuses answered."""
    statuses: list[int] = []

    def post(path: str, body: str) -> None:
        statuses.append(exchange(url, "POST", f"/v2/models/{path}", body).status)

    for value in (1, 2, -1, -2):  # two successes, a raising execute, an error response
        post("plain/infer", _body(value))
    post("plain/infer", _body(1).replace("INT32", "FP32"))  # wrong datatype
    post("plain/infer", _body(1).replace('"IN"', '"NOPE"'))  # unknown input
    post("plain/infer", "{")  # not JSON
    for value in (3, -1):
        post("ens/infer", _body(value))
    post("dec/generate_stream", '{"IN":3}')
    post("dec/generate_stream", '{"IN":-1}')
    post("dec/infer", _body(2))  # decoupled over /infer
    for value in (1, 5, 50):
        post("custom/infer", _body(value))
    for value in (7, 7, 8):  # a miss, a hit, a miss
        post("cached/infer", _body(value))
    post("dyn/infer", _body(1, batched=True))
    # dyn (queue of one): a held execution, a queued request that times out, a refused one
    hold, mark = scratch / "hold", scratch / "mark"
    held = threading.Thread(
        target=post, args=("dyn/infer", _body(2, True, hold=str(hold), mark=str(mark)))
    )
    held.start()
    while not mark.exists():
        time.sleep(0.01)
    queued = threading.Thread(target=post, args=("dyn/infer", _body(3, True, timeout=200000)))
    queued.start()
    time.sleep(0.05)
    post("dyn/infer", _body(4, batched=True))  # the queue is full
    time.sleep(0.3)  # past the queued request's timeout (Triton answers it once dyn is free)
    hold.touch()
    held.join()
    queued.join()
    return sorted(statuses)


def _scrape(server: Any) -> str:
    reply = exchange(server.metrics_url, "GET", "/metrics")
    assert (reply.status, reply.headers["content-type"]) == (200, "text/plain; charset=utf-8")
    return reply.body.decode()


def _headers(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("#")]


def _samples(text: str) -> set[str]:
    return {line for line in text.splitlines() if line and not line.startswith("#")}


def _settled(real: Any, ours: Any, seen: Callable[[str], Any]) -> tuple[str, str]:
    """Both texts once ``seen`` of them agree (real Triton updates some gauges once a
    metrics interval), or after 10 s."""
    deadline = time.monotonic() + 10
    while True:
        texts = _scrape(real), _scrape(ours)
        if seen(texts[0]) == seen(texts[1]) or time.monotonic() > deadline:
            return texts
        time.sleep(0.1)


def _comparable(text: str) -> set[str]:
    return {line for line in _samples(text) if not OWN_VALUES.match(line)}


def pair_flags() -> tuple[str, ...]:
    """Both servers' flags for ``hunt_metrics``: the response cache, a short interval."""
    skip_without_real_triton(rt.platform_problem())
    caches = rt.ensure_installed().server_dir / "caches"
    return (
        f"--cache-directory={caches}",
        "--cache-config=local,size=1048576",
        "--metrics-interval-ms=100",
    )


@pytest.fixture(scope="module")
def pair(model_repo: Any) -> Iterator[tuple[Any, Any]]:
    flags = pair_flags()
    repo = model_repo("hunt_metrics")
    with rt.running(repo, *flags) as real, _launch.running(repo, *flags) as ours:
        yield real, ours


def test_metrics_text_before_and_after_traffic(pair: tuple[Any, Any], tmp_path: Path) -> None:
    """The same families in the same order (counters, then gauges, then histograms), the
    same sample lines, written alike (``7``, not ``7.0``; ``le`` last), before any
    traffic and after it, server-wide cache gauges included."""
    real, ours = pair
    before = _settled(real, ours, _comparable)
    assert _headers(before[1]) == _headers(before[0])
    assert _comparable(before[1]) == _comparable(before[0])
    statuses = []
    for server, name in ((real, "real"), (ours, "ours")):
        (tmp_path / name).mkdir()
        statuses.append(_traffic(server.url, tmp_path / name))
    assert statuses[1] == statuses[0]
    after = _settled(real, ours, _comparable)
    assert _headers(after[1]) == _headers(after[0])
    assert _comparable(after[1]) == _comparable(after[0])
    for line in (
        'nv_inference_request_failure{model="dyn",reason="REJECTED",version="1"} 1',
        'nv_inference_request_failure{model="plain",reason="BACKEND",version="1"} 2',
        'nv_inference_request_success{model="dec",version="1"} 2',
        'hunt_in_hist_bucket{kind="a",model="custom",le="10"} 2',
        "nv_cache_num_hits 1",
        "nv_cache_num_lookups 3",
        "nv_cache_num_entries 2",
    ):
        assert line in _samples(after[0]), line


@pytest.mark.parametrize(
    "flags",
    [
        ("--allow-cpu-metrics=false",),
        ("--metrics-config=counter_latencies=false", "--allow-gpu-metrics=false"),
        ("--metrics-config=counter_latencies=0", "--metrics-config=bogus=1"),
        ("--allow-gpu-metrics=true", "--metrics-interval-ms=1.5"),
    ],
    ids=["no-cpu", "no-latency-counters", "ignored-settings", "gpu-on"],
)
def test_metrics_flags_shape_the_families(model_repo: Any, flags: tuple[str, ...]) -> None:
    """The metrics flags tritonserver takes are taken, and leave out the same families."""
    skip_without_real_triton(rt.platform_problem())
    rt.ensure_installed()
    repo = model_repo("hunt_metrics")
    with rt.running(repo, *flags) as real, _launch.running(repo, *flags) as ours:
        for server in (real, ours):
            exchange(server.url, "POST", "/v2/models/plain/infer", _body(1))
        # (real Triton lists its CPU gauges from its first metrics interval on)
        texts = _settled(real, ours, _headers)
    assert _headers(texts[1]) == _headers(texts[0])


def test_no_family_without_a_series(tmp_path: Path) -> None:
    """An empty repository: no ``nv_inference_*`` family is listed (Triton leaves out a
    family with no series), the CPU and pinned-pool gauges are."""
    skip_without_real_triton(rt.platform_problem())
    rt.ensure_installed()
    texts = []
    for start in (rt.running, _launch.running):
        with start(tmp_path) as server:
            texts.append(_scrape(server))
    assert _headers(texts[1]) == _headers(texts[0])
    assert "nv_inference" not in texts[1]


def test_startup_log_says_it_collects_cpu_metrics(tmp_path: Path) -> None:
    """``Collecting CPU metrics`` is logged while CPU metrics are on, as Triton logs it."""
    skip_without_real_triton(rt.platform_problem())
    rt.ensure_installed()
    for flags, expected in (((), True), (("--allow-cpu-metrics=false",), False)):
        for start in (rt.start, _launch.start):
            server = start(tmp_path, *flags)
            server.stop()
            assert ('"Collecting CPU metrics"' in server.log()) is expected, (start, flags)


def test_custom_counter_with_total_suffix() -> None:
    """A counter family whose samples end in ``_total`` keeps that name in its header
    lines (prometheus_client takes the suffix off the family's name)."""
    from prometheus_client import CollectorRegistry
    from prometheus_client.core import Metric

    from tritonhttp.server.core._metrics import render

    class One:
        def collect(self) -> Iterator[Metric]:
            m = Metric("jobs_total", "Jobs", "counter")
            m.add_sample("jobs_total", {"b": 'x"y', "a": "1"}, 3.0)
            yield m

    registry = CollectorRegistry(auto_describe=False)
    registry.register(One())  # type: ignore[arg-type]
    assert render(registry).decode() == (
        '# HELP jobs_total Jobs\n# TYPE jobs_total counter\njobs_total{b="x\\"y",a="1"} 3\n'
    )
