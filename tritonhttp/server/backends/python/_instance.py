"""An instance of a Python-backend model run in the server process."""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from ... import _json
from ...core._errors import Code, CoreError
from ...core._types import ExecutionTimes, InferRequest, InferResponse, OutputTensor
from . import _pb_utils as pb
from ._loader import format_exception
from ._runner import InstanceRunner

__all__ = ["InProcessInstance"]

log = logging.getLogger("tritonhttp.server")


class _AsyncLoop:
    """A private event loop on a daemon thread for ``async def execute`` models."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)


class InProcessInstance:
    """Implements :class:`~tritonhttp.server.core._backend_api.ModelInstance` in-process."""

    def __init__(
        self,
        name: str,
        model: Any,
        model_file: Path,
        version_dir: Path,
        output_names: list[str],
        decoupled: bool,
        runner: InstanceRunner,
    ) -> None:
        self.name = name
        self._model = model
        self._model_file = model_file
        self._version_dir = version_dir
        self._output_names = set(output_names)
        self._decoupled = decoupled
        self._runner = runner
        self._async_loop: _AsyncLoop | None = None
        self._has_execute = callable(getattr(model, "execute", None))

    # ------------------------------------------------------------------ execute

    def _call(self, requests: list[pb.InferenceRequest]) -> Any:
        pb._model_dir.path = self._version_dir
        result = self._model.execute(requests)
        if inspect.iscoroutine(result):
            self._runner.never_inline()
            if self._async_loop is None:
                self._async_loop = _AsyncLoop(f"{self.name}-asyncio")
            result = self._async_loop.run(result)
        return result

    def _fail_all(self, n: int, message: str) -> list[InferResponse]:
        err = CoreError(
            f"Failed to process the request(s) for model '{self.name}', message: {message}",
            Code.INTERNAL,
        )
        return [InferResponse(error=err, failed=True) for _ in range(n)]

    async def execute(
        self, requests: list[InferRequest], times: ExecutionTimes
    ) -> list[InferResponse]:
        t0 = time.monotonic_ns()
        n = len(requests)
        if self._decoupled:
            return self._fail_all(
                n, "decoupled models are not supported by this server yet (tritonhttp)"
            )
        if not self._has_execute:
            return self._fail_all(
                n, f"Python model {self._model_file} does not implement `execute` method."
            )
        senders: list[pb.InferenceResponseSender] = []
        finals: list[list[Any]] = []
        pb_requests = []
        for req in requests:
            box: list[Any] = []
            sender = pb.InferenceResponseSender(False, box.append)
            senders.append(sender)
            finals.append(box)
            pb_requests.append(self._pb_request(req, sender))
        t1 = time.monotonic_ns()
        times.input_ns = t1 - t0
        try:
            if self._runner.inline:
                result = self._runner.run_inline(self._call, pb_requests)
            else:
                result = await self._runner.run(self._call, pb_requests)
        except BaseException as e:  # the model's exception, whatever it is
            times.infer_ns = time.monotonic_ns() - t1
            if isinstance(e, (KeyboardInterrupt, asyncio.CancelledError)):
                raise
            text = format_exception(e)
            out = self._fail_all(n, text)
            for i, box in enumerate(finals):
                if box:
                    out[i] = self._convert(box[0], requests[i])
            return out
        t2 = time.monotonic_ns()
        times.infer_ns = t2 - t1
        out = self._collect(result, requests, senders, finals)
        times.output_ns = time.monotonic_ns() - t2
        return out

    def _collect(
        self,
        result: Any,
        requests: list[InferRequest],
        senders: list[pb.InferenceResponseSender],
        finals: list[list[Any]],
    ) -> list[InferResponse]:
        n = len(requests)
        if result is None:
            if all(box for box in finals):
                return [self._convert(box[0], r) for box, r in zip(finals, requests, strict=False)]
            result = [None] * n if all(s._was_used() for s in senders) else result
        if not isinstance(result, list):
            return self._with_answered(
                self._fail_all(
                    n, f"Expected a list in the execute return, found type '{type(result)}'."
                ),
                finals,
                requests,
            )
        if len(result) != n:
            return self._with_answered(
                self._fail_all(
                    n,
                    "Number of InferenceResponse objects do not match the number of "
                    f"InferenceRequest objects. InferenceRequest(s) size is:{n}, and "
                    f"InferenceResponse(s) size is:{len(result)}\n",
                ),
                finals,
                requests,
            )
        out: list[InferResponse] = []
        for i, item in enumerate(result):
            if item is None:
                if finals[i]:
                    out.append(self._convert(finals[i][0], requests[i]))
                    continue
                item_error = (
                    "Expected an 'InferenceResponse' object in the execute function return "
                    f"list, found type '{type(item)}'."
                )
                return self._with_answered(self._fail_all(n, item_error), finals, requests)
            if not isinstance(item, pb.InferenceResponse):
                return self._with_answered(
                    self._fail_all(
                        n,
                        "Expected an 'InferenceResponse' object in the execute function "
                        f"return list, found type '{type(item)}'.",
                    ),
                    finals,
                    requests,
                )
            if finals[i]:
                return self._with_answered(
                    self._fail_all(n, "Unable to send response. Response sender has been closed."),
                    finals,
                    requests,
                )
            out.append(self._convert(item, requests[i]))
        return out

    def _with_answered(
        self, out: list[InferResponse], finals: list[list[Any]], requests: list[InferRequest]
    ) -> list[InferResponse]:
        for i, box in enumerate(finals):
            if box:
                out[i] = self._convert(box[0], requests[i])
        return out

    # ------------------------------------------------------------------ conversions

    def _pb_request(
        self, req: InferRequest, sender: pb.InferenceResponseSender
    ) -> pb.InferenceRequest:
        inputs = [
            pb.Tensor._from_server(t.name, t.datatype, t.array)  # type: ignore[arg-type]
            for t in req.inputs.values()
        ]
        requested = set(req.requested_outputs) if req.requested_outputs else set(self._output_names)
        params = _json.dumps(req.parameters).decode("utf-8") if req.parameters else "{}"
        return pb.InferenceRequest._from_server(
            req.id,
            req.correlation_id,
            inputs,
            requested,
            req.flags,
            req.timeout_us,
            params,
            sender,
        )

    def _convert(self, response: pb.InferenceResponse, req: InferRequest) -> InferResponse:
        error = response.error()
        if error is not None:
            return InferResponse(error=CoreError(error.message(), Code(error.code().value)))
        wanted = set(req.requested_outputs) if req.requested_outputs else self._output_names
        outputs: list[OutputTensor] = []
        for tensor in response.output_tensors():
            name = tensor._name
            if name not in wanted:
                continue
            if tensor._wire == "BYTES":
                items = tensor._items
                if items is None:
                    items = pb._as_bytes_items(tensor._array)
                arr = np.empty(len(items), dtype=np.object_)
                arr[:] = items
                outputs.append(OutputTensor(name, "BYTES", list(tensor._array.shape), arr))
            else:
                array = tensor._array
                outputs.append(OutputTensor(name, tensor._wire, list(array.shape), array))
        return InferResponse(outputs=outputs)

    # ------------------------------------------------------------------ lifecycle

    def _finalize(self) -> None:
        pb._model_dir.path = self._version_dir
        fini = getattr(self._model, "finalize", None)
        if callable(fini):
            try:
                fini()
            except Exception as e:  # logged and ignored, as Triton does
                log.error(
                    "Failed to finalize model instance '%s': %s", self.name, format_exception(e)
                )

    async def finalize(self) -> None:
        await self._runner.run(self._finalize, may_inline=False)
        if self._async_loop is not None:
            self._async_loop.stop()
        self._runner.close()
