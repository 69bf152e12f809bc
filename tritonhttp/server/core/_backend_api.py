"""The narrow interface between the core and a backend.

A backend loads one model version: it may complete the configuration
(:meth:`Backend.auto_complete`), then creates the instances the core schedules requests
on (:meth:`Backend.create_instance`). An instance executes batches of
:class:`~._types.InferRequest` and answers one :class:`~._types.InferResponse` per
request; how (in this process, in a worker process) is the backend's business.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ._errors import Code, CoreError
from ._types import ExecutionTimes, InferRequest, InferResponse
from .model_config_pb2 import ModelConfig

__all__ = ["Backend", "Emit", "LoadContext", "ModelInstance", "ServerBridge"]

#: receives each response of a BLS request: ``(response or None, final)``
Emit = Callable[[InferResponse | None, bool], None]


class ServerBridge(Protocol):
    """What the core lends a backend so models can reach the server (BLS, model control,
    the metrics registry). Every method runs on the server's event loop."""

    async def infer(
        self,
        request: InferRequest,
        model_name: str,
        model_version: int,
        decoupled: bool,
        emit: Emit,
    ) -> None:
        """Run a BLS request; every response (errors included) goes to ``emit`` and the
        last one is final. Never raises."""
        ...

    async def load_model(self, name: str, config: str, files: dict[str, bytes]) -> None:
        """Load or reload a model; raises CoreError with the server's message."""
        ...

    async def unload_model(self, name: str, unload_dependents: bool) -> None:
        """Start unloading a model; raises CoreError."""
        ...

    def is_model_ready(self, name: str, version: str) -> bool:
        """Whether the model (version) is ready; raises CoreError for a bad version."""
        ...

    @property
    def control_mode(self) -> str:
        """``none``, ``poll`` or ``explicit``."""
        ...

    @property
    def registry(self) -> Any:
        """The prometheus_client registry of the metrics endpoint."""
        ...


@dataclass(frozen=True)
class LoadContext:
    """Where a model version lives and what the server was told about it."""

    model_name: str
    version: int
    model_dir: Path
    backend_config: dict[str, str]

    @property
    def version_dir(self) -> Path:
        return self.model_dir / str(self.version)


class ModelInstance(Protocol):
    """One instance of a loaded model version. The core sends it one batch at a time."""

    name: str

    async def execute(
        self, requests: list[InferRequest], times: ExecutionTimes
    ) -> list[InferResponse]:
        """One response per request, in order (errors as responses, never raised).

        ``times`` is filled with the time spent on inputs, in the model and on outputs.
        """
        ...

    async def finalize(self) -> None:
        """Release the instance (calls the model's ``finalize``); never raises."""
        ...

    # An instance with a true ``answers_directly`` attribute may write a request's answer
    # to the client itself when the request carries a ``direct`` offer, and then returns
    # ``InferResponse(answered=True, rest=...)`` for it.
    #
    # Decoupled models: a request carrying ``response_stream`` gets every response there,
    # as the model sends it (the final one flagged); ``execute`` then returns, for such a
    # request, a completion marker (``InferResponse()``, or the error when execute failed,
    # ``rescheduled`` when the model released it with RESCHEDULE).


class Backend(Protocol):
    """Loads model versions for one backend name (``python``)."""

    name: str
    #: the library file a configuration's ``runtime`` may name (Triton's backend file)
    library: str
    #: the folder the backend's code lives in (Triton's messages name its backend folder)
    directory: Path

    def bind(self, bridge: ServerBridge) -> None:
        """Receive the server bridge (called once, before any load)."""
        ...

    async def auto_complete(self, ctx: LoadContext, config: ModelConfig) -> ModelConfig:
        """The config after the model had its say; raise CoreError to fail the load."""
        ...

    async def create_instance(
        self,
        ctx: LoadContext,
        config: ModelConfig,
        config_json: str,
        group_index: int,
        instance_index: int,
        instance_name: str,
    ) -> ModelInstance:
        """Create and initialise one instance; raise CoreError to fail the load."""
        ...


def runtime_check(runtime: str, ctx: LoadContext, backend: Backend) -> None:
    """Refuse a configuration's ``runtime`` that names another library than the
    backend's, with the words of Triton, which looks for it in the version folder, the
    model folder and the backend's folder (``model.py``: a Python-based backend's file, in
    the backend's folder only). A library found there is refused as well: only built-in
    backends run here."""
    if not runtime or runtime == backend.library:
        return
    name = ctx.model_name
    if runtime == "model.py":
        place = backend.directory / runtime
        raise CoreError(
            f"unable to find Python backend based backend library '{runtime}' for model "
            f"'{name}', searched: '{place}'",
            Code.INVALID_ARG,
        )
    folders = (ctx.version_dir, ctx.model_dir, backend.directory)
    if "/" not in runtime and runtime not in (".", ".."):
        for folder in folders[:2]:
            if (folder / runtime).is_file():
                raise CoreError(
                    f"backend library '{runtime}' for model '{name}' found in '{folder}': "
                    f"this server runs only its built-in backend ('{backend.library}')",
                    Code.INVALID_ARG,
                )
    searched = "".join(f"'{f}' " for f in folders)
    raise CoreError(
        f"unable to find backend library '{runtime}' for model '{name}', searched: {searched}",
        Code.INVALID_ARG,
    )
