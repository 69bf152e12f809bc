"""Process isolation: each model instance in its own worker process.

:class:`ProcessInstance` is the core's ``ModelInstance`` over a worker
(:class:`~._worker_process.WorkerProcess`): it sends batches, turns the worker's messages
(:mod:`._messages`) into responses, serves its BLS, log, metric and model-control
requests, and replaces a worker that crashed, exited or hung past
``stub-timeout-seconds`` (failing that worker's requests, never the server). A worker
may hold client connections and write successful answers itself (:mod:`._direct`).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple, cast

import numpy as np

from triton_python_backend_utils._errors import TritonModelException

from ...core._errors import Code, CoreError
from ...core._trace import trace_execution
from ...core._types import ExecutionTimes, InferRequest, InferResponse, InputTensor, OutputTensor
from . import _messages as msg
from ._arena import Producer
from ._collector import Collector, SharedCheck, collect, collected
from ._convert import params_json
from ._direct import DirectReply
from ._ipc import INLINE, write_block
from ._polling import stay_awake
from ._region_inputs import mapped_inputs, output_dests
from ._settings import BackendSettings
from ._worker_process import _SERVER_DTYPES, WorkerContext, WorkerProcess, _not_healthy

__all__ = ["ProcessInstance"]

log = logging.getLogger("tritonhttp.server")

#: a worker whose last execute took less than this is sent its next request while busy
#: (it starts it the moment the first ends, without waiting for the server's turn)
AHEAD_MAX_NS = 1_000_000


class _Batch(NamedTuple):
    """A batch in flight: its future (the RESCHEDULE flags), its stub-timeout deadline,
    and whom to tell the moment the worker is free (``ExecutionTimes.on_free``)."""

    done: asyncio.Future[list[bool] | None]
    deadline: float
    on_free: Callable[[], None] | None


class ProcessInstance:
    """Implements :class:`~tritonhttp.server.core._backend_api.ModelInstance` over a worker."""

    def __init__(
        self,
        name: str,
        init: msg.Init,
        output_names: list[str],
        settings: BackendSettings,
        context: WorkerContext,
        python: str | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.name = name
        self._init = init
        self._decoupled = init.decoupled
        #: the worker may write a request's answer to the client itself (``reply``)
        self.answers_directly = not init.decoupled and context.reply_codec is not None
        self._outputs = tuple(output_names)  # what the model is told when nothing is asked
        self._settings = settings
        self._context = context
        self._services = context.services
        self._poll = context.poll
        self._python = python
        self._env = env
        self._worker: WorkerProcess | None = None
        self._tokens = itertools.count(1)
        #: requests sent to the worker and not finally answered yet, by token
        self._pending: dict[int, Collector] = {}
        #: batches in flight (oldest first): their future, stub-timeout deadline, and
        #: whom to tell the moment the worker is free (ExecutionTimes.on_free)
        self._batches: dict[int, _Batch] = {}
        #: when a batch sent ahead began (its predecessor's ``done``), by batch id
        self._began: dict[int, int] = {}
        #: when the batch the worker runs now began
        self._busy_since = 0
        self._watchdog: asyncio.TimerHandle | None = None
        self._calls: dict[int, asyncio.Future[Any]] = {}
        self._bls: dict[int, InferRequest] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._init_future: asyncio.Future[msg.Ready | str] | None = None
        self._fini_future: asyncio.Future[None] | None = None
        self._restarting: asyncio.Task[None] | None = None
        self._broken: str | None = None
        self._last_restart = 0.0
        self._finalizing = False
        self._death_text = ""
        self.pid = 0
        #: times this instance's worker was replaced
        self.restarts = 0
        self._ready_check = SharedCheck()
        self._last_end = 0
        self._last_rtt = 0
        self._ready_hook = False
        #: the worker parses requests handed to it unparsed (``DirectReply.unparsed``)
        self.parses_requests = False

    # ------------------------------------------------------------------ start

    async def start(self) -> None:
        """Spawn the worker and initialise the model; raises CoreError when that fails."""
        loop = asyncio.get_running_loop()
        worker = WorkerProcess(
            self.name, self._settings, self._message, self._exited, self._python, self._env,
            self._context.reply_codec if self.answers_directly else None,
        )  # fmt: skip
        self._worker = worker
        self._death_text = _not_healthy(self.name)
        self._init_future = loop.create_future()
        try:
            worker.start()
        except OSError as e:
            raise CoreError(
                f"failed to start the Python stub process: {e}", Code.INTERNAL
            ) from None
        worker.send(self._init)
        result = await self._init_future
        if isinstance(result, str):
            worker.close()
            await worker.reap()
            raise CoreError(result, Code.INTERNAL)
        self.pid, self._ready_hook = result.pid, result.has_ready_hook
        self.parses_requests = result.parses

    # ------------------------------------------------------------------ messages

    def _message(self, m: msg.Message) -> None:
        match m:
            case msg.DoneAnswered(batch_id, token):
                c = self._pending.get(token)
                if c is not None:
                    c.put(InferResponse(answered=True), True)
                self._batch_ended(batch_id, [False])
            case msg.Done():
                self._done(m)
            case msg.Streamed(token, desc, final, failed):
                self._streamed(token, self._response(desc, failed, token), final, failed)
            case msg.Log(level, message, file, line):
                self._services.log(level, message, file, line)
            case msg.MetricOp(metric_id, op, value):
                self._services.metrics.metric_update(metric_id, op, value)
            case msg.Call(call_id, op, args):
                self._call(call_id, op, args)
            case msg.Bls():
                self._start_bls(m)
            case msg.BlsCancel(call_id):
                req = self._bls.get(call_id)
                if req is not None:
                    req.cancelled = True
            case msg.FamilyDelete(family_id):
                self._services.metrics.family_delete(family_id)
            case msg.MetricDelete(metric_id):
                self._services.metrics.metric_delete(metric_id)
            case msg.Ready() | msg.InitError():
                self._init_result(m if isinstance(m, msg.Ready) else m.message)
            case msg.ReadyAnswer(call_id, ready):
                fut = self._calls.pop(call_id, None)
                if fut is not None and not fut.done():
                    fut.set_result(ready)
            case msg.FiniDone():
                fini = self._fini_future
                if fini is not None and not fini.done():
                    fini.set_result(None)
            case _:
                log.error("unexpected message from the stub of '%s': %r", self.name, m)

    def _init_result(self, result: msg.Ready | str) -> None:
        fut = self._init_future
        if fut is not None and not fut.done():
            fut.set_result(result)

    def _response(
        self, desc: msg.ResponseDesc | None, failed: bool, token: int
    ) -> InferResponse | None:
        match desc:
            case None:
                return None
            case msg.ErrorDesc(code, message):
                return InferResponse(error=CoreError(message, Code(code)), failed=failed)
            case msg.AnsweredDesc(rest):  # the worker wrote the answer to the client but rest
                return InferResponse(answered=True, rest=rest)
            case msg.DeclinedDesc():  # an unparsed request the worker did not take
                return InferResponse(declined=True)
            case msg.OutputsDesc(block, parameters, placed):
                worker = self._worker
                assert worker is not None
                outputs = [
                    OutputTensor(name, wire, list(shape), data)
                    for name, wire, shape, data in worker.read_block(block)
                ]
                if placed:
                    self._placed(outputs, placed, token)
                return InferResponse(outputs=outputs, parameters=parameters)
        raise AssertionError(desc)  # pragma: no cover

    def _placed(
        self,
        outputs: list[OutputTensor],
        placed: list[tuple[int, str, str, tuple[int, ...]]],
        token: int,
    ) -> None:
        """Add the outputs the worker wrote into their regions, as views of the server's
        own mappings of those bytes (the front end's write of each then finds it in
        place, after its usual checks)."""
        c = self._pending.get(token)
        parts = c.req.output_regions if c is not None else None
        if parts is None:
            return  # (nobody waits for this response any more)
        for position, name, wire, shape in placed:
            part = parts[name]
            dtype = _SERVER_DTYPES[wire]
            count = int(np.prod(shape, dtype=np.int64))
            view = np.frombuffer(part.region.view, dtype, count, part.offset).reshape(shape)
            outputs.insert(position, OutputTensor(name, wire, list(shape), view))

    def _done(self, m: msg.Done) -> None:
        pending = self._pending
        if m.sizes:  # the batch sizes of unparsed requests the worker admitted
            for token, size in m.sizes.items():
                c = pending.get(token)
                if c is not None:
                    c.req.batch_size = size
        for token, desc, failed in m.finals:
            c = pending.get(token)
            if c is not None:
                c.put(self._response(desc, failed, token), True, failed)
        self._batch_ended(m.batch_id, m.rescheduled)

    def _batch_ended(self, batch_id: int, rescheduled: list[bool] | None) -> None:
        """The worker's ``execute`` of a batch returned: the next batch sent ahead begins."""
        entry = self._batches.pop(batch_id, None)
        batches = self._batches
        if batches:
            # a batch sent ahead begins now: its stub timeout and its times count from here
            ahead = next(iter(batches))
            fut, _, on_free = batches[ahead]
            began = time.monotonic_ns()
            self._began[ahead] = began
            self._busy_since = began
            deadline = asyncio.get_running_loop().time() + self._settings.stub_timeout_s
            batches[ahead] = _Batch(fut, deadline, on_free)
        if entry is not None and not entry.done.done():
            entry.done.set_result(rescheduled)
            if entry.on_free is not None:
                # the worker is free: its next batch goes out now, ahead of whatever the
                # loop has queued (this batch's answers included). (That execute never
                # polls the channel inline, re-entering _readable: this one's execute
                # still counts as active until it resumes.)
                entry.on_free()

    @property
    def takes_ahead(self) -> bool:
        """Whether a busy instance may be sent one more request (it starts it when the
        one it runs ends): only for a quick, non-decoupled model on a live worker, while
        the execute it runs has not been running long."""
        worker = self._worker
        return (
            not self._decoupled
            and self._last_rtt < AHEAD_MAX_NS
            and time.monotonic_ns() - self._busy_since < AHEAD_MAX_NS
            and worker is not None
            and worker.alive
        )

    def _streamed(
        self, token: int, response: InferResponse | None, final: bool, failed: bool
    ) -> None:
        c = self._pending.get(token)
        if c is None:
            return
        c.put(response, final, failed)
        if final and self._decoupled:
            self._pending.pop(token, None)

    def _reply(self, call_id: int, ok: bool, value: Any) -> None:
        worker = self._worker
        if worker is not None:
            worker.send(msg.CallResult(call_id, ok, value))

    def _call(self, call_id: int, op: str, args: tuple[Any, ...]) -> None:
        services = self._services
        try:
            if op == "cancelled":
                c = self._pending.get(args[0])
                self._reply(call_id, True, bool(c is not None and c.req.cancelled))
            elif op == "family":
                self._reply(call_id, True, services.metrics.family_create(self.name, *args))
            elif op == "metric":
                self._reply(call_id, True, services.metrics.metric_create(self.name, *args))
            elif op == "metric_value":
                self._reply(call_id, True, services.metrics.metric_value(*args))
            elif op == "ready":
                result = services.is_model_ready(self.name, *args)
                self._reply(call_id, not isinstance(result, str), result)
            elif op in ("load", "unload"):
                self._spawn(self._control(call_id, op, args))
            else:
                self._reply(call_id, False, f"unknown request '{op}'")
        except TritonModelException as e:
            self._reply(call_id, False, str(e))

    async def _control(self, call_id: int, op: str, args: tuple[Any, ...]) -> None:
        if op == "load":
            error = await self._services.load_model(self.name, *args)
        else:
            error = await self._services.unload_model(self.name, *args)
        self._reply(call_id, error is None, error)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ------------------------------------------------------------------ BLS

    def _start_bls(self, m: msg.Bls) -> None:
        worker = self._worker
        assert worker is not None
        call_id, r = m.call_id, m.request
        inputs = {
            name: InputTensor(name, wire, list(shape), array=data)
            for name, wire, shape, data in worker.read_block(r.block)
        }
        req = InferRequest(
            id=r.request_id, inputs=inputs, requested_outputs=list(r.requested) or None,
            parameters=dict(r.parameters), correlation_id=r.correlation_id, flags=r.flags,
            timeout_us=r.timeout_us,
        )  # fmt: skip
        self._bls[call_id] = req

        def emit(response: InferResponse | None, final: bool) -> None:
            w = self._worker
            if final:
                self._bls.pop(call_id, None)
            if w is not worker or not w.alive:
                return
            w.send(msg.BlsResponse(call_id, self._encode(w, response), final))

        self._spawn(self._services.infer(req, m.model, m.version, m.decoupled, emit, r.trace))

    @staticmethod
    def _encode(worker: WorkerProcess, response: InferResponse | None) -> msg.ResponseDesc | None:
        if response is None:
            return None
        if response.error is not None:
            return msg.ErrorDesc(int(response.error.code), response.error.message)
        assert worker.inputs is not None
        block = write_block(
            worker.inputs, [(o.name, o.datatype, o.shape, o.array) for o in response.outputs]
        )
        params = (
            {k: v for k, v in response.parameters.items() if isinstance(v, (bool, int, str))}
            if response.parameters
            else None
        )
        return msg.OutputsDesc(block, params)

    # ------------------------------------------------------------------ crashes

    def _exited(self) -> None:
        """The worker's channel closed: fail what it had, then replace it."""
        text = self._death_text
        for fut, _, _ in self._batches.values():
            if not fut.done():
                fut.set_result(None)
        self._batches.clear()
        self._began.clear()
        for fut2 in self._calls.values():
            if not fut2.done():
                fut2.set_result(False)
        self._calls.clear()
        self._init_result(text)
        if self._fini_future is not None and not self._fini_future.done():
            self._fini_future.set_result(None)
        self._fail_pending(text)
        for req in self._bls.values():
            req.cancelled = True
        self._bls.clear()
        self._services.metrics.drop_instance(self.name)
        worker = self._worker
        if worker is not None:
            self._spawn(worker.reap())
        started = self._init_future is not None and self._init_future.done() and self.pid
        if started and not self._finalizing:
            log.error("%s", text)
            self._restart_soon()

    def _fail_pending(self, text: str) -> None:
        """Every request this worker had not finally answered gets ``text``."""
        pending, self._pending = self._pending, {}
        for c in pending.values():
            c.put(InferResponse(error=CoreError(text, Code.INTERNAL), failed=True), True, True)

    def _watch(self) -> None:
        """The stub-timeout watchdog: one timer per instance, set for the oldest batch in
        flight (rather than a timer per execute)."""
        self._watchdog = None
        worker = self._worker
        oldest = next((d for fut, d, _ in self._batches.values() if not fut.done()), None)
        if oldest is None or worker is None:
            return
        loop = asyncio.get_running_loop()
        if oldest > loop.time():
            self._watchdog = loop.call_at(oldest, self._watch)
        else:
            self._hung(worker)

    def _hung(self, worker: WorkerProcess) -> None:
        """``execute`` ran past stub-timeout-seconds: kill the worker (it is replaced)."""
        timeout = self._settings.stub_timeout_s
        self._death_text = (
            f"Stub process '{self.name}' did not return from execute within "
            f"stub-timeout-seconds ({timeout:g} s); it was killed and is restarted."
        )
        worker.kill()

    def _restart_soon(self) -> None:
        if self._restarting is None or self._restarting.done():
            self._restarting = asyncio.ensure_future(self._restart())

    async def _restart(self) -> None:
        delay = max(0.0, 1.0 - (time.monotonic() - self._last_restart))
        if delay:
            await asyncio.sleep(delay)
        if self._finalizing:
            return
        self._last_restart = time.monotonic()
        try:
            await self.start()
        except CoreError as e:
            self._broken = e.message
            log.error("failed to restart the stub process of '%s': %s", self.name, e.message)
            return
        self._broken = None
        self.restarts += 1
        log.info("restarted the stub process of '%s' (pid %d)", self.name, self.pid)

    async def _replacement_worker(self) -> WorkerProcess | None:
        """(The worker is gone.) Its replacement once started; None when there is none."""
        if self._finalizing:
            return None
        self._restart_soon()
        assert self._restarting is not None
        await asyncio.shield(self._restarting)
        worker = self._worker
        return worker if worker is not None and worker.alive else None

    # ------------------------------------------------------------------ execute

    async def execute(
        self, requests: list[InferRequest], times: ExecutionTimes
    ) -> list[InferResponse]:
        t0 = time.monotonic_ns()
        worker = self._worker
        if worker is None or not worker.alive:
            worker = await self._replacement_worker()
        if worker is None:
            text = self._broken or _not_healthy(self.name)
            return [InferResponse(error=CoreError(text, Code.INTERNAL), failed=True)
                    for _ in requests]  # fmt: skip
        first: DirectReply | None = requests[0].reply  # type: ignore[assignment]
        if len(requests) > 1:
            apart = self._unparsed_apart(worker, requests)
            if apart is not None:
                return await apart(times)
        elif (
            first is not None
            and first.unparsed is not None
            and not (self.parses_requests and worker.hold(first))
        ):
            return [InferResponse(declined=True)]
        loop = asyncio.get_running_loop()
        batch_id = next(self._tokens)
        done: asyncio.Future[list[bool] | None] = loop.create_future()
        deadline = loop.time() + self._settings.stub_timeout_s
        self._batches[batch_id] = _Batch(done, deadline, times.on_free)
        if self._watchdog is None:
            self._watchdog = loop.call_at(deadline, self._watch)
        collectors = self._send_batch(worker, batch_id, requests)
        t1 = time.monotonic_ns()
        if len(self._batches) == 1:
            self._busy_since = t1
        times.input_ns = t1 - t0
        poll = self._poll
        poll.active += 1
        try:
            self._poll_for(worker, done, t0, t1, requests)
            rescheduled = await done
        finally:
            poll.active -= 1
        t2 = time.monotonic_ns()
        began = self._began.pop(batch_id, t1) if self._began else t1
        if began > t1:  # sent ahead: it waited in the worker behind another batch
            times.waited_ns = began - t1
        else:
            began = t1
        times.infer_ns = t2 - began
        self._last_rtt = t2 - began
        out = collected(collectors, rescheduled) or await collect(collectors, rescheduled)
        if not self._decoupled:
            for c in collectors:
                self._pending.pop(c.token, None)
        self._last_end = time.monotonic_ns()
        times.output_ns = self._last_end - t2
        if requests[0].trace is not None or len(requests) > 1:
            trace_execution(requests, out, t0, times)
        return out

    def _unparsed_apart(
        self, worker: WorkerProcess, requests: list[InferRequest]
    ) -> Callable[[ExecutionTimes], Awaitable[list[InferResponse]]] | None:
        """None when the worker takes this batch as it is: the worker parses each request
        of it that is unparsed. Else how to run it: the unparsed requests declined (the
        front parses and queues them again), the others as a batch."""
        replies: list[DirectReply | None] = [r.reply for r in requests]  # type: ignore[misc]
        unparsed = [r for r in replies if r is not None and r.unparsed is not None]
        if not unparsed or (self.parses_requests and all(worker.hold(r) for r in unparsed)):
            return None
        parsed = [q for q, r in zip(requests, replies, strict=True)
                  if r is None or r.unparsed is None]  # fmt: skip

        async def run(times: ExecutionTimes) -> list[InferResponse]:
            done = iter(await self.execute(parsed, times) if parsed else ())
            return [next(done) if r is None or r.unparsed is None
                    else InferResponse(declined=True) for r in replies]  # fmt: skip

        return run

    def _send_batch(
        self, worker: WorkerProcess, batch_id: int, requests: list[InferRequest]
    ) -> list[Collector]:
        """Send the batch to the worker; a collector per request, registered as pending.
        A request handed over unparsed travels as its body."""
        inputs = worker.inputs
        assert inputs is not None
        decoupled = self._decoupled
        collectors: list[Collector] = []
        wire: list[msg.ExecRequest | msg.ExecUnparsed] = []
        unparsed: msg.ExecUnparsed | None = None
        for req in requests:
            token = next(self._tokens)
            c = Collector(req, decoupled, token=token)
            self._pending[token] = c
            collectors.append(c)
            reply: DirectReply | None = req.reply  # type: ignore[assignment]
            if reply is not None and reply.unparsed is not None:
                body, header_len = reply.unparsed
                block = _body_block(inputs, body)
                unparsed = msg.ExecUnparsed(batch_id, token, header_len, block, reply.key)
                wire.append(unparsed)
            else:
                wire.append(self._exec_request(worker, inputs, token, req))
        if unparsed is None:
            worker.send_frame(msg.encode_exec(batch_id, cast("list[msg.ExecRequest]", wire)))
        elif len(wire) == 1:  # (its batch size as the worker reads it comes back with it)
            requests[0].batch_size = 1
            worker.send(unparsed)
        else:
            worker.send(msg.ExecWithUnparsed(batch_id, wire, [r.batch_size for r in requests]))
        return collectors

    def _exec_request(
        self, worker: WorkerProcess, inputs: Producer, token: int, req: InferRequest
    ) -> msg.ExecRequest:
        """A parsed request as the worker gets it: its tensors placed in the arena, but
        for large ones in a client's shared-memory region (the worker maps those), and
        where the outputs asked into system regions go (the worker may write those)."""
        mapped = dests = None
        if req.regions:
            mapped = mapped_inputs(req, worker.send_region, worker.region_handles)
            if req.output_regions and not self._decoupled:
                dests = output_dests(req, worker.send_region, worker.region_handles)
        tensors = list(req.inputs.values())
        if mapped is not None:
            skip = {m[0] for m in mapped}
            tensors = [t for i, t in enumerate(tensors) if i not in skip]
        block = write_block(inputs, [(t.name, t.datatype, t.shape, t.array) for t in tensors])
        wanted = tuple(req.requested_outputs) if req.requested_outputs else self._outputs
        reply: DirectReply | None = req.reply  # type: ignore[assignment]
        answer = None
        if reply is not None and worker.hold(reply):
            answer = (reply.key, reply.answer)
        return msg.ExecRequest(
            token, req.id, req.correlation_id, req.flags, req.timeout_us, params_json(req),
            wanted, block, answer, None if req.trace is None else req.trace.handle(), mapped,
            dests,
        )  # fmt: skip

    def _poll_for(
        self,
        worker: WorkerProcess,
        done: asyncio.Future[list[bool] | None],
        t0: int,
        t1: int,
        requests: list[InferRequest],
    ) -> None:
        """Poll for a quick model's answer to ``requests`` (:class:`ReplyPoll`) before
        ``done`` is awaited: inline for a lone fresh request, else by keeping the loop
        turning."""
        poll = self._poll
        budget = poll.budget_ns(self._settings.busy_wait_us, self._last_rtt, len(requests))
        if not budget:
            return
        if poll.inline(t0, self._last_end, requests[0].start_ns):
            poll.poll_inline(worker.read_now, done, t1 + budget)
        else:
            stay_awake(asyncio.get_running_loop(), done, t1 + budget)

    async def is_ready(self) -> bool | None:
        """The model's own ``is_ready()`` (None: it has none); False when unhealthy.
        Concurrent checks share one call."""
        return await self._ready_check.run(self._ask_ready)

    async def _ask_ready(self) -> bool | None:
        worker = self._worker
        if worker is None or not worker.alive:
            return False
        if not self._ready_hook:
            return None
        call_id = next(self._tokens)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._calls[call_id] = fut
        worker.send(msg.IsReady(call_id))
        try:
            result = await asyncio.wait_for(fut, 6.0)
        except asyncio.TimeoutError:
            return False
        return result if isinstance(result, bool) or result is None else False

    async def finalize(self) -> None:
        self._finalizing = True
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        if self._restarting is not None and not self._restarting.done():
            with contextlib.suppress(BaseException):
                await self._restarting
        worker = self._worker
        if worker is not None and worker.alive:
            self._fini_future = asyncio.get_running_loop().create_future()
            worker.send(msg.Fini())
            try:
                await asyncio.wait_for(self._fini_future, self._settings.stub_timeout_s)
            except asyncio.TimeoutError:
                log.error("finalize of '%s' timed out; killing its stub process", self.name)
            worker.close()
        if worker is not None:
            await worker.reap()
        # streams the model never finished (decoupled requests without a FINAL)
        self._fail_pending(f"Stub process '{self.name}' was stopped: the model was unloaded.")
        self._services.metrics.drop_instance(self.name)
        if self._tasks:
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)


def _body_block(arena: Producer, body: bytearray | memoryview) -> Any:
    """An unparsed request's body for the worker: inside the message when small (as
    ``bytes``), else a block of one UINT8 tensor in the arena."""
    if len(body) <= INLINE:
        return bytes(body)
    return write_block(arena, [("", "UINT8", (len(body),), np.frombuffer(body, np.uint8))])
