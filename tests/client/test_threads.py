"""One client shared by many threads, and async_infer, against real Triton."""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np
import pytest

import tritonhttp

pytestmark = pytest.mark.real_triton


def add_sub(a: np.ndarray[Any, Any], b: np.ndarray[Any, Any]) -> list[tritonhttp.InferInput]:
    return [
        tritonhttp.InferInput("INPUT0", [4], "FP32").set_data_from_numpy(a),
        tritonhttp.InferInput("INPUT1", [4], "FP32").set_data_from_numpy(b),
    ]


def slow(delay_ms: int) -> list[tritonhttp.InferInput]:
    data = np.array([delay_ms], np.int32)
    return [tritonhttp.InferInput("DELAY_MS", [1], "INT32").set_data_from_numpy(data)]


def test_many_threads_share_one_client(triton_url: str) -> None:
    errors: list[BaseException] = []
    done = []

    def worker(k: int) -> None:
        try:
            for i in range(40):
                a = np.full(4, k, np.float32)
                b = np.arange(4, dtype=np.float32) + i
                result = client.infer("add_sub", add_sub(a, b), request_id=f"{k}-{i}")
                assert result.get_response()["id"] == f"{k}-{i}"
                np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
                np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)
                assert client.is_server_live()
            done.append(k)
        except BaseException as e:  # reported below
            errors.append(e)

    with tritonhttp.InferenceServerClient(triton_url, concurrency=4) as client:
        threads = [threading.Thread(target=worker, args=(k,)) for k in range(12)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors, errors[0]
    assert sorted(done) == list(range(12))


def test_async_infer_returns_at_once_and_results_come_from_any_thread(triton_url: str) -> None:
    with tritonhttp.InferenceServerClient(triton_url, concurrency=8) as client:
        start = time.monotonic()
        handles = [
            client.async_infer("slow_model", slow(100), request_id=str(i)) for i in range(40)
        ]
        submitted = time.monotonic() - start
        assert submitted < 0.4  # tritonclient sleeps 10 ms per call: >= 0.4 s
        results: dict[int, Any] = {}

        def collect(i: int) -> None:
            results[i] = handles[i].get_result()

        threads = [threading.Thread(target=collect, args=(i,)) for i in range(40)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for i, result in results.items():
            assert result.get_response()["id"] == str(i)
            assert result.as_numpy("OUTPUT0").tolist() == [100]
        assert handles[0].get_result() is results[0]  # again: same result, no error


def test_get_result_without_blocking_and_with_timeout(triton_url: str) -> None:
    with tritonhttp.InferenceServerClient(triton_url) as client:
        handle = client.async_infer("slow_model", slow(400))
        with pytest.raises(tritonhttp.InferenceServerException, match="failed to obtain"):
            handle.get_result(block=False)
        with pytest.raises(tritonhttp.InferenceServerException, match="failed to obtain"):
            handle.get_result(timeout=0.05)
        assert handle.get_result(timeout=10).as_numpy("OUTPUT0").tolist() == [400]


def test_max_greenlets_bounds_outstanding_requests(triton_url: str) -> None:
    with tritonhttp.InferenceServerClient(triton_url, concurrency=4, max_greenlets=2) as client:
        start = time.monotonic()
        handles = [client.async_infer("slow_model", slow(200)) for _ in range(3)]
        blocked = time.monotonic() - start
        assert blocked >= 0.15  # the third call waited for one of the first two
        assert [h.get_result().as_numpy("OUTPUT0")[0] for h in handles] == [200] * 3


def test_close_waits_for_outstanding_requests(triton_url: str) -> None:
    client = tritonhttp.InferenceServerClient(triton_url, concurrency=2)
    handles = [client.async_infer("slow_model", slow(150)) for _ in range(4)]
    client.close()
    assert all(h.get_result(block=False).as_numpy("OUTPUT0")[0] == 150 for h in handles)


def test_errors_of_async_requests_reach_get_result(triton_url: str) -> None:
    mode = np.array([1], np.int32)
    with tritonhttp.InferenceServerClient(triton_url) as client:
        handle = client.async_infer(
            "error_model", [tritonhttp.InferInput("MODE", [1], "INT32").set_data_from_numpy(mode)]
        )
        for _ in range(2):
            with pytest.raises(tritonhttp.InferenceServerException) as info:
                handle.get_result()
            assert info.value.status() == "400"
            assert "intentional invalid argument" in str(info.value)
        with pytest.raises(tritonhttp.InferenceServerException, match="reserved"):
            client.async_infer("add_sub", [], parameters={"priority": 1})
