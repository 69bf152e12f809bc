"""Robustness of the production features (several servers, retries, cancellation) under
bad input: a clear error at construction, never a crash or a hang later on."""

from __future__ import annotations

import asyncio
import math
import socket
import threading
import time
from typing import Any

import numpy as np
import pytest

import tritonhttp
import tritonhttp.aio
from tritonhttp._errors import ClientClosedError, ConnectError, RequestCancelled
from tritonhttp._routing import ServerSet, retry_after

from ._scripted import OK_JSON, answer_ok, closed_port, serving

Error = tritonhttp.InferenceServerException


def _inputs() -> list[tritonhttp.InferInput]:
    x = tritonhttp.InferInput("IN", [1], "INT32")
    x.set_data_from_numpy(np.array([1], dtype=np.int32))
    return [x]


def _busy(retry_after_value: bytes) -> bytes:
    return (
        b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: "
        + retry_after_value
        + b'\r\nContent-Length: 16\r\n\r\n{"error":"busy"}'
    )


# --------------------------------------------------------------- constructor arguments


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"backoff_factor": math.nan}, "backoff_factor must be a finite number"),
        ({"backoff_factor": math.inf}, "backoff_factor must be a finite number"),
        ({"backoff_max": math.nan}, "backoff_max must be a finite number"),
        ({"backoff_max": math.inf}, "backoff_max must be a finite number"),
        ({"statuses": ["abc"]}, "statuses must be HTTP status codes"),
        ({"statuses": ["503"]}, "statuses must be HTTP status codes"),
        ({"statuses": [503.5]}, "statuses must be HTTP status codes"),
        ({"statuses": [True]}, "statuses must be HTTP status codes"),
        ({"statuses": [99999]}, "statuses must be HTTP status codes"),
        ({"statuses": None}, "statuses must be a collection"),
        ({"statuses": 503}, "statuses must be a collection"),
        ({"methods": None}, "methods must be a collection"),
        ({"methods": [["infer"]]}, "methods must be a collection"),
        ({"methods": [1, "infer", "x"]}, "unknown client methods"),
    ],
)
def test_bad_retry_settings_are_refused_with_a_clear_error(
    kwargs: dict[str, Any], match: str
) -> None:
    """NaN or infinite back-offs were accepted (then time.sleep(nan) raised ValueError,
    or Retry-After could make a call sleep for hours); statuses that are not ints
    raised a bare ValueError/TypeError, or were silently converted ('503', 503.5,
    True as 1); methods None or unhashable raised a bare TypeError."""
    with pytest.raises(Error, match=match):
        tritonhttp.Retry(**kwargs)


@pytest.mark.parametrize(
    "client", [tritonhttp.InferenceServerClient, tritonhttp.aio.InferenceServerClient]
)
@pytest.mark.parametrize(
    "backoff", [(math.nan, 1.0), (1.0, math.nan), (1.0, math.inf), (math.inf, math.inf), "12"]
)
def test_bad_server_backoff_is_refused(client: Any, backoff: Any) -> None:
    """A NaN back-off set a failed server aside for ever (``now >= nan`` never holds),
    and the string "12" was read as (1.0, 2.0)."""
    with pytest.raises(Error, match="server_backoff"):
        client(["a:1", "b:2"], server_backoff=backoff)


@pytest.mark.parametrize(
    "client", [tritonhttp.InferenceServerClient, tritonhttp.aio.InferenceServerClient]
)
def test_a_server_list_with_an_item_that_is_not_a_string_is_refused(client: Any) -> None:
    """It raised AttributeError: 'int' object has no attribute 'startswith'."""
    with pytest.raises(Error, match="must be a 'host:port' string, got 8001 at index 1"):
        client(["a:1", 8001])
    with pytest.raises(Error, match="got None at index 2"):
        client(["a:1", "b:2", None])


# --------------------------------------------------------------------- Retry-After


def test_retry_after_values() -> None:
    assert retry_after("7") == 7.0
    assert retry_after(" 7 ") == 7.0
    for garbage in ("²", "¹²", "-3", "1.5", "abc", "", None, "Wed, 32 Oct 2015 07:28:00 GMT"):
        assert retry_after(garbage) is None, garbage
    assert retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # in the past
    # huge values are bounded by backoff_max
    retry = tritonhttp.Retry(backoff_max=2.0)
    assert retry.backoff(1, retry_after("99999999999999999999999")) == 2.0
    assert retry.backoff(1, retry_after("Fri, 31 Dec 9999 23:59:59 GMT")) == 2.0


def _busy_then_ok() -> Any:
    def handler(conn: socket.socket, index: int, request: bytes) -> bool:
        conn.sendall(_busy(b"\xb2") if index == 0 else OK_JSON)  # 'Retry-After: ²'
        return True

    return handler


def test_a_retry_after_of_unicode_digits_is_ignored_sync() -> None:
    """str.isdigit() holds for '²', which float() refuses: the call raised ValueError."""
    with serving(_busy_then_ok()) as server:
        retry = tritonhttp.Retry(2, backoff_factor=0.01)
        with tritonhttp.InferenceServerClient(server.url, retries=retry) as client:
            assert client.get_server_metadata() == {"name": "ok"}
        assert len(server.take()) == 2


def test_a_retry_after_of_unicode_digits_is_ignored_aio() -> None:
    async def main(url: str) -> Any:
        retry = tritonhttp.Retry(2, backoff_factor=0.01)
        async with tritonhttp.aio.InferenceServerClient(url, retries=retry) as client:
            return await client.get_server_metadata()

    with serving(_busy_then_ok()) as server:
        assert asyncio.run(main(server.url)) == {"name": "ok"}
        assert len(server.take()) == 2


# ---------------------------------------------------------------- long-lived failures


def test_a_server_that_failed_more_than_1024_times_is_still_set_aside() -> None:
    """The back-off was ``backoff * 2 ** (failures - 1)``: from the 1025th failure on,
    OverflowError (int too large to convert to float) out of every call."""
    servers = ServerSet(2, "round_robin", 0.001, 0.002)
    for _ in range(1100):
        servers.failed(0)
    assert servers.set_aside() == [0]
    retry = tritonhttp.Retry(10**9, backoff_factor=0.1, backoff_max=3.0)
    assert retry.backoff(1100) == 3.0
    assert retry.backoff(10**6) == 3.0


def test_calls_to_servers_that_are_all_down_keep_raising_connect_errors() -> None:
    """Every call tries every set-aside server and counts a failure for each: the
    1025th call with all servers down raised OverflowError, and so did every later
    one (``is_server_live()`` too, instead of returning False)."""
    down = [f"127.0.0.1:{closed_port()}", f"127.0.0.1:{closed_port()}"]
    with tritonhttp.InferenceServerClient(down) as client:
        client._servers.failed(0)
        for state in client._servers._states:  # as after 1100 calls
            state.failures = 1100
        with pytest.raises(ConnectError):
            client.get_server_metadata()
        assert client.is_server_live() is False


# -------------------------------------------------------------------- cancellation


def test_cancel_during_a_retry_back_off_ends_the_request_at_once() -> None:
    """The back-off slept on (here the server's Retry-After, 5 s) before the request
    noticed it had been cancelled."""

    def busy(conn: socket.socket, index: int, request: bytes) -> bool:
        conn.sendall(_busy(b"5"))
        return True

    with serving(busy) as server:
        retry = tritonhttp.Retry(3, backoff_max=5.0, methods={"infer"})
        client = tritonhttp.InferenceServerClient(server.url, retries=retry)
        try:
            request = client.async_infer("m", _inputs())
            deadline = time.monotonic() + 5
            while not server.requests and time.monotonic() < deadline:
                time.sleep(0.01)
            time.sleep(0.1)  # the 503 is read: the request waits out its back-off
            t0 = time.monotonic()
            assert request.cancel() is True
            with pytest.raises(RequestCancelled):
                request.get_result(timeout=10)
            assert time.monotonic() - t0 < 2.0
            assert len(server.take()) == 1  # never sent again
            assert request.cancel() is False  # it is over now
        finally:
            t0 = time.monotonic()
            client.close()
            assert time.monotonic() - t0 < 2.0


def test_cancel_at_any_moment_of_a_retried_request_ends_it_soon() -> None:
    """cancel() while the request is queued, on the wire or waiting out a back-off
    (the server's Retry-After: 3 s): get_result raises RequestCancelled well before
    that back-off would have ended."""

    def busy(conn: socket.socket, index: int, request: bytes) -> bool:
        conn.sendall(_busy(b"3"))
        return True

    with serving(busy) as server:
        retry = tritonhttp.Retry(5, backoff_max=3.0, methods={"infer"})
        with tritonhttp.InferenceServerClient(server.url, retries=retry) as client:
            for delay in (0.0, 0.001, 0.005, 0.02, 0.05):
                request = client.async_infer("m", _inputs())
                time.sleep(delay)
                t0 = time.monotonic()
                request.cancel()
                with pytest.raises(RequestCancelled):
                    request.get_result(timeout=10)
                assert time.monotonic() - t0 < 1.5, delay


# retries=0: sent from the caller's thread (poll() waits); 1: by a thread (a lock waits)
@pytest.mark.parametrize(
    ("retries", "timeout"), [(0, math.inf), (1, math.inf), (0, 1e10), (1, 1e10)]
)
def test_get_result_with_an_endless_timeout_waits_for_the_result(
    retries: int, timeout: float
) -> None:
    """``get_result(timeout=inf)`` raised OverflowError (poll() takes an int of
    milliseconds, a lock at most threading.TIMEOUT_MAX seconds)."""

    def slow(conn: socket.socket, index: int, request: bytes) -> bool:
        time.sleep(0.1)
        return answer_ok(conn, index, request)

    with (
        serving(slow) as server,
        tritonhttp.InferenceServerClient(server.url, retries=retries) as client,
    ):
        request = client.async_infer("m", _inputs())
        assert isinstance(request.get_result(timeout=timeout), tritonhttp.InferResult)


def test_close_ends_a_blocking_call_waiting_out_a_retry_back_off() -> None:
    """A call in another thread waiting out a back-off (here Retry-After: 5) slept it
    out before it noticed the client had been closed."""

    def busy(conn: socket.socket, index: int, request: bytes) -> bool:
        conn.sendall(_busy(b"5"))
        return True

    with serving(busy) as server:
        client = tritonhttp.InferenceServerClient(
            [server.url, server.url], retries=tritonhttp.Retry(3, backoff_max=5.0)
        )
        outcome: list[BaseException] = []

        def call() -> None:
            try:
                client.get_server_metadata()
            except BaseException as e:
                outcome.append(e)

        thread = threading.Thread(target=call)
        thread.start()
        deadline = time.monotonic() + 5
        while not server.requests and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.1)  # the 503 is read: the call waits out its back-off
        t0 = time.monotonic()
        client.close()
        thread.join(10)
        assert not thread.is_alive()
        assert time.monotonic() - t0 < 2.0
        assert len(outcome) == 1 and isinstance(outcome[0], ClientClosedError)
        assert len(server.take()) == 1


@pytest.mark.parametrize("zone", ["-0000", ""])
def test_a_retry_after_date_without_a_zone_is_gmt(
    zone: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """parsedate_to_datetime gives a naive datetime for '-0000' (or no zone), which
    .timestamp() read as local time: 30 s ahead became 5 h 30 s in New York."""
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        when = time.strftime("%a, %d %b %Y %H:%M:%S", time.gmtime(time.time() + 30))
        wait = retry_after(f"{when} {zone}".strip())
        assert wait is not None and 25 < wait <= 31
    finally:
        monkeypatch.undo()
        time.tzset()


def test_aio_a_probe_whose_request_cannot_be_prepared_is_released() -> None:
    """The asyncio client prepared the request for a server outside the try that
    releases a probe: a plugin failing then left the server 'probing' for good, so it
    was never probed again and stayed set aside while another server was healthy."""

    class FailsOnce:
        calls = 0

        def __call__(self, request: Any) -> None:
            FailsOnce.calls += 1
            if FailsOnce.calls == 2:  # the request prepared for the probed server
                raise RuntimeError("token refresh failed")

    async def main(a: str, b: str) -> None:
        client = tritonhttp.aio.InferenceServerClient(
            [a, b], load_balancing="failover", server_backoff=(0.05, 0.05)
        )
        async with client:
            client._servers.failed(1)
            await asyncio.sleep(0.1)  # its back-off is over: the next call probes it
            client.register_plugin(FailsOnce())
            with pytest.raises(RuntimeError, match="token refresh"):
                await client.get_server_metadata()
            assert await client.get_server_metadata() == {"name": "ok"}  # probes it
            assert client._servers.set_aside() == []

    with serving(answer_ok) as a, serving(answer_ok) as b:
        asyncio.run(main(a.url, b.url))
