"""Stateful endpoints side by side, each on its own pair of servers: statistics, metrics,
trace and log settings, restricted APIs and header forwarding."""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest

from ._wire import binary_request, bytes_blob, exchange, step_differences

pytestmark = pytest.mark.real_triton

TESTS = Path(__file__).parent.parent
MODELS = TESTS / "models"
TRACE_FILE = str(Path(tempfile.gettempdir()) / "tritonhttp-trace-test.log")


def j(doc: Any) -> str:
    return json.dumps(doc, separators=(",", ":"))


ADD = j({"inputs": [
    {"name": "INPUT0", "datatype": "FP32", "shape": [4], "data": [1, 2, 3, 4]},
    {"name": "INPUT1", "datatype": "FP32", "shape": [4], "data": [1, 1, 1, 1]},
]})  # fmt: skip


def _mode(m: int) -> str:
    return j({"inputs": [{"name": "MODE", "datatype": "INT32", "shape": [1], "data": [m]}]})


def _pair(real_factory: Any, ours_factory: Any, repo: Path, *args: str) -> tuple[Any, Any]:
    return real_factory(repo, *args), ours_factory(repo, *args)


def _traffic(url: str) -> None:
    for _ in range(3):
        assert exchange(url, "POST", "/v2/models/add_sub/infer", ADD).status == 200
    assert exchange(url, "POST", "/v2/models/add_sub/infer", "{").status == 500  # not counted
    assert exchange(url, "POST", "/v2/models/error_model/infer", _mode(0)).status == 500  # success
    assert exchange(url, "POST", "/v2/models/error_model/infer", _mode(2)).status == 500  # fail
    assert exchange(url, "POST", "/v2/models/error_model/infer", _mode(5)).status == 200
    # BYTES: a truncated last string fails in the backend (a failed request), a wrong
    # element count is refused at admission (not counted)
    cut = binary_request([("INPUT0", "BYTES", [2], bytes_blob([b"ab", b"cdef"])[:-1])])
    assert exchange(url, "POST", "/v2/models/identity_bytes/infer", *cut).status == 400
    extra = binary_request([("INPUT0", "BYTES", [1], bytes_blob([b"ab", b"c"]))])
    assert exchange(url, "POST", "/v2/models/identity_bytes/infer", *extra).status == 400


def _mask(stats: dict[str, Any]) -> dict[str, Any]:
    def walk(v: Any, key: str = "") -> Any:
        if isinstance(v, dict):
            return {k: walk(x, k) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        if key == "ns":
            return v > 0
        if key == "last_inference":
            return v > 0
        return v

    return walk(stats)  # type: ignore[no-any-return]


def test_statistics(real_triton_factory: Any, bundled_server_factory: Any) -> None:
    real, ours = _pair(real_triton_factory, bundled_server_factory, MODELS, "--exit-timeout-secs=7")
    _traffic(real.url)
    _traffic(ours.url)
    for path in (
        "/v2/models/stats",
        "/v2/models/add_sub/stats",
        "/v2/models/add_sub/versions/1/stats",
        "/v2/models/error_model/stats",
        "/v2/models/simple/stats",
        "/v2/models/identity_bytes/stats",
    ):
        r = exchange(real.url, "GET", path)
        o = exchange(ours.url, "GET", path)
        assert (o.status, o.content_type) == (r.status, r.content_type)
        assert _mask(json.loads(o.body)) == _mask(json.loads(r.body)), path
        assert list(json.loads(o.body)["model_stats"][0]) == list(
            json.loads(r.body)["model_stats"][0]
        )


def _families(text: str) -> dict[str, tuple[str, str]]:
    helps = dict(re.findall(r"^# HELP (\S+) (.*)$", text, re.M))
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))
    return {k: (helps[k], types.get(k, "")) for k in helps}


def _samples(text: str) -> dict[str, float]:
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, value = line.rsplit(" ", 1)
            out[key] = float(value)
    return out


def test_metrics(real_triton_factory: Any, bundled_server_factory: Any) -> None:
    real, ours = _pair(real_triton_factory, bundled_server_factory, MODELS, "--exit-timeout-secs=7")
    _traffic(real.url)
    _traffic(ours.url)
    r = exchange(real.metrics_url, "GET", "/metrics")
    o = exchange(ours.metrics_url, "GET", "/metrics")
    assert (o.status, o.content_type) == (r.status, r.content_type)
    rt, ot = r.body.decode(), o.body.decode()
    assert _families(ot) == _families(rt)
    rs, os_ = _samples(rt), _samples(ot)
    assert set(os_) == set(rs)
    # nv_pinned_memory_pool_*: real Triton shows its pool's size (0 or 256 MiB, depending on
    # whether it could pin memory on this machine); we have no pinned pool and say 0
    assert os_["nv_pinned_memory_pool_total_bytes"] == 0
    for key, value in rs.items():
        if key.startswith(("nv_inference_request_success", "nv_inference_request_failure",
                           "nv_inference_count", "nv_inference_exec_count",
                           "nv_inference_pending")):  # fmt: skip
            assert os_[key] == value, key
    for path, method in (
        ("/metrics/", "GET"),
        ("/other", "GET"),
        ("/metrics", "POST"),
        ("/", "GET"),
    ):
        r = exchange(real.metrics_url, method, path)
        o = exchange(ours.metrics_url, method, path)
        assert (o.status, o.content_type) == (r.status, r.content_type), path
        if path != "/metrics/":
            assert o.body == r.body


TRACE_STEPS: list[tuple[str, str, str]] = [
    ("GET", "/v2/trace/setting", ""),
    ("GET", "/v2/models/add_sub/trace/setting", ""),
    ("POST", "/v2/trace/setting", '{"trace_rate":"5","trace_count":"10","log_frequency":"2"}'),
    ("GET", "/v2/models/add_sub/trace/setting", ""),
    (
        "POST",
        "/v2/models/add_sub/trace/setting",
        '{"trace_rate":"7","trace_level":["TENSORS","TIMESTAMPS"]}',
    ),
    ("GET", "/v2/models/add_sub/trace/setting", ""),
    ("GET", "/v2/models/simple/trace/setting", ""),
    ("POST", "/v2/trace/setting", '{"trace_rate":"9"}'),
    ("GET", "/v2/models/add_sub/trace/setting", ""),
    ("POST", "/v2/models/add_sub/trace/setting", '{"trace_rate":null,"trace_level":null}'),
    ("GET", "/v2/models/add_sub/trace/setting", ""),
    ("POST", "/v2/trace/setting", '{"trace_rate":null,"trace_count":null,"log_frequency":null}'),
    ("POST", "/v2/trace/setting", '{"trace_level":["OFF"]}'),
    ("POST", "/v2/trace/setting", '{"trace_level":["BOGUS"]}'),
    ("POST", "/v2/trace/setting", '{"trace_count":"abc"}'),
    ("POST", "/v2/trace/setting", '{"log_frequency":"-1"}'),
    ("POST", "/v2/trace/setting", '{"trace_level":[1]}'),
    ("GET", "/v2/trace/setting", ""),
]


def test_trace_settings(real_triton_factory: Any, bundled_server_factory: Any) -> None:
    args = (f"--trace-config=triton,file={TRACE_FILE}", "--trace-config=level=TIMESTAMPS",
            "--trace-config=rate=1")  # fmt: skip
    real, ours = _pair(real_triton_factory, bundled_server_factory, MODELS, *args)
    problems = step_differences(real, ours, TRACE_STEPS)
    assert not problems, "\n".join(problems)


LOG_STEPS = [
    ("GET", ""),
    ("POST", '{"log_info":false,"log_verbose_level":2}'),
    ("POST", '{"log_warning":false,"log_error":null,"unknown":1}'),
    ("POST", '{"log_format":"ISO8601"}'),
    ("POST", '{"log_error":false,"log_format":"xml"}'),
    ("POST", '{"log_verbose_level":true}'),
    ("POST", '{"log_file":null}'),
    (
        "POST",
        '{"log_info":true,"log_warning":true,"log_error":true,"log_verbose_level":0,"log_format":"default"}',
    ),
    ("POST", "[]"),
    ("GET", ""),
]


def test_log_settings(real_triton_factory: Any, bundled_server_factory: Any) -> None:
    real, ours = _pair(real_triton_factory, bundled_server_factory, MODELS, "--exit-timeout-secs=6")
    problems = []
    for method, body in LOG_STEPS:
        r = exchange(real.url, method, "/v2/logging", body)
        o = exchange(ours.url, method, "/v2/logging", body)
        if (o.status, o.content_type, o.body) != (r.status, r.content_type, r.body):
            problems.append(
                f"{method} {body}\n  ours {o.status} {o.body!r}\n  real {r.status} {r.body!r}"
            )
    assert not problems, "\n".join(problems)


def test_restricted_apis_and_header_forwarding(
    real_triton_factory: Any, bundled_server_factory: Any, model_repo: Any
) -> None:
    args = (
        "--model-control-mode=explicit", "--load-model=param_echo", "--load-model=add_sub",
        "--http-restricted-api=model-repository:admin-key=admin-value",
        "--http-restricted-api=inference,metadata:infer-key=infer-value",
        "--http-restricted-api=health:health-key=yes",
        "--http-header-forward-pattern=my_header.*",
    )  # fmt: skip
    real, ours = _pair(real_triton_factory, bundled_server_factory, model_repo("special"), *args)
    echo = j({"inputs": [{"name": "IN", "datatype": "INT32", "shape": [1], "data": [0]}],
              "parameters": {"p": 1}, "outputs": [{"name": "INFO"}]})  # fmt: skip
    good = {"infer-key": "infer-value"}
    steps: list[tuple[str, str, str, dict[str, str]]] = [
        ("GET", "/v2", "", {}),
        ("GET", "/v2", "", good),
        ("GET", "/v2", "", {"Infer-Key": "infer-value"}),
        ("GET", "/v2", "", {"infer-key": "INFER-VALUE"}),
        ("GET", "/v2/models/add_sub", "", {}),
        ("GET", "/v2/health/ready", "", {}),
        ("GET", "/v2/health/live", "", {"health-key": "yes"}),
        ("GET", "/v2/health/ready", "", {"health-key": "no"}),
        ("GET", "/v2/models/add_sub/ready", "", {}),
        ("GET", "/v2/models/add_sub/config", "", {}),
        ("POST", "/v2/models/add_sub/infer", ADD, {}),
        ("DELETE", "/v2/models/add_sub/infer", "", {}),
        ("POST", "/v2/models/add_sub/infer", ADD, good),
        ("POST", "/v2/models/add_sub/generate", "{}", {}),
        ("POST", "/v2/repository/index", "", {}),
        ("POST", "/v2/repository/index", "", {"admin-key": "admin-value"}),
        ("POST", "/v2/repository/models/add_sub/load", "", {"admin-key": "admin-value"}),
        (
            "POST",
            "/v2/models/param_echo/infer",
            echo,
            {**good, "my_header_1": "hval", "MY_HEADER_UP": "U", "other": "x"},
        ),
    ]
    problems = []
    for method, path, body, headers in steps:
        r = exchange(real.url, method, path, body, headers)
        o = exchange(ours.url, method, path, body, headers)
        if (o.status, o.content_type, o.body) != (r.status, r.content_type, r.body):
            problems.append(
                f"{method} {path} {headers}\n  ours {o.status} {o.content_type} {o.body[:400]!r}"
                f"\n  real {r.status} {r.content_type} {r.body[:400]!r}"
            )
    assert not problems, "\n".join(problems)
