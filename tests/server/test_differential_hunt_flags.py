"""Server flags side by side with real tritonserver 2.51: which values of the metrics flags
(and of flags that turn off what this server does not have) start the server and which
stop it (exit status 1, the flag named), the two spellings ``--flag=value`` and
``--flag value``, and a flag given twice."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests._real import skip_without_real_triton
from tritonhttp.server import _launch
from tritonhttp.testing import _process
from tritonhttp.testing import _real_triton as rt

from ._wire import exchange

pytestmark = pytest.mark.real_triton

#: Triton's summary quantiles when ``summary_quantiles`` is not given
DEFAULT_QUANTILES = ((0.5, 0.05), (0.9, 0.01), (0.95, 0.001), (0.99, 0.001), (0.999, 0.001))

#: flag values tritonserver takes (booleans in any case, ``on``/``off``; ints read as
#: ``std::stoi`` reads them; --metrics-config settings it does not know)
TAKEN = [
    ("--allow-metrics=on",),
    ("--allow-metrics=TRUE",),
    ("--allow-cpu-metrics=0",),
    ("--allow-cpu-metrics", "false"),
    ("--allow-gpu-metrics=false",),
    ("--allow-gpu-metrics=true",),
    ("--metrics-interval-ms=1.5",),
    ("--metrics-interval-ms=5x",),
    ("--metrics-interval-ms", " 7"),
    ("--metrics-config=a=b=c",),
    ("--metrics-config", "counter_latencies=false"),
    ("--metrics-config=summary_latencies=maybe",),
    # what this server does anyway: no SageMaker, no Vertex AI, no pinned memory pool
    ("--allow-sagemaker=false",),
    ("--allow-vertex-ai", "0"),
    ("--pinned-memory-pool-byte-size=0",),
    ("--http-thread-count=4",),
]

#: flag values tritonserver refuses: exit status 1
REFUSED = [
    ("--allow-metrics= true",),
    ("--allow-metrics=yes",),
    ("--allow-cpu-metrics=no",),
    ("--allow-gpu-metrics=",),
    ("--metrics-config=nokey",),
    ("--metrics-config=a=",),
    ("--metrics-config==x",),
    ("--metrics-interval-ms=abc",),
    ("--metrics-interval-ms=inf",),
    ("--metrics-flag-that-is-not=1",),
    ("--allow-metrics",),  # no value
    ("--http-thread-count=abc",),
]


def _outcome(start: Callable[..., Any], repo: Path, flags: tuple[str, ...]) -> tuple[bool, str]:
    """Whether the server started with ``flags`` (then stopped), and what it said (its
    exit status, then its whole log)."""
    log = repo / f"{start.__module__}.log"
    try:
        server = start(repo, *flags, timeout=60, log_path=log)
    except RuntimeError as e:
        return False, str(e).splitlines()[0] + "\n" + log.read_text(errors="replace")
    server.stop()
    return True, server.log()


@pytest.mark.parametrize(
    ("flags", "taken"),
    [*((f, True) for f in TAKEN), *((f, False) for f in REFUSED)],
    ids=[" ".join(f) for f in (*TAKEN, *REFUSED)],
)
def test_metrics_flag_values(tmp_path: Path, flags: tuple[str, ...], taken: bool) -> None:
    skip_without_real_triton(rt.platform_problem())
    rt.ensure_installed()
    real = _outcome(rt.start, tmp_path, flags)
    ours = _outcome(_launch.start, tmp_path, flags)
    assert (real[0], ours[0]) == (taken, taken), (real[1][-600:], ours[1][-600:])
    assert real[1].count("Started HTTPService at") == ours[1].count("Started HTTPService at")
    if not taken:
        name = flags[0].split("=", 1)[0]
        assert "exited with 1" in real[1] and "exited with 1" in ours[1]
        assert name in real[1] and name in ours[1], ours[1][-600:]


def test_flag_given_twice_last_wins(tmp_path: Path) -> None:
    """The last ``--metrics-port`` and the last ``--allow-metrics`` count, on both."""
    skip_without_real_triton(rt.platform_problem())
    rt.ensure_installed()
    for start in (rt.start, _launch.start):
        port = _process.free_port()
        flags = ("--allow-metrics=false", f"--metrics-port={port}", "--allow-metrics=true")
        server = start(tmp_path, *flags)
        try:
            assert _metrics_status(port) == 200, start
        finally:
            server.stop()


def _metrics_status(port: int) -> int:
    """The status of ``GET /metrics`` on ``port``, once it listens: tritonserver starts
    its metrics service after the HTTP service its readiness is read from."""
    deadline = time.monotonic() + 15
    while True:
        try:
            return exchange(f"127.0.0.1:{port}", "GET", "/metrics").status
        except ConnectionRefusedError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


@pytest.mark.parametrize(
    ("configs", "quantiles", "counters", "problems"),
    [
        (["summary_latencies=true"], DEFAULT_QUANTILES, True, []),
        (["summary_latencies=TRUE"], None, True, []),
        (["summary_latencies=true", "summary_latencies=false"], DEFAULT_QUANTILES, True, []),
        (["counter_latencies=false", "counter_latencies=true"], None, False, []),
        (
            ["summary_latencies=true", "summary_quantiles= 0.9x:.5,1e-1:2,,q:1,3"],
            ((0.9, 0.5), (0.1, 2.0)),
            True,
            [
                "Invalid option: []. No ':' delimiter found. Expected format is <quantile>:<error>",
                "Invalid option: [q:1]. Error: stod",
                "Invalid option: [3]. No ':' delimiter found. Expected format is "
                "<quantile>:<error>",
            ],
        ),
        (
            ["summary_latencies=true", "summary_quantiles=0.3:0.1", "summary_quantiles=x"],
            ((0.3, 0.1),),
            True,
            ["Invalid option: [x]. No ':' delimiter found. Expected format is <quantile>:<error>"],
        ),
    ],
)
def test_metrics_config_reads_latency_settings_as_tritonserver(
    configs: list[str],
    quantiles: tuple[tuple[float, float], ...] | None,
    counters: bool,
    problems: list[str],
) -> None:
    """Only ``true`` turns the summaries on and only ``false`` the counters off, and no
    later value turns them back; ``summary_quantiles`` pairs are read as ``std::stod``
    reads numbers (the number a text starts with), a pair it cannot read is skipped with
    tritonserver's error line, and the last setting with a pair it could read wins."""
    from tritonhttp.server._options import parse_args
    from tritonhttp.server.core._summary import DEFAULT_QUANTILES as defaults

    assert defaults == DEFAULT_QUANTILES
    opts = parse_args(["--model-repository=.", *(f"--metrics-config={c}" for c in configs)])
    assert (opts.summary_quantiles, opts.latency_counters) == (quantiles, counters)
    assert opts.quantile_problems == problems
