"""``bench`` load generation: keeps a level of load running until told to stop.

Closed loop (``--concurrency N``: N requests always in flight) or open loop
(``--request-rate R``: requests sent on a schedule, constant or Poisson, or the intervals
of ``--request-intervals``). Three ways to send:

* ``sync``: worker threads, each with its own keep-alive connection; every request is
  encoded by tritonhttp (``generate_request_body``), sent, and its answer decoded
  (``parse_response_body``) and checked, with the three times recorded -- perf_analyzer's
  client send, response wait and client receive;
* ``async``: ``async_infer`` of one shared ``tritonhttp.InferenceServerClient``;
* ``loop``: one thread driving N connections with a body encoded once (``_loop``), the
  least client overhead; used when there is one data step and nothing per request
  (no sequences, validation, shared memory or custom schedule).

Every finished request is appended to ``records``: ``Record`` tuples (or the
``(start, end, error)`` triples of the loop driver); the measurement reads them as they
come.
"""

from __future__ import annotations

import collections
import http.client
import itertools
import json
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple
from urllib.parse import quote, urlsplit

from ._bench_requests import check_outputs

if TYPE_CHECKING:
    import tritonhttp

    from ._bench_requests import RequestSource, SharedMemory
    from ._settings import Settings

__all__ = ["Load", "Record", "Schedule", "Target"]


class Record(NamedTuple):
    """One finished request (times from ``time.perf_counter``, durations in seconds)."""

    start: float
    end: float
    error: str | None
    send: float = float("nan")  # encoding and writing the request
    wait: float = float("nan")  # waiting for the response
    recv: float = float("nan")  # decoding (and checking) the response
    delayed: bool = False  # sent later than its scheduled time
    sequence_end: bool = False


class Schedule:
    """When the requests of an open loop are due: thread-safe ``next()`` send times."""

    def __init__(
        self, distribution: str, rate: float, t0: float, intervals: list[float] | None = None
    ) -> None:
        self._distribution = distribution
        self._rate = rate
        self._intervals = itertools.cycle(intervals) if intervals else None
        self._random = random.Random(0)
        self._lock = threading.Lock()
        self._due = t0
        self._count = 0
        self._t0 = t0

    def next(self) -> float:
        """The send time of the next request."""
        with self._lock:
            if self._intervals is not None:
                self._due += next(self._intervals)
            elif self._distribution == "poisson":
                self._due += self._random.expovariate(self._rate)
            else:
                self._count += 1
                return self._t0 + (self._count - 1) / self._rate
            return self._due


@dataclass
class Target:
    """What the load is sent to, and with what."""

    settings: Settings
    client: tritonhttp.InferenceServerClient
    model: str
    version: str
    source: RequestSource
    shm: SharedMemory | None = None
    output_shm_size: int = 0
    output_names: tuple[str, ...] = ()
    loop_request: bytes | None = None  # set: the loop driver may be used

    @property
    def path(self) -> str:
        """The request path of /infer."""
        base = urlsplit(self.settings.base_url).path.rstrip("/")
        path = f"{base}/v2/models/{quote(self.model)}"
        if self.version:
            path += f"/versions/{quote(self.version)}"
        return path + "/infer"


def _error_text(status: int, body: bytes) -> str:
    try:
        message = str(json.loads(body)["error"])
    except (ValueError, KeyError, TypeError):
        message = body.decode("utf-8", errors="replace").strip()
    return f"HTTP {status}: " + " ".join(message.split())


class _Worker:
    """One keep-alive connection sending one request at a time (``sync`` mode)."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self.state: dict[str, Any] = {}
        self.conn: http.client.HTTPConnection | None = None
        self.outputs: list[Any] | None = None
        if target.shm is not None and target.output_shm_size:
            import tritonhttp

            self.outputs = []
            placed = target.shm.output_region(list(target.output_names), target.output_shm_size)
            for name, region, size, offset in placed:
                output = tritonhttp.InferRequestedOutput(name)
                output.set_shared_memory(region, size, offset)
                self.outputs.append(output)

    def _connect(self) -> http.client.HTTPConnection:
        settings = self.target.settings
        parts = urlsplit(settings.base_url)
        host, port = parts.hostname or "localhost", parts.port
        if parts.scheme == "https":
            return http.client.HTTPSConnection(
                host, port, timeout=settings.timeout, context=settings.ssl_context()
            )
        return http.client.HTTPConnection(host, port, timeout=settings.timeout)

    def _post(self, body: bytes, json_size: int | None) -> tuple[int, bytes, Any]:
        headers = dict(self.target.settings.headers)
        if json_size is not None:
            headers["Inference-Header-Content-Length"] = str(json_size)
        else:
            headers["Content-Type"] = "application/json"
        if self.conn is None:
            self.conn = self._connect()
        try:
            self.conn.request("POST", self.target.path, body, headers)
            response = self.conn.getresponse()
            data = response.read()
        except (OSError, http.client.HTTPException):
            self.conn.close()
            self.conn = None
            raise
        return response.status, data, response

    def one(self, scheduled: float | None = None) -> Record:
        """Send the next request and wait for its answer."""
        t0 = time.perf_counter()
        prepared, sequence = self.target.source.next(self.state)
        return self._send(t0, prepared, sequence, scheduled)

    def finish(self) -> None:
        """End the worker's open sequence, unmeasured (``RequestSource.finish``)."""
        closing = self.target.source.finish(self.state)
        if closing is not None:
            self._send(time.perf_counter(), *closing, None)

    def _send(
        self, t0: float, prepared: Any, sequence: dict[str, Any], scheduled: float | None
    ) -> Record:
        import tritonhttp

        clock = time.perf_counter
        outputs = self.outputs if self.outputs is not None else prepared.outputs
        body, json_size = tritonhttp.InferenceServerClient.generate_request_body(
            prepared.inputs, outputs, **sequence
        )
        t1 = clock()
        error: str | None = None
        try:
            status, data, response = self._post(body, json_size)
        except (OSError, http.client.HTTPException) as e:
            status, data, response = 0, b"", None
            error = f"connection error: {e}"
        t2 = clock()
        if error is None and status != 200:
            error = _error_text(status, data)
        elif error is None:
            result = tritonhttp.InferenceServerClient.parse_response_body(
                data,
                header_length=response.getheader("Inference-Header-Content-Length"),
                content_encoding=response.getheader("Content-Encoding"),
            )
            if prepared.expected and self.outputs is None:  # outputs in shm: not checked
                error = check_outputs(result, prepared.expected)
        t3 = clock()
        delayed = scheduled is not None and t0 - scheduled > 0.001
        ends = bool(sequence.get("sequence_end"))
        return Record(t0, t3, error, t1 - t0, t2 - t1, t3 - t2, delayed, ends)

    def close(self) -> None:
        """Close the connection."""
        if self.conn is not None:
            self.conn.close()


def _run_threads(targets: list[Callable[[], None]]) -> None:
    threads = [
        threading.Thread(target=t, name=f"bench-{i}", daemon=True) for i, t in enumerate(targets)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


class _Stopping(threading.Event):
    """The load's stop flag, and a budget of requests. The loop driver, which sends the
    next request as it reads an answer, looks at ``is_set()`` then: with ``limit`` it
    reads as set once the answers past a mark exceed a count. Workers (``sync``,
    ``async``) take a ticket (``take()``) for each request instead."""

    def __init__(self, records: list[Any]) -> None:
        super().__init__()
        self._records = records
        self._mark = 0
        self._after: int | None = None
        self._tickets: int | None = None
        self._lock = threading.Lock()

    def limit(self, mark: int, after: int) -> None:
        """Stop sending once more than ``after`` requests have finished past ``mark``."""
        self._mark, self._after = mark, after

    def tickets(self, count: int) -> None:
        """Let ``take()`` succeed ``count`` times."""
        self._tickets = count

    def take(self) -> bool:
        """Whether one more request may be sent (always, without tickets)."""
        with self._lock:
            if self._tickets is None:
                return True
            if self._tickets <= 0:
                return False
            self._tickets -= 1
            return True

    def is_set(self) -> bool:
        if super().is_set():
            return True
        return self._after is not None and len(self._records) - self._mark > self._after


class Load:
    """A level of load running in the background: ``start()``, read ``records``, ``stop()``."""

    def __init__(
        self,
        target: Target,
        mode: str,
        *,
        concurrency: int | None = None,
        schedule: Schedule | None = None,
        max_threads: int = 16,
        rate: float | None = None,
    ) -> None:
        self.target = target
        self.mode = mode
        self.concurrency = concurrency
        self.schedule = schedule
        self.max_threads = max_threads
        self.rate = rate
        self.records: list[Any] = []
        self.stopping = _Stopping(self.records)
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start sending."""
        self.target.source.new_level()
        self._thread = threading.Thread(target=self._drive, name="bench-load", daemon=True)
        self._thread.start()

    def alive(self) -> bool:
        """Whether the load is still running (False when it gave up, e.g. no server)."""
        return self._thread is not None and self._thread.is_alive()

    def stop(self) -> None:
        """Stop sending and wait for the requests in flight."""
        self.stopping.set()
        if self._thread is not None:
            self._thread.join()

    def send_exactly(self, count: int) -> None:
        """After ``stop()``: a closed loop (``count`` at least its concurrency) starts
        again and sends exactly ``count`` requests, then lets them finish and ends."""
        assert self.concurrency is not None and count >= self.concurrency
        self.stopping = _Stopping(self.records)
        if self.mode == "loop":
            # Each answer frees a connection; the concurrency's first requests plus one
            # per answer up to ``count - concurrency`` answers make ``count``.
            self.stopping.limit(len(self.records), count - self.concurrency)
        else:
            self.stopping.tickets(count)
        self.start()

    def _drive(self) -> None:
        if self.mode == "loop":
            self._loop()
        elif self.mode == "async":
            self._async()
        elif self.schedule is None:
            assert self.concurrency is not None
            _run_threads([self._closed_worker] * self.concurrency)
        else:
            _run_threads([self._open_worker] * self.max_threads)

    def _closed_worker(self) -> None:
        worker = _Worker(self.target)
        try:
            while not self.stopping.is_set() and self.stopping.take():
                self.records.append(worker.one())
            worker.finish()
        finally:
            worker.close()

    def _open_worker(self) -> None:
        assert self.schedule is not None
        worker = _Worker(self.target)
        try:
            while True:
                due = self.schedule.next()
                delay = due - time.perf_counter()
                if (delay > 0 and self.stopping.wait(delay)) or self.stopping.is_set():
                    break
                self.records.append(worker.one(due))
            worker.finish()
        finally:
            worker.close()

    def _loop(self) -> None:
        from ._loop import LoopDriver

        assert self.target.loop_request is not None
        connections = self.concurrency if self.schedule is None else self.max_threads
        driver = LoopDriver(self.target.settings, self.target.loop_request, connections or 1)
        t0 = time.perf_counter()
        driver.run(self.stopping, self.records, self.rate if self.schedule else None, t0)

    def _async(self) -> None:
        pending: collections.deque[tuple[float, Any, bool] | None] = collections.deque()
        ready = threading.Semaphore(0)
        room = threading.Semaphore(self.concurrency or self.max_threads)

        def submitter() -> None:
            state: dict[str, Any] = {}
            try:
                while not self.stopping.is_set():
                    due = None
                    if self.schedule is not None:
                        due = self.schedule.next()
                        delay = due - time.perf_counter()
                        if delay > 0 and self.stopping.wait(delay):
                            return
                    while not room.acquire(timeout=0.05):
                        if self.stopping.is_set():
                            return
                    if self.stopping.is_set() or not self.stopping.take():
                        room.release()
                        return
                    prepared, sequence = self.target.source.next(state)
                    started = time.perf_counter()
                    late = due is not None and started - due > 0.001
                    pending.append((started, self._submit(prepared, sequence), late))
                    ready.release()
            finally:
                try:
                    self._finish(state)
                finally:
                    pending.append(None)
                    ready.release()

        def collector() -> None:
            while True:
                ready.acquire()
                item = pending.popleft()
                if item is None:
                    return
                self.records.append(_collect(*item))
                room.release()

        _run_threads([submitter, collector])

    def _finish(self, state: dict[str, Any]) -> None:
        """End the submitter's open sequence, unmeasured (``RequestSource.finish``)."""
        closing = self.target.source.finish(state)
        if closing is not None:
            _collect(time.perf_counter(), self._submit(*closing), False)

    def _submit(self, prepared: Any, sequence: dict[str, Any]) -> Any:
        target = self.target
        return target.client.async_infer(
            target.model,
            prepared.inputs,
            model_version=target.version,
            outputs=prepared.outputs,
            headers=target.settings.request_headers,
            **sequence,
        )


def _collect(started: float, request: Any, late: bool) -> Record:
    from ._errors import describe

    error = None
    try:
        request.get_result()
    except Exception as e:
        error = describe(e)
    return Record(started, time.perf_counter(), error, delayed=late)
