"""The server side of BLS and model control: what a backend may ask of the core."""

from __future__ import annotations

import asyncio
import base64
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from ._backend_api import Emit
from ._errors import Code, CoreError
from ._model import ModelVersion
from ._repo_files import parse_version
from ._repository import Repository
from ._types import InferRequest, InferResponse, ResponseStream

__all__ = ["CoreBridge", "decoupled_responses", "instances_ready"]


def _error(model: str, message: str, code: Code = Code.INTERNAL) -> InferResponse:
    return InferResponse(
        error=CoreError(f"Model {model} - Error when running inference: {message}", code)
    )


class CoreBridge:
    """Implements :class:`~._backend_api.ServerBridge` over a repository."""

    def __init__(self, repository: Repository, registry: Any = None) -> None:
        self._repo = repository
        self._registry = registry

    @property
    def control_mode(self) -> str:
        return self._repo.mode

    @property
    def registry(self) -> Any:
        return self._registry

    async def infer(
        self,
        request: InferRequest,
        model_name: str,
        model_version: int,
        decoupled: bool,
        emit: Emit,
    ) -> None:
        try:
            await self._infer(request, model_name, model_version, decoupled, emit)
        except Exception as e:  # never leave a BLS caller waiting
            emit(_error(model_name, f"{type(e).__name__}: {e}"), True)

    async def _infer(
        self,
        request: InferRequest,
        name: str,
        version: int,
        decoupled: bool,
        emit: Emit,
    ) -> None:
        try:
            # -1 is the latest version; 0 and other negatives are versions no model has
            model = self._repo.get(name, "" if version == -1 else str(version))
        except CoreError:
            emit(
                _error(
                    name,
                    f"Failed for execute the inference request. Model '{name}' is not ready.",
                ),
                True,
            )
            return
        if model.decoupled and not decoupled:
            emit(
                _error(
                    name,
                    f"Model {name} is using the decoupled. The current BLS request call doesn't "
                    "support models using the decoupled transaction policy. Please use "
                    "'decoupled=True' argument to the 'exec' or 'async_exec' calls for "
                    "decoupled models.'",
                ),
                True,
            )
            return
        try:
            model.admit(request)
        except CoreError as e:
            emit(_error(name, e.message, e.code), True)
            return
        if not model.decoupled:
            emit(await model.infer(request), True)
            return
        async for response, final in decoupled_responses(model, request):
            emit(response, final)

    async def load_model(self, name: str, config: str, files: dict[str, bytes]) -> None:
        if self._repo.mode != "explicit":
            raise CoreError(
                "explicit model load / unload is not allowed if polling is enabled",
                Code.UNSUPPORTED,
            )
        encoded = {
            k.removeprefix("file:"): base64.b64encode(v).decode("ascii") for k, v in files.items()
        }
        await self._repo.load(name, config or None, encoded or None)

    async def unload_model(self, name: str, unload_dependents: bool) -> None:
        if self._repo.mode != "explicit":
            raise CoreError(
                "explicit model load / unload is not allowed if polling is enabled",
                Code.UNSUPPORTED,
            )
        await self._repo.unload(name, unload_dependents)

    def is_model_ready(self, name: str, version: str) -> bool:
        if version:
            parse_version(version)
        return self._repo.is_ready(name, version)


async def decoupled_responses(
    model: ModelVersion, request: InferRequest
) -> AsyncIterator[tuple[InferResponse | None, bool]]:
    """Run an admitted request on a decoupled model; yield each ``(response, final)`` as
    the model sends it. A request the scheduler refuses yields its error as final.

    The consumer stopping early closes the stream (later responses are dropped).
    """
    stream = ResponseStream()
    request.response_stream = stream
    task = asyncio.ensure_future(model.infer(request))
    try:
        while True:
            if stream.pending():
                response, final = await stream.get()
            elif task.done():
                error = task.exception()
                if error is not None:
                    yield InferResponse(error=CoreError(str(error), Code.INTERNAL)), True
                    return
                marker = task.result()
                if marker.error is not None and stream.count == 0:
                    yield marker, True  # refused before the model saw it
                    return
                response, final = await stream.get()  # sent later, from the model's threads
            else:
                getter = asyncio.ensure_future(stream.get())
                await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
                if not getter.done():
                    getter.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await getter
                    continue
                response, final = getter.result()
            yield response, final
            if final:
                return
    finally:
        stream.close()
        if not task.done():
            await asyncio.wait({task})


async def instances_ready(model: ModelVersion) -> bool:
    """What the model's own ``is_ready()`` says (instances without one count as ready).

    An instance that is not healthy (a crashed worker being replaced) is not ready.
    """
    checks = [check() for inst in model.instances if (check := getattr(inst, "is_ready", None))]
    if not checks:
        return True
    results = await asyncio.gather(*checks, return_exceptions=True)
    return all(r is None or r is True for r in results)
