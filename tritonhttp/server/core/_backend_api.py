"""The narrow interface between the core and a backend.

A backend loads one model version: it may complete the configuration
(:meth:`Backend.auto_complete`), then creates the instances the core schedules requests
on (:meth:`Backend.create_instance`). An instance executes batches of
:class:`~._types.InferRequest` and answers one :class:`~._types.InferResponse` per
request; how (in this process, in a worker process) is the backend's business.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ._types import ExecutionTimes, InferRequest, InferResponse
from .model_config_pb2 import ModelConfig

__all__ = ["Backend", "LoadContext", "ModelInstance"]


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


class Backend(Protocol):
    """Loads model versions for one backend name (``python``)."""

    name: str

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
