"""Model control, versions, failing models and state: one script of requests played on real
Triton and on our server (both ``--model-control-mode=explicit`` on ``tests/repos/special``),
every answer compared byte for byte."""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import pytest
from _repos import ECHO_MODEL

from ._wire import ADD_SUB_IO, Reply, exchange, infer_body
from .test_differential_state import _mask

pytestmark = pytest.mark.real_triton

ARGS = ("--model-control-mode=explicit", "--strict-readiness=true")


def j(doc: Any) -> str:
    return json.dumps(doc, separators=(",", ":"))


Step = tuple[str, str, str | bytes, dict[str, str]]

UPLOAD = j(
    {
        "parameters": {
            "config": j(
                {
                    "backend": "python",
                    "input": [{"name": "IN", "data_type": "TYPE_INT32", "dims": [1]}],
                    "output": [{"name": "OUT", "data_type": "TYPE_INT32", "dims": [1]}],
                }
            ),
            "file:1/model.py": base64.b64encode(ECHO_MODEL.encode()).decode(),
        }
    }
)

LOADS = [
    "add_sub", "broken_model", "syntax_error", "no_class", "multi_ver", "specific_ver", "latest2",
    "bad_name", "bad_pbtxt", "unknown_field", "noconfig", "classify", "seq_accum", "param_echo",
    "decoupled", "cfgmodel", "no_versions", "bad_dims", "kind_gpu", "exec_errors", "no_execute",
    "not_there", "lead_zero",
]  # fmt: skip

STEPS: list[Step] = [
    ("POST", "/v2/repository/index", "", {}),
    ("GET", "/v2/health/ready", "", {}),
    ("GET", "/v2/models/add_sub", "", {}),
    ("POST", "/v2/repository/models/add_sub/unload", "", {}),
    ("POST", "/v2/repository/models/nope/unload", '{"parameters":{"unload_dependents":5}}', {}),
    ("POST", "/v2/repository/models/add_sub/load", "{", {}),
    ("POST", "/v2/repository/models/add_sub/load", '{"parameters":[]}', {}),
    ("POST", "/v2/repository/models/add_sub/load", '{"parameters":{"config":{}}}', {}),
    ("POST", "/v2/repository/models/add_sub/load", '{"parameters":{"other":"x"}}', {}),
    *[("POST", f"/v2/repository/models/{m}/load", "", {}) for m in LOADS],
    ("POST", "/v2/repository/index", "", {}),
    ("POST", "/v2/repository/index", '{"ready":true}', {}),
    ("GET", "/v2/health/ready", "", {}),
    ("GET", "/v2/models/cfgmodel/stats", "", {}),  # the warm-up request counts
    *[("GET", f"/v2/models/{m}", "", {}) for m in LOADS],
    *[("GET", f"/v2/models/{m}/config", "", {}) for m in LOADS],
    *[("GET", f"/v2/models/{m}/ready", "", {}) for m in LOADS],
    ("GET", "/v2/models/multi_ver/versions/2", "", {}),
    ("GET", "/v2/models/lead_zero/versions/1", "", {}),  # the folder "01" is not a version
    ("GET", "/v2/models/lead_zero/versions/2/ready", "", {}),
    ("GET", "/v2/models/multi_ver/versions/2/config", "", {}),
    ("GET", "/v2/models/specific_ver/versions/2", "", {}),
    ("GET", "/v2/models/latest2/versions/1", "", {}),
    ("GET", "/v2/models/broken_model/versions/1", "", {}),
    ("POST", "/v2/models/multi_ver/infer", infer_body(("IN", "INT32", [1], [0])), {}),
    ("POST", "/v2/models/multi_ver/versions/2/infer", infer_body(("IN", "INT32", [1], [0])), {}),
    (
        "POST",
        "/v2/models/specific_ver/versions/2/infer",
        infer_body(("IN", "INT32", [1], [0])),
        {},
    ),
    ("POST", "/v2/models/latest2/infer", infer_body(("IN", "INT32", [1], [0])), {}),
    ("POST", "/v2/models/broken_model/infer", infer_body(("IN", "FP32", [1], [0])), {}),
    ("POST", "/v2/models/decoupled/infer", infer_body(("IN", "INT32", [1], [0])), {}),
    ("POST", "/v2/models/noconfig/infer", infer_body(("IN", "FP32", [2, 2], [1, 2, 3, 4])), {}),
    (
        "POST",
        "/v2/models/classify/infer",
        infer_body(
            ("IN", "FP32", [4], [0.5, 0.9, 0.1, 0.7]),
            outputs=[{"name": "OUT", "parameters": {"classification": 2}}],
        ),
        {},
    ),
    (
        "POST",
        "/v2/models/classify/infer",
        infer_body(
            ("IN", "FP32", [4], [0.5, 0.9, 0.1, 0.7]),
            outputs=[{"name": "OUT", "parameters": {"classification": 3, "binary_data": True}}],
        ),
        {},
    ),
    (
        "POST",
        "/v2/models/cfgmodel/infer",
        infer_body(("INPUT0", "FP32", [1, 2, 2], [1, 2, 3, 4])),
        {},
    ),
    (
        "POST",
        "/v2/models/cfgmodel/infer",
        infer_body(("INPUT0", "FP32", [5, 2, 2], [0] * 20)),
        {},
    ),
    ("POST", "/v2/models/cfgmodel/infer", infer_body(("INPUT0", "FP32", [2, 4], [0] * 8)), {}),
    ("POST", "/v2/models/no_execute/infer", infer_body(("IN", "INT32", [1], [0])), {}),
    *[
        ("POST", "/v2/models/exec_errors/infer", infer_body(("MODE", "INT32", [1], [m])), {})
        for m in range(11)
    ],
    (
        "POST",
        "/v2/models/exec_errors/infer",
        infer_body(
            ("MODE", "INT32", [1], [8]),
            outputs=[{"name": "OUT", "parameters": {"binary_data": True}}],
        ),
        {},
    ),
    ("POST", "/v2/models/param_echo/infer", infer_body(("IN", "INT32", [1], [0])), {}),
    (
        "POST",
        "/v2/models/param_echo/infer",
        infer_body(
            ("IN", "INT32", [1], [0]),
            id="rid-7",
            parameters={
                "mode": "ok",
                "priority": 0,
                "timeout": 5000000,
                "custom": "x",
                "binary_data_output": False,
                "i": -5,
                "b": True,
                "d": 1.5,
                "big": 18446744073709551615,
                "sequence_id": 5,
                "sequence_start": True,
            },
        ),
        {},
    ),
    (
        "POST",
        "/v2/models/param_echo/infer",
        infer_body(
            ("IN", "INT32", [1], [0]),
            parameters={"sequence_id": "abc", "sequence_end": True},
            outputs=[{"name": "INFO"}],
        ),
        {},
    ),
    ("POST", "/v2/models/seq_accum/infer", infer_body(("INPUT", "INT32", [1], [1])), {}),
    (
        "POST",
        "/v2/models/seq_accum/infer",
        infer_body(("INPUT", "INT32", [1], [1]), parameters={"sequence_id": 5}),
        {},
    ),
    (
        "POST",
        "/v2/models/seq_accum/infer",
        infer_body(
            ("INPUT", "INT32", [1], [1]), parameters={"sequence_id": 5, "sequence_start": True}
        ),
        {},
    ),
    (
        "POST",
        "/v2/models/seq_accum/infer",
        infer_body(("INPUT", "INT32", [1], [2]), parameters={"sequence_id": 5}),
        {},
    ),
    (
        "POST",
        "/v2/models/seq_accum/infer",
        infer_body(
            ("INPUT", "INT32", [1], [3]), parameters={"sequence_id": 5, "sequence_end": True}
        ),
        {},
    ),
    (
        "POST",
        "/v2/models/seq_accum/infer",
        infer_body(("INPUT", "INT32", [1], [3]), parameters={"sequence_id": 5}),
        {},
    ),
    (
        "POST",
        "/v2/models/seq_accum/infer",
        infer_body(
            ("INPUT", "INT32", [1], [4]),
            parameters={"sequence_id": "abc", "sequence_start": True, "sequence_end": True},
        ),
        {},
    ),
    ("POST", "/v2/repository/models/multi_ver/unload", "", {}),
    ("POST", "/v2/models/multi_ver/infer", infer_body(("IN", "INT32", [1], [0])), {}),
    ("GET", "/v2/models/multi_ver", "", {}),
    ("GET", "/v2/models/multi_ver/stats", "", {}),
    ("POST", "/v2/repository/models/broken_model/unload", "", {}),
    ("GET", "/v2/health/ready", "", {}),
    (
        "POST",
        "/v2/repository/models/add_sub/load",
        j(
            {
                "parameters": {
                    "config": j(
                        {
                            "name": "add_sub",
                            "backend": "python",
                            "max_batch_size": 2,
                            **ADD_SUB_IO,
                        }
                    )
                }
            }
        ),
        {},
    ),
    ("GET", "/v2/models/add_sub/config", "", {}),
    (
        "POST",
        "/v2/repository/models/add_sub/load",
        j({"parameters": {"config": j({"name": "wrong"})}}),
        {},
    ),
    ("POST", "/v2/repository/models/add_sub/load", j({"parameters": {"config": "{"}}), {}),
    (
        "POST",
        "/v2/repository/models/add_sub/load",
        j({"parameters": {"file:1/model.py": "eA=="}}),
        {},
    ),
    ("GET", "/v2/models/add_sub/config", "", {}),
    ("POST", "/v2/repository/models/add_sub/load", "", {}),
    ("GET", "/v2/models/add_sub/config", "", {}),
    ("POST", "/v2/repository/index", "", {}),
    # a model from files sent with the load request: served, but never in the index
    ("POST", "/v2/repository/models/uploaded/load", UPLOAD, {}),
    ("GET", "/v2/models/uploaded/ready", "", {}),
    ("POST", "/v2/models/uploaded/infer", infer_body(("IN", "INT32", [1], [5])), {}),
    ("POST", "/v2/repository/index", "", {}),
    ("POST", "/v2/repository/index", '{"ready":true}', {}),
    ("POST", "/v2/repository/models/uploaded/unload", "", {}),
    ("POST", "/v2/repository/index", "", {}),
    ("GET", "/v2/models/uploaded/ready", "", {}),
]


def _same(ours: Reply, real: Reply) -> str | None:
    if (ours.status, ours.content_type, ours.body) != (real.status, real.content_type, real.body):
        at = next(
            (i for i, (a, b) in enumerate(zip(ours.body, real.body, strict=False)) if a != b), 0
        )
        start = max(0, at - 150)
        return (
            f"ours {ours.status} {ours.content_type} {ours.body[start : start + 500]!r}\n"
            f"   real {real.status} {real.content_type} {real.body[start : start + 500]!r}"
        )
    return None


def _settle(url: str) -> None:
    """Wait until no model is LOADING/UNLOADING."""
    for _ in range(100):
        index = json.loads(exchange(url, "POST", "/v2/repository/index").body)
        if not any(m.get("state") in ("LOADING", "UNLOADING") for m in index):
            return
        time.sleep(0.05)


def test_lifecycle_script(
    real_triton_factory: Any, bundled_server_factory: Any, model_repo: Any
) -> None:
    repo = model_repo("special")
    real = real_triton_factory(repo, *ARGS)
    ours = bundled_server_factory(repo, *ARGS)
    problems = []
    for i, (method, path, body, headers) in enumerate(STEPS):
        if "unload" in path or path.endswith("/index"):
            _settle(real.url)
            _settle(ours.url)
        r = exchange(real.url, method, path, body, headers)
        o = exchange(ours.url, method, path, body, headers)
        if path.endswith("/config") and o.status == r.status == 200:
            # map entries (parameters, metric_tags) come in hash order on real Triton
            if json.loads(o.body) != json.loads(r.body):
                problems.append(f"#{i} {method} {path}: {o.body[:300]!r} vs {r.body[:300]!r}")
            continue
        if path.endswith("/stats"):
            if (o.status, o.content_type) != (r.status, r.content_type) or (
                o.status == 200 and _mask(json.loads(o.body)) != _mask(json.loads(r.body))
            ):
                problems.append(f"#{i} {method} {path}: {o.body[:400]!r} vs {r.body[:400]!r}")
            continue
        diff = _same(o, r)
        if diff:
            problems.append(f"#{i} {method} {path} {str(body)[:120]}\n   {diff}")
    assert not problems, "\n".join(problems)


def test_full_queue_answers_503(
    real_triton_factory: Any, bundled_server_factory: Any, model_repo: Any
) -> None:
    import threading

    repo = model_repo("special")

    args = ("--model-control-mode=explicit", "--load-model=queue1")
    body = infer_body(("IN", "INT32", [1, 1], [7]))
    answers = []
    for server in (real_triton_factory(repo, *args), bundled_server_factory(repo, *args)):
        replies: list[Reply] = []
        threads = []
        for delay in (0.0, 0.25):
            time.sleep(delay)
            t = threading.Thread(
                target=lambda s=server, r=replies: r.append(
                    exchange(s.url, "POST", "/v2/models/queue1/infer", body)
                )
            )
            t.start()
            threads.append(t)
        time.sleep(0.25)
        third = exchange(server.url, "POST", "/v2/models/queue1/infer", body)
        for t in threads:
            t.join()
        answers.append(
            (third.status, third.content_type, third.body, sorted(r.status for r in replies))
        )
    assert answers[1] == answers[0]
    assert answers[0][0] == 503


_IN0 = '{"name":"INPUT0","data_type":"TYPE_FP32","dims":%s}'
_IN1 = '{"name":"INPUT1","data_type":"TYPE_FP32","dims":[4]}'
_OUT = (
    '"output":[{"name":"OUTPUT0","data_type":"TYPE_FP32","dims":[4]},'
    '{"name":"OUTPUT1","data_type":"TYPE_FP32","dims":[4]}]'
)


def _add_sub(extra: str = "", dims: str = "[4]", inputs: str = "") -> str:
    """add_sub's configuration as JSON text, with ``extra`` members after its own."""
    inputs = inputs or f"[{_IN0 % dims},{_IN1}]"
    return f'{{"backend":"python","input":{inputs},{_OUT}{extra}}}'


#: configuration overrides as users write them by hand, and as Triton's parser reads them
OVERRIDES = {
    "nested lists": _add_sub(inputs=f"[[{_IN0 % '[4]'}],[{_IN1}]]"),
    "nested dims": _add_sub(dims="[[2],[2]]"),
    "null elements": _add_sub(dims="[null,4]", extra=',"instance_group":[null,[{"count":2}]]'),
    "an object for a list": _add_sub(extra=',"instance_group":{"count":2}'),
    "a number for a list": _add_sub(
        dims="4", extra=',"version_policy":{"specific":{"versions":1}}'
    ),
    "a list named twice": f'{{"backend":"python","input":[{_IN0 % "[4]"}],{_OUT},"input":{_IN1}}}',
    "a number named twice": _add_sub(extra=',"max_batch_size":2,"max_batch_size":4'),
    "a member named twice in a list's object": _add_sub(
        extra=',"instance_group":[{"count":2,"count":3}]'
    ),
    "a map named twice": _add_sub(
        extra=',"parameters":{"k":{"string_value":"a"}},"parameters":{"j":{"string_value":"b"}}'
    ),
    "nulls": _add_sub(extra=',"instance_group":null,"optimization":null,"max_batch_size":null'),
    "a map key twice": _add_sub(
        extra=',"parameters":{"k":{"string_value":"a"},"k":{"string_value":"b"}}'
    ),
    "a message named twice": _add_sub(
        extra=',"dynamic_batching":{},"max_batch_size":4,"dynamic_batching":{}'
    ),
    "a list for a number": _add_sub(extra=',"max_batch_size":[4]'),
    "a list for a message": _add_sub(extra=',"dynamic_batching":[{}]'),
    "a number for a message in a list": _add_sub(inputs=f"[{_IN0 % '[4]'},1]"),
    "enum names in any case": _add_sub(
        inputs=f"[{_IN0.replace('TYPE_FP32', 'type-fp32') % '[4]'},"
        f"{_IN1.replace('TYPE_FP32', 'Type_Fp32')}]",
        extra=',"instance_group":[{"kind":"kind_cpu"}]',
    ),
    "an enum name without its prefix": _add_sub(
        inputs=f"[{_IN0.replace('TYPE_', '') % '[4]'},{_IN1}]"
    ),
    "booleans as text": _add_sub(
        extra=',"model_transaction_policy":{"decoupled":"no"},'
        '"dynamic_batching":{"preserve_ordering":"T"},"max_batch_size":4'
    ),
    "a boolean as other text": _add_sub(extra=',"model_transaction_policy":{"decoupled":"nope"}'),
    "floats that are not integers": _add_sub(
        extra=',"sequence_batching":{"control_input":[{"name":"START","control":'
        '[{"kind":"CONTROL_SEQUENCE_START","fp32_false_true":[0.1,2.25]}]}]}'
    ),
}


@pytest.mark.parametrize("override", list(OVERRIDES))
def test_config_override_read_as_triton_reads_it(
    real_triton_factory: Any, bundled_server_factory: Any, model_repo: Any, override: str
) -> None:
    repo = model_repo("special")
    servers = [real_triton_factory(repo, *ARGS), bundled_server_factory(repo, *ARGS)]
    body = j({"parameters": {"config": OVERRIDES[override]}})
    try:
        real, ours = (
            exchange(s.url, "POST", "/v2/repository/models/add_sub/load", body) for s in servers
        )
        assert _same(ours, real) is None, _same(ours, real)
        if real.status == 200:
            configs = [exchange(s.url, "GET", "/v2/models/add_sub/config") for s in servers]
            assert json.loads(configs[1].body) == json.loads(configs[0].body)
    finally:
        for s in servers:
            assert exchange(s.url, "POST", "/v2/repository/models/add_sub/load").status == 200
