"""What the server provides to models, whichever process they run in.

:class:`ModelServices` lives on the server's event loop: model log lines, BLS requests,
model control and the custom-metric store. In-process models reach it through
:class:`InProcessRuntime` (installed as pb_utils' runtime in the server process); worker
processes reach it through their control channel (:mod:`._process`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator
from typing import Any

from triton_python_backend_utils import _runtime
from triton_python_backend_utils._errors import TritonModelException
from triton_python_backend_utils._metrics import MetricKind, MetricStore
from triton_python_backend_utils._request import InferenceRequest

from ...core._backend_api import Emit, ServerBridge
from ...core._errors import CoreError
from ...core._metrics import format_value
from ...core._trace import live_trace, trace_end
from ...core._types import InferRequest, InferResponse
from ._convert import core_request, pb_response
from ._execution import current_host

__all__ = ["InProcessRuntime", "ModelServices", "metrics_collector"]

model_log = logging.getLogger("tritonhttp.server.model")
_LEVELS = {0: logging.INFO, 1: logging.WARNING, 2: logging.ERROR, 3: 5}


def control_error(what: str, instance: str, message: str) -> str:
    return f"{what}: Failed to process the request for model '{instance}', message: {message}"


class ModelServices:
    """The server's services to models (bound to the server's loop and bridge)."""

    def __init__(self) -> None:
        self.bridge: ServerBridge | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.metrics = MetricStore()
        self._collector_registered = False

    def bind(self, bridge: ServerBridge, loop: asyncio.AbstractEventLoop) -> None:
        self.bridge = bridge
        self.loop = loop
        registry = bridge.registry
        if registry is not None and not self._collector_registered:
            registry.register(metrics_collector(self.metrics))
            self._collector_registered = True

    # ------------------------------------------------------------------ logging

    @staticmethod
    def log(level: int, message: str, file: str, line: int) -> None:
        model_log.log(_LEVELS.get(level, logging.INFO), "%s", message,
                      extra={"triton_where": (file, line)})  # fmt: skip

    # ------------------------------------------------------------------ BLS

    async def infer(
        self,
        request: InferRequest,
        name: str,
        version: int,
        decoupled: bool,
        emit: Emit,
        trace_id: int | None = None,
    ) -> None:
        """Run a model's BLS request; ``trace_id``: the trace the model passed with it
        (the request is then traced as that trace's child while it runs)."""
        if trace_id is not None:
            parent = live_trace(trace_id)
            if parent is not None:
                request.trace = parent.spawn(name, version)
                request.trace.request_id = request.id
                try:
                    await self._infer(request, name, version, decoupled, emit)
                finally:
                    trace_end(request)
                return
        await self._infer(request, name, version, decoupled, emit)

    async def _infer(
        self, request: InferRequest, name: str, version: int, decoupled: bool, emit: Emit
    ) -> None:
        if self.bridge is None:
            emit(
                InferResponse(
                    error=CoreError(
                        f"Model {name} - Error when running inference: the server is not ready"
                    )
                ),
                True,
            )
            return
        await self.bridge.infer(request, name, version, decoupled, emit)

    # ------------------------------------------------------------------ model control

    async def load_model(
        self, instance: str, name: str, config: str, files: dict[str, bytes]
    ) -> str | None:
        """None, or the error text for TritonModelException."""
        try:
            assert self.bridge is not None
            await self.bridge.load_model(name, config, files)
        except CoreError as e:
            return control_error("Failed to load model", instance, e.message)
        return None

    async def unload_model(self, instance: str, name: str, unload_dependents: bool) -> str | None:
        try:
            assert self.bridge is not None
            await self.bridge.unload_model(name, unload_dependents)
        except CoreError as e:
            return control_error("Failed to unload model", instance, e.message)
        return None

    def is_model_ready(self, instance: str, name: str, version: str) -> bool | str:
        """The readiness, or the error text."""
        try:
            assert self.bridge is not None
            return self.bridge.is_model_ready(name, version)
        except CoreError as e:
            return control_error("Failed to check model readiness", instance, e.message)


# ----------------------------------------------------------------------------- in-process


class InProcessRuntime(_runtime.Runtime):
    """pb_utils' runtime for models running in the server's process."""

    def __init__(self, services: ModelServices) -> None:
        super().__init__()
        self._default = services

    @property
    def services(self) -> ModelServices:
        """The calling model's server (several servers may share one process)."""
        host = current_host()
        if host is not None and isinstance(host.context, ModelServices):
            return host.context
        return self._default

    def metrics(self) -> MetricStore:
        return self.services.metrics

    def instance_name(self) -> str:
        host = current_host()
        return host.instance_name if host is not None else ""

    def model_dir(self) -> str:
        host = current_host()
        return host.model_dir if host is not None else ""

    def log(self, level: int, message: str, file: str, line: int) -> None:
        self.services.log(level, message, file, line)

    def _loop(self) -> asyncio.AbstractEventLoop:
        loop = self.services.loop
        if loop is None:
            raise TritonModelException("the server is not running")
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            raise TritonModelException(
                "BLS and model control cannot block the server's event loop: this instance "
                "ran inline; start the server with --backend-config=python,"
                "inline-execution=never"
            )
        return loop

    def _call(self, coro_fn: Callable[[], Any]) -> Any:
        loop = self._loop()
        fut = asyncio.run_coroutine_threadsafe(coro_fn(), loop)
        return fut.result()

    def check_bls(self) -> None:
        host = current_host()
        if host is not None and host.phase != "ready":
            raise TritonModelException("BLS is only supported during the 'execute' function.")

    def infer(self, request: InferenceRequest, decoupled: bool) -> _runtime.ResponseStream:
        loop = self._loop()
        stream = _runtime.ResponseStream()
        core = core_request(request)

        def emit(response: InferResponse | None, final: bool) -> None:
            stream.push(pb_response(response) if response is not None else None, final)

        def cancel() -> None:
            loop.call_soon_threadsafe(setattr, core, "cancelled", True)

        stream.cancel_hook = cancel
        name, version = request._model_name, request._model_version
        asyncio.run_coroutine_threadsafe(
            self.services.infer(core, name, version, decoupled, emit, request._trace._id or None),
            loop,
        )
        return stream

    def load_model(self, name: str, config: str, files: dict[str, bytes]) -> None:
        inst = self.instance_name()
        error = self._call(lambda: self.services.load_model(inst, name, config, files))
        if error is not None:
            raise TritonModelException(error)

    def unload_model(self, name: str, unload_dependents: bool) -> None:
        inst = self.instance_name()
        error = self._call(lambda: self.services.unload_model(inst, name, unload_dependents))
        if error is not None:
            raise TritonModelException(error)

    def is_model_ready(self, name: str, version: str) -> bool:
        result = self.services.is_model_ready(self.instance_name(), name, version)
        if isinstance(result, str):
            raise TritonModelException(result)
        return result


# ----------------------------------------------------------------------------- metrics


def metrics_collector(store: MetricStore) -> Any:
    """A prometheus_client collector exposing the custom metrics of ``store``."""
    from prometheus_client.core import Metric
    from prometheus_client.registry import Collector

    kinds = {
        MetricKind.COUNTER.value: "counter",
        MetricKind.GAUGE.value: "gauge",
        MetricKind.HISTOGRAM.value: "histogram",
    }

    class CustomMetrics(Collector):
        def collect(self) -> Iterator[Metric]:
            for family in store.snapshot():
                kind = kinds[family.kind]
                metric = Metric(family.name, family.description, kind)
                for unsorted, value in family.series:
                    labels = dict(sorted(unsorted.items()))  # label order as Triton prints it
                    if kind != "histogram":
                        metric.add_sample(family.name, labels, value)
                        continue
                    bounds, counts, total, count = value
                    # Triton's order: count, sum, then the buckets with "le" last
                    metric.add_sample(family.name + "_count", labels, count)
                    metric.add_sample(family.name + "_sum", labels, total)
                    for bound, c in zip(bounds, counts, strict=True):
                        metric.add_sample(family.name + "_bucket", {**labels, "le": _le(bound)}, c)
                    metric.add_sample(family.name + "_bucket", {**labels, "le": "+Inf"}, count)
                yield metric

    return CustomMetrics()


def _le(bound: float) -> str:
    """A bucket bound as Triton writes it: like a sample value (``1e+20``, ``+Inf``)."""
    return format_value(bound)
