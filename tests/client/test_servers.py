"""Several servers and retries in the sync client, against real servers on real sockets.

The servers: recording HTTP servers (``_httpd.recorder``), a port nothing listens on
(connection refused), a listener whose backlog is full (connecting times out), a
server that answers slowly, and our bundled server in child processes (one killed in
the middle of a run).
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import tritonhttp
from tritonhttp._errors import ConnectError, ReadTimeout, ServiceUnavailableError

from ._httpd import error_answer, infer_answer, json_answer, recorder, refusing_port, unreachable

MODELS = Path(__file__).resolve().parent.parent / "models"
META = {"name": "recorder", "version": "0", "extensions": []}


def _inputs() -> list[tritonhttp.InferInput]:
    x = tritonhttp.InferInput("IN", [1], "INT32")
    x.set_data_from_numpy(np.array([1], dtype=np.int32))
    return [x]


def test_round_robin_spreads_calls_over_the_servers() -> None:
    with recorder() as a, recorder() as b, recorder() as c:
        with tritonhttp.InferenceServerClient([a.url, b.url, c.url]) as client:
            for _ in range(30):
                assert client.infer("m", _inputs()).as_numpy("OUT").tolist() == [7]
        assert [s.count("/infer") for s in (a, b, c)] == [10, 10, 10]


def test_failover_sends_everything_to_the_first_healthy_server() -> None:
    with recorder() as a, recorder() as b:
        client = tritonhttp.InferenceServerClient([a.url, b.url], load_balancing="failover")
        with client:
            for _ in range(5):
                client.get_server_metadata()
            assert (a.count(), b.count()) == (5, 0)
            a.stop()
            for _ in range(5):
                assert client.get_server_metadata() == META
        assert (a.count(), b.count()) == (5, 5)


def test_down_and_unreachable_servers_are_set_aside() -> None:
    down = f"127.0.0.1:{refusing_port()}"
    with unreachable() as slow_to_connect, recorder() as up:
        client = tritonhttp.InferenceServerClient(
            [down, slow_to_connect, up.url], connection_timeout=0.5
        )
        with client:
            t0 = time.perf_counter()
            first = client.infer("m", _inputs())  # tries all three: pays one connect timeout
            t1 = time.perf_counter()
            for _ in range(19):
                assert client.infer("m", _inputs()).as_numpy("OUT").tolist() == [7]
            t2 = time.perf_counter()
            assert client._servers.set_aside() == [0, 1]
        assert first.as_numpy("OUT").tolist() == [7]
        assert up.count("/infer") == 20
        # the set-aside servers are not tried again: 19 calls cost less than the
        # connect timeout the first call waited for
        assert t2 - t1 < t1 - t0
        assert t1 - t0 >= 0.45


def test_a_set_aside_server_gets_nothing_until_it_is_probed_again() -> None:
    with recorder() as a, recorder() as b:
        port = b.port
        b.stop()
        client = tritonhttp.InferenceServerClient([a.url, b.url], server_backoff=(0.5, 0.5))
        with client:
            for _ in range(4):
                client.get_server_metadata()  # b refuses once, then is set aside
            assert client._servers.set_aside() == [1]
            with recorder(port=port) as b_again:  # b is back, but still set aside
                set_aside_at = time.monotonic()
                for _ in range(10):
                    client.get_server_metadata()
                within_backoff = time.monotonic() - set_aside_at < 0.5
                seen_while_aside = b_again.count()
                time.sleep(0.6)
                for _ in range(10):
                    client.get_server_metadata()
                assert client._servers.set_aside() == []
                seen_after = b_again.count()
        if within_backoff:
            assert seen_while_aside == 0
        assert seen_after >= 5  # probed, healthy again: its share of round robin


def test_an_infer_that_reached_a_slow_server_is_not_sent_elsewhere() -> None:
    def slow(seen: object) -> tuple[int, dict[str, str], bytes]:
        time.sleep(1.0)
        return infer_answer()

    with recorder(slow) as s, recorder() as fast:
        client = tritonhttp.InferenceServerClient([s.url, fast.url], network_timeout=0.3)
        with client:
            with pytest.raises(ReadTimeout):
                client.infer("m", _inputs())  # round robin starts with the slow one
            assert fast.count("/infer") == 0  # written to the slow server: not resent
            assert client._servers.set_aside() == []  # it connected: not set aside
            assert client.infer("m", _inputs()).as_numpy("OUT").tolist() == [7]
        assert fast.count("/infer") == 1


def test_every_server_down_raises_the_connect_error() -> None:
    urls = [f"127.0.0.1:{refusing_port()}" for _ in range(2)]
    with tritonhttp.InferenceServerClient(urls) as client:
        with pytest.raises(ConnectError) as info:
            client.infer("m", _inputs())
        assert isinstance(info.value, ConnectionRefusedError)
        assert client.is_server_live() is False
        assert client._servers.set_aside() == [0, 1]


def test_threads_share_the_servers() -> None:
    down = f"127.0.0.1:{refusing_port()}"
    with recorder() as a, recorder() as b:
        client = tritonhttp.InferenceServerClient([a.url, down, b.url], concurrency=4)
        errors: list[BaseException] = []

        def work() -> None:
            try:
                for _ in range(25):
                    client.infer("m", _inputs())
            except BaseException as e:
                errors.append(e)

        threads = [threading.Thread(target=work) for _ in range(8)]
        with client:
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        assert errors == []
        assert a.count("/infer") + b.count("/infer") == 200
        assert abs(a.count("/infer") - b.count("/infer")) <= 100


def test_invalid_settings_are_refused() -> None:
    with pytest.raises(tritonhttp.InferenceServerException, match="load_balancing"):
        tritonhttp.InferenceServerClient(["a:1", "b:2"], load_balancing="random")
    with pytest.raises(tritonhttp.InferenceServerException, match="empty"):
        tritonhttp.InferenceServerClient([])
    with pytest.raises(tritonhttp.InferenceServerException, match="scheme"):
        tritonhttp.InferenceServerClient(["a:1", "http://b:2"])
    with pytest.raises(tritonhttp.InferenceServerException, match="retries"):
        tritonhttp.InferenceServerClient("a:1", retries=-1)
    with pytest.raises(tritonhttp.InferenceServerException, match="unknown client methods"):
        tritonhttp.Retry(methods=("infre",))
    with pytest.raises(tritonhttp.InferenceServerException, match="server_backoff"):
        tritonhttp.InferenceServerClient(["a:1", "b:2"], server_backoff=(0, 1))


# ----------------------------------------------------------------------------- retries


def test_a_safe_call_is_retried_after_503_then_succeeds() -> None:
    answers = [error_answer(503, "busy"), error_answer(503, "busy"), json_answer(META)]
    with recorder(answers) as server:
        with tritonhttp.InferenceServerClient(
            server.url, retries=tritonhttp.Retry(3, backoff_factor=0.01)
        ) as client:
            assert client.get_server_metadata() == META
        assert server.count() == 3


def test_retries_stop_at_total() -> None:
    with recorder([error_answer(503, "busy")]) as server:
        with (
            tritonhttp.InferenceServerClient(
                server.url, retries=tritonhttp.Retry(2, backoff_factor=0)
            ) as client,
            pytest.raises(ServiceUnavailableError, match="busy"),
        ):
            client.get_model_config("m")
        assert server.count() == 3  # the call and two retries


def test_infer_is_not_retried_on_503_unless_asked() -> None:
    with (
        recorder([error_answer(503, "busy"), infer_answer()]) as server,
        tritonhttp.InferenceServerClient(server.url, retries=3) as client,
    ):
        with pytest.raises(ServiceUnavailableError):
            client.infer("m", _inputs())
        assert server.count("/infer") == 1
    opt_in = tritonhttp.Retry(
        3, backoff_factor=0, methods=tritonhttp.Retry.SAFE_METHODS | {"infer"}
    )
    with recorder([error_answer(503, "busy"), infer_answer()]) as server:
        with tritonhttp.InferenceServerClient(server.url, retries=opt_in) as client:
            assert client.infer("m", _inputs()).as_numpy("OUT").tolist() == [7]
            request = client.async_infer("m", _inputs())
            assert request.get_result().as_numpy("OUT").tolist() == [7]
        assert server.count("/infer") == 3


def test_retry_after_is_honoured() -> None:
    answers = [error_answer(503, "later", **{"Retry-After": "1"}), json_answer(META)]
    with recorder(answers) as server:
        with tritonhttp.InferenceServerClient(
            server.url, retries=tritonhttp.Retry(1, backoff_factor=0)
        ) as client:
            t0 = time.perf_counter()
            assert client.get_server_metadata() == META
            waited = time.perf_counter() - t0
        assert server.count() == 2
    assert waited >= 0.95  # the server asked for one second


def test_a_call_that_could_not_connect_is_retried_whatever_its_method() -> None:
    port = refusing_port()
    later = recorder(port=port)

    def start_later() -> None:
        time.sleep(0.2)
        later.__enter__()

    with tritonhttp.InferenceServerClient(
        f"127.0.0.1:{port}", retries=tritonhttp.Retry(6, backoff_factor=0.1, backoff_max=0.4)
    ) as client:
        thread = threading.Thread(target=start_later)
        thread.start()
        try:
            result = client.infer("m", _inputs())
        finally:
            thread.join()
            later.__exit__(None, None, None)
    assert result.as_numpy("OUT").tolist() == [7]


# ----------------------------------------------------------------------------- real processes


@pytest.fixture
def two_servers() -> Iterator[list[object]]:
    from tritonhttp.server import _launch

    servers = []
    try:
        for _ in range(2):
            servers.append(
                _launch.start(MODELS, "--python-isolation=in-process", "--model-control-mode=none")
            )
        yield servers
    finally:
        for s in servers:
            s.stop()


def _add_sub_inputs() -> list[tritonhttp.InferInput]:
    a = tritonhttp.InferInput("INPUT0", [4], "FP32")
    a.set_data_from_numpy(np.arange(4, dtype=np.float32))
    b = tritonhttp.InferInput("INPUT1", [4], "FP32")
    b.set_data_from_numpy(np.ones(4, dtype=np.float32))
    return [a, b]


def test_a_server_killed_mid_run_leaves_the_others_serving(two_servers: list[object]) -> None:
    first, second = two_servers
    down = f"127.0.0.1:{refusing_port()}"
    urls = [first.url, down, second.url]  # type: ignore[attr-defined]
    with tritonhttp.InferenceServerClient(urls, connection_timeout=2.0) as client:
        for _ in range(10):
            out = client.infer("add_sub", _add_sub_inputs()).as_numpy("OUTPUT0")
            assert out.tolist() == [1.0, 2.0, 3.0, 4.0]
        first.process.send_signal(signal.SIGKILL)  # type: ignore[attr-defined]
        first.process.wait(10)  # type: ignore[attr-defined]
        for _ in range(10):
            out = client.infer("add_sub", _add_sub_inputs()).as_numpy("OUTPUT0")
            assert out.tolist() == [1.0, 2.0, 3.0, 4.0]
        assert client._servers.set_aside() == [0, 1]
        stats = client.get_inference_statistics("add_sub")  # answered by the one left
    served = stats["model_stats"][0]["inference_stats"]["success"]["count"]
    assert served >= 15  # its half of the first ten, and every call after the kill
