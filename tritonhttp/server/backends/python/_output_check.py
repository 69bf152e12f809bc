"""Outputs that disagree with the model's configuration (a development aid).

Triton takes a Python model's outputs as the arrays say: an output the configuration
does not declare is dropped without a word, and a data type or shape other than the
configured one goes to the client as it is. With ``--backend-config=python,
check-outputs=true`` the backend logs a warning the first time a model's response
disagrees in one of these ways (instances that run in-process). ``triton-cli model
check`` reports the same disagreements.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from triton_python_backend_utils._request import InferenceResponse

from ...core._config import wire_datatype
from ...core.model_config_pb2 import ModelConfig

__all__ = ["OutputCheck", "disagreements"]

log = logging.getLogger("tritonhttp.server")

#: an output: its name, data type (wire name) and shape (or dims, -1 for any size)
Tensor = tuple[str, str, Sequence[int]]


def disagreements(
    declared: Iterable[Tensor], batched: bool, produced: Iterable[Tensor]
) -> list[str]:
    """What is wrong with ``produced`` outputs for a model declaring ``declared`` (the
    dims without the batch dimension, which ``batched`` models have first)."""
    config = {name: (wire, list(dims)) for name, wire, dims in declared}
    problems = []
    for name, wire, shape in produced:
        if name not in config:
            known = ", ".join(config) or "none"
            problems.append(
                f"output '{name}' is not in the configuration (outputs: {known}); it is dropped"
            )
            continue
        want, dims = config[name]
        if wire != want:
            problems.append(f"output '{name}' is {wire}, the configuration says {want}")
        full = [-1] * batched + dims
        got = list(shape)
        if len(got) != len(full) or any(d >= 0 and d != s for d, s in zip(full, got, strict=False)):
            batch = ", the first is the batch" if batched else ""
            problems.append(
                f"output '{name}' has shape {got}, the configuration says {full} "
                f"(-1: any size{batch})"
            )
    return problems


@dataclass
class OutputCheck:
    """Compares a model's responses with its configuration; logs each new finding."""

    model: str
    declared: list[Tensor]
    batched: bool
    _seen: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def of(cls, model: str, version: int, config: ModelConfig) -> OutputCheck:
        declared: list[Tensor] = [
            (o.name, wire_datatype(o.data_type), list(o.dims)) for o in config.output
        ]
        return cls(f"'{model}' version {version}", declared, config.max_batch_size > 0)

    def inspect(self, response: InferenceResponse) -> None:
        """Log (once each) how ``response``'s outputs disagree with the configuration."""
        if response._error is not None:
            return
        produced = [(t._name, t._wire, t._array.shape) for t in response._outputs]
        for problem in disagreements(self.declared, self.batched, produced):
            with self._lock:
                if problem in self._seen:
                    continue
                self._seen.add(problem)
            log.warning("model %s: %s", self.model, problem)
