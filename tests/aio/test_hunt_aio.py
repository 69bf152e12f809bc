"""Differences between tritonhttp.aio and tritonclient.http.aio, found by hunting; each
pinned side by side against a scripted local server (the request bytes as received)."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import httpx
import pytest
import tritonclient.http.aio as ref_aio
from client._scripted import ScriptedServer, answer_ok, serving

import tritonhttp
import tritonhttp.aio as aio


def _lines(request: bytes, pattern: bytes) -> list[bytes]:
    head = request.partition(b"\r\n\r\n")[0]
    return [line for line in head.split(b"\r\n") if re.match(pattern, line)]


async def _metadata(module: Any, url: str, **kw: Any) -> Any:
    http_client = httpx.AsyncClient() if kw.pop("httpx", False) else None
    extra = {"http_client": http_client} if http_client is not None else {}
    client = module.InferenceServerClient(url, **extra)
    try:
        return await client.get_server_metadata(**kw)
    finally:
        await client.close()
        if http_client is not None:
            await http_client.aclose()


def _sent(server: ScriptedServer, module: Any, url: str, pattern: bytes, **kw: Any) -> Any:
    """(the call's result, the matching lines of the request the server received)."""
    result = asyncio.run(_metadata(module, url, **kw))
    (request,) = server.take()
    return result, _lines(request, pattern)


# -- header values are written as UTF-8 --------------------------------------------------


@pytest.mark.parametrize("value", ["caf\u00e9", "\u20ac 5", "\u65e5\u672c", "ascii"])
@pytest.mark.parametrize("transport", ["pool", "httpx"])
def test_non_ascii_header_values_are_sent_as_utf8(value: str, transport: str) -> None:
    """aiohttp writes header values as UTF-8. Ours wrote latin-1 (``caf\\xe9``), and
    raised ``InferenceServerException`` for a value outside latin-1 (``€``); through a
    caller's httpx client it raised ``UnicodeEncodeError``."""
    headers = {"X-Note": value}
    with serving(answer_ok) as server:
        ours = _sent(
            server, aio, server.url, rb"X-Note:", headers=headers, httpx=transport == "httpx"
        )
        ref = _sent(server, ref_aio, server.url, rb"X-Note:", headers=headers)
    assert ours == ref == ({"name": "ok"}, [b"X-Note: " + value.encode()])


# -- a non-ASCII base path is percent-encoded ----------------------------------------------


@pytest.mark.parametrize("base", ["/b\u00e4se", "/\u20ac/x", "/ascii"])
def test_non_ascii_base_path_is_percent_encoded(base: str) -> None:
    """yarl percent-encodes the URL's path as UTF-8 (``/b%C3%A4se/v2``); ours sent the
    raw latin-1 byte in the request line (``/b\\xe4se/v2``, not HTTP) or raised for a
    character outside latin-1."""
    with serving(answer_ok) as server:
        url = server.url + base
        ours = _sent(server, aio, url, rb"GET ")
        ref = _sent(server, ref_aio, url, rb"GET ")
    assert ours == ref
    assert ours[1][0].isascii()


# -- documented differences (docs/migration.md) ---------------------------------------------


def test_list_header_values_are_repeated_lines() -> None:
    """Deliberate: as both sync clients do, a list value is sent as one header line per
    item; aiohttp sent ``str(list)`` as one value."""
    headers = {"X-A": ["a", "b"]}
    with serving(answer_ok) as server:
        ours = _sent(server, aio, server.url, rb"X-A:", headers=headers)
        ref = _sent(server, ref_aio, server.url, rb"X-A:", headers=headers)
    assert ours[1] == [b"X-A: a", b"X-A: b"]
    assert ref[1] == [b"X-A: ['a', 'b']"]


@pytest.mark.parametrize(
    ("query", "ours_line", "ref_line"),
    [
        ({}, b"GET /v2? HTTP/1.1", b"GET /v2 HTTP/1.1"),
        ({"p": "a/b?c"}, b"GET /v2?p=a%2Fb%3Fc HTTP/1.1", b"GET /v2?p=a/b?c HTTP/1.1"),
        ({"p": (1, 2)}, b"GET /v2?p=%281%2C+2%29 HTTP/1.1", b"GET /v2?p=(1,+2) HTTP/1.1"),
        ({"p": [1, "x y"]}, b"GET /v2?p=1&p=x+y HTTP/1.1", b"GET /v2?p=1&p=x+y HTTP/1.1"),
    ],
)
def test_query_strings_are_written_as_the_sync_clients_write_them(
    query: dict[str, Any], ours_line: bytes, ref_line: bytes
) -> None:
    """Deliberate: the query string is the sync clients' (``quote_plus`` of each value,
    a bare ``?`` for an empty dict); yarl re-normalised it (dropping an empty query,
    un-escaping ``/ ? ( ) ,``). The server decodes both to the same parameters."""
    with serving(answer_ok) as server:
        ours = _sent(server, aio, server.url, rb"GET ", query_params=query)
        ref = _sent(server, ref_aio, server.url, rb"GET ", query_params=query)
    assert ours == ({"name": "ok"}, [ours_line])
    assert ref == ({"name": "ok"}, [ref_line])


# -- credentials in the URL ------------------------------------------------------------------


async def _calls_with(module: Any, url: str, headers: Any) -> Any:
    client = module.InferenceServerClient(url)
    try:
        live = await client.is_server_live(headers=headers)
        config = await client.get_model_config("m", headers=headers)
        await client.unload_model("m", headers=headers)
        return live, config
    finally:
        await client.close()


@pytest.mark.parametrize(
    ("credentials", "expected"),
    [("user:pw", b"dXNlcjpwdw=="), ("u", b"dTo="), ("a%40b:p%3Aw", b"YUBiOnA6dw==")],
)
@pytest.mark.parametrize("headers", [None, {"X-A": "1"}])
def test_credentials_in_the_url_are_sent_as_basic_auth(
    credentials: str, expected: bytes, headers: Any
) -> None:
    """aiohttp turns ``user:password@`` in the URL into ``Authorization: Basic ...`` on
    every request (percent-decoded); ours dropped the credentials silently."""
    with serving(answer_ok) as server:
        url = f"{credentials}@{server.url}"
        results = []
        for module in (aio, ref_aio):
            results.append(asyncio.run(_calls_with(module, url, headers)))
            results.append([_lines(r, rb"(?i)authorization:") for r in server.take()])
    assert results[0] == results[2]
    assert results[1] == results[3] == [[b"Authorization: Basic " + expected]] * 3


def test_an_authorization_header_wins_over_url_credentials() -> None:
    """Deliberate: aiohttp raised ``ValueError`` when a call (or a plugin such as
    ``BasicAuth``) also set ``Authorization``; ours sends the call's header."""
    with serving(answer_ok) as server:
        url = f"user:pw@{server.url}"
        ours = _sent(server, aio, url, rb"(?i)authorization:", headers={"authorization": "T"})
        with pytest.raises(ValueError, match="Cannot combine AUTHORIZATION header"):
            asyncio.run(_metadata(ref_aio, url, headers={"authorization": "T"}))
    assert ours == ({"name": "ok"}, [b"authorization: T"])


@pytest.mark.parametrize("authority", ["user:pw@127.0.0.1", "LOCALHOST", "[::FFFF:127.0.0.1]"])
def test_verbose_prints_the_request_url_as_written(
    authority: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """tritonclient prints ``GET <scheme>://<url as given>/v2...``; ours printed the
    host lower-cased and without the credentials (the response line, aiohttp's
    normalised URL, is the same)."""
    with serving(answer_ok) as server:
        url = f"{authority}:{server.port}/base"
        printed = []
        for module in (aio, ref_aio):
            asyncio.run(_verbose_call(module, url))
            printed.append(capsys.readouterr().out.splitlines()[0])
            server.take()
    assert printed[0] == printed[1] == f"GET http://{url}/v2?a=b, headers {{}}"


async def _verbose_call(module: Any, url: str) -> Any:
    client = module.InferenceServerClient(url, verbose=True)
    try:
        return await client.get_server_metadata(query_params={"a": "b"})
    finally:
        await client.close()


# -- a query right after the host -------------------------------------------------------------


def test_a_query_right_after_the_host_follows_a_slash() -> None:
    """Both tritonclient clients sent ``GET /?q=1/v2`` for the URL ``host:port?q=1``;
    ours (sync and asyncio) sent ``GET ?q=1/v2``, not a valid request target."""
    with serving(answer_ok) as server:
        url = f"{server.url}?q=1"
        ours = _sent(server, aio, url, rb"GET ")
        ref = _sent(server, ref_aio, url, rb"GET ")
        sync = tritonhttp.InferenceServerClient(url)
        try:
            sync.get_server_metadata()
        finally:
            sync.close()
        (request,) = server.take()
    assert ours == ref == ({"name": "ok"}, [b"GET /?q=1/v2 HTTP/1.1"])
    assert _lines(request, rb"GET ") == [b"GET /?q=1/v2 HTTP/1.1"]
