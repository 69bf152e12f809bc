"""``async_infer`` on warm connections: sent from the caller's thread, read when asked for.

With an idle keep-alive connection at hand, a small request goes out at once from the
thread that calls ``async_infer`` and no pool thread is involved; the response waits in
the socket until ``get_result`` (or ``close``, or a thread that needs the connection)
reads it. These tests hold the observable contract of ``async_infer`` on that path:
results, errors, waiting rules, close, and no deadlock when every connection holds an
unread response.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import tritonhttp


def slow(delay_ms: int) -> list[tritonhttp.InferInput]:
    data = np.array([delay_ms], np.int32)
    return [tritonhttp.InferInput("DELAY_MS", [1], "INT32").set_data_from_numpy(data)]


def add_sub(k: float) -> list[tritonhttp.InferInput]:
    a = np.full(4, k, np.float32)
    b = np.ones(4, np.float32)
    return [
        tritonhttp.InferInput("INPUT0", [4], "FP32").set_data_from_numpy(a),
        tritonhttp.InferInput("INPUT1", [4], "FP32").set_data_from_numpy(b),
    ]


def new_threads(before: set[threading.Thread]) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t not in before]


def warm(client: tritonhttp.InferenceServerClient, n: int) -> None:
    """Leave ``n`` idle connections: ``n`` calls in flight at once from threads of ours."""
    barrier = threading.Barrier(n)

    def call() -> None:
        barrier.wait()
        client.infer("slow_model", slow(150))

    threads = [threading.Thread(target=call) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


@pytest.fixture
def client(bundled_server: Any) -> Iterator[tritonhttp.InferenceServerClient]:
    with tritonhttp.InferenceServerClient(bundled_server.url, concurrency=2) as c:
        warm(c, 2)
        yield c


def test_requests_on_warm_connections_need_no_thread(
    client: tritonhttp.InferenceServerClient,
) -> None:
    before = set(threading.enumerate())
    handles = [client.async_infer("add_sub", add_sub(k)) for k in (1.0, 2.0)]
    assert new_threads(before) == []
    assert "pending" in repr(handles[0]) or "done" in repr(handles[0])
    for k, handle in reversed(list(zip((1.0, 2.0), handles, strict=True))):
        result = handle.get_result()
        assert result.as_numpy("OUTPUT0").tolist() == [k + 1] * 4
        assert result.as_numpy("OUTPUT1").tolist() == [k - 1] * 4
    assert repr(handles[0]) == "<InferAsyncRequest done>"
    assert new_threads(before) == []


def test_more_requests_than_connections_all_complete(
    client: tritonhttp.InferenceServerClient,
) -> None:
    # two go out at once, the others wait for a pool thread and a connection, which
    # they get by reading the unread responses first
    handles = [client.async_infer("slow_model", slow(20), request_id=str(i)) for i in range(10)]
    for i in reversed(range(10)):
        result = handles[i].get_result(timeout=30)
        assert result.get_response()["id"] == str(i)
        assert result.as_numpy("OUTPUT0").tolist() == [20]


def test_a_blocking_call_while_every_connection_holds_an_unread_response(
    client: tritonhttp.InferenceServerClient,
) -> None:
    handles = [client.async_infer("add_sub", add_sub(k)) for k in (3.0, 4.0)]
    answer: list[Any] = []
    caller = threading.Thread(target=lambda: answer.append(client.infer("add_sub", add_sub(5))))
    caller.start()
    caller.join(timeout=30)
    assert not caller.is_alive(), "infer waited for a connection nobody would free"
    assert answer[0].as_numpy("OUTPUT0").tolist() == [6.0] * 4
    assert [h.get_result().as_numpy("OUTPUT0")[0] for h in handles] == [4.0, 5.0]


def test_get_result_without_blocking_and_with_timeout(
    client: tritonhttp.InferenceServerClient,
) -> None:
    before = set(threading.enumerate())
    handle = client.async_infer("slow_model", slow(400))
    assert new_threads(before) == []
    with pytest.raises(tritonhttp.InferenceServerException, match="failed to obtain"):
        handle.get_result(block=False)
    with pytest.raises(tritonhttp.InferenceServerException, match="failed to obtain"):
        handle.get_result(timeout=0.05)
    assert handle.get_result(timeout=10).as_numpy("OUTPUT0").tolist() == [400]
    assert handle.cancel() is False  # over


def test_close_reads_the_responses_left_in_their_sockets(bundled_server: Any) -> None:
    client = tritonhttp.InferenceServerClient(bundled_server.url, concurrency=2)
    warm(client, 2)
    before = set(threading.enumerate())
    handles = [client.async_infer("slow_model", slow(150)) for _ in range(2)]
    client.close()
    assert new_threads(before) == []
    assert [h.get_result(block=False).as_numpy("OUTPUT0")[0] for h in handles] == [150, 150]


def test_one_result_for_every_thread_that_asks(client: tritonhttp.InferenceServerClient) -> None:
    handle = client.async_infer("slow_model", slow(100))
    seen: list[Any] = []
    threads = [threading.Thread(target=lambda: seen.append(handle.get_result())) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(seen) == 8 and all(r is seen[0] for r in seen)
    assert seen[0].as_numpy("OUTPUT0").tolist() == [100]


def test_errors_reach_get_result_as_on_the_thread_path(
    client: tritonhttp.InferenceServerClient, bundled_server: Any
) -> None:
    mode = [tritonhttp.InferInput("MODE", [1], "INT32")]
    mode[0].set_data_from_numpy(np.array([1], np.int32))
    before = set(threading.enumerate())
    handle = client.async_infer("error_model", mode)
    assert new_threads(before) == []
    for _ in range(2):
        with pytest.raises(tritonhttp.InferenceServerException) as info:
            handle.get_result()
        assert info.value.status() == "400"
        assert "intentional invalid argument" in str(info.value)
    # a header tritonclient refuses: raised by get_result on both paths, with one text
    bad = {"Transfer-Encoding": "chunked"}
    warm_handle = client.async_infer("add_sub", add_sub(1), headers=bad)
    with tritonhttp.InferenceServerClient(bundled_server.url) as cold:
        cold_handle = cold.async_infer("add_sub", add_sub(1), headers=bad)
        with pytest.raises(tritonhttp.InferenceServerException) as on_thread:
            cold_handle.get_result()
    with pytest.raises(tritonhttp.InferenceServerException) as inline:
        warm_handle.get_result()
    assert str(inline.value) == str(on_thread.value)
    assert "Transfer-Encoding" in str(inline.value)
    # the refused request left its connection usable
    assert client.infer("add_sub", add_sub(2)).as_numpy("OUTPUT1").tolist() == [1.0] * 4
