"""What Triton refuses in a model's ``batch_input`` and ``batch_output`` entries.

The Python backend never hands these tensors to a model (``execute`` sees each request's
own inputs); the fields only decide whether the model loads. Two checks, at two moments:

* :func:`unreadable_batch_input` (the backend reading the entries when the model is
  created, before the model's auto-completion): an entry without a data type;
* :func:`batch_problem` (with the other checks of the completed configuration, or while
  polling when auto-completion is off): each entry in turn, its source count, then its
  data type, then its source names; then each output entry, its source count, its source
  names, then its target names.
"""

from __future__ import annotations

from collections.abc import Iterable

from .model_config_pb2 import BatchInput, BatchOutput, DataType, ModelConfig

__all__ = ["batch_problem", "unreadable_batch_input"]

#: the data types a batch input may have
_BATCH_INPUT_TYPES = (DataType.TYPE_INT32, DataType.TYPE_FP32)


def unreadable_batch_input(cfg: ModelConfig) -> str | None:
    """The refusal of a batch input whose data type is not given (None: none)."""
    for entry in cfg.batch_input:
        if entry.data_type == DataType.TYPE_INVALID:
            return "unexpected batch input data type 'TYPE_INVALID'"
    return None


def batch_problem(cfg: ModelConfig) -> str | None:
    """The first refusal among the batch input and output entries (None: none)."""
    name = cfg.name
    inputs = {t.name for t in cfg.input}
    for entry in cfg.batch_input:
        if len(entry.source_input) != 1:
            return _not_one_source("input", BatchInput.Kind.Name(entry.kind), entry, name)
        if entry.data_type not in _BATCH_INPUT_TYPES:
            return f"batch input data type must be TYPE_INT32 or TYPE_FP32 for {name}"
        problem = _unknown_source(entry.source_input, inputs, name)
        if problem:
            return problem
    outputs = {t.name for t in cfg.output}
    for out in cfg.batch_output:
        if len(out.source_input) != 1:
            return _not_one_source("output", BatchOutput.Kind.Name(out.kind), out, name)
        problem = _unknown_source(out.source_input, inputs, name)
        if problem:
            return problem
        for target in out.target_name:
            if target not in outputs:
                return f"unknown target output name '{target}' for {name}"
    return None


def _unknown_source(sources: Iterable[str], inputs: set[str], name: str) -> str | None:
    for source in sources:
        if source not in inputs:
            return f"unknown source input name '{source}' for {name}"
    return None


def _not_one_source(what: str, kind: str, entry: BatchInput | BatchOutput, name: str) -> str:
    return (
        f"batch {what} kind '{kind}' expects 1 source input, got "
        f"{len(entry.source_input)} for {name}"
    )
