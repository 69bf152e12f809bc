"""The load generator behind ``bench``: closed-loop concurrency and open-loop request rate.

Requests go through one shared, thread-safe ``tritonhttp.InferenceServerClient``:

* ``sync`` mode: worker threads each call ``infer`` in a loop (concurrency N = N threads;
  request rate R = up to ``max_threads`` threads, each taking the next time slot);
* ``async`` mode: one thread keeps N requests in flight with ``async_infer`` (request
  rate: a submitter on the schedule and a collector);
* ``loop`` mode: one thread drives N keep-alive connections with a request encoded once
  (see ``_loop``): the least client overhead, for measuring the server.

Each level runs ``warmup`` seconds unmeasured, then measures for ``duration`` seconds (or
until ``requests`` more have completed). Only requests that *complete* inside the
measured window count; throughput is their number divided by the window. In request-rate
mode a latency is measured from the request's scheduled time, so falling behind shows.
"""

from __future__ import annotations

import collections
import itertools
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import tritonhttp

    from ._settings import Settings

__all__ = ["LevelResult", "LoadGenerator", "percentile"]

_STAT_KEYS = ("queue", "compute_input", "compute_infer", "compute_output")


def percentile(ordered: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of an ascending sequence (q in 0..100)."""
    if not ordered:
        return math.nan
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


@dataclass
class LevelResult:
    """What one load level measured."""

    load: str  # "concurrency" or "request_rate"
    level: float
    requests: int  # completed successfully inside the window
    errors: int  # failed inside the window
    window_s: float
    latencies_s: list[float] = field(repr=False)  # ascending
    first_error: str | None = None
    server_us: dict[str, float] | None = None  # average per request, from the statistics
    batch_size: int = 1

    @property
    def throughput(self) -> float:
        """Successful requests per second."""
        return self.requests / self.window_s if self.window_s > 0 else 0.0

    def latency_ms(self) -> dict[str, float]:
        """avg, min, p50, p90, p95, p99, max in milliseconds (NaN without requests)."""
        lat = self.latencies_s
        avg = sum(lat) / len(lat) if lat else math.nan
        stats = {"avg": avg, "min": lat[0] if lat else math.nan}
        for q in (50, 90, 95, 99):
            stats[f"p{q}"] = percentile(lat, q)
        stats["max"] = lat[-1] if lat else math.nan
        return {k: v * 1000 for k, v in stats.items()}


# A completed request: (start or scheduled time, end time, error text or None).
_Record = tuple[float, float, "str | None"]


class LoadGenerator:
    """Runs load levels against one model with a fixed set of inputs."""

    def __init__(
        self,
        client: tritonhttp.InferenceServerClient,
        model: str,
        version: str,
        inputs: list[tritonhttp.InferInput],
        outputs: list[tritonhttp.InferRequestedOutput],
        headers: dict[str, str] | None,
        *,
        mode: str = "sync",
        max_threads: int = 16,
        batch_size: int = 1,
        loop_request: tuple[Settings, bytes] | None = None,
    ) -> None:
        self._client = client
        self._model = model
        self._version = version
        self._inputs = inputs
        self._outputs = outputs
        self._headers = headers
        self._mode = mode
        self._max_threads = max_threads
        self._batch_size = batch_size
        self._loop_request = loop_request

    # -- one request -------------------------------------------------------------------

    def _infer(self) -> None:
        self._client.infer(
            self._model,
            self._inputs,
            model_version=self._version,
            outputs=self._outputs,
            headers=self._headers,
        )

    def _submit(self) -> Any:
        return self._client.async_infer(
            self._model,
            self._inputs,
            model_version=self._version,
            outputs=self._outputs,
            headers=self._headers,
        )

    def _server_stats(self) -> dict[str, tuple[int, int]] | None:
        try:
            answer = self._client.get_inference_statistics(
                self._model, self._version, headers=self._headers
            )
            stats = answer["model_stats"][0]["inference_stats"]
            return {k: (int(stats[k]["count"]), int(stats[k]["ns"])) for k in _STAT_KEYS}
        except Exception:  # statistics are a bonus: never fail the bench over them
            return None

    # -- drivers -----------------------------------------------------------------------

    def _closed_sync(self, n: int, stop: threading.Event, records: list[_Record]) -> None:
        def worker() -> None:
            clock = time.perf_counter
            while not stop.is_set():
                start = clock()
                error = None
                try:
                    self._infer()
                except Exception as e:
                    error = _one_line(e)
                records.append((start, clock(), error))

        self._run_threads([worker] * n)

    def _closed_async(self, n: int, stop: threading.Event, records: list[_Record]) -> None:
        def driver() -> None:
            clock = time.perf_counter
            pending: collections.deque[tuple[float, Any]] = collections.deque()
            while True:
                while not stop.is_set() and len(pending) < n:
                    pending.append((clock(), self._submit()))
                if not pending:
                    return
                start, request = pending.popleft()
                error = None
                try:
                    request.get_result()
                except Exception as e:
                    error = _one_line(e)
                records.append((start, clock(), error))

        self._run_threads([driver])

    def _open_sync(
        self, rate: float, t0: float, stop: threading.Event, records: list[_Record]
    ) -> None:
        slots = itertools.count()
        lock = threading.Lock()

        def worker() -> None:
            clock = time.perf_counter
            while True:
                with lock:
                    scheduled = t0 + next(slots) / rate
                delay = scheduled - clock()
                if delay > 0 and stop.wait(delay):
                    return
                if stop.is_set():
                    return
                error = None
                try:
                    self._infer()
                except Exception as e:
                    error = _one_line(e)
                records.append((scheduled, clock(), error))

        self._run_threads([worker] * self._max_threads)

    def _open_async(
        self, rate: float, t0: float, stop: threading.Event, records: list[_Record]
    ) -> None:
        queue: collections.deque[tuple[float, Any] | None] = collections.deque()
        ready = threading.Semaphore(0)

        def submitter() -> None:
            clock = time.perf_counter
            try:
                for k in itertools.count():
                    scheduled = t0 + k / rate
                    delay = scheduled - clock()
                    if delay > 0 and stop.wait(delay):
                        return
                    if stop.is_set():
                        return
                    queue.append((scheduled, self._submit()))
                    ready.release()
            finally:
                queue.append(None)
                ready.release()

        def collector() -> None:
            clock = time.perf_counter
            while True:
                ready.acquire()
                item = queue.popleft()
                if item is None:
                    return
                scheduled, request = item
                error = None
                try:
                    request.get_result()
                except Exception as e:
                    error = _one_line(e)
                records.append((scheduled, clock(), error))

        self._run_threads([submitter, collector])

    def _loop(
        self,
        connections: int,
        rate: float | None,
        t0: float,
        stop: threading.Event,
        records: list[_Record],
    ) -> None:
        from ._loop import LoopDriver

        assert self._loop_request is not None
        settings, request = self._loop_request
        LoopDriver(settings, request, connections).run(stop, records, rate, t0)

    @staticmethod
    def _run_threads(targets: list[Callable[[], None]]) -> None:
        threads = [
            threading.Thread(target=t, name=f"bench-{i}", daemon=True)
            for i, t in enumerate(targets)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    # -- a level -----------------------------------------------------------------------

    def run(
        self,
        load: str,
        level: float,
        *,
        duration: float | None,
        requests: int | None,
        warmup: float,
        progress: Callable[[float, int], None] | None = None,
    ) -> LevelResult:
        """Run one level (``load`` is "concurrency" or "request_rate").

        ``progress(fraction_done, completed_requests)`` is called about ten times a second.
        """
        records: list[_Record] = []
        stop = threading.Event()
        before = self._server_stats()
        begin = time.perf_counter() + 0.01
        if self._mode == "loop":
            concurrent = load == "concurrency"
            driver = threading.Thread(
                target=self._loop,
                args=(
                    int(level) if concurrent else self._max_threads,
                    None if concurrent else level,
                    begin,
                    stop,
                    records,
                ),
            )
        elif load == "concurrency":
            n = int(level)
            if self._mode == "sync":
                driver = threading.Thread(target=self._closed_sync, args=(n, stop, records))
            else:
                driver = threading.Thread(target=self._closed_async, args=(n, stop, records))
        elif self._mode == "sync":
            driver = threading.Thread(target=self._open_sync, args=(level, begin, stop, records))
        else:
            driver = threading.Thread(target=self._open_async, args=(level, begin, stop, records))
        driver.start()
        try:
            window_start = begin + warmup
            mark = 0  # records completed before the window starts (roughly)
            marked = False
            while True:
                now = time.perf_counter()
                if not marked and now >= window_start:
                    mark, marked = len(records), True
                if duration is not None:
                    done = (now - begin) / (warmup + duration)
                    finished = now >= window_start + duration
                else:
                    assert requests is not None
                    measured = len(records) - mark if marked else 0
                    done = measured / requests
                    finished = marked and measured >= requests
                if progress is not None:
                    progress(min(done, 1.0), len(records))
                if finished or not driver.is_alive():
                    break
                time.sleep(0.01 if requests is not None else 0.1)
        finally:
            stop.set()
            window_end = time.perf_counter()
            driver.join()
        after = self._server_stats()
        inside = sorted((r for r in records if r[1] >= window_start), key=lambda r: r[1])
        if duration is not None:
            inside = [r for r in inside if r[1] <= window_end]
            window = window_end - window_start
        else:
            assert requests is not None
            inside = inside[:requests]
            window = (inside[-1][1] - window_start) if inside else 0.0
        ok = sorted(end - start for start, end, error in inside if error is None)
        errors = [error for _, _, error in inside if error is not None]
        if not inside:  # e.g. every request fails at once: report any error at all
            errors = [error for _, _, error in records if error is not None][:1]
        return LevelResult(
            load=load,
            level=level,
            requests=len(ok),
            errors=len(errors),
            window_s=window,
            latencies_s=ok,
            first_error=errors[0] if errors else None,
            server_us=_server_delta(before, after),
            batch_size=self._batch_size,
        )


def _server_delta(
    before: dict[str, tuple[int, int]] | None, after: dict[str, tuple[int, int]] | None
) -> dict[str, float] | None:
    if before is None or after is None:
        return None
    delta = {}
    for key in _STAT_KEYS:
        count = after[key][0] - before[key][0]
        ns = after[key][1] - before[key][1]
        delta[key] = ns / count / 1000 if count > 0 else math.nan
    return delta


def _one_line(exc: BaseException) -> str:
    from ._errors import describe

    return describe(exc)
