"""``bench -f``: the columns perf_analyzer's CSV adds for a decoupled model (``Response
Throughput``), for the response cache (``Server Cache Hit``, ``Server Cache Miss``) and
for an ensemble (a CSV per composing model, and ``Composing models`` in the text); and
the server's counts of a run against the client's.

The ensemble and decoupled runs are differential (real Triton 2.51 and the bundled
server); the cache runs use the bundled server alone, since the real Triton of the tests
ships no cache library (``--cache-config local,...`` fails to start it)."""

from __future__ import annotations

import csv
import io
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import MODELS, Run, run_script
from conftest import Server, is_bundled
from tritonhttp_cli._bench_measure import MeasureOptions, _settled, measure_level, server_delta
from tritonhttp_cli._bench_report import composing_csv_texts, csv_text

from tritonhttp.server import _launch as bundled

CACHE_FLAGS = ("--cache-config", "local,size=1048576")

ENSEMBLE = """name: "ens_add"
platform: "ensemble"
max_batch_size: 0
input [
  { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] },
  { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] }
]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
ensemble_scheduling {
  step [
    {
      model_name: "add_sub"
      model_version: -1
      input_map { key: "INPUT0" value: "INPUT0" }
      input_map { key: "INPUT1" value: "INPUT1" }
      output_map { key: "OUTPUT0" value: "OUTPUT0" }
    }
  ]
}
"""


def _rows(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(path.read_text())))


def _header(path: Path) -> list[str]:
    return path.read_text().splitlines()[0].split(",")


@pytest.fixture(scope="module")
def parity_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """add_sub (tests/models), a copy with the response cache on, and an ensemble of
    one add_sub step."""
    repo = tmp_path_factory.mktemp("parity") / "repo"
    shutil.copytree(MODELS / "add_sub", repo / "add_sub")
    cached = repo / "add_sub_cached"
    shutil.copytree(MODELS / "add_sub", cached)
    config = (cached / "config.pbtxt").read_text().replace('"add_sub"', '"add_sub_cached"')
    (cached / "config.pbtxt").write_text(config + "response_cache { enable: true }\n")
    (repo / "ens_add" / "1").mkdir(parents=True)
    (repo / "ens_add" / "config.pbtxt").write_text(ENSEMBLE)
    return repo


@pytest.fixture(
    scope="module", params=[pytest.param("real", marks=pytest.mark.real_triton), "bundled"]
)
def ens_server(request: pytest.FixtureRequest, parity_repo: Path) -> Server:
    """The ensemble repository (without the cached model, which real Triton could not
    load without a cache) on real Triton or the bundled server."""
    repo = parity_repo.parent / "no_cache"
    if not repo.exists():
        shutil.copytree(parity_repo, repo, ignore=shutil.ignore_patterns("add_sub_cached"))
    name = "real_triton_factory" if request.param == "real" else "bundled_server_factory"
    factory: Any = request.getfixturevalue(name)
    server: Server = factory(repo)
    return server


@pytest.fixture(scope="module")
def cache_server(parity_repo: Path, bundled_server_factory: Any) -> bundled.BundledServer:
    server: bundled.BundledServer = bundled_server_factory(parity_repo, *CACHE_FLAGS)
    return server


def bench(server: Server, *args: str) -> Run:
    return run_script(["--url", server.url, "bench", *args], timeout=180)


# -- Response Throughput (decoupled) -----------------------------------------------------


def test_decoupled_model_csv_has_response_throughput(run_cli: Any, tmp_path: Path) -> None:
    """A decoupled model's ``-f`` (it is measured with ``--streaming``) has perf_analyzer's
    ``Response Throughput`` right after ``Inferences/Second``: responses per second, so
    its ratio to the requests per second is the responses per request."""
    report = tmp_path / "stream.csv"
    done = run_cli(
        "bench", "text_stream", "--streaming", "-c", "2", "-n", "12", "--warmup", "0",
        "--synthetic-input-tokens-mean", "6", "--synthetic-input-tokens-stddev", "0",
        "-f", str(report), "--json",
    )  # fmt: skip
    assert done.code == 0, done.stderr
    header = _header(report)
    assert header[:4] == [
        "Concurrency",
        "Inferences/Second",
        "Response Throughput",
        "Client Send",
    ]
    assert "Server Cache Hit" not in header
    (row,) = _rows(report)
    per_request = float(row["Response Throughput"]) / float(row["Inferences/Second"])
    # text_stream sends one response per word of the prompt: 6 words.
    assert per_request == pytest.approx(6, rel=0.01)
    level = done.json()["levels"][0]
    assert float(row["Inferences/Second"]) == pytest.approx(
        level["metrics"]["request_throughput"]["avg"], rel=1e-3
    )
    # perf_analyzer times no client send or receive for a streamed model.
    assert (row["Client Send"], row["Client Recv"]) == ("0", "0")
    assert int(row["p50 latency"]) > 0


def test_one_piece_model_csv_has_no_response_throughput(run_cli: Any, tmp_path: Path) -> None:
    """A model that answers in one piece (``generate``) keeps perf_analyzer's usual
    columns."""
    report = tmp_path / "echo.csv"
    done = run_cli(
        "bench", "text_echo", "--streaming", "-n", "5", "--warmup", "0", "-f", str(report)
    )
    assert done.code == 0, done.stderr
    assert _header(report)[:3] == ["Concurrency", "Inferences/Second", "Client Send"]


# -- response cache ---------------------------------------------------------------------


def test_cache_columns_and_counts(cache_server: bundled.BundledServer, tmp_path: Path) -> None:
    """With the response cache on for the model, the CSV has ``Server Cache Hit`` and
    ``Server Cache Miss`` (µs per hit, per miss) between ``Server Compute Output`` and
    ``Client Recv``, and the text has the cache counts, which add up to the successful
    requests."""
    report = tmp_path / "cached.csv"
    done = bench(cache_server, "add_sub_cached", "-n", "40", "-f", str(report))
    assert done.code == 0, done.stderr
    header = _header(report)
    at = header.index("Server Compute Output")
    assert header[at + 1 : at + 4] == ["Server Cache Hit", "Server Cache Miss", "Client Recv"]
    (row,) = _rows(report)
    assert int(row["Server Cache Hit"]) >= 0 and int(row["Server Cache Miss"]) >= 0
    counts = {}
    for line in done.stdout.splitlines():
        key, _, value = line.strip().partition(": ")
        if key in ("Cache hit count", "Cache miss count", "Successful request count"):
            counts[key] = int(value)
    assert (
        counts["Cache hit count"] + counts["Cache miss count"] == counts["Successful request count"]
    )
    assert counts["Cache hit count"] > 0  # the same request every time: hits after the first
    assert "cache hit/miss " in done.stdout and "Average Cache Hit Latency: " in done.stdout


def test_no_cache_columns_without_the_cache(
    cache_server: bundled.BundledServer, tmp_path: Path
) -> None:
    report = tmp_path / "plain.csv"
    done = bench(cache_server, "add_sub", "-n", "10", "--warmup", "0", "-f", str(report))
    assert done.code == 0, done.stderr
    assert "Server Cache Hit" not in _header(report)
    assert "Cache hit count" not in done.stdout


# -- ensembles --------------------------------------------------------------------------


def test_ensemble_composing_models(ens_server: Server, tmp_path: Path) -> None:
    """An ensemble's ``-f`` is followed by one CSV per composing model, beside it, named
    ``NAME_vVERSION.`` + the file's name; the text lists the composing models' server
    figures under ``Composing models``."""
    report = tmp_path / "ens.csv"
    done = bench(ens_server, "ens_add", "-c", "1,2", "-n", "30", "--warmup", "0", "-f", str(report))
    assert done.code == 0, done.stderr
    step = tmp_path / "add_sub_v1.ens.csv"
    assert step.is_file(), sorted(p.name for p in tmp_path.iterdir())
    assert _header(step) == [
        "Concurrency",
        "Inferences/Second",
        "Client Send",
        "Network+Server Send/Recv",
        "Server Queue",
        "Server Compute Input",
        "Server Compute Infer",
        "Server Compute Output",
        "Client Recv",
    ]
    main, composing = _rows(report), _rows(step)
    assert [r["Concurrency"] for r in composing] == [r["Concurrency"] for r in main]
    for ens_row, step_row in zip(main, composing, strict=True):
        # one add_sub request per ensemble request: the same inferences per second
        assert float(step_row["Inferences/Second"]) == pytest.approx(
            float(ens_row["Inferences/Second"]), rel=1e-3
        )
        assert (step_row["Client Send"], step_row["Client Recv"]) == ("0", "0")
        assert int(step_row["Server Compute Infer"]) > 0
    lines = done.stdout.splitlines()
    assert "  Composing models: " in lines
    at = lines.index("  Composing models: ")
    assert lines[at + 1] == "  add_sub, version: 1"
    assert lines[at + 2].startswith("      Inference count: ")
    assert "      Successful request count: 30" in lines[at + 2 : at + 6]


# -- the server's counts against the client's ------------------------------------------


@pytest.mark.parametrize("mode", ["loop", "sync", "async"])
def test_request_count_matches_the_server(run_cli: Any, triton: Server, mode: str) -> None:
    """``-n N`` at a concurrency sends exactly N requests after the warm-up's have ended,
    so the server counts exactly the client's N (before, the load kept going while the
    N-th answer was read and the statistics were fetched: the server counted more)."""
    done = run_cli("bench", "add_sub", "-c", "4", "-n", "60", "--mode", mode, "--json")
    assert done.code == 0, done.stderr
    (level,) = done.json()["levels"]
    assert level["requests"] == 60
    server = level["server_us"]
    assert (server["success_count"], server["inference_count"]) == (60, 60), is_bundled(triton)


def test_a_count_behind_the_clients_is_read_again() -> None:
    """A server may count a request after its answer has gone out (ours does when a worker
    answers directly): the reading after ``-n N`` is taken again until it counts the N
    successes the client saw, never past a failure's."""
    before = (0, 0, {"success": (10, 0)})
    readings = iter([(0, 0, {"success": (69, 0)}), (0, 0, {"success": (70, 0)})])
    records = [(0.0, 1.0, None)] * 60 + [(0.0, 1.0, "HTTP 500")]
    after = _settled(lambda: next(readings), before, (0, 0, {"success": (68, 0)}), records)
    assert after == (0, 0, {"success": (70, 0)})
    caught_up = (0, 0, {"success": (70, 0)})
    assert _settled(lambda: pytest.fail("read again"), before, caught_up, records) is caught_up


class _LaggingLoad:
    """A closed loop of one whose server counts the warm-up's last request only on the
    second reading after the warm-up (as a server counting a request after its answer)."""

    concurrency = 1

    def __init__(self) -> None:
        self.records: list[Any] = []
        self.counted: list[int] = []
        self._running = False

    def start(self) -> None:
        self._running = True
        if not self.records:  # the warm-up: three requests
            self.records += [(0.0, 0.001, None)] * 3
            self.counted += [2, 3]  # the server's readings after it, one behind at first

    def stop(self) -> None:
        self._running = False

    def alive(self) -> bool:
        return self._running

    def send_exactly(self, count: int) -> None:
        self.records += [(0.0, 0.001, None)] * count
        self.counted.append(3 + count)
        self._running = True

    def stats(self) -> Any:
        success = self.counted.pop(0) if self.counted else 0
        return 0, 0, {"success": (success, success * 1000)}


def test_the_warm_up_is_counted_before_the_window_starts() -> None:
    """``-n N``: the window's first reading waits until the server counts the warm-up's
    requests (one counted late would otherwise fall in the window: N + 1)."""
    load = _LaggingLoad()
    base = [(0, 0, {"success": (0, 0)})]

    def stats() -> Any:
        return base.pop() if base else load.stats()

    options = MeasureOptions(fixed_requests=5, warmup_requests=3)
    result, _ = measure_level(load, ("concurrency", 1), options, stats)  # type: ignore[arg-type]
    assert result.server is not None
    assert (result.requests, result.server["success_count"]) == (5, 5)


class _EdgeLoad:
    """A load whose requests finish only while the server's statistics are read."""

    concurrency = None

    def __init__(self) -> None:
        self.records: list[Any] = []
        self._alive = threading.Event()

    def start(self) -> None:
        self._alive.set()

    def stop(self) -> None:
        self._alive.clear()

    def alive(self) -> bool:
        return self._alive.is_set()

    def stats(self) -> Any:
        now = time.perf_counter()
        self.records.append((now - 0.001, now, None))
        return None


def test_windows_leave_no_gap_between_them() -> None:
    """A request that finishes while the statistics are read at a window's edge counts in
    the next window: each window starts where the last one ended."""
    load = _EdgeLoad()
    options = MeasureOptions(interval_s=0.05, stability=10.0, max_trials=3)
    result, _ = measure_level(load, ("concurrency", 1), options, load.stats)  # type: ignore[arg-type]
    # Edges 0, 1 and 2 each finish one request inside the three windows; edge 3's comes
    # after the last window.
    assert (result.windows, result.requests) == (3, 3)


# -- layouts without a server -----------------------------------------------------------


def _snapshot(success: int, hit: int, miss: int, compute: int) -> Any:
    totals = {
        "success": (success, success * 100_000),
        "queue": (success, success * 10_000),
        "compute_input": (compute, compute * 1_000),
        "compute_infer": (compute, compute * 50_000),
        "compute_output": (compute, compute * 1_000),
        "cache_hit": (hit, hit * 20_000),
        "cache_miss": (miss, miss * 30_000),
    }
    return compute, compute, totals


def test_cache_figures_and_csv_layout() -> None:
    delta = server_delta(_snapshot(0, 0, 0, 0), _snapshot(10, 6, 4, 4))
    assert delta is not None
    assert (delta["cache_hit_count"], delta["cache_miss_count"]) == (6, 4)
    assert (delta["cache_hit"], delta["cache_miss"]) == (20, 30)
    # queue 10, then compute and cache per request served: (4*52 + 6*20 + 4*30) / 10
    assert delta["compute_and_cache"] == pytest.approx(44.8)
    assert delta["overhead"] == pytest.approx(100 - 10 - 44.8)
    from tritonhttp_cli._bench_measure import LevelResult

    result = LevelResult("concurrency", 1, 10, 0, 1.0, [0.001] * 10, server=delta, responses=30)
    text = csv_text([result], False, False, cache=True, decoupled=True)
    header, row = (line.split(",") for line in text.splitlines())
    assert header[:3] == ["Concurrency", "Inferences/Second", "Response Throughput"]
    assert header[8:11] == ["Server Compute Output", "Server Cache Hit", "Server Cache Miss"]
    assert row[2] == "30" and row[9:11] == ["20", "30"]
    # perf_analyzer's network share: client wait - queue - compute - hit - miss
    assert row[4] == str(1000 - 10 - 52 - 20 - 30)
    assert composing_csv_texts([result], True) == {}
