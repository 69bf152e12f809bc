"""The ``python`` backend: auto-complete, instance creation and initialisation."""

from __future__ import annotations

import asyncio
from typing import Any

from google.protobuf import json_format

from ...core._backend_api import LoadContext
from ...core._config import config_to_json
from ...core._errors import Code, CoreError
from ...core.model_config_pb2 import ModelConfig
from . import _pb_utils as pb
from ._instance import InProcessInstance
from ._loader import format_exception, import_model_module
from ._runner import InstanceRunner

__all__ = ["PythonBackend"]

_KIND_NAMES = {0: "AUTO", 1: "GPU", 2: "CPU", 3: "MODEL"}


def _model_file(ctx: LoadContext, config: ModelConfig) -> str:
    filename = config.default_model_filename or "model.py"
    if not filename.endswith(".py"):
        raise CoreError(
            f"Model name must end with '.py'. Model name is \"{filename}\".", Code.INTERNAL
        )
    path = ctx.version_dir / filename
    if not path.is_file():
        raise CoreError(
            f"Failed to preinitialize Python stub: Python model file not found in '{path}'",
            Code.INTERNAL,
        )
    return filename


def _import(ctx: LoadContext, filename: str) -> Any:
    try:
        module = import_model_module(ctx.model_dir, ctx.version, filename)
    except BaseException as e:
        if isinstance(e, KeyboardInterrupt):
            raise
        raise CoreError(format_exception(e), Code.INTERNAL) from None
    cls = getattr(module, "TritonPythonModel", None)
    if cls is None:
        raise CoreError(
            f"AttributeError: module '{module.__name__}' has no attribute 'TritonPythonModel'",
            Code.INTERNAL,
        )
    return cls


class PythonBackend:
    """Implements :class:`~tritonhttp.server.core._backend_api.Backend` for ``python``."""

    name = "python"

    def __init__(self, inline: str = "auto") -> None:
        self._inline = inline

    async def auto_complete(self, ctx: LoadContext, config: ModelConfig) -> ModelConfig:
        filename = _model_file(ctx, config)
        return await asyncio.to_thread(self._auto_complete_sync, ctx, config, filename)

    def _auto_complete_sync(
        self, ctx: LoadContext, config: ModelConfig, filename: str
    ) -> ModelConfig:
        cls = _import(ctx, filename)
        hook = getattr(cls, "auto_complete_config", None)
        if hook is None:
            return config
        original = config_to_json(config).decode("utf-8")
        try:
            result = hook(pb.ModelConfig(original))
        except Exception as e:
            raise CoreError(format_exception(e), Code.INTERNAL) from None
        if not isinstance(result, pb.ModelConfig):
            raise CoreError(
                f"auto_complete_config function in model '{config.name}' must return a valid "
                "pb.ModelConfig object.",
                Code.INTERNAL,
            )
        return _merge(config, result.as_dict())

    async def create_instance(
        self,
        ctx: LoadContext,
        config: ModelConfig,
        config_json: str,
        group_index: int,
        instance_index: int,
        instance_name: str,
    ) -> InProcessInstance:
        filename = _model_file(ctx, config)
        runner = InstanceRunner(instance_name, self._inline)
        group = config.instance_group[group_index]
        args = {
            "model_config": config_json,
            "model_instance_kind": _KIND_NAMES.get(group.kind, "CPU"),
            "model_instance_name": instance_name,
            "model_instance_device_id": str(group.gpus[0]) if group.gpus else "0",
            "model_repository": str(ctx.model_dir),
            "model_version": str(ctx.version),
            "model_name": ctx.model_name,
        }

        def build() -> Any:
            cls = _import(ctx, filename)
            pb._model_dir.path = ctx.version_dir
            try:
                model = cls()
                init = getattr(model, "initialize", None)
                if callable(init):
                    init(args)
            except Exception as e:
                raise CoreError(format_exception(e), Code.INTERNAL) from None
            return model

        try:
            model = await runner.run(build, may_inline=False)
        except BaseException:
            runner.close()
            raise
        return InProcessInstance(
            instance_name,
            model,
            ctx.version_dir / filename,
            ctx.version_dir,
            [o.name for o in config.output],
            config.model_transaction_policy.decoupled,
            runner,
        )


def _merge(config: ModelConfig, completed: dict[str, Any]) -> ModelConfig:
    """Take from auto_complete_config only what Triton takes: batch size, IO, scheduler,
    decoupled."""
    merged = ModelConfig()
    merged.CopyFrom(config)
    try:
        if "max_batch_size" in completed:
            merged.max_batch_size = int(completed["max_batch_size"])
        if "input" in completed:
            del merged.input[:]
            for item in completed["input"]:
                json_format.ParseDict(item, merged.input.add())
        if "output" in completed:
            del merged.output[:]
            for item in completed["output"]:
                json_format.ParseDict(item, merged.output.add())
        if config.WhichOneof("scheduling_choice") is None:
            for key in ("dynamic_batching", "sequence_batching"):
                if key in completed:
                    part = ModelConfig()
                    json_format.ParseDict({key: completed[key]}, part)
                    merged.MergeFrom(part)
        policy = completed.get("model_transaction_policy")
        if isinstance(policy, dict) and "decoupled" in policy:
            merged.model_transaction_policy.decoupled = bool(policy["decoupled"])
    except (json_format.ParseError, TypeError, ValueError) as e:
        raise CoreError(f"auto-complete produced an invalid config: {e}", Code.INTERNAL) from None
    return merged
