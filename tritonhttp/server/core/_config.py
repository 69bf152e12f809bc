"""Model configuration: config.pbtxt (protobuf text format) in, Triton's defaults filled,
Triton's validation messages out, and the JSON form the config endpoint prints."""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
from google.protobuf import descriptor as _descriptor
from google.protobuf import text_format
from google.protobuf.message import Message

from ..support import _json
from ._batch_inputs import batch_problem, unreadable_batch_input
from ._errors import Code, CoreError
from ._override import OverrideError, is_map, is_repeated, read_override
from .model_config_pb2 import (
    DataType,
    ModelConfig,
    ModelInput,
    ModelInstanceGroup,
    ModelSequenceBatching,
)

__all__ = [
    "DATATYPE_TO_WIRE",
    "WIRE_TO_DATATYPE",
    "ModelConfig",
    "PollError",
    "config_to_json",
    "first_subfolder",
    "io_problem",
    "normalize",
    "parse_override",
    "read_config",
    "validate_load",
    "validate_poll",
    "version_policy_versions",
]

#: config TYPE_* name -> protocol datatype name
DATATYPE_TO_WIRE = {
    "TYPE_BOOL": "BOOL",
    "TYPE_UINT8": "UINT8",
    "TYPE_UINT16": "UINT16",
    "TYPE_UINT32": "UINT32",
    "TYPE_UINT64": "UINT64",
    "TYPE_INT8": "INT8",
    "TYPE_INT16": "INT16",
    "TYPE_INT32": "INT32",
    "TYPE_INT64": "INT64",
    "TYPE_FP16": "FP16",
    "TYPE_FP32": "FP32",
    "TYPE_FP64": "FP64",
    "TYPE_STRING": "BYTES",
    "TYPE_BF16": "BF16",
    "TYPE_INVALID": "INVALID",
}
WIRE_TO_DATATYPE = {v: k for k, v in DATATYPE_TO_WIRE.items()}


def wire_datatype(data_type: int) -> str:
    """Protocol datatype name ("FP32") of a config DataType value."""
    return DATATYPE_TO_WIRE[DataType.Name(data_type)]


class PollError(Exception):
    """The model directory could not be read or its config is unusable (a poll failure).

    Clients only see ``failed to load '<m>', failed to poll from model repository``;
    the message goes to the log.
    """


def read_config(model_dir: Path) -> ModelConfig | None:
    """Parse ``<model_dir>/config.pbtxt``; None when the file does not exist."""
    path = model_dir / "config.pbtxt"
    if not path.is_file():
        return None
    cfg = ModelConfig()
    try:
        text = path.read_text(encoding="utf-8")
        text_format.Parse(text, cfg)
    except (text_format.ParseError, UnicodeDecodeError) as e:
        raise PollError(f"failed to read text proto from {path}: {e}") from None
    return cfg


def parse_override(text: str) -> ModelConfig:
    """A config given as JSON (load request ``config`` parameter), read as Triton reads
    it (:mod:`._override`)."""
    try:
        return read_override(text)
    except OverrideError as e:
        raise PollError(f"failed to parse config override: {e}") from None


def version_policy_versions(cfg: ModelConfig, available: list[int]) -> list[int]:
    """The versions the policy selects among the numeric version folders."""
    available = sorted(available)
    which = cfg.version_policy.WhichOneof("policy_choice")
    if which == "all":
        return available
    if which == "specific":
        wanted = set(cfg.version_policy.specific.versions)
        return [v for v in available if v in wanted]
    n = cfg.version_policy.latest.num_versions if which == "latest" else 1
    return available[-n:] if n > 0 else []


#: the model files by which Triton tells a model's backend when its configuration names
#: none (only Python models serve here: the others then fail to load, for want of theirs)
_BACKEND_FILES = {
    "model.plan": "tensorrt",
    "model.onnx": "onnxruntime",
    "model.pt": "pytorch",
    "model.savedmodel": "tensorflow",
    "model.graphdef": "tensorflow",
}


def normalize(cfg: ModelConfig, model_name: str, version_dirs: list[Path]) -> None:
    """Fill the defaults Triton fills (in place).

    ``version_dirs``: the folders whose files tell the backend when the configuration
    names none (Triton looks in the model's first subfolder, see :func:`first_subfolder`)."""
    if not cfg.name:
        cfg.name = model_name
    if not cfg.backend and not cfg.platform:
        filename = cfg.default_model_filename or "model.py"
        if any((d / filename).is_file() for d in version_dirs):
            cfg.backend = "python"
        elif not cfg.default_model_filename:
            for name, backend in _BACKEND_FILES.items():
                if any((d / name).exists() for d in version_dirs):
                    cfg.backend = backend
                    break
    if cfg.backend == "python" and not cfg.default_model_filename:
        cfg.default_model_filename = "model.py"
    if not cfg.HasField("version_policy"):
        cfg.version_policy.latest.num_versions = 1
    if cfg.platform != "ensemble":
        opt = cfg.optimization
        if not opt.HasField("input_pinned_memory"):
            opt.input_pinned_memory.enable = True
        if not opt.HasField("output_pinned_memory"):
            opt.output_pinned_memory.enable = True
    which = cfg.WhichOneof("scheduling_choice")
    if which == "dynamic_batching":
        db = cfg.dynamic_batching
        if not db.preferred_batch_size and cfg.max_batch_size > 0:
            db.preferred_batch_size.append(cfg.max_batch_size)
    elif which == "sequence_batching":
        sb = cfg.sequence_batching
        if sb.max_sequence_idle_microseconds == 0:
            sb.max_sequence_idle_microseconds = 1000000
        if sb.HasField("oldest") and not sb.oldest.preferred_batch_size and cfg.max_batch_size > 0:
            sb.oldest.preferred_batch_size.append(cfg.max_batch_size)
    if cfg.platform != "ensemble":
        normalize_instance_groups(cfg)


def first_subfolder(model_dir: Path) -> list[Path]:
    """The model folder's first subfolder by name (any name, numeric or not), where
    Triton looks for the files that tell a model's backend; none when it has none."""
    try:
        subs = sorted(e.name for e in os.scandir(model_dir) if e.is_dir())
    except OSError:
        return []
    return [model_dir / subs[0]] if subs else []


def normalize_instance_groups(cfg: ModelConfig) -> None:
    """Default group ``<model>`` (KIND_CPU x1); names ``<model>_<i>``; AUTO resolves to CPU."""
    if not cfg.instance_group:
        group = cfg.instance_group.add()
        group.name = cfg.name
        group.kind = ModelInstanceGroup.KIND_CPU
        group.count = 1
        return
    for i, group in enumerate(cfg.instance_group):
        if not group.name:
            group.name = f"{cfg.name}_{i}"
        if group.kind == ModelInstanceGroup.KIND_AUTO:
            group.kind = ModelInstanceGroup.KIND_GPU if group.gpus else ModelInstanceGroup.KIND_CPU
        if group.count < 1:
            group.count = 1


def validate_poll(cfg: ModelConfig, dir_name: str) -> None:
    """Checks Triton makes while polling the repository (failures are PollError)."""
    name = cfg.name
    if name and name != dir_name:
        raise PollError(
            f"unexpected directory name '{dir_name}' for model '{name}', "
            "directory name must equal model name"
        )
    problem = scheduling_problem(cfg, dir_name)
    if problem:
        raise PollError(problem)
    if cfg.platform != "ensemble" and cfg.HasField("ensemble_scheduling"):
        raise PollError(
            f"ensemble scheduling cannot be set for model '{name or dir_name}' whose "
            "platform is not ensemble"
        )
    for agent in cfg.model_repository_agents.agents:  # (no repository agent is installed)
        raise PollError(
            f"unable to find 'libtritonrepoagent_{agent.name}.so' for repo agent "
            f"'{agent.name}', searched: /opt/tritonserver/repoagents"
        )
    which = cfg.WhichOneof("scheduling_choice")
    if cfg.response_cache.enable and which == "sequence_batching":
        raise PollError(
            f"Response Cache does not currently support model {name or dir_name} with sequence "
            "batching scheduler. Please disable the response cache."
        )
    if cfg.response_cache.enable and cfg.model_transaction_policy.decoupled:
        raise PollError(
            f"Response Cache does not currently support model {name or dir_name} with "
            "'decoupled' "
            "transaction policy. Please disable the response cache."
        )


def scheduling_problem(cfg: ModelConfig, name: str = "") -> str | None:
    """What Triton refuses in the batch size and the scheduler's settings (None: nothing),
    checked on the configuration file and again on what the model completed (``name``:
    the model's, where the config does not say it)."""
    name = cfg.name or name
    if cfg.max_batch_size < 0:
        return f"'max_batch_size' must be non-negative value for {name}"
    which = cfg.WhichOneof("scheduling_choice")
    if which == "dynamic_batching":
        db = cfg.dynamic_batching
        for size in db.preferred_batch_size:
            if size < 1:
                return f"dynamic batching preferred size must be positive for {name}"
            if size > cfg.max_batch_size:
                return f"dynamic batching preferred size must be <= max batch size for {name}"
        if db.priority_levels > 0 and not 1 <= db.default_priority_level <= db.priority_levels:
            return f"default priority level must be in range [1, {db.priority_levels}] for {name}"
        if db.priority_levels > 1 and db.preserve_ordering:
            return f"Only one priority level is allowed when 'preserve_ordering' is true for {name}"
    elif which == "sequence_batching":
        return _sequence_problem(cfg, name)
    return None


_CORRID_TYPES = ("TYPE_UINT64", "TYPE_INT64", "TYPE_UINT32", "TYPE_INT32", "TYPE_STRING")
_FALSE_TRUE = ("int32_false_true", "fp32_false_true", "bool_false_true")


def _sequence_problem(cfg: ModelConfig, name: str) -> str | None:
    """What Triton refuses in ``sequence_batching``: its control tensors and the oldest
    strategy's preferred batch sizes."""
    sb = cfg.sequence_batching
    kinds: set[int] = set()
    tensors: set[str] = set()
    for ci in sb.control_input:
        if not ci.name:
            return f"sequence batching control tensor must have a name for {name}"
        if ci.name in tensors:
            return (
                f"sequence batching control tensor '{ci.name}' is specified for multiple "
                f"control kinds for {name}"
            )
        tensors.add(ci.name)
        for ctl in ci.control:
            kind = ModelSequenceBatching.Control.Kind.Name(ctl.kind)
            if ctl.kind in kinds:
                return f"sequence batching specifies multiple {kind} tensors for {name}"
            kinds.add(ctl.kind)
            problem = _control_problem(ctl, kind, name)
            if problem:
                return problem
    if sb.WhichOneof("strategy_choice") == "oldest":
        for size in sb.oldest.preferred_batch_size:
            if size < 1:
                return f"sequence batching preferred batch size must be positive for {name}"
            if size > cfg.max_batch_size:
                return (
                    f"sequence batching preferred batch size must be <= max batch size for {name}"
                )
    return None


def _control_problem(ctl: Any, kind: str, name: str) -> str | None:
    """What Triton refuses in one control of kind ``kind``."""
    given = [f for f in _FALSE_TRUE if len(getattr(ctl, f))]
    if ctl.kind == ModelSequenceBatching.Control.CONTROL_SEQUENCE_CORRID:
        if given:
            return (
                "sequence batching must not specify either 'int32_false_true', "
                f"'fp32_false_true' or 'bool_false_true' for {kind} for {name}"
            )
        if DataType.Name(ctl.data_type) not in _CORRID_TYPES:
            return (
                f"unexpected data type for control {kind} for {name}. Allowed data types "
                "are TYPE_UINT64, TYPE_INT64, TYPE_UINT32, TYPE_INT32 and TYPE_STRING"
            )
        return None
    if not given:
        return (
            "sequence batching must specify either 'int32_false_true', 'fp32_false_true' "
            f"or 'bool_false_true' for {kind} for {name}"
        )
    if len(given) > 1:
        return (
            "sequence batching specifies more than one from 'int32_false_true', "
            f"'fp32_false_true' and 'bool_false_true' for {kind} for {name}"
        )
    if len(getattr(ctl, given[0])) != 2:
        return (
            f"sequence batching control '{given[0]}' must have exactly 2 entries for {kind} "
            f"for {name}"
        )
    return None


def io_problem(cfg: ModelConfig) -> str | None:
    """What Triton refuses in the inputs and outputs, batch inputs and outputs included
    (None: nothing): checked while polling when no auto-completion is to come, else on
    the completed configuration."""
    name = cfg.name
    for kind, tensors in (("input", cfg.input), ("output", cfg.output)):
        for t in tensors:
            if not t.name:
                return f"model {kind} must specify 'name' for {name}"
            if t.data_type == DataType.TYPE_INVALID:
                return f"model {kind} '{t.name}' must specify 'data_type' for {name}"
            if not t.dims:
                return f"model {kind} '{t.name}' must specify 'dims' for {name}"
            if any(d < 1 and d != -1 for d in t.dims):
                return (
                    f"model {kind} '{t.name}' dimension must be integer >= 1, or -1 to "
                    f"indicate a variable-size dimension for {name}"
                )
            if t.HasField("reshape"):
                if not t.reshape.shape and cfg.max_batch_size == 0:
                    return (
                        f"model {kind} '{t.name}' cannot have empty reshape for non-batching "
                        f"model as scalar tensors are not supported for {name}"
                    )
                if _fixed_runs(t.dims) != _fixed_runs(t.reshape.shape):
                    return (
                        f"model {kind} '{t.name}' has different size for dims and reshape "
                        f"for {name}"
                    )
            if t.is_shape_tensor:
                return f"shape tensors are only supported for TensorRT platform for {name}"
    return batch_problem(cfg)


def _fixed_runs(shape: Iterable[int]) -> list[int]:
    """The element counts of the runs of fixed dimensions around each variable one: a
    reshape must keep every run's count (``[4, -1]`` as ``[2, 2, -1]``)."""
    runs = [1]
    for d in shape:
        if d == -1:
            runs.append(1)
        else:
            runs[-1] *= d
    return runs


def validate_load(cfg: ModelConfig, completed: bool = True) -> None:
    """Checks made when a version loads (failures: ``Invalid argument: <msg>``).

    ``completed``: the configuration the model completed (or serves with); its inputs,
    outputs and batch settings are checked too. Before auto-completion they are not: the
    model may mend them (a missing ``dims`` or ``data_type``), as in Triton, and without
    it the repository checked them while polling."""
    name = cfg.name
    problem = (scheduling_problem(cfg) or io_problem(cfg)) if completed else None
    if problem:
        raise CoreError(problem, Code.INVALID_ARG)
    if cfg.platform != "ensemble" and not cfg.backend:
        raise CoreError(
            "unable to find backend library for backend '', try specifying runtime on the "
            "model configuration.",
            Code.INVALID_ARG,
        )
    for group in cfg.instance_group:
        _check_group(group, name, cfg.platform)
    problem = unreadable_batch_input(cfg)  # (before the model's own code runs)
    if problem:
        raise CoreError(problem, Code.INVALID_ARG)
    for t in cfg.input:
        if t.format != ModelInput.FORMAT_NONE and len(t.dims) != 3:
            raise CoreError(f"model input NHWC/NCHW require 3 dims for {name}")
    force_cpu = cfg.parameters.get("FORCE_CPU_ONLY_INPUT_TENSORS")
    if force_cpu is not None and force_cpu.string_value not in ("yes", "no"):
        raise CoreError(
            f"Incorrect value for FORCE_CPU_ONLY_INPUT_TENSORS: {force_cpu.string_value}'",
            Code.UNSUPPORTED,
        )


def _check_group(group: ModelInstanceGroup, name: str, platform: str) -> None:
    """What Triton refuses in one instance group on a machine without GPUs."""
    where = f"instance group {group.name} of model {name}"
    if group.kind == ModelInstanceGroup.KIND_GPU:
        if group.gpus:
            raise CoreError(
                f"{where} specifies invalid or unsupported gpu id {group.gpus[0]}. GPUs with "
                "at least the minimum required CUDA compute compatibility of 6.000000 are: "
            )
        raise CoreError(f"{where} has kind KIND_GPU but no GPUs are available")
    for kind in ("KIND_CPU", "KIND_MODEL"):
        if group.kind == ModelInstanceGroup.Kind.Value(kind) and group.gpus:
            raise CoreError(f"{where} has kind {kind} but specifies one or more GPUs")
    if group.profile:
        raise CoreError(
            f"{where} and platform {platform}specifies profile field which is only supported "
            "for TensorRT models"
        )


# ----------------------------------------------------------------------------- JSON form

_FD = _descriptor.FieldDescriptor

#: the 64-bit integers Triton leaves as protobuf's JSON writes them, in quotes (it turns
#: the others, dims and the like, back into numbers)
_QUOTED = {
    "tritonhttp_server.ModelInstanceGroup.SecondaryDevice.device_id",
    "tritonhttp_server.ModelSequenceBatching.InitialState.dims",
    "tritonhttp_server.ModelOptimizationPolicy.Cuda.GraphSpec.Shape.dim",
}

#: messages whose fields Triton prints in another order than their declaration's
_ORDER = {
    "tritonhttp_server.ModelSequenceBatching.InitialState": (
        "data_type", "dims", "name", "zero_data", "data_file"
    ),
}  # fmt: skip


def _scalar(field: Any, value: Any) -> str:
    t = field.type
    if t == _FD.TYPE_ENUM:
        return _json.escape_str(field.enum_type.values_by_number[value].name)
    if t == _FD.TYPE_STRING:
        return _json.escape_str(value)
    if t == _FD.TYPE_BYTES:
        import base64

        return _json.escape_str(base64.b64encode(value).decode())
    if t == _FD.TYPE_BOOL:
        return "true" if value else "false"
    if field.full_name in _QUOTED:
        return f'"{int(value)}"'
    if t in (_FD.TYPE_FLOAT, _FD.TYPE_DOUBLE):
        # protobuf prints the shortest form, Triton re-reads it with RapidJSON: integral
        # values come out as integers, others as RapidJSON doubles.
        x = float(value)
        if math.isfinite(x) and x.is_integer() and abs(x) < 2**63:
            return str(int(x))
        if t == _FD.TYPE_FLOAT and math.isfinite(x):
            x = float(str(np.float32(x)))  # (the shortest text of the float32)
        return _json.format_double(x)
    return str(int(value))


def _message(msg: Message, out: list[str]) -> None:
    out.append("{")
    first = True
    field: Any
    desc = msg.DESCRIPTOR
    order = _ORDER.get(desc.full_name)
    for field in [desc.fields_by_name[f] for f in order] if order else desc.fields:
        repeated = is_repeated(field)
        a_map = is_map(field)
        if not repeated and field.containing_oneof is not None:
            if not msg.HasField(field.name):
                continue
        elif not repeated and field.type == _FD.TYPE_MESSAGE and not msg.HasField(field.name):
            continue
        if not first:
            out.append(",")
        first = False
        out.append(f'"{field.name}":')
        value = getattr(msg, field.name)
        if a_map:
            value_field = field.message_type.fields_by_name["value"]
            out.append("{")
            # Triton's own order is its hash map's (it varies between runs): sorted here
            for i, key in enumerate(sorted(value)):
                if i:
                    out.append(",")
                out.append(_json.escape_str(str(key)))
                out.append(":")
                if value_field.type == _FD.TYPE_MESSAGE:
                    _message(value[key], out)
                else:
                    out.append(_scalar(value_field, value[key]))
            out.append("}")
        elif repeated:
            out.append("[")
            for i, item in enumerate(value):
                if i:
                    out.append(",")
                if field.type == _FD.TYPE_MESSAGE:
                    _message(item, out)
                else:
                    out.append(_scalar(field, item))
            out.append("]")
        elif field.type == _FD.TYPE_MESSAGE:
            _message(value, out)
        else:
            out.append(_scalar(field, value))
    out.append("}")


def config_to_json(cfg: Message) -> bytes:
    """The config as Triton prints it: declaration order, every scalar, set messages only."""
    out: list[str] = []
    _message(cfg, out)
    return "".join(out).encode("utf-8")
