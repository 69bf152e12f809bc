"""Backend options (``--backend-config=python,<key>=<value>``) and per-model parameters."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from ...core._errors import Code, CoreError
from ...core.model_config_pb2 import ModelConfig
from ...support import _platform

__all__ = ["ISOLATIONS", "ISOLATION_PARAMETER", "BackendSettings"]

MIB = 1024 * 1024
#: model config parameter choosing the isolation of one model ("process" / "in-process")
ISOLATION_PARAMETER = "ISOLATION"
#: where Python model instances can run
ISOLATIONS = ("process", "in-process")
_INLINE = ("auto", "always", "never")


def _int(values: dict[str, str], key: str, default: int) -> int:
    text = values.get(key)
    if text is None:
        return default
    try:
        return int(text.strip())
    except ValueError:
        raise CoreError(
            f"failed to parse backend config '{key}': '{text}' is not an integer",
            Code.INVALID_ARG,
        ) from None


def _shm_prefix(values: dict[str, str]) -> str:
    prefix = values.get("shm-region-prefix-name", _platform.default_shm_prefix())
    if not prefix:
        raise CoreError(
            "shm-region-prefix-name must at least contain one character.", Code.INVALID_ARG
        )
    if "/" in prefix:
        raise CoreError("shm-region-prefix-name must not contain '/'.", Code.INVALID_ARG)
    longest = _platform.shm_prefix_max()
    if len(prefix) > longest:
        raise CoreError(
            f"shm-region-prefix-name '{prefix}' is {len(prefix)} characters long: on this "
            f"platform ({_platform.system()}) shared-memory names allow at most {longest} "
            f"before the {_platform.SHM_SUFFIX_LEN} characters each segment adds",
            Code.INVALID_ARG,
        )
    return prefix


@dataclass(frozen=True)
class BackendSettings:
    """The python backend's options, checked as Triton checks them (at each model load)."""

    isolation: str = "process"
    inline: str = "auto"
    shm_default: int = MIB
    shm_growth: int = MIB
    stub_timeout_s: float = 30.0
    #: Triton's ``triton_python_backend_shm_region_``, or ``tpb_shm_`` where
    #: shared-memory names are short (macOS: 31 characters)
    shm_prefix: str = field(default_factory=_platform.default_shm_prefix)
    python: str = sys.executable
    #: microseconds a busy worker polls for its next message before sleeping (the
    #: server polls for a lone quick request's answer up to ReplyPoll.CAP_US of it);
    #: 0 disables both
    busy_wait_us: int = 1000
    #: how much a worker whose model is slow raises its nice value (``_priority``); 0: never
    slow_model_nice: int = 10
    #: warn about responses whose outputs disagree with the configuration (in-process)
    check_outputs: bool = False

    @classmethod
    def parse(cls, values: dict[str, str]) -> BackendSettings:
        """Raises CoreError with the load error Triton gives for a bad value."""
        shm_default = _int(values, "shm-default-byte-size", MIB)
        if shm_default < MIB:
            # Triton 2.51's text says "4 MiBs" while it checks 1 MiB; this says what it checks
            raise CoreError("shm-default-byte-size can't be smaller than 1 MiB", Code.INVALID_ARG)
        growth = _int(values, "shm-growth-byte-size", MIB)
        if growth <= 0:
            raise CoreError(
                "shm-growth-byte-size can't be smaller than or equal to zero.", Code.INVALID_ARG
            )
        timeout = _int(values, "stub-timeout-seconds", 30)
        if timeout <= 0:
            raise CoreError(
                "stub-timeout-seconds can't be smaller than or equal to zero.", Code.INVALID_ARG
            )
        prefix = _shm_prefix(values)
        _int(values, "thread-pool-size", 32)  # accepted; workers need no thread pool here
        isolation = values.get("isolation", "process")
        if isolation not in ISOLATIONS:
            raise CoreError(
                f"unknown isolation '{isolation}' (expected 'process' or 'in-process')",
                Code.INVALID_ARG,
            )
        inline = values.get("inline-execution", "auto")
        if inline not in _INLINE:
            raise CoreError(
                f"unknown inline-execution '{inline}' (expected 'auto', 'always' or 'never')",
                Code.INVALID_ARG,
            )
        busy = _int(values, "busy-wait-us", 1000)
        if busy < 0:
            raise CoreError("busy-wait-us can't be negative.", Code.INVALID_ARG)
        nice = _int(values, "slow-model-nice", 10)
        if not 0 <= nice <= 39:
            raise CoreError("slow-model-nice must be between 0 and 39.", Code.INVALID_ARG)
        check = values.get("check-outputs", "false").strip().lower()
        if check not in ("true", "false", "1", "0"):
            raise CoreError(f"check-outputs takes true or false, not '{check}'", Code.INVALID_ARG)
        return cls(isolation, inline, shm_default, growth, float(timeout), prefix,
                   busy_wait_us=busy, slow_model_nice=nice,
                   check_outputs=check in ("true", "1"))  # fmt: skip

    def isolation_of(self, config: ModelConfig) -> str:
        """The model's isolation: its ``ISOLATION`` parameter, else the server's; always
        ``in-process`` where worker processes are not supported (Windows)."""
        param = config.parameters.get(ISOLATION_PARAMETER)
        value = self.isolation if param is None else param.string_value.strip()
        if value not in ISOLATIONS:
            raise CoreError(
                f"unknown value '{value}' for parameter '{ISOLATION_PARAMETER}' (expected "
                "'process' or 'in-process')",
                Code.INVALID_ARG,
            )
        if value == "process" and not _platform.workers_supported():
            return "in-process"
        return value
