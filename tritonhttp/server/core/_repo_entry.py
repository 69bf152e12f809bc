"""What the repository keeps of one model (:class:`ModelEntry`: its versions and the
state of its loads), and how a load's outcome is told: the states that make a version
failed or newly up, and the error texts and log lines of a load, as Triton's.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._config import ModelConfig, PollError
from ._errors import CoreError
from ._model import ModelVersion

__all__ = [
    "UNLOADED",
    "LoggedError",
    "ModelEntry",
    "brought_up",
    "is_failed",
    "load_failed",
    "log_failure",
    "log_outcome",
]

log = logging.getLogger("tritonhttp.server")

#: the reason of a version that was unloaded (a failed one keeps its own)
UNLOADED = "unloaded"


@dataclass
class ModelEntry:
    """A model name the server manages, with every version it knows about."""

    name: str
    versions: dict[int, ModelVersion] = field(default_factory=dict)
    #: a version failed to load and nothing serves in its place, or the model never
    #: loaded: the server is not ready (strict readiness)
    failed: bool = False
    #: the last load left a version of its own failed: a load of the folder's unchanged
    #: files then loads again (else it keeps what serves)
    last_failed: bool = False
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    temp_dir: Path | None = None
    signature: tuple[Any, ...] = ()
    #: a load got past polling (the model then counts as known even with no version)
    attempted: bool = False
    model_dir: Path | None = None
    #: the configuration of the last load that succeeded (normalized, before the backend
    #: completes it)
    base_config: ModelConfig | None = None
    #: the versions a load in progress brings up where none of them serves: listed as
    #: LOADING meanwhile (a version that serves stays READY while its reload runs)
    loading: set[int] = field(default_factory=set)
    #: with namespacing: the repository of the model's folder (its namespace, where an
    #: ensemble's steps are looked up first)
    namespace: Path | None = None
    #: the model as log lines name it (``<repository>::<name>`` with namespacing)
    label: str = ""

    def ready_versions(self) -> list[ModelVersion]:
        return [v for _, v in sorted(self.versions.items()) if v.ready]

    def states(self) -> list[tuple[int, str, str]]:
        """(version, state, reason) of every version known, as the index lists them."""
        out = []
        for v in sorted(self.versions.keys() | self.loading):
            mv = self.versions.get(v)
            if mv is not None and (mv.ready or v not in self.loading):
                out.append((v, mv.state, mv.reason))
            else:
                out.append((v, "LOADING", ""))
        return out

    def settling(self) -> bool:
        """A version is loading or unloading (the server is not ready meanwhile)."""
        return any(state in ("LOADING", "UNLOADING") for _, state, _ in self.states())


class LoggedError(CoreError):
    """A load failure whose reasons the load already logged, version by version."""


def is_failed(mv: ModelVersion) -> bool:
    """Whether ``mv`` is a version whose load failed (not one unloaded or unloading)."""
    return mv.state == "UNAVAILABLE" and mv.reason != UNLOADED


def brought_up(mv: ModelVersion, before: ModelVersion | None) -> bool:
    """Whether a load made ``mv`` serve where nothing of its version served before (a
    version kept serving, or reloaded over one that served, was up already)."""
    return mv.ready and mv is not before and (before is None or not before.ready)


def load_failed(name: str, versions: list[ModelVersion], state: str) -> LoggedError:
    """Triton's answer to a load that failed for ``versions``, each now in ``state``
    (their reasons are logged already)."""
    text = "".join(f"version {mv.version} is at {state} state: {mv.reason};\n" for mv in versions)
    return LoggedError(f"load failed for model '{name}': {text}")


def log_outcome(name: str, loaded: list[ModelVersion]) -> None:
    """Log the end of a load as Triton does: each failed version, then the model."""
    failures = [mv for mv in loaded if not mv.ready]
    for mv in failures:
        log.error("failed to load '%s' version %d: %s", name, mv.version, mv.reason)
    if failures:
        log.info("failed to load '%s'", name)
    else:
        log.info("successfully loaded '%s'", name)


def log_failure(name: str, error: BaseException) -> None:
    """Log a load that failed before its versions were loaded (or was logged already)."""
    if isinstance(error, LoggedError):
        return
    if isinstance(error, PollError):
        log.error("Poll failed for model directory '%s': %s", name, error)
    else:
        log.error("failed to load '%s': %s", name, getattr(error, "message", error))
