"""JSON nested deeper than the parser goes: a clear error on every endpoint that reads a
JSON body, the server unharmed.

Real Triton's RapidJSON reads any depth (and real Triton 2.51 crashes on ``data`` nested
100,000 deep); ours refuses past about a thousand levels as it refuses any syntax error.
What both parse, both answer alike (``test_differential.py``, the ``deep-*`` cases).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tritonhttp.server.core._errors import CoreError
from tritonhttp.server.front._http import parse_body, parse_json

from ._wire import exchange

MODELS = Path(__file__).parent.parent / "models"

LEVELS = 100_000
ARRAYS = b"[" * LEVELS + b"]" * LEVELS
OBJECTS = b'{"a":' * LEVELS + b"1" + b"}" * LEVELS
IN_DATA = b'{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[4],"data":' + ARRAYS + b"}]}"
TOO_DEEP = "failed to parse the request JSON buffer: arrays and objects nested too deeply. at "

#: every endpoint that reads a JSON body (unload, as in Triton, ignores its body)
PATHS = [
    "/v2/models/add_sub/infer",
    "/v2/models/add_sub/generate",
    "/v2/models/add_sub/generate_stream",
    "/v2/repository/index",
    "/v2/repository/models/add_sub/load",
    "/v2/trace/setting",
    "/v2/models/add_sub/trace/setting",
    "/v2/logging",
    "/v2/systemsharedmemory/region/r/register",
    "/v2/cudasharedmemory/region/r/register",
]


def _offset(text: bytes, first_wins: bool) -> int:
    with pytest.raises(CoreError) as caught:
        parse_json(text, first_wins=first_wins)
    message = str(caught.value)
    assert message.startswith(TOO_DEEP), message
    return int(message.rsplit(" ", 1)[-1])


@pytest.mark.parametrize("first_wins", [False, True])
@pytest.mark.parametrize("text", [ARRAYS, OBJECTS], ids=["arrays", "objects"])
def test_parse_refuses_as_a_syntax_error(text: bytes, first_wins: bool) -> None:
    at = _offset(text, first_wins)
    assert 900 < at < len(text) // 2  # where the parser gave up, inside the nest
    assert _offset(b"\xef\xbb\xbf" + text, first_wins) == at + 3  # counted from the body's start


def test_what_the_parser_reaches_parses() -> None:
    doc: Any = parse_body(b"[" * 500 + b"]" * 500)
    depth = 0
    while doc:
        doc, depth = doc[0], depth + 1
    assert depth == 499  # the innermost list is empty


@pytest.fixture(scope="module")
def server(bundled_server_factory: Any) -> Any:
    """Ours with explicit model control (load and unload read their bodies)."""
    return bundled_server_factory(MODELS, "--model-control-mode=explicit", "--load-model=*")


@pytest.mark.parametrize("body", [ARRAYS, OBJECTS, IN_DATA], ids=["arrays", "objects", "data"])
@pytest.mark.parametrize("path", PATHS)
def test_every_json_endpoint_answers_a_clear_error(server: Any, path: str, body: bytes) -> None:
    reply = exchange(server.url, "POST", path, body)
    assert reply.status in (400, 500), reply.body[:300]
    error = json.loads(reply.body)["error"]
    assert "RecursionError" not in error and "internal server error" not in error
    if reply.status == 500:
        assert error.startswith(TOO_DEEP), error
    ready = exchange(server.url, "GET", "/v2/models/add_sub/ready", b"")
    assert ready.status == 200
