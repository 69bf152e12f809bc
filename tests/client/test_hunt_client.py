"""Differences a migrating user would hit, found by hunting; each pinned side by side.

Every test calls tritonhttp (and tritonhttp.aio) and tritonclient.http (and its aio
client) the same way and compares what comes back, against a scripted local server
where a server is needed.
"""

from __future__ import annotations

import asyncio
import socket
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import tritonclient.http as ref_http
import tritonclient.http.aio as ref_aio
import tritonclient.utils as ref_utils

import tritonhttp
import tritonhttp.aio as aio
import tritonhttp.utils

from ._scripted import ScriptedServer, serving


def _exception_form(e: BaseException) -> tuple[Any, ...]:
    assert isinstance(e, (tritonhttp.InferenceServerException, ref_http.InferenceServerException))
    return (str(e), e.message(), e.status(), e.debug_details())


# -- an error answer whose "error" is null ------------------------------------------------

_NULL_ERROR = b'{"error":null}'


def _answer_null_error(conn: socket.socket, index: int, request: bytes) -> bool:
    conn.sendall(
        b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: %d\r\n\r\n%s"
        % (len(_NULL_ERROR), _NULL_ERROR)
    )
    return True


@pytest.fixture(scope="module")
def null_error_server() -> Iterator[ScriptedServer]:
    with serving(_answer_null_error) as server:
        yield server


def _infer_inputs(module: Any) -> list[Any]:
    tensor = module.InferInput("IN", [2], "FP32")
    tensor.set_data_from_numpy(np.array([1, 2], np.float32))
    return [tensor]


_SYNC_CALLS = {
    "get_server_metadata": lambda m, c: c.get_server_metadata(),
    "get_model_config": lambda m, c: c.get_model_config("m"),
    "load_model": lambda m, c: c.load_model("m"),
    "infer": lambda m, c: c.infer("m", _infer_inputs(m)),
}


@pytest.mark.parametrize("call", sorted(_SYNC_CALLS))
def test_null_error_message_reads_like_tritonclient(
    null_error_server: ScriptedServer, call: str
) -> None:
    """``{"error": null}`` with an error status: tritonclient's ``str(e)`` is
    ``"[500] "``; ours showed the constructor's arguments, ``"[500] (None, '500', None)"``."""
    forms = []
    for module in (tritonhttp, ref_http):
        client = module.InferenceServerClient(null_error_server.url)
        try:
            with pytest.raises(module.InferenceServerException) as info:
                _SYNC_CALLS[call](module, client)
        finally:
            client.close()
        forms.append(_exception_form(info.value))
    assert forms[0] == forms[1] == ("[500] ", None, "500", None)


def test_null_error_message_reads_like_tritonclient_aio(null_error_server: ScriptedServer) -> None:
    async def call(module: Any) -> tuple[Any, ...]:
        client = module.InferenceServerClient(null_error_server.url)
        try:
            await client.infer("m", _infer_inputs(module))
        except Exception as e:
            return _exception_form(e)
        finally:
            await client.close()
        raise AssertionError("no exception")

    assert asyncio.run(call(aio)) == asyncio.run(call(ref_aio)) == ("[500] ", None, "500", None)


# -- BYTES tensors given as a numpy subclass ----------------------------------------------


def _matrix(rows: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PendingDeprecationWarning)  # np.matrix is discouraged
        return np.matrix(rows, dtype=object)


_SUBCLASS_BYTES = [
    _matrix([[b"a", b"bc"]]),
    _matrix([[b"a"], ["\u00e9"]]),
    np.ma.masked_array(np.array([b"a", b"bc"]), mask=[0, 1]),
    np.ma.masked_array(np.array([b"a", "bc", 3], dtype=object), mask=[0, 1, 0]),
    np.ma.masked_array(np.array([[b"x", b"y"]], dtype=object), mask=True),
]
_SUBCLASS_IDS = ["matrix", "matrix-column", "masked-S", "masked-object", "all-masked"]


def _outcome(fn: Any) -> tuple[Any, ...]:
    try:
        value = fn()
    except Exception as e:
        return ("raised", type(e).__name__, str(e))
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape, value.tolist())
    return ("returned", value)


@pytest.mark.parametrize("array", _SUBCLASS_BYTES, ids=_SUBCLASS_IDS)
@pytest.mark.parametrize("binary", [True, False])
def test_bytes_subclass_arrays_send_their_elements(array: Any, binary: bool) -> None:
    """tritonclient walks a BYTES array with ``np.nditer``: a masked array's stored
    elements and a matrix element by element. Ours sent a masked element as ``b"None"``
    (or failed) and a whole matrix row as one element, ``b"[b'a', b'bc']"``."""
    forms = []
    for module in (tritonhttp, ref_http):
        tensor = module.InferInput("I", list(array.shape), "BYTES")
        tensor.set_data_from_numpy(array, binary_data=binary)
        raw = tensor._get_binary_data()
        forms.append((tensor._get_tensor(), None if raw is None else bytes(raw)))
    assert forms[0] == forms[1]


@pytest.mark.parametrize("array", _SUBCLASS_BYTES, ids=_SUBCLASS_IDS)
@pytest.mark.parametrize("function", ["serialize_byte_tensor", "serialized_byte_size"])
def test_bytes_subclass_arrays_in_utils(array: Any, function: str) -> None:
    ours = _outcome(lambda: getattr(tritonhttp.utils, function)(array))
    ref = _outcome(lambda: getattr(ref_utils, function)(array))
    assert ours == ref


# -- documented differences (docs/migration.md) ---------------------------------------------


def _record(conn: socket.socket, index: int, request: bytes) -> bool:
    header = b'{"model_name":"m","outputs":[]}'
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(header), header))
    return True


def test_inputs_given_as_a_generator_are_sent_whole() -> None:
    """Deliberate: tritonclient iterated ``inputs`` twice, so a generator's binary data
    was announced in the header but never sent; ours reads it once and sends all."""
    with serving(_record) as server:
        bodies = []
        for module in (tritonhttp, ref_http):
            client = module.InferenceServerClient(server.url)
            try:
                client.infer("m", (tensor for tensor in _infer_inputs(module)))
            finally:
                client.close()
            bodies.append(server.take()[-1].partition(b"\r\n\r\n")[2])
    data = np.array([1, 2], np.float32).tobytes()
    assert bodies[0] == bodies[1] + data  # the same header; only ours carries the data
    ours = tritonhttp.InferenceServerClient.generate_request_body(iter(_infer_inputs(tritonhttp)))
    ref = ref_http.InferenceServerClient.generate_request_body(iter(_infer_inputs(ref_http)))
    assert ours == (ref[0] + data, len(ref[0])) and ref[1] is None


def _redirect(conn: socket.socket, index: int, request: bytes) -> bool:
    conn.sendall(b"HTTP/1.1 308 Permanent Redirect\r\nLocation: /v2\r\nContent-Length: 0\r\n\r\n")
    return True


def test_aio_redirects_are_not_followed() -> None:
    """Deliberate: aiohttp followed redirects (here into a loop: ``TooManyRedirects``);
    tritonhttp.aio reports the 3xx answer, as both sync clients do."""

    async def call(module: Any, url: str) -> Any:
        client = module.InferenceServerClient(url)
        try:
            return await client.get_server_metadata()
        except Exception as e:
            return e
        finally:
            await client.close()

    with serving(_redirect) as server:
        ours = asyncio.run(call(aio, server.url))
        ref = asyncio.run(call(ref_aio, server.url))
        sync = tritonhttp.InferenceServerClient(server.url)
        try:
            with pytest.raises(tritonhttp.InferenceServerException) as info:
                sync.get_server_metadata()
        finally:
            sync.close()
    assert type(ref).__name__ == "TooManyRedirects"
    assert isinstance(ours, aio.InferenceServerException)
    assert _exception_form(ours) == _exception_form(info.value)
    assert str(ours) == "[308] client received an empty response from the server."
