"""Logger lines in the server log (format, levels, log settings) and custom metrics (the
checks Triton 2.51 makes, with its messages) in both isolation modes."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest

from ._http import exchange, infer, mode_call
from .conftest import Start

LINE = re.compile(r'^([IWEV])\d{4} [\d:.]+ (\d+) (\S+):(\d+)\] "(.*)"$', re.MULTILINE)


@pytest.fixture(scope="module")
def repo(model_repo: Any) -> Path:
    """``tests/repos/backend_metrics``, materialised."""
    return Path(model_repo("backend_metrics"))


def _lines(log: str, where: str) -> list[tuple[str, str, str]]:
    return [(m[0], m[2], m[4]) for m in LINE.findall(log) if m[4].startswith(where)]


def _wait_for(server: Any, text: str) -> None:
    deadline = time.monotonic() + 10
    while text not in server.log() and time.monotonic() < deadline:
        time.sleep(0.05)


@pytest.mark.real_triton
def test_logger_lines_match_triton(real_triton_factory: Any, ours: Start, repo: Path) -> None:
    real, server = real_triton_factory(repo), ours(repo)
    got = []
    for s in (real, server):
        before = len(s.log())
        assert infer(s.url, "logging", ("INPUT0", "BYTES", [1], ["x"])).status == 200
        deadline = time.monotonic() + 10
        while "execute: Specific Msg!" not in s.log()[before:] and time.monotonic() < deadline:
            time.sleep(0.05)
        got.append(_lines(s.log(), "initialize") + _lines(s.log()[before:], "execute"))
    assert got[1] == got[0]
    assert [letter for letter, *_ in got[1][:4]] == ["I", "W", "E", "I"]  # no verbose line
    assert all(file == "model.py" for _, file, _ in got[1])
    pid = int(LINE.search(server.log())[2])  # type: ignore[index]
    assert pid == server.process.pid  # the server's pid, as Triton prints it


def test_verbose_lines_need_log_verbose(ours: Start, repo: Path) -> None:
    server = ours(repo, "--log-verbose=1")
    infer(server.url, "logging", ("INPUT0", "BYTES", [1], ["x"]))
    _wait_for(server, "execute: Specific Msg!")
    assert ("V", "model.py", "execute: Verbose Msg!") in _lines(server.log(), "execute")


def test_log_settings_apply_to_models(ours: Start, repo: Path) -> None:
    server = ours(repo, "--log-warning=false")
    assert exchange(server.url, "POST", "/v2/logging", '{"log_info":false}').status == 200
    infer(server.url, "logging", ("INPUT0", "BYTES", [1], ["x"]))
    _wait_for(server, "execute: Error Msg!")
    letters = {letter for letter, *_ in _lines(server.log(), "execute")}
    assert letters == {"E"}
    exchange(server.url, "POST", "/v2/logging", '{"log_info":true}')


def test_finalize_logs_reach_the_log_on_unload(ours: Start, repo: Path) -> None:
    server = ours(repo, "--model-control-mode=explicit", "--load-model=logging")
    exchange(server.url, "POST", "/v2/repository/models/logging/unload")
    _wait_for(server, "finalize: Specific Msg!")
    assert ("E", "model.py", "finalize: Error Msg!") in _lines(server.log(), "finalize")


#: what Triton 2.51 raises for each check (python-backend spec §2.11); Triton aborts on the
#: next call after such an error, so the texts are recorded rather than compared live
INSTANCE = "metrics_checks_0"
EXPECTED = {
    "counter_inc": {"ok": 3.0},
    "counter_neg": {"TritonModelException": "Failed to increment metric value: Failed to process "
        f"the request for model '{INSTANCE}', message: TRITONSERVER_METRIC_KIND_COUNTER can only "
        "be incremented monotonically by non-negative values."},
    "counter_set": {"TritonModelException": "Failed to set metric value: Failed to process the "
        f"request for model '{INSTANCE}', message: TRITONSERVER_METRIC_KIND_COUNTER does not "
        "support Set"},
    "counter_observe": {"TritonModelException": "Failed to observe metric value: Failed to "
        f"process the request for model '{INSTANCE}', message: TRITONSERVER_METRIC_KIND_COUNTER "
        "does not support Observe"},
    "gauge": {"ok": 3.0},
    "gauge_observe": {"TritonModelException": "Failed to observe metric value: Failed to process "
        f"the request for model '{INSTANCE}', message: TRITONSERVER_METRIC_KIND_GAUGE does not "
        "support Observe"},
    "hist_observe": {"ok": None},
    "hist_value": {"TritonModelException": "Failed to get metric value: Failed to process the "
        f"request for model '{INSTANCE}', message: TRITONSERVER_METRIC_KIND_HISTOGRAM does not "
        "support Value"},
    "hist_inc": {"TritonModelException": "Failed to increment metric value: Failed to process "
        f"the request for model '{INSTANCE}', message: TRITONSERVER_METRIC_KIND_HISTOGRAM does "
        "not support Increment"},
    "missing_buckets": {"TritonModelException": "Failed to create metric. Missing required "
        "buckets."},
    "unexpected_buckets": {"TritonModelException": "Failed to create metric. Unexpected buckets "
        "found."},
    "labels_not_dict": {"TritonModelException": "Failed to create metric. Labels must be a "
        "dictionary."},
    "label_not_str": {"TritonModelException": "Error when creating Metric: Failed to process the "
        f"request for model '{INSTANCE}', message: attempt to access JSON non-string as string"},
    "same_labels_shared": {"ok": 3.0},
    "kind_conflict": {"TritonModelException": "Error when creating MetricFamily: Failed to "
        f"process the request for model '{INSTANCE}', message: Family name already exists with "
        "different type"},
    "same_family": {"ok": 3.0},
    "bad_name": {"TritonModelException": "Error when creating MetricFamily: Failed to process "
        f"the request for model '{INSTANCE}', message: Invalid metric name"},
    "int_kind": {"TypeError": True},
    "family_deleted": {"TritonModelException": "Failed to set metric value: Invalid metric "
        "operation as the corresponding 'MetricFamily' has been deleted. The 'MetricFamily' "
        "object should be deleted AFTER its corresponding 'Metric' objects have been deleted."},
}  # fmt: skip


def test_metric_checks(servers: Start, repo: Path, isolation: str) -> None:
    server = servers(repo, f"--python-isolation={isolation}", "--model-control-mode=explicit",
                     "--load-model=metrics_checks")  # fmt: skip
    assert mode_call(server.url, "metrics_checks", 0) == EXPECTED
    text = exchange(server.metrics_url, "GET", "/metrics").body.decode()
    # "same_family" made the a="1" series through a second handle on checks_counter: the
    # series went with that handle, as in Triton 2.51 (and the family, left without series)
    assert "checks_counter" not in text
    assert "checks_gauge 3\n" in text
    assert 'checks_hist_bucket{le="5"} 1\n' in text and "checks_hist_count 1\n" in text
    assert "checks_tmp" not in text  # its family is gone
    exchange(server.url, "POST", "/v2/repository/models/metrics_checks/unload")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        text = exchange(server.metrics_url, "GET", "/metrics").body.decode()
        if "checks_gauge" not in text:
            break
        time.sleep(0.05)
    assert "checks_gauge" not in text  # the model's families go with it
