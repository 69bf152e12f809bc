"""Everything the HTTP front needs from the server, in one object."""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry

from ._errors import CoreError
from ._metrics import make_registry
from ._repository import Repository
from ._settings import LogSettings, TraceSettings
from ._shm import SharedMemoryRegistry
from ._trace import Tracer

__all__ = ["EXTENSIONS", "ServerCore"]

#: what ``GET /v2`` lists (Triton 2.51 order; ``generate`` is not advertised)
EXTENSIONS = [
    "classification",
    "sequence",
    "model_repository",
    "model_repository(unload_dependents)",
    "schedule_policy",
    "model_configuration",
    "system_shared_memory",
    "cuda_shared_memory",
    "binary_tensor_data",
    "parameters",
    "statistics",
    "trace",
    "logging",
]

VERSION = "2.51.0"


@dataclass
class ServerCore:
    """Repository, shared memory, settings, tracing and metrics of one server."""

    repository: Repository
    server_id: str = "triton"
    shm: SharedMemoryRegistry = field(default_factory=SharedMemoryRegistry)
    trace: TraceSettings = field(default_factory=TraceSettings)
    log: LogSettings = field(default_factory=LogSettings)
    registry: CollectorRegistry | None = None
    #: sampling and output of request traces (from ``trace``)
    tracer: Tracer = field(init=False)

    def _version_of(self, name: str) -> int:
        try:
            return self.repository.get(name, "").version
        except CoreError:
            return -1

    def __post_init__(self) -> None:
        self.tracer = Tracer(self.trace, resolve=self._version_of)
        if self.registry is None:
            self.registry = make_registry(
                self.repository.loaded_versions, self.repository.response_cache
            )
