"""Process isolation: each model instance in its own worker process.

:class:`WorkerProcess` spawns a fresh interpreter (``python -I _worker_boot.py``, never a
fork of the server), connects its control socket to the event loop (``add_reader``: no
thread hop per request) and owns the two shared-memory arenas.
:class:`ProcessInstance` is the core's ``ModelInstance`` over a worker: it sends
batches, turns the worker's messages into responses, serves its BLS, log, metric and
model-control requests, and replaces a worker that crashed, exited or hung past
``stub-timeout-seconds`` (failing that worker's requests, never the server).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import itertools
import logging
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from triton_python_backend_utils import _errors as _pb_errors
from triton_python_backend_utils._errors import TritonModelException

from ....utils._dtypes import BF16
from ...core._errors import Code, CoreError
from ...core._types import (
    DirectOffer,
    ExecutionTimes,
    InferRequest,
    InferResponse,
    InputTensor,
    OutputTensor,
)
from ._arena import Consumer, Producer
from ._convert import params_json
from ._ipc import (
    DECLINED,
    DTYPES,
    INLINE,
    FrameReader,
    encode,
    read_block,
    recv_fd,
    send_fd,
    write_block,
)
from ._services import ModelServices
from ._settings import BackendSettings

__all__ = ["ProcessInstance", "WorkerProcess", "run_auto_complete"]

log = logging.getLogger("tritonhttp.server")

BOOT = str(Path(__file__).with_name("_worker_boot.py"))
PB_UTILS_DIR = str(Path(_pb_errors.__file__).resolve().parent)
#: executes in flight over every worker of this server (a poll only when it is the only one)
_ACTIVE = [0]
_SERVER_DTYPES = {**DTYPES, "BF16": BF16}
#: the server's event loop polls for a worker's answer at most this long (µs): inline
#: for a lone request (serving no other connection meanwhile), else by turning without
#: sleeping (:func:`_stay_awake`)
REPLY_POLL_CAP_US = 300
#: a worker whose last execute took less than this is sent its next request while busy
#: (it starts it the moment the first ends, without waiting for the server's turn)
AHEAD_MAX_NS = 1_000_000
#: a worker holds at most this many client connections to answer on (more: the server
#: answers the requests of further connections itself)
DIRECT_CONNECTIONS = 256


def _stay_awake(loop: asyncio.AbstractEventLoop, done: asyncio.Future[Any], until_ns: int) -> None:
    """Keep ``loop`` from sleeping until ``done`` or ``until_ns``: a callback that queues
    itself again makes each pass of the loop poll its sockets without blocking. (A loop
    that sleeps in epoll pays a wake-up on the worker's answer, tens of microseconds on
    a virtual machine.)"""
    if not done.done() and time.monotonic_ns() < until_ns:
        loop.call_soon(_stay_awake, loop, done, until_ns)


def _not_healthy(name: str) -> str:
    return f"Stub process '{name}' is not healthy."


class WorkerProcess:
    """One worker process and the server's end of its channel (event-loop side)."""

    def __init__(
        self,
        name: str,
        settings: BackendSettings,
        on_message: Callable[[Any], None],
        on_exit: Callable[[], None],
        python: str | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.name = name
        self._settings = settings
        self._on_message = on_message
        self._on_exit = on_exit
        self._python = python or settings.python
        self._env = env
        self.proc: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None
        self._fd_sock: socket.socket | None = None
        self._frames = FrameReader()
        self._out: collections.deque[memoryview] = collections.deque()
        self._writing = False
        self.inputs: Producer | None = None
        self.outputs = Consumer()
        #: client connections this worker holds a descriptor of (their keys)
        self.connections: set[int] = set()
        self.alive = False
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> None:
        """Spawn the process and set its arenas up (messages flow from now on)."""
        loop = asyncio.get_running_loop()
        self._loop = loop
        ctl, ctl_child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        fds, fds_child = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            self.proc = subprocess.Popen(
                [self._python, "-I", BOOT, str(ctl_child.fileno()), str(fds_child.fileno()),
                 str(os.getpid()), PB_UTILS_DIR],
                pass_fds=(ctl_child.fileno(), fds_child.fileno()),
                stdin=subprocess.DEVNULL,
                env=self._env,
            )  # fmt: skip
        except OSError:
            for s in (ctl, ctl_child, fds, fds_child):
                s.close()
            raise
        ctl_child.close()
        fds_child.close()
        ctl.setblocking(False)
        fds.settimeout(30)
        self._sock, self._fd_sock = ctl, fds
        self.alive = True
        loop.add_reader(ctl.fileno(), self._readable)
        cfg = self._settings
        self.send(
            (
                "setup",
                {
                    "prefix": cfg.shm_prefix,
                    "default_size": cfg.shm_default,
                    "growth": cfg.shm_growth,
                    "spin_us": cfg.busy_wait_us,
                },
            )
        )
        self.inputs = Producer(
            cfg.shm_prefix, cfg.shm_default, cfg.shm_growth, self._announce, self._retire
        )

    # ------------------------------------------------------------------ sending

    def _announce(self, segment_id: int, fd: int, size: int) -> None:
        if self._fd_sock is not None and self.alive:
            try:
                send_fd(self._fd_sock, fd)
            except OSError:
                return
        self.send(("seg", segment_id, size))

    def _retire(self, segment_id: int) -> None:
        self.send(("unseg", segment_id))

    def offer(self, offer: DirectOffer) -> bool:
        """Make sure the worker holds the offered connection (False: it cannot)."""
        key = offer.key
        if key in self.connections:
            return True
        if len(self.connections) >= DIRECT_CONNECTIONS or self._fd_sock is None or not self.alive:
            return False
        try:
            send_fd(self._fd_sock, offer.fd)
        except OSError:
            return False
        self.send(("conn", key, *offer.heads))  # (the heads go once per connection)
        self.connections.add(key)
        offer.on_close(functools.partial(self._connection_closed, key))
        return True

    def _connection_closed(self, key: int) -> None:
        if key in self.connections:
            self.connections.discard(key)
            self.send(("unconn", key))

    def send(self, message: Any) -> None:
        """Queue a control message (written at once when the socket takes it)."""
        if not self.alive or self._sock is None:
            return
        data = encode(message)
        if self._writing:
            self._out.append(memoryview(data))
            return
        try:
            n = self._sock.send(data)
        except (BlockingIOError, InterruptedError):
            n = 0
        except OSError:
            self._died()
            return
        if n < len(data):
            self._out.append(memoryview(data)[n:])
            self._writing = True
            assert self._loop is not None
            self._loop.add_writer(self._sock.fileno(), self._writable)

    def _writable(self) -> None:
        sock = self._sock
        assert sock is not None
        while self._out:
            chunk = self._out[0]
            try:
                n = sock.send(chunk)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                self._died()
                return
            if n < len(chunk):
                self._out[0] = chunk[n:]
                return
            self._out.popleft()
        self._writing = False
        assert self._loop is not None
        self._loop.remove_writer(sock.fileno())

    # ------------------------------------------------------------------ receiving

    def _readable(self) -> None:
        sock = self._sock
        if sock is None:
            return
        try:
            data = sock.recv(1 << 18)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._died()
            return
        for message in self._frames.feed(data):
            if message[0] == "seg":
                assert self._fd_sock is not None
                try:
                    self.outputs.add(message[1], recv_fd(self._fd_sock), message[2])
                except OSError:
                    self._died()
                    return
            elif message[0] == "unseg":
                self.outputs.drop(message[1])
            else:
                self._on_message(message)

    def read_block(self, block: Any) -> list[tuple[str, str, tuple[int, ...], Any]]:
        """The tensors of a block the worker wrote."""
        return read_block(self.outputs, block, _SERVER_DTYPES)

    # ------------------------------------------------------------------ ending

    def _died(self) -> None:
        if not self.alive:
            return
        self.alive = False
        self._close_channel()
        self._on_exit()

    def _close_channel(self) -> None:
        loop = self._loop
        sock = self._sock
        if sock is not None and loop is not None:
            with contextlib.suppress(Exception):
                loop.remove_reader(sock.fileno())
            if self._writing:
                with contextlib.suppress(Exception):
                    loop.remove_writer(sock.fileno())
        for s in (self._sock, self._fd_sock):
            if s is not None:
                s.close()
        self._sock = self._fd_sock = None
        self._out.clear()
        self._writing = False
        self.connections.clear()
        if self.inputs is not None:
            self.inputs.close()
        self.outputs.close()

    def kill(self) -> None:
        """SIGKILL the process (its requests are failed by ``on_exit``)."""
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGKILL)
        self._died()

    async def reap(self, timeout: float = 10.0) -> None:
        """Wait for the process to end (killing it after ``timeout``)."""
        proc = self.proc
        if proc is None:
            return
        deadline = time.monotonic() + timeout
        while proc.poll() is None:
            if time.monotonic() > deadline:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await asyncio.get_running_loop().run_in_executor(None, proc.wait)
                break
            await asyncio.sleep(0.01)

    def close(self) -> None:
        """Close the channel (the process exits when it sees that)."""
        was = self.alive
        self.alive = False
        if was:
            self._close_channel()


class _Pending:
    """A request sent to a worker and not finally answered yet."""

    __slots__ = ("failed", "req", "result", "waiter")

    def __init__(self, req: InferRequest) -> None:
        self.req = req
        self.result: InferResponse | None = None
        self.waiter: asyncio.Future[InferResponse] | None = None
        self.failed = False


class ProcessInstance:
    """Implements :class:`~tritonhttp.server.core._backend_api.ModelInstance` over a worker."""

    def __init__(
        self,
        name: str,
        init_message: tuple[Any, ...],
        decoupled: bool,
        output_names: list[str],
        settings: BackendSettings,
        services: ModelServices,
        python: str | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.name = name
        self._init_message = init_message
        self._decoupled = decoupled
        #: the worker may write a request's answer to the client itself (``direct``)
        self.answers_directly = not decoupled
        self._outputs = tuple(output_names)  # what the model is told when nothing is asked
        self._settings = settings
        self._services = services
        self._python = python
        self._env = env
        self._worker: WorkerProcess | None = None
        self._tokens = itertools.count(1)
        self._pending: dict[int, _Pending] = {}
        #: batches in flight (oldest first): their future, stub-timeout deadline, and
        #: whom to tell the moment the worker is free (ExecutionTimes.on_free)
        self._batches: dict[
            int, tuple[asyncio.Future[list[bool] | None], float, Callable[[], None] | None]
        ] = {}
        #: when a batch sent ahead began (its predecessor's ``done``), by batch id
        self._began: dict[int, int] = {}
        #: when the batch the worker runs now began
        self._busy_since = 0
        self._watchdog: asyncio.TimerHandle | None = None
        self._calls: dict[int, asyncio.Future[Any]] = {}
        self._bls: dict[int, InferRequest] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._init_future: asyncio.Future[Any] | None = None
        self._fini_future: asyncio.Future[None] | None = None
        self._restarting: asyncio.Task[None] | None = None
        self._broken: str | None = None
        self._last_restart = 0.0
        self._finalizing = False
        self._death_text = ""
        self.pid = 0
        #: times this instance's worker was replaced
        self.restarts = 0
        self._ready_check: asyncio.Future[bool | None] | None = None
        self._last_end = 0
        self._last_rtt = 0
        self._ready_hook = False
        #: the worker parses unparsed requests itself (``InferRequest.body``)
        self.parses_requests = False

    # ------------------------------------------------------------------ start

    async def start(self) -> None:
        """Spawn the worker and initialise the model; raises CoreError when that fails."""
        loop = asyncio.get_running_loop()
        worker = WorkerProcess(
            self.name, self._settings, self._message, self._exited, self._python, self._env
        )
        self._worker = worker
        self._death_text = _not_healthy(self.name)
        self._init_future = loop.create_future()
        try:
            worker.start()
        except OSError as e:
            raise CoreError(
                f"failed to start the Python stub process: {e}", Code.INTERNAL
            ) from None
        worker.send(self._init_message)
        result = await self._init_future
        if isinstance(result, str):
            worker.close()
            await worker.reap()
            raise CoreError(result, Code.INTERNAL)
        self.pid, self._ready_hook = int(result[0]), bool(result[1])
        self.parses_requests = len(result) > 2 and bool(result[2])

    # ------------------------------------------------------------------ messages

    def _message(self, m: Any) -> None:
        kind = m[0]
        if kind == "done":
            self._done(m[1], m[2], m[3], m[4] if len(m) > 4 else None)
        elif kind == "resp":
            self._resp(m[1], m[2], m[3], m[4])
        elif kind == "log":
            self._services.log(m[1], m[2], m[3], m[4])
        elif kind == "metric_op":
            self._services.metrics.metric_update(m[1], m[2], m[3])
        elif kind == "call":
            self._call(m[1], m[2], m[3])
        elif kind == "bls":
            self._start_bls(m[1], m[2], m[3], m[4], m[5])
        elif kind == "bls_cancel":
            req = self._bls.get(m[1])
            if req is not None:
                req.cancelled = True
        elif kind == "family_del":
            self._services.metrics.family_delete(m[1])
        elif kind == "metric_del":
            self._services.metrics.metric_delete(m[1])
        elif kind in ("ready", "init_error"):
            fut = self._init_future
            if fut is not None and not fut.done():
                fut.set_result(m[1])
        elif kind == "reply":
            fut2 = self._calls.pop(m[1], None)
            if fut2 is not None and not fut2.done():
                fut2.set_result(m[2])
        elif kind == "fini_done":
            fini = self._fini_future
            if fini is not None and not fini.done():
                fini.set_result(None)

    def _response(self, desc: Any, failed: bool) -> InferResponse | None:
        if desc is None:
            return None
        if desc[0] == DECLINED[0]:  # an unparsed request the worker did not take
            return InferResponse(declined=True)
        if desc[0] == 0:
            return InferResponse(error=CoreError(desc[2], Code(desc[1])), failed=failed)
        if desc[0] == 2:  # the worker wrote the answer to the client (all but desc[1])
            return InferResponse(answered=True, rest=desc[1])
        worker = self._worker
        assert worker is not None
        outputs = [
            OutputTensor(name, wire, list(shape), data)
            for name, wire, shape, data in worker.read_block(desc[1])
        ]
        return InferResponse(outputs=outputs, parameters=desc[2])

    def _done(
        self,
        batch_id: int,
        finals: list[Any],
        flags: list[bool] | None,
        sizes: dict[int, int] | None = None,
    ) -> None:
        if sizes:  # the batch sizes of unparsed requests the worker admitted (other than 1)
            for token, size in sizes.items():
                p = self._pending.get(token)
                if p is not None:
                    p.req.batch_size = size
        for token, desc, failed in finals:
            self._finish(token, self._response(desc, failed))
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
            batches[ahead] = (fut, deadline, on_free)
        if entry is not None and not entry[0].done():
            entry[0].set_result(flags)
            if entry[2] is not None:
                # the worker is free: its next batch goes out now, ahead of whatever the
                # loop has queued (this batch's answers included). (That execute never
                # polls the channel inline, re-entering _readable: this one's execute
                # still counts in _ACTIVE until it resumes.)
                entry[2]()

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

    def _finish(self, token: int, response: InferResponse | None) -> None:
        p = self._pending.get(token)
        if p is None or response is None:
            return
        if p.waiter is None:
            p.result = response
        elif not p.waiter.done():
            p.waiter.set_result(response)

    def _resp(self, token: int, desc: Any, final: bool, failed: bool) -> None:
        p = self._pending.get(token)
        if p is None:
            return
        response = self._response(desc, failed)
        if failed:
            p.failed = True
        if not self._decoupled:
            self._finish(token, response)
            return
        stream = p.req.response_stream
        if stream is not None:
            stream.put(response, final)
        elif response is not None and response.error is not None and p.result is None:
            p.result = response  # no stream (warm-up): the first error
        if final:
            self._pending.pop(token, None)

    def _reply(self, call_id: int, ok: bool, value: Any) -> None:
        worker = self._worker
        if worker is not None:
            worker.send(("reply", call_id, (ok, value)))

    def _call(self, call_id: int, op: str, args: tuple[Any, ...]) -> None:
        services = self._services
        try:
            if op == "cancelled":
                p = self._pending.get(args[0])
                self._reply(call_id, True, bool(p is not None and p.req.cancelled))
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

    def _start_bls(
        self, call_id: int, model: str, version: int, decoupled: bool, desc: Any
    ) -> None:
        worker = self._worker
        assert worker is not None
        rid, cid, flags, timeout, params, requested, tensors = desc
        inputs = {
            name: InputTensor(name, wire, list(shape), array=data)
            for name, wire, shape, data in worker.read_block(tensors)
        }
        req = InferRequest(
            id=rid, inputs=inputs, requested_outputs=list(requested) or None,
            parameters=dict(params), correlation_id=cid, flags=flags, timeout_us=timeout,
        )  # fmt: skip
        self._bls[call_id] = req

        def emit(response: InferResponse | None, final: bool) -> None:
            w = self._worker
            if final:
                self._bls.pop(call_id, None)
            if w is not worker or not w.alive:
                return
            w.send(("bls_resp", call_id, self._encode(w, response), final))

        self._spawn(self._services.infer(req, model, version, decoupled, emit))

    @staticmethod
    def _encode(worker: WorkerProcess, response: InferResponse | None) -> Any:
        if response is None:
            return None
        if response.error is not None:
            return (0, int(response.error.code), response.error.message)
        assert worker.inputs is not None
        block = write_block(
            worker.inputs, [(o.name, o.datatype, o.shape, o.array) for o in response.outputs]
        )
        params = (
            {k: v for k, v in response.parameters.items() if isinstance(v, (bool, int, str))}
            if response.parameters
            else None
        )
        return (1, block, params)

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
        if self._init_future is not None and not self._init_future.done():
            self._init_future.set_result(text)
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
        for p in pending.values():
            error = InferResponse(error=CoreError(text, Code.INTERNAL), failed=True)
            p.failed = True
            if self._decoupled:
                stream = p.req.response_stream
                if stream is not None:
                    stream.put(error, True)
            elif p.waiter is None:
                p.result = error
            elif not p.waiter.done():
                p.waiter.set_result(error)

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
        assert worker.inputs is not None
        if requests[0].body is not None:  # (an unparsed request executes alone)
            offer = requests[0].direct
            if not self.parses_requests or offer is None or not worker.offer(offer):
                return [InferResponse(declined=True)]
        loop = asyncio.get_running_loop()
        batch_id = next(self._tokens)
        done: asyncio.Future[list[bool] | None] = loop.create_future()
        deadline = loop.time() + self._settings.stub_timeout_s
        self._batches[batch_id] = (done, deadline, times.on_free)
        if self._watchdog is None:
            self._watchdog = loop.call_at(deadline, self._watch)
        pendings: list[tuple[int, _Pending]] = []
        descs: list[tuple[Any, ...]] = []
        inputs = worker.inputs
        outputs = self._outputs
        for req in requests:
            token = next(self._tokens)
            p = _Pending(req)
            self._pending[token] = p
            pendings.append((token, p))
            if req.body is not None:
                # unparsed: the worker parses, checks and answers it, or declines it
                body, header_len = req.body
                assert req.direct is not None
                descs.append((token, header_len, _body_block(inputs, body), req.direct.key))
                continue
            block = write_block(
                inputs, [(t.name, t.datatype, t.shape, t.array) for t in req.inputs.values()]
            )
            wanted = tuple(req.requested_outputs) if req.requested_outputs else outputs
            offer = req.direct
            direct = offer.answer if offer is not None and worker.offer(offer) else None
            descs.append(
                (token, req.id, req.correlation_id, req.flags, req.timeout_us, params_json(req),
                 wanted, block, direct)
            )  # fmt: skip
        worker.send(("exec", batch_id, descs))
        t1 = time.monotonic_ns()
        if len(self._batches) == 1:
            self._busy_since = t1
        times.input_ns = t1 - t0
        spin = min(self._settings.busy_wait_us, REPLY_POLL_CAP_US) * 1000
        _ACTIVE[0] += 1
        try:
            if spin and self._last_rtt < spin:
                # a quick model: poll for the answer a moment rather than let the event
                # loop sleep (a wake-up costs tens of microseconds)
                deadline = t1 + spin
                if (
                    _ACTIVE[0] == 1
                    and t0 - self._last_end > 60_000
                    and t0 - requests[0].start_ns < 100_000
                ):
                    # one request at a time (it did not queue, no other execute is in
                    # flight): poll the worker's socket right here
                    while worker.alive and time.monotonic_ns() < deadline:
                        worker._readable()
                        if done.done():
                            break
                        os.sched_yield()
                else:
                    # other work is under way: keep the loop turning (it serves every
                    # connection meanwhile) until the answer
                    _stay_awake(loop, done, deadline)
            flags = await done
        finally:
            _ACTIVE[0] -= 1
        t2 = time.monotonic_ns()
        began = self._began.pop(batch_id, t1) if self._began else t1
        if began > t1:  # sent ahead: it waited in the worker behind another batch
            times.waited_ns = began - t1
        else:
            began = t1
        times.infer_ns = t2 - began
        self._last_rtt = t2 - began
        out: list[InferResponse] = []
        for i, (token, p) in enumerate(pendings):
            if flags is not None and flags[i]:
                self._pending.pop(token, None)
                out.append(InferResponse(rescheduled=True))
            elif self._decoupled:
                out.append(p.result or InferResponse(failed=p.failed))
            else:
                if p.result is None:
                    p.waiter = loop.create_future()
                    p.result = await p.waiter
                self._pending.pop(token, None)
                out.append(p.result)
        self._last_end = time.monotonic_ns()
        times.output_ns = self._last_end - t2
        return out

    async def is_ready(self) -> bool | None:
        """The model's own ``is_ready()`` (None: it has none); False when unhealthy.
        Concurrent checks share one call."""
        if self._ready_check is None or self._ready_check.done():
            self._ready_check = asyncio.ensure_future(self._ask_ready())
        return await asyncio.shield(self._ready_check)

    async def _ask_ready(self) -> bool | None:
        worker = self._worker
        if worker is None or not worker.alive:
            return False
        if not self._ready_hook:
            return None
        call_id = next(self._tokens)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._calls[call_id] = fut
        worker.send(("isready", call_id))
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
            worker.send(("fini",))
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


async def run_auto_complete(
    settings: BackendSettings,
    message: tuple[Any, ...],
    name: str,
    python: str | None = None,
    env: dict[str, str] | None = None,
) -> str | None:
    """Run ``auto_complete_config`` in a short-lived worker (as Triton's model-level stub).

    Returns the completed config JSON (None: the model has no such method); raises
    CoreError with the model's error."""
    loop = asyncio.get_running_loop()
    result: asyncio.Future[Any] = loop.create_future()

    def on_message(m: Any) -> None:
        if not result.done():
            if m[0] == "ac":
                result.set_result(("ok", m[1]))
            elif m[0] == "init_error":
                result.set_result(("error", m[1]))

    def on_exit() -> None:
        if not result.done():
            result.set_result(("error", _not_healthy(name)))

    worker = WorkerProcess(name, settings, on_message, on_exit, python, env)
    try:
        worker.start()
    except OSError as e:
        raise CoreError(f"failed to start the Python stub process: {e}", Code.INTERNAL) from None
    try:
        worker.send(message)
        status, value = await result
    finally:
        worker.close()
        await worker.reap()
    if status == "error":
        raise CoreError(value, Code.INTERNAL)
    return value  # type: ignore[no-any-return]
