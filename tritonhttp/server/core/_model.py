"""A loaded model version: request admission (:mod:`._admission`), the response cache,
and the scheduler in front of its instances (:mod:`._scheduler`, :mod:`._sequence`)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from ._admission import Admission
from ._backend_api import ModelInstance
from ._cache import ResponseCache
from ._config import wire_datatype
from ._dynamic_batcher import BatchingRules, DynamicBatcher
from ._fifo import FifoScheduler
from ._queue import PriorityQueue
from ._rate_limit import Gate, RateLimiter
from ._scheduler import Refusal, Scheduler
from ._sequence import SequenceBatcher
from ._stats import ModelStats
from ._types import ExecutionTimes, InferRequest, InferResponse
from .model_config_pb2 import ModelConfig

__all__ = ["ModelVersion", "admission_for"]


def admission_for(name: str, version: int, config: ModelConfig) -> Admission:
    """The rules ``config`` sets for the requests of a model version."""
    return Admission(
        name,
        version,
        config.max_batch_size,
        [
            (i.name, wire_datatype(i.data_type), list(i.dims), i.optional,
             list(i.reshape.shape) if i.HasField("reshape") else None)
            for i in config.input
        ],
        [o.name for o in config.output],
    )  # fmt: skip


class ModelVersion:
    """One version of a model: its state, config, instances, queue and statistics."""

    def __init__(self, name: str, version: int) -> None:
        self.name = name
        self.version = version
        self.state = "LOADING"
        self.reason = ""
        self.config: ModelConfig | None = None
        self.config_json = b""
        self.metadata_json = b""
        self.instances: list[ModelInstance] = []
        self.answers_directly = False
        self.parses_in_backend = False
        self.stats = ModelStats()
        self.decoupled = False
        self.in_flight = 0
        self._drain_waiters: list[asyncio.Future[None]] = []
        #: the config's rules for requests (set by :meth:`activate`)
        self.admission = Admission(name, version, 0, [], [])
        self.output_names: list[str] = []
        self.scheduler: Scheduler | None = None
        self._sequence: SequenceBatcher | None = None
        #: the server's response cache, when this version uses it
        self.cache: ResponseCache | None = None
        self.labels: dict[str, list[bytes]] = {}
        #: ``"model_name":...,"model_version":...`` as response JSON (built once)
        self.wire_prefix = b""
        #: (output name, datatype, *shape) -> ``{"name":...,"datatype":...,"shape":[...]``
        #: (built once per output shape, up to 1024 of them)
        self.wire_heads: dict[tuple[str | int, ...], bytes] = {}

    # ------------------------------------------------------------------ setup

    def activate(
        self,
        config: ModelConfig,
        instances: list[ModelInstance],
        cache: ResponseCache | None = None,
        model_dir: Path | None = None,
        rate_limiter: RateLimiter | None = None,
    ) -> None:
        """Take the final config and the created instances; the version becomes READY.

        ``cache`` is the server's response cache; the version uses it when its config
        enables ``response_cache``. ``model_dir`` holds the ``initial_state`` files of a
        sequence model's states. ``rate_limiter`` (on) decides when and where requests
        execute; CoreError when it cannot give an instance what it needs.
        """
        self.config = config
        self.instances = instances
        self.decoupled = config.model_transaction_policy.decoupled
        self.output_names = [o.name for o in config.output]
        self.admission = admission_for(self.name, self.version, config)
        which = config.WhichOneof("scheduling_choice")
        gate = None if rate_limiter is None else Gate(rate_limiter, config, instances)
        self._sequence = None
        scheduler: Scheduler
        if which == "sequence_batching":
            scheduler = self._sequence = SequenceBatcher(
                config, instances, self._execute, self.stats, model_dir=model_dir, gate=gate
            )
        elif which == "dynamic_batching":
            scheduler = DynamicBatcher(
                instances,
                self._execute,
                self.stats,
                BatchingRules.from_config(config),
                PriorityQueue(config.dynamic_batching),
                gate=gate,
            )
        else:
            scheduler = FifoScheduler(instances, self._execute, self.stats, gate=gate)
        self.scheduler = scheduler
        self.cache = cache if cache is not None and config.response_cache.enable else None
        #: every instance may write an answer to the client itself (``InferRequest.reply``);
        #: never under the sequence batcher, which must end or release a request's sequence
        #: before the client has its answer and can send the next request
        self.answers_directly = (
            bool(instances)
            and self.cache is None
            and self._sequence is None
            and not self.decoupled
            and not config.dynamic_batching.preserve_ordering
            and gate is None  # (the instance must be free before the client has its answer)
            and all(getattr(i, "answers_directly", False) for i in instances)
        )
        #: the dynamic batcher forms batches of requests its instances parse, counting
        #: each by the batch size the front reads off its header: where nothing else of a
        #: request enters its decisions (no shapes that must match, no optional inputs)
        #: and its queue refuses nothing (one priority level, no timeouts, no size limit:
        #: a refusal would name the request and come before its checks)
        self.batches_unparsed = (
            isinstance(scheduler, DynamicBatcher)
            and config.max_batch_size > 0
            and scheduler.queue.prefetching
            and not (scheduler.rules.equal_shape_inputs or scheduler.rules.optional_inputs)
        )
        #: every instance may be handed a request unparsed (in its reply capability): it
        #: parses and checks it itself, and answers the client or declines
        self.parses_in_backend = (
            self.answers_directly
            and (which is None or self.batches_unparsed)
            and all(getattr(i, "parses_requests", False) for i in instances)
        )
        self.state = "READY"
        self.reason = ""

    def update_instances(
        self, config: ModelConfig, instances: list[ModelInstance]
    ) -> list[asyncio.Future[None]]:
        """Serve with ``instances``, those of ``config``'s instance groups, from now on
        (Triton's in-place instance update; the futures end as each instance left out is
        free, see :meth:`Scheduler.update_instances`)."""
        assert self.scheduler is not None
        self.config = config
        self.instances = instances
        self.reason = ""
        return self.scheduler.update_instances(instances, config)

    @property
    def ready(self) -> bool:
        return self.state == "READY"

    # ------------------------------------------------------------------ admission

    def admit(self, req: InferRequest) -> None:
        """Validate a parsed request against the config (raises CoreError, JSON-typed;
        BackendError for what Triton's backend fails after admission, text/plain)."""
        req.start_ns = time.monotonic_ns()
        backend_error = self.admission.check(req)
        if self._sequence is not None:
            self._sequence.check(req)
        if backend_error is not None:
            self.stats.record_request(False, time.monotonic_ns() - req.start_ns, 0)
            raise backend_error

    # ------------------------------------------------------------------ scheduling

    async def infer(self, req: InferRequest) -> InferResponse:
        """Answer an admitted request (from the cache, or through the scheduler).

        Raises CoreError when the scheduler refuses it outright (queue full).
        """
        scheduler = self.scheduler
        assert scheduler is not None
        self.in_flight += 1
        try:
            cache = self.cache
            if cache is None:
                return await scheduler.infer(req)
            return await self._infer_cached(cache, scheduler, req)
        finally:
            self.in_flight -= 1
            if self.in_flight == 0 and self._drain_waiters:
                for waiter in self._drain_waiters:
                    if not waiter.done():
                        waiter.set_result(None)
                self._drain_waiters.clear()

    async def _infer_cached(
        self, cache: ResponseCache, scheduler: Scheduler, req: InferRequest
    ) -> InferResponse:
        return await self._through_cache(
            cache,
            req,
            lambda: scheduler.infer(req),
            lambda r: None if isinstance(r, Refusal) else r,
        )

    async def _through_cache(
        self,
        cache: ResponseCache,
        req: InferRequest,
        compute: Callable[[], Awaitable[InferResponse]],
        kept: Callable[[InferResponse], InferResponse | None],
    ) -> InferResponse:
        """The cached response of ``req``, or ``compute()``'s, cached as ``kept`` says
        (None: not cached, nor counted as a miss); lookups, insertions, hits and misses
        counted as Triton counts them."""
        t0 = time.monotonic_ns()
        key = cache.key(self.name, self.version, req)
        hit = cache.lookup(key)
        t1 = time.monotonic_ns()
        cache.stats.lookup_ns += t1 - t0
        if hit is not None:
            self.stats.record_cache_hit(t1 - req.start_ns, t1 - t0)
            return hit
        response = await compute()
        keep = kept(response)
        if keep is not None:
            t2 = time.monotonic_ns()
            existed = cache.contains(key)
            cache.insert(key, keep)
            t3 = time.monotonic_ns()
            cache.stats.insertion_ns += t3 - t2
            if not existed:
                self.stats.record_cache_miss((t1 - t0) + (t3 - t2))
        return response

    def cancel(self, req: InferRequest) -> None:
        """The client went away: drop the request if queued, else flag it cancelled."""
        req.cancelled = True
        if self.scheduler is not None:
            self.scheduler.cancel(req)

    async def _execute(
        self,
        inst: ModelInstance,
        requests: list[InferRequest],
        nulls: tuple[int, ...] = (),
        on_free: Callable[[], None] | None = None,
    ) -> list[InferResponse]:
        """Run one batch on ``inst`` and count it. ``nulls`` are the positions of
        sequence-batcher padding requests: part of the batch size, not inferences.
        ``on_free``: see :class:`ExecutionTimes`."""
        t0 = time.monotonic_ns()
        times = ExecutionTimes(on_free=on_free)
        out = responses = await inst.execute(requests, times)
        t1 = time.monotonic_ns()
        if responses[0].declined if len(responses) == 1 else any(r.declined for r in responses):
            # not executed: the front end parses and answers those the usual way; the
            # others ran as one batch (without padding: never under the sequence batcher)
            taken = [(q, r) for q, r in zip(requests, responses, strict=True) if not r.declined]
            if not taken:
                return out
            requests, responses = [q for q, _ in taken], [r for _, r in taken]
        batch = 0
        for r in requests:
            batch += r.batch_size
        stats = self.stats
        failed = responses[0].failed if len(responses) == 1 else all(r.failed for r in responses)
        pairs = zip(requests, responses, strict=False)
        if nulls:
            real = [pair for i, pair in enumerate(pairs) if i not in nulls]
            stats.record_execution(
                batch, len(real), times.input_ns, times.infer_ns, times.output_ns, failed,
                sum(r.batch_size for r, _ in real),
            )  # fmt: skip
        else:
            real = pairs  # type: ignore[assignment]
            stats.record_execution(
                batch, len(requests), times.input_ns, times.infer_ns, times.output_ns, failed
            )
        started = t0 + times.waited_ns
        for r, resp in real:
            stats.record_request(not resp.failed, t1 - r.start_ns, started - r.start_ns)
        return out

    @property
    def pending(self) -> int:
        return self.scheduler.pending if self.scheduler is not None else 0

    def close(self) -> None:
        """Stop the scheduler's timers (the version is unloading)."""
        if self.scheduler is not None:
            self.scheduler.close()

    async def drain(self) -> None:
        """Wait until no request is in flight."""
        if self.in_flight:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._drain_waiters.append(waiter)
            await waiter
