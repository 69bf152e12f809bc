"""In-process isolation: model instances run inside the server's interpreter.

Each instance has its own imported copy of ``model.py`` and its own thread (or runs
inline on the event loop when its calls are quick, see :mod:`._runner`). pdb,
breakpoints and coverage see the model code as any other code of the process.
"""

from __future__ import annotations

import asyncio
import threading
import time

from triton_python_backend_utils._request import InferenceRequest, InferenceResponse

from ...core._trace import trace_execution
from ...core._types import ExecutionTimes, InferRequest, InferResponse
from ._collector import Collector, SharedCheck, collect, collected
from ._convert import core_error, core_response, pb_request, pb_tensor, requested_names
from ._execution import ModelHost
from ._output_check import OutputCheck
from ._runner import InstanceRunner
from ._services import ModelServices

__all__ = ["InProcessInstance"]


class _Link:
    """A request's way back to the server, in the server's own process: the model's
    responses, from whichever thread sends them, reach the request's collector."""

    __slots__ = ("_loop", "check", "collector", "decoupled", "loop_thread", "wanted")

    def __init__(
        self,
        req: InferRequest,
        decoupled: bool,
        wanted: set[str],
        loop: asyncio.AbstractEventLoop,
        loop_thread: int,
        check: OutputCheck | None = None,
    ) -> None:
        self.collector = Collector(req, decoupled, threading.Lock())
        self.decoupled = decoupled
        self.wanted = wanted
        self._loop = loop
        self.loop_thread = loop_thread
        self.check = check

    # called from model threads (or inline on the loop)
    def deliver(self, response: InferenceResponse | None, final: bool) -> None:
        if self.check is not None and response is not None:
            self.check.inspect(response)
        core = core_response(response, self.wanted) if response is not None else None
        self._hand(core, final, False)

    def fail(self, message: str) -> None:
        self._hand(core_error(message), True, True)

    def _hand(self, core: InferResponse | None, final: bool, failed: bool) -> None:
        c = self.collector
        if threading.get_ident() == self.loop_thread:
            c.put(core, final, failed)
            return
        if not c.decoupled:
            lock = c.lock
            assert lock is not None and core is not None
            with lock:
                if c.waiter is None:  # the loop does not wait yet: no need to wake it
                    c.failed = c.failed or failed
                    c.result = core
                    return
        self._loop.call_soon_threadsafe(c.put, core, final, failed)

    def is_cancelled(self) -> bool:
        return self.collector.req.cancelled


class InProcessInstance:
    """Implements :class:`~tritonhttp.server.core._backend_api.ModelInstance` in-process."""

    def __init__(
        self,
        host: ModelHost,
        output_names: list[str],
        runner: InstanceRunner,
        services: ModelServices,
        check: OutputCheck | None = None,
    ) -> None:
        self.name = host.instance_name
        #: compares responses with the configuration (``check-outputs``), or None
        self._check = check
        self.host = host
        self._outputs = set(output_names)
        self._decoupled = host.decoupled
        self._runner = runner
        self._services = services
        self._ready_check = SharedCheck()

    async def execute(
        self, requests: list[InferRequest], times: ExecutionTimes
    ) -> list[InferResponse]:
        t0 = time.monotonic_ns()
        loop = asyncio.get_running_loop()
        ident = threading.get_ident()
        links: list[_Link] = []
        pb_requests: list[InferenceRequest] = []
        decoupled = self._decoupled
        for req in requests:
            wanted = requested_names(req, self._outputs)
            link = _Link(req, decoupled, wanted, loop, ident, self._check)
            links.append(link)
            inputs = []
            for t in req.inputs.values():
                inputs.append(pb_tensor(t.name, t.datatype, t.array))  # type: ignore[arg-type]
            pb_requests.append(pb_request(req, inputs, wanted, link))
        t1 = time.monotonic_ns()
        times.input_ns = t1 - t0
        runner = self._runner
        try:
            if runner.inline:
                flags = runner.run_inline(self.host.execute, pb_requests)
            else:
                flags = await runner.run(self.host.execute, pb_requests)
        except BaseException as e:  # KeyboardInterrupt / cancellation
            for link in links:
                link.fail(self.host.fail_text(f"{type(e).__name__}: {e}"))
            if isinstance(e, Exception):
                flags = None  # (the batch failed as a whole)
            else:
                raise
        if self.host.uses_async:
            runner.never_inline()
        t2 = time.monotonic_ns()
        times.infer_ns = t2 - t1
        collectors = [link.collector for link in links]
        out = collected(collectors, flags) or await collect(collectors, flags)
        times.output_ns = time.monotonic_ns() - t2
        if requests[0].trace is not None or len(requests) > 1:
            trace_execution(requests, out, t0, times)
        return out

    async def is_ready(self) -> bool | None:
        """The model's own ``is_ready()`` answer (None: it has none); concurrent checks
        share one call."""
        return await self._ready_check.run(self._ask_ready)

    async def _ask_ready(self) -> bool | None:
        return await asyncio.get_running_loop().run_in_executor(None, self.host.is_ready)

    async def finalize(self) -> None:
        await self._runner.run(self.host.finalize, may_inline=False)
        self._runner.close()
        self._services.metrics.drop_instance(self.name)
