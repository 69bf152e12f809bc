"""The sans-IO core on its own: bytes in, bytes out, no sockets.

Reference behaviour comes from tritonclient's and geventhttpclient's own helpers run on
the same input.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import rapidjson
import tritonclient.http as ref_http
from geventhttpclient.url import URL
from hypothesis import given, settings
from hypothesis import strategies as st
from tritonclient.http import _utils as ref_utils

import tritonhttp
from tritonhttp import _errors
from tritonhttp._protocol import (
    ResponseReader,
    encode_request_head,
    error_for,
    header_fields,
    parse_server_url,
    query_string,
)
from tritonhttp._protocol._json import dumps

RESPONSE = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Dup: 1\r\nx-dup: 2\r\n"
    b'Content-Length: 11\r\n\r\n{"a":[1,2]}'
)


def read_all(chunks: list[bytes], use_window: bool) -> Any:
    reader = ResponseReader()
    pending = b"".join(chunks)
    for chunk in chunks:
        if reader.complete:
            break
        window = reader.body_window() if use_window else None
        if window is not None:
            n = min(len(window), len(pending))
            window[:n] = pending[:n]
            reader.body_received(n)
            pending = pending[n:]
            continue
        reader.feed(chunk)
        pending = pending[len(chunk) :]
    while not reader.complete and use_window and pending:
        window = reader.body_window()
        assert window is not None
        n = min(len(window), len(pending))
        window[:n] = pending[:n]
        reader.body_received(n)
        pending = pending[n:]
    assert reader.complete
    return reader.response()


@pytest.mark.parametrize("use_window", [False, True])
@pytest.mark.parametrize("split", [1, 3, 7, 64, 10_000])
def test_reader_handles_any_split(split: int, use_window: bool) -> None:
    chunks = [RESPONSE[i : i + split] for i in range(0, len(RESPONSE), split)]
    response = read_all(chunks, use_window)
    assert response.status == 200
    assert bytes(response.body) == b'{"a":[1,2]}'
    assert response.get("content-type") == "application/json"
    assert response.get("X-DUP") == "2"
    assert response.keep_alive
    assert repr(response).startswith("<HTTPSocketPoolResponse status=200 headers={")
    assert not response.body.readonly


def test_reader_large_body_goes_into_a_numpy_buffer() -> None:
    size = 3 << 20
    reader = ResponseReader()
    reader.feed(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\nab" % size)
    window = reader.body_window()
    assert window is not None and len(window) == size - 2
    window[:] = b"c" * (size - 2)
    reader.body_received(size - 2)
    assert reader.complete
    body = reader.response().body
    assert bytes(body[:3]) == b"abc" and len(body) == size
    assert isinstance(body.obj, np.ndarray)


def test_reader_connection_close_and_http10() -> None:
    reader = ResponseReader()
    reader.feed(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
    assert reader.complete and not reader.response().keep_alive
    reader = ResponseReader()
    reader.feed(b"HTTP/1.0 204 No Content\r\n\r\n")
    assert reader.complete and reader.response().status == 204


def test_reader_errors() -> None:
    reader = ResponseReader()
    with pytest.raises(_errors.ProtocolError):
        reader.feed(b"HTTP/1.1 abc\r\n\r\n")
    reader = ResponseReader()
    with pytest.raises(ConnectionResetError):
        reader.eof()
    reader = ResponseReader()
    reader.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab")
    with pytest.raises(ConnectionResetError, match="middle"):
        reader.eof()


# -- request heads -----------------------------------------------------------------------


def test_header_layout() -> None:
    fields = header_fields(
        "ua/1",
        {"content-encoding": "x", "X-A": 1, "Content-Encoding": "gzip", "X-L": ["a", "b"],
         "Content-Length": "999", "HOST": "h"},
        "127.0.0.1:1",
        12,
    )  # fmt: skip
    assert fields == [
        ("User-Agent", "ua/1"),
        ("Content-Encoding", "gzip"),
        ("X-A", "1"),
        ("X-L", "a"),
        ("X-L", "b"),
        ("HOST", "h"),
        ("Content-Length", "12"),
    ]
    assert header_fields("ua", None, "h:1", None) == [("User-Agent", "ua"), ("Host", "h:1")]
    head = encode_request_head("GET", "/v2", [("Host", "h")])
    assert head == b"GET /v2 HTTP/1.1\r\nHost: h\r\n\r\n"


@pytest.mark.parametrize(
    "headers",
    [{"X": "a\nb"}, {"X": "a\rb"}, {"X": "\x00"}, {"Bad Name": "1"}, {"": "1"}, {1: "x"}],
)
def test_header_injection_is_refused(headers: dict[Any, Any]) -> None:
    with pytest.raises(ValueError) as info:
        header_fields("ua", headers, "h", None)
    assert isinstance(info.value, tritonhttp.InferenceServerException)


def test_non_latin1_header_values_are_refused() -> None:
    with pytest.raises(ValueError, match="latin-1"):
        encode_request_head("GET", "/", [("X", "\u20ac")])


# -- URLs and query strings --------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "localhost:8000",
        "LocalHost:8000/base/x/",
        "[::1]:8000/a",
        "gw/triton/a",
        "h:80/p?q=1",
        "h:8000//",
    ],
)
@pytest.mark.parametrize("ssl", [False, True])
def test_server_url_parsing_matches_geventhttpclient(url: str, ssl: bool) -> None:
    ref = URL(("https://" if ssl else "http://") + url)
    ours = parse_server_url(url, ssl)
    assert (ours.host, ours.port, ours.base_path) == (
        ref.host,
        ref.port,
        ref.request_uri.rstrip("/"),
    )


@pytest.mark.parametrize(
    "url", ["http://h:1", "https://h", ":80", "h:notaport", "h:1/a b", " h:1", "a b:1", "h\x7f:1"]
)
def test_bad_server_urls(url: str) -> None:
    with pytest.raises(tritonhttp.InferenceServerException):
        parse_server_url(url, False)


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.text(max_size=5),
        st.one_of(
            st.text(max_size=5),
            st.integers(),
            st.booleans(),
            st.none(),
            st.lists(st.one_of(st.text(max_size=3), st.integers()), max_size=3),
        ),
        max_size=4,
    )
)
def test_query_string_matches_tritonclient(params: dict[str, Any]) -> None:
    assert query_string(params) == ref_utils._get_query_string(params)


# -- error mapping -----------------------------------------------------------------------


class FakeResponse:
    """The two things tritonclient's error mapping reads."""

    def __init__(self, status: int, body: bytes) -> None:
        self.status_code = status
        self._body = body

    def read(self) -> bytes:
        return self._body


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (200, b""),
        (400, b'{"error":"bad input"}'),
        (404, b""),
        (500, b"not json"),
        (503, b'{"message":"no error key"}'),
        (400, b"[1,2]"),
        (502, b"\xff\xfe"),
        (201, b'{"error":"created is not 200"}'),
        (400, b'{"error":"caf\xc3\xa9"}'),
    ],
)
def test_error_mapping_matches_tritonclient(status: int, body: bytes) -> None:
    ours = error_for(status, memoryview(bytearray(body)))
    ref = ref_utils._get_error(FakeResponse(status, body))
    if ref is None:
        assert ours is None
        return
    assert ours is not None
    assert (str(ours), ours.status(), ours.message(), ours.debug_details()) == (
        str(ref),
        ref.status(),
        ref.message(),
        ref.debug_details(),
    )
    assert isinstance(ours, _errors.ServerError)


# -- JSON --------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(
    st.recursive(
        st.one_of(
            st.none(),
            st.booleans(),
            st.integers(),
            st.floats(allow_nan=True, allow_infinity=True),
            st.text(),
        ),
        lambda children: (
            st.lists(children, max_size=4)
            | st.dictionaries(st.text(max_size=4), children, max_size=4)
        ),
        max_leaves=20,
    )
)
def test_json_is_rapidjson(value: Any) -> None:
    assert dumps(value) == rapidjson.dumps(value)
    assert dumps(value).isascii()


def test_json_accepts_numpy_values() -> None:
    assert dumps({"s": [np.int64(2), np.int32(3)], "f": np.float32(0.5), "b": np.bool_(True)}) == (
        '{"s":[2,3],"f":0.5,"b":true}'
    )
    assert dumps(np.arange(3)) == "[0,1,2]"
    with pytest.raises(TypeError, match="not JSON serializable"):
        dumps({"x": object()})


# -- InferResult from any response-like object -------------------------------------------


class ReadableResponse:
    """Like geventhttpclient's response: get(header) and read([length])."""

    def __init__(self, body: bytes, headers: dict[str, str]) -> None:
        self.body, self.headers, self.offset = body, headers, 0

    def get(self, name: str) -> str | None:
        return self.headers.get(name)

    def read(self, length: int = -1) -> bytes:
        start = self.offset
        self.offset = len(self.body) if length == -1 else start + length
        return self.body[start : self.offset]


def test_infer_result_from_a_response_object() -> None:
    header = (
        b'{"outputs":[{"name":"O","datatype":"INT32","shape":[2],'
        b'"parameters":{"binary_data_size":8}}]}'
    )
    body = header + np.array([5, 6], np.int32).tobytes()
    headers = {"Inference-Header-Content-Length": str(len(header))}
    ours = tritonhttp.InferResult(ReadableResponse(body, headers), False)
    ref = ref_http.InferResult(ReadableResponse(body, headers), False)
    assert ours.get_response() == ref.get_response()
    assert ours.as_numpy("O").tolist() == ref.as_numpy("O").tolist() == [5, 6]
