"""Latency summaries (``--metrics-config summary_latencies=true``) side by side with real
Triton 2.51 on ``tests/repos/hunt_metrics``: which models have which summary, what each
counts, the quantile series and ``summary_quantiles`` as tritonserver reads it."""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests._real import skip_without_real_triton
from tritonhttp.server import _launch
from tritonhttp.testing import _real_triton as rt

from ._wire import exchange
from .test_differential_hunt_metrics import (
    OWN_VALUES,
    _body,
    _headers,
    _samples,
    _scrape,
    _settled,
    _traffic,
    pair_flags,
)

pytestmark = pytest.mark.real_triton

SUMMARY_ON = "--metrics-config=summary_latencies=true"
_SERIES = re.compile(r"^(\w+)\{(.*)\} (\S+)$")


def _summary_values(text: str) -> dict[tuple[str, str], float]:
    """Every summary series, ``(name, labels)``: value."""
    out = {}
    for line in _samples(text):
        m = _SERIES.match(line)
        if m and ("_summary_" in m.group(1) or m.group(1).endswith("_summary_per_model")):
            out[(m.group(1), m.group(2))] = math.nan if m.group(3) == "Nan" else float(m.group(3))
    return out


def _comparable(text: str) -> set[str]:
    """Sample lines whose values both servers share: counts, and for each quantile
    series only whether it has a value."""
    out = set()
    for line in _samples(text):
        m = _SERIES.match(line)
        if OWN_VALUES.match(line) or (m and m.group(1).endswith("_sum")):
            continue
        if m and "quantile=" in m.group(2):
            line = f"{m.group(1)}{{{m.group(2)}}} {'Nan' if m.group(3) == 'Nan' else 'value'}"
        out.add(line)
    return out


@pytest.fixture(scope="module")
def pair(model_repo: Any) -> Iterator[tuple[Any, Any]]:
    flags = (*pair_flags(), SUMMARY_ON)
    repo = model_repo("hunt_metrics")
    with rt.running(repo, *flags) as real, _launch.running(repo, *flags) as ours:
        yield real, ours


def test_summaries_before_and_after_traffic(pair: tuple[Any, Any], tmp_path: Path) -> None:
    """The same summary families in the same place (after every other family), on the
    same models: no request summary for the response-cached model, cache hit and miss
    summaries only for it. The same counts: successes only, a batch's compute once per
    request, an ensemble's and a decoupled model's as Triton counts them; NaN where a
    summary has seen nothing."""
    real, ours = pair
    before = _settled(real, ours, _comparable)
    assert _headers(before[1]) == _headers(before[0])
    assert _comparable(before[1]) == _comparable(before[0])
    line = 'nv_inference_request_summary_us{model="plain",version="1",quantile="0.5"} Nan'
    assert line in _samples(before[0])
    for name in ("real", "ours"):
        (tmp_path / name).mkdir()
    assert _traffic(ours.url, tmp_path / "ours") == _traffic(real.url, tmp_path / "real")
    after = _settled(real, ours, _comparable)
    assert _headers(after[1]) == _headers(after[0])
    assert _comparable(after[1]) == _comparable(after[0])
    families = [h.split()[2] for h in _headers(after[0]) if h.startswith("# TYPE")]
    kinds = [h.split()[3] for h in _headers(after[0]) if h.startswith("# TYPE")]
    assert kinds[-7:] == ["summary"] * 7 and "summary" not in kinds[:-7]
    assert families[-2:] == ["nv_cache_hit_summary_per_model", "nv_cache_miss_summary_per_model"]
    for line in (
        # two successes, an error response and the ensemble's step; not the raise
        'nv_inference_request_summary_us_count{model="plain",version="1"} 4',
        'nv_cache_hit_summary_per_model_count{model="cached",version="1"} 1',
        'nv_cache_miss_summary_per_model_count{model="cached",version="1"} 2',
    ):
        assert line in _samples(after[0]), line
    assert 'nv_inference_request_summary_us_count{model="cached"' not in after[0]


def test_quantiles_and_sums_agree_with_the_counters(pair: tuple[Any, Any]) -> None:
    """Each summary's sum is its counter's total (failed requests count in neither), and
    its quantiles rise with the quantile, between the smallest and largest it saw."""
    for server in pair:
        for value in (1, 2, 3, -1):
            exchange(server.url, "POST", "/v2/models/plain/infer", _body(value))
        text = _scrape(server)
        values = _summary_values(text)
        labels = 'model="plain",version="1"'
        count = values[("nv_inference_request_summary_us_count", labels)]
        for stage in ("request", "queue", "compute_infer"):
            counter = re.search(rf"nv_inference_{stage}_duration_us\{{{labels}\}} (\d+)", text)
            assert counter is not None, stage
            total = values[(f"nv_inference_{stage}_summary_us_sum", labels)]
            # (real Triton adds each request's whole microseconds to both)
            assert abs(int(counter.group(1)) - total) <= count, (server, stage)
            quantiles = [
                values[(f"nv_inference_{stage}_summary_us", f'{labels},quantile="{q}"')]
                for q in ("0.5", "0.9", "0.95", "0.99", "0.999")
            ]
            assert quantiles == sorted(quantiles), (server, stage)
            assert quantiles[0] >= 0 and quantiles[-1] <= total, (server, stage)


def test_summary_quantiles_as_tritonserver_reads_them(model_repo: Any) -> None:
    """``summary_quantiles``: pairs in the order given, a quantile over 1 (the largest
    observation) taken, pairs without ``:`` or a number skipped with tritonserver's error
    line, a trailing comma ignored; a later ``summary_latencies`` value does not turn the
    summaries off."""
    skip_without_real_triton(rt.platform_problem())
    rt.ensure_installed()
    flags = (
        SUMMARY_ON,
        "--metrics-config=summary_quantiles=0.9:0.01,abc,0.5:x,0.25:0.05,1.5:0.1,",
        "--metrics-config=summary_latencies=yes",
    )
    repo = model_repo("hunt_metrics")
    texts, logs = [], []
    for start in (rt.running, _launch.running):
        with start(repo, *flags) as server:
            for value in (1, 2, 3):
                exchange(server.url, "POST", "/v2/models/plain/infer", _body(value))
            texts.append(_scrape_counted(server, 'nv_inference_count{model="plain",version="1"} 3'))
        logs.append(server.log())
    for text, log in zip(texts, logs, strict=True):
        quantiles = re.findall(
            r'nv_inference_request_summary_us\{model="plain",version="1",quantile="([^"]+)"', text
        )
        assert quantiles == ["0.9", "0.25", "1.5"]
        assert "Invalid option: [abc]. No ':' delimiter found. Expected format is" in log
        assert "Invalid option: [0.5:x]. Error: stod" in log
    assert _headers(texts[1]) == _headers(texts[0])
    assert _comparable(texts[1]) == _comparable(texts[0])
    for text in texts:
        values = _summary_values(text)
        labels = 'model="plain",version="1"'
        top = values[("nv_inference_request_summary_us", f'{labels},quantile="1.5"')]
        assert top >= values[("nv_inference_request_summary_us", f'{labels},quantile="0.9"')]


@pytest.mark.parametrize(
    "flags",
    [
        ("--metrics-config=summary_latencies=yes",),
        ("--metrics-config=summary_quantiles=0.5:0.05",),
        (),
    ],
    ids=["not-true", "quantiles-alone", "default"],
)
def test_no_summaries_unless_turned_on(model_repo: Any, flags: tuple[str, ...]) -> None:
    skip_without_real_triton(rt.platform_problem())
    rt.ensure_installed()
    repo = model_repo("hunt_metrics")
    for start in (rt.running, _launch.running):
        with start(repo, *flags) as server:
            exchange(server.url, "POST", "/v2/models/plain/infer", _body(1))
            assert "summary" not in _scrape(server)


def _scrape_counted(server: Any, line: str) -> str:
    """The metrics once they show ``line``, for up to a second: a request a worker
    answered itself is counted when the server reads the worker's report, which may
    come an instant after the client has its answer."""
    deadline = time.monotonic() + 1
    text = _scrape(server)
    while line not in text and time.monotonic() < deadline:
        time.sleep(0.025)
        text = _scrape(server)
    return text
