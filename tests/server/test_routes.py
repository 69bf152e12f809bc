"""The front end's routing, through the ASGI application in-process (no socket).

Each case is one request and the answer Triton gives it: status, content type and exact
body. They cover what routing decides: unknown paths (404, which wins over everything),
wrong methods (405, as text or JSON depending on the endpoint), restricted API groups
(403, checked before the method), and model routes with and without a version.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tritonhttp.server import Server, parse_args
from tritonhttp.server.http._extensions import RESPOND

MODELS = Path(__file__).parent.parent / "models"

TEXT = "text/plain"
JSON = "application/json"
NOT_FOUND = (404, TEXT, b'{"error":"Not Found"}')
NOT_ALLOWED_TEXT = (405, TEXT, b'{"error":"Method Not Allowed"}')
NOT_ALLOWED_JSON = (405, JSON, b'{"error":"Method Not Allowed"}')
NOT_READY = (400, TEXT, b'{"error":"Model version not ready"}')

ADD = {
    "inputs": [
        {"name": "INPUT0", "datatype": "FP32", "shape": [4], "data": [1, 2, 3, 4]},
        {"name": "INPUT1", "datatype": "FP32", "shape": [4], "data": [1, 1, 1, 1]},
    ]
}
ADD_ANSWER = (
    b'{"model_name":"add_sub","model_version":"1","outputs":[{"name":"OUTPUT0",'
    b'"datatype":"FP32","shape":[4],"data":[2.0,3.0,4.0,5.0]},{"name":"OUTPUT1",'
    b'"datatype":"FP32","shape":[4],"data":[0.0,1.0,2.0,3.0]}]}'
)

#: (method, path, request headers) -> (status, content type, body)
Case = tuple[tuple[str, str, dict[str, str]], tuple[int, str, bytes]]

UNRESTRICTED: list[Case] = [
    # unknown paths, trailing pieces and malformed versions: 404 whatever the method
    (("GET", "/v3", {}), NOT_FOUND),
    (("GET", "/v2/", {}), NOT_FOUND),
    (("DELETE", "/v2/nothing", {}), NOT_FOUND),
    (("GET", "/v2/models/add_sub/", {}), NOT_FOUND),
    (("POST", "/v2/models/add_sub/infer/", {}), NOT_FOUND),
    (("GET", "/v2/health/ready/", {}), NOT_FOUND),
    (("GET", "/v2/health", {}), NOT_FOUND),
    (("GET", "/v2/models/add_sub/versions/x", {}), NOT_FOUND),
    (("GET", "/v2/models/add_sub/versions/", {}), NOT_FOUND),
    (("GET", "/v2/models/add_sub/versions/1/trace/setting", {}), NOT_FOUND),
    (("GET", "/v2/systemsharedmemory/region/r/remove", {}), NOT_FOUND),
    (("POST", "/v2/repository/models/add_sub/reload", {}), NOT_FOUND),
    # wrong methods: text on inference and health endpoints, JSON elsewhere
    (("GET", "/v2/models/add_sub/infer", {}), NOT_ALLOWED_TEXT),
    (("PUT", "/v2/models/add_sub/versions/1/infer", {}), NOT_ALLOWED_TEXT),
    (("POST", "/v2/models/add_sub/ready", {}), NOT_ALLOWED_TEXT),
    (("PUT", "/v2/health/live", {}), NOT_ALLOWED_TEXT),
    (("POST", "/v2/health/ready", {}), NOT_ALLOWED_TEXT),
    (("POST", "/v2", {}), NOT_ALLOWED_JSON),
    (("DELETE", "/v2/models/add_sub", {}), NOT_ALLOWED_JSON),
    (("POST", "/v2/models/add_sub/versions/1/config", {}), NOT_ALLOWED_JSON),
    (("POST", "/v2/models/stats", {}), NOT_ALLOWED_JSON),
    (("GET", "/v2/models/add_sub/generate", {}), NOT_ALLOWED_JSON),
    (("GET", "/v2/models/add_sub/generate_stream", {}), NOT_ALLOWED_JSON),
    (("PUT", "/v2/logging", {}), NOT_ALLOWED_JSON),
    (("DELETE", "/v2/trace/setting", {}), NOT_ALLOWED_JSON),
    (("PUT", "/v2/models/add_sub/trace/setting", {}), NOT_ALLOWED_JSON),
    (("GET", "/v2/repository/index", {}), NOT_ALLOWED_JSON),
    (("GET", "/v2/repository/models/add_sub/load", {}), NOT_ALLOWED_JSON),
    (("POST", "/v2/systemsharedmemory/status", {}), NOT_ALLOWED_JSON),
    (("GET", "/v2/systemsharedmemory/region/r/register", {}), NOT_ALLOWED_JSON),
    (("POST", "/v2/cudasharedmemory/region/r/status", {}), NOT_ALLOWED_JSON),
    (("GET", "/v2/cudasharedmemory/unregister", {}), NOT_ALLOWED_JSON),
    # model routes, without and with a version
    (("GET", "/v2/models/add_sub/ready", {}), (200, TEXT, b"")),
    (("GET", "/v2/models/add_sub/ready?verbose=1", {}), (200, TEXT, b"")),
    (("GET", "/v2/models/add_sub/versions/1/ready", {}), (200, TEXT, b"")),
    (("GET", "/v2/models/add_sub/versions/2/ready", {}), NOT_READY),
    (("GET", "/v2/models/nope/ready", {}), NOT_READY),
    (("GET", "/v2/models/stats/ready", {}), NOT_READY),  # a model named "stats"
    (
        ("GET", "/v2/models/add_sub/versions/99999999999999999999/ready", {}),
        (
            400,
            TEXT,
            b'{"error":"failed to get model version from specified version string \''
            b"99999999999999999999' (details: stol), version should be an integral value > 0\"}",
        ),
    ),
    (
        ("GET", "/v2/models/nope", {}),
        (404, JSON, b'{"error":"Request for unknown model: \'nope\' is not found"}'),
    ),
    (
        ("GET", "/v2/models/add_sub/versions/2", {}),
        (404, JSON, b'{"error":"Request for unknown model: \'add_sub\' version 2 is not found"}'),
    ),
    (
        ("GET", "/v2/models/add_sub/versions/2/config", {}),
        (404, JSON, b'{"error":"Request for unknown model: \'add_sub\' version 2 is not found"}'),
    ),
    (
        ("POST", "/v2/models/add_sub/versions/007/infer", {}),
        (404, TEXT, b'{"error":"Request for unknown model: \'add_sub\' version 7 is not found"}'),
    ),
    (("GET", "/v2/health/live", {}), (200, TEXT, b"")),
    (("GET", "/v2/health/ready", {}), (200, TEXT, b"")),
]

RESTRICTED_ARGS = (
    "--http-restricted-api=inference:infer-key=yes",
    "--http-restricted-api=health,model-repository:admin=1",
)
INFER_KEY = {"infer-key": "yes"}
ADMIN = {"admin": "1"}


def _restricted(header: str) -> tuple[int, str, bytes]:
    return (
        403,
        TEXT,
        b'{"error":"This API is restricted, expecting header \'%s\'"}' % (header.encode()),
    )


RESTRICTED: list[Case] = [
    # the restricted group's header is checked before the method, the path before both
    (("POST", "/v2/models/add_sub/infer", {}), _restricted("infer-key")),
    (("GET", "/v2/models/add_sub/infer", {}), _restricted("infer-key")),
    (("POST", "/v2/models/add_sub/infer", {"infer-key": "no"}), _restricted("infer-key")),
    (("GET", "/v2/models/add_sub/infer", INFER_KEY), NOT_ALLOWED_TEXT),
    (("POST", "/v2/models/add_sub/generate", {}), _restricted("infer-key")),
    (("GET", "/v2/models/add_sub/versions/1/generate_stream", {}), _restricted("infer-key")),
    (("POST", "/v2/models/add_sub/infer/", {}), NOT_FOUND),
    (("GET", "/v2/models/add_sub/versions/1/trace/setting", {}), NOT_FOUND),
    (("GET", "/v2/health/ready", {}), _restricted("admin")),
    (("PUT", "/v2/health/live", {}), _restricted("admin")),
    (("PUT", "/v2/health/live", ADMIN), NOT_ALLOWED_TEXT),
    (("GET", "/v2/health/ready", ADMIN), (200, TEXT, b"")),
    (("GET", "/v2/models/add_sub/versions/1/ready", {}), _restricted("admin")),
    (("GET", "/v2/models/add_sub/versions/1/ready", ADMIN), (200, TEXT, b"")),
    (("GET", "/v2/repository/index", {}), _restricted("admin")),
    (("GET", "/v2/repository/index", ADMIN), NOT_ALLOWED_JSON),
    (("POST", "/v2/repository/models/add_sub/unload", INFER_KEY), _restricted("admin")),
    # groups not restricted answer as usual
    (("POST", "/v2", {}), NOT_ALLOWED_JSON),
    (
        ("GET", "/v2/models/add_sub/versions/2", {"admin": "0"}),
        (404, JSON, b'{"error":"Request for unknown model: \'add_sub\' version 2 is not found"}'),
    ),
]


@contextlib.asynccontextmanager
async def _in_process(*argv: str) -> AsyncIterator[tuple[Server, httpx.AsyncClient]]:
    """A server started from ``argv`` (on ``MODELS``) and a client of its ASGI app."""
    server = Server(parse_args([f"--model-repository={MODELS}", *argv]))
    await server.load_models()
    try:
        transport = httpx.ASGITransport(app=server.http)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            yield server, client
    finally:
        await server.stop()


async def _answers(argv: tuple[str, ...], cases: list[Case]) -> list[tuple[int, str, bytes]]:
    """Each case's (status, content type, body) from a server started from ``argv``."""
    async with _in_process(*argv) as (_, client):
        out = []
        for (method, path, headers), _ in cases:
            r = await client.request(method, path, headers=headers)
            out.append((r.status_code, r.headers.get("content-type", ""), r.content))
        return out


EXPLICIT = ("--model-control-mode=explicit", "--load-model=add_sub")


def _check(argv: tuple[str, ...], cases: list[Case]) -> None:
    got = asyncio.run(_answers(argv, cases))
    wrong = [
        (request, expected, answer)
        for ((request, expected), answer) in zip(cases, got, strict=True)
        if answer != expected
    ]
    assert not wrong, "\n".join(f"{r}: expected {e}, got {a}" for r, e, a in wrong)


def test_route_answers_without_restrictions() -> None:
    _check(EXPLICIT, UNRESTRICTED)


def test_restricted_api_groups_are_checked_before_methods() -> None:
    _check(EXPLICIT + RESTRICTED_ARGS, RESTRICTED)


@pytest.mark.parametrize("version", ["", "/versions/1"])
def test_model_routes_with_and_without_version(version: str) -> None:
    async def go() -> None:
        async with _in_process(*EXPLICIT) as (_, c):
            base = "/v2/models/add_sub"
            r = await c.post(base + version + "/infer", json=ADD)
            assert (r.status_code, r.content) == (200, ADD_ANSWER)
            plain, versioned = await c.get(base), await c.get(base + version)
            assert versioned.status_code == 200
            assert versioned.content == plain.content
            assert versioned.json()["name"] == "add_sub"
            r = await c.get(base + version + "/config")
            assert (r.status_code, r.json()["name"]) == (200, "add_sub")
            r = await c.get(base + version + "/stats")
            assert r.status_code == 200
            assert [(s["name"], s["version"]) for s in r.json()["model_stats"]] == [
                ("add_sub", "1")
            ]
            r = await c.get("/v2/models/stats")
            assert [(s["name"], s["version"]) for s in r.json()["model_stats"]] == [
                ("add_sub", "1")
            ]
            r = await c.get("/v2/models/add_sub/trace/setting")
            assert (r.status_code, r.json()["trace_level"]) == (200, ["OFF"])
            r = await c.get("/v2")
            assert (r.status_code, r.json()["name"]) == (200, "triton")

    asyncio.run(go())


def test_head_is_not_allowed() -> None:
    """HEAD is a method like any other to the routes: 405 (the HTTP server omits the body
    on the wire)."""
    cases: list[Case] = [
        (("HEAD", "/v2/models/add_sub", {}), (405, JSON, b"")),
        (("HEAD", "/v2/health/ready", {}), (405, TEXT, b"")),
        (("HEAD", "/v2/nothing", {}), (404, TEXT, b"")),
    ]
    _check(EXPLICIT, cases)


BINARY_ADD = {**ADD, "parameters": {"binary_data_output": True}}


@pytest.mark.parametrize("request_json", [ADD, BINARY_ADD], ids=["json", "binary"])
def test_an_uncompressed_infer_answer_is_one_respond_call(request_json: dict[str, Any]) -> None:
    """Where the HTTP server offers ``respond``, an infer answer, JSON or binary, is made
    in one call (one write): the same status, headers and bytes as through ASGI
    ``send``; a client that accepts compression gets the general path."""
    body = json.dumps(request_json).encode()

    async def go() -> None:
        async with _in_process(*EXPLICIT) as (server, c):
            plain = await c.post("/v2/models/add_sub/infer", content=body)
            for accept, expect_calls in ((b"", 1), (b"gzip", 0)):
                calls: list[tuple[Any, ...]] = []
                sent: list[dict[str, Any]] = []
                scope = _infer_scope(accept)
                scope[RESPOND] = lambda *a, _calls=calls: _calls.append(a)
                await server.http(scope, _body_once(body), _collect(sent))
                assert len(calls) == expect_calls
                if not calls:
                    assert sent[0]["type"] == "http.response.start"
                    continue
                status, content_type, out, *extra = calls[0]
                parts = [out] if isinstance(out, bytes) else out
                headers = dict(extra[0]) if extra else {}
                assert not sent
                assert status == plain.status_code == 200
                assert content_type.decode() == plain.headers["content-type"]
                assert b"".join(bytes(p) for p in parts) == plain.content
                assert headers == {
                    k.encode(): v.encode()
                    for k, v in plain.headers.items()
                    if k == "inference-header-content-length"
                }

    asyncio.run(go())


def _infer_scope(accept: bytes) -> dict[str, Any]:
    headers = [(b"content-type", b"application/json")]
    if accept:
        headers.append((b"accept-encoding", accept))
    path = "/v2/models/add_sub/infer"
    return {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": path, "raw_path": path.encode(), "root_path": "",
        "query_string": b"", "headers": headers, "server": None, "client": None,
    }  # fmt: skip


def _body_once(body: bytes) -> Any:
    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    return receive


def _collect(sent: list[dict[str, Any]]) -> Any:
    async def send(message: dict[str, Any]) -> None:
        sent.append(dict(message))

    return send
