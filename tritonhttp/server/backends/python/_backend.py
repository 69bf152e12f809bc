"""The ``python`` backend: settings, auto-complete, and instance creation in either
isolation mode."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

from triton_python_backend_utils import _runtime

from ...core._backend_api import LoadContext, ModelInstance, ServerBridge
from ...core._config import config_to_json
from ...core._errors import Code, CoreError
from ...core._model import admission_for
from ...core._override import OverrideError, read_override
from ...core.model_config_pb2 import ModelConfig
from . import _forkserver
from ._envs import resolve_env
from ._execution import ModelError, ModelHost, auto_complete, load_model_class
from ._inprocess import InProcessInstance
from ._messages import AutoComplete, Init
from ._output_check import OutputCheck
from ._polling import ReplyPoll
from ._process import ProcessInstance
from ._runner import InstanceRunner
from ._services import InProcessRuntime, ModelServices
from ._settings import BackendSettings
from ._worker_process import WorkerContext, run_auto_complete

__all__ = ["PythonBackend"]

log = logging.getLogger("tritonhttp.server")

_KIND_NAMES = {0: "AUTO", 1: "GPU", 2: "CPU", 3: "MODEL"}
# an in-process model whose source mentions these must not run inline on the event loop
_BLOCKING_CALLS = (b".exec(", b"async_exec", b"load_model", b"unload_model", b"is_model_ready")


class PythonBackend:
    """Implements :class:`~tritonhttp.server.core._backend_api.Backend` for ``python``.

    ``isolation``/``inline`` are the server-wide defaults; ``--backend-config=python,...``
    values given to each load override them. ``reply_codec``: the module worker
    processes import to write answers to clients themselves (:mod:`._direct`); None:
    the server writes every answer.
    """

    name = "python"
    library = "libtriton_python.so"
    directory = Path(__file__).resolve().parent

    def __init__(
        self, inline: str = "auto", isolation: str = "process", reply_codec: str | None = None
    ) -> None:
        self._defaults = {"inline-execution": inline, "isolation": isolation}
        self.services = ModelServices()
        self._workers = WorkerContext(self.services, ReplyPoll(), reply_codec)
        self._bound = False
        self._previous = _runtime.current()

    def bind(self, bridge: ServerBridge) -> None:
        """Connect to the server (on its event loop): BLS, model control, metrics."""
        self.services.bind(bridge, asyncio.get_running_loop())
        if not self._bound:
            self._previous = _runtime.current()
            _runtime.install(InProcessRuntime(self.services))
            self._bound = True

    def close(self) -> None:
        """The server stopped: pb_utils in this process goes back to what it was, and
        this thread's worker zygote ends unless another server's workers still use it."""
        if self._bound:
            _runtime.install(self._previous)
            self._bound = False
        _forkserver.close(idle_only=True)

    def _settings(self, ctx: LoadContext) -> BackendSettings:
        return BackendSettings.parse({**self._defaults, **ctx.backend_config})

    @staticmethod
    def _filename(config: ModelConfig) -> str:
        return config.default_model_filename or "model.py"

    # ------------------------------------------------------------------ auto-complete

    async def auto_complete(self, ctx: LoadContext, config: ModelConfig) -> ModelConfig:
        settings = self._settings(ctx)
        env = resolve_env(config, ctx.model_dir)
        filename = self._filename(config)
        original = config_to_json(config).decode("utf-8")
        if env is not None or settings.isolation_of(config) == "process":
            completed = await run_auto_complete(
                settings,
                AutoComplete(str(ctx.model_dir), ctx.version, filename, config.name, original),
                ctx.model_name,
                env.python if env else None,
                env.environ if env else None,
            )  # fmt: skip
        else:

            def run() -> str | None:
                try:
                    cls, _ = load_model_class(ctx.model_dir, ctx.version, filename)
                    return auto_complete(cls, config.name, original)
                except ModelError as e:
                    raise CoreError(str(e), Code.INTERNAL) from None

            completed = await asyncio.to_thread(run)
        if completed is None:
            return config
        import json

        return _merge(config, json.loads(completed))

    # ------------------------------------------------------------------ instances

    async def create_instance(
        self,
        ctx: LoadContext,
        config: ModelConfig,
        config_json: str,
        group_index: int,
        instance_index: int,
        instance_name: str,
    ) -> ModelInstance:
        settings = self._settings(ctx)
        env = resolve_env(config, ctx.model_dir)
        filename = self._filename(config)
        group = config.instance_group[group_index]
        args = {
            "model_config": config_json,
            "model_instance_kind": _KIND_NAMES.get(group.kind, "CPU"),
            "model_instance_name": instance_name,
            "model_instance_device_id": str(group.gpus[instance_index % len(group.gpus)])
            if group.gpus
            else "0",
            "model_repository": str(ctx.model_dir),
            "model_version": str(ctx.version),
            "model_name": ctx.model_name,
        }
        decoupled = config.model_transaction_policy.decoupled
        outputs = [o.name for o in config.output]
        check = (
            OutputCheck.of(ctx.model_name, ctx.version, config) if settings.check_outputs else None
        )
        if env is not None or settings.isolation_of(config) == "process":
            if check is not None and instance_index == 0 and group_index == 0:
                log.warning(
                    "model '%s': check-outputs applies to in-process instances only; this "
                    "model runs in worker processes",
                    ctx.model_name,
                )
            instance = ProcessInstance(
                instance_name,
                Init(
                    str(ctx.model_dir),
                    ctx.version,
                    filename,
                    instance_name,
                    decoupled,
                    args,
                    admission_for(ctx.model_name, ctx.version, config).spec(),
                ),
                outputs,
                settings,
                self._workers,
                env.python if env else None,
                env.environ if env else None,
            )
            await instance.start()
            return instance
        return await self._in_process(ctx, settings, filename, instance_name, decoupled,
                                      outputs, args, check)  # fmt: skip

    async def _in_process(
        self,
        ctx: LoadContext,
        settings: BackendSettings,
        filename: str,
        instance_name: str,
        decoupled: bool,
        outputs: list[str],
        args: dict[str, str],
        check: OutputCheck | None = None,
    ) -> InProcessInstance:
        inline = settings.inline
        runner = InstanceRunner(instance_name, inline)

        def build() -> ModelHost:
            try:
                cls, path = load_model_class(ctx.model_dir, ctx.version, filename)
                host = ModelHost(cls, path, instance_name, decoupled)
                host.context = self.services
                host.initialize(args)
            except ModelError as e:
                raise CoreError(str(e), Code.INTERNAL) from None
            return host

        try:
            host = await runner.run(build, may_inline=False)
        except BaseException:
            runner.close()
            raise
        if inline == "auto" and (decoupled or _mentions_blocking_calls(host)):
            runner.never_inline()
        return InProcessInstance(host, outputs, runner, self.services, check)


def _mentions_blocking_calls(host: ModelHost) -> bool:
    try:
        source = host.model_file.read_bytes()
    except OSError:
        return True
    return any(word in source for word in _BLOCKING_CALLS)


def _merge(config: ModelConfig, completed: dict[str, Any]) -> ModelConfig:
    """Take from auto_complete_config only what Triton takes: batch size, IO, scheduler,
    decoupled. The completed config is read as Triton reads a config's JSON
    (:func:`~...core._override.read_override`); one that is still no valid ModelConfig
    (an unknown field or enum name, a value of the wrong type) is ignored as a whole, as
    Triton ignores it: the model loads with the configuration it was given."""
    try:
        parsed = read_override(json.dumps(completed))
    except (OverrideError, TypeError, ValueError) as e:
        log.warning(
            "auto_complete_config of model '%s' returned an invalid configuration, ignored: %s",
            config.name,
            str(e).splitlines()[0],
        )
        return config
    merged = ModelConfig()
    merged.CopyFrom(config)
    if "max_batch_size" in completed:
        merged.max_batch_size = parsed.max_batch_size
    for key in ("input", "output"):
        if key in completed:
            field = getattr(merged, key)
            del field[:]
            field.extend(getattr(parsed, key))
    if config.WhichOneof("scheduling_choice") is None:
        for key in ("dynamic_batching", "sequence_batching"):
            if parsed.HasField(key):
                getattr(merged, key).CopyFrom(getattr(parsed, key))
    if parsed.HasField("model_transaction_policy"):
        merged.model_transaction_policy.CopyFrom(parsed.model_transaction_policy)
    return merged
