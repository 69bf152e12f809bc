"""Model warm-up: the ``model_warmup`` samples a version runs before it serves."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ._backend_api import ModelInstance
from ._config import ModelConfig, wire_datatype
from ._errors import Code, CoreError
from ._model import ModelVersion

__all__ = ["warm_up"]


async def warm_up(
    mv: ModelVersion,
    cfg: ModelConfig,
    model_dir: Path,
    instances: list[ModelInstance] | None = None,
) -> None:
    """Run ``model_warmup`` samples before the version serves (failures fail the load).

    As in Triton, every instance (of ``instances``, by default all of the version's) runs
    each sample: ``batch_size: B`` and ``count: C`` send B x max(C, 1) requests of batch 1
    to it. A sample's inputs the model does not have are left out; a batch size above the
    model's largest (1 for a model without batching) fails each of the B requests.
    """
    if not cfg.model_warmup:
        return
    import numpy as np

    from ._types import InferRequest, InputTensor

    rng = np.random.default_rng(0)
    for sample in cfg.model_warmup:
        inputs = _warm_up_inputs(sample, cfg, model_dir, rng)
        for instance in mv.instances if instances is None else instances:
            if sample.batch_size > max(cfg.max_batch_size, 1):
                one = (
                    f"batch size {sample.batch_size} for '{instance.name}', max allowed is "
                    f"{cfg.max_batch_size}; "
                )
                raise CoreError(
                    f"failed to run warmup sample '{sample.name}': {one * sample.batch_size}"
                )
            for _ in range(max(1, sample.batch_size) * max(1, sample.count)):
                copies = {
                    k: InputTensor(t.name, t.datatype, list(t.shape), array=t.array)
                    for k, t in inputs.items()
                }
                req = InferRequest(id="", inputs=copies)
                mv.admit(req)
                (response,) = await mv._execute(instance, [req])
                if response.error is not None:
                    raise CoreError(
                        f"failed to run warmup sample '{sample.name}': {response.error.message}; "
                    )


def _warm_up_inputs(sample: Any, cfg: ModelConfig, model_dir: Path, rng: Any) -> dict[str, Any]:
    """The input tensors of one warm-up sample (those the model has), as Triton makes them."""
    import numpy as np

    from ...utils._dtypes import TRITON_TO_NUMPY
    from ._types import InputTensor

    known = {t.name for t in cfg.input}
    inputs: dict[str, InputTensor] = {}
    for name, spec in sample.inputs.items():
        which = spec.WhichOneof("input_data_type")
        if which is None:
            raise CoreError(
                f"[request id: <id_unknown>] warmup setting expects input '{name}' to have "
                "input_data_type set"
            )
        wire = wire_datatype(spec.data_type)
        shape = list(spec.dims)
        if cfg.max_batch_size > 0:
            shape = [1, *shape]
        count = int(np.prod(shape, dtype=np.int64))
        raw = b""
        if which == "input_data_file":
            path = model_dir / "warmup" / spec.input_data_file
            try:
                raw = path.read_bytes()
            except OSError as e:
                raise CoreError(
                    f"failed to open text file for read {path}: {e.strerror}", Code.INTERNAL
                ) from None
        if name not in known:
            continue
        if wire == "BYTES":
            arr: np.ndarray[Any, Any] = np.empty(count, dtype=np.object_)
            arr[:] = [b""] * count if which != "random_data" else [b"a"] * count
        elif which == "input_data_file":
            arr = np.frombuffer(bytearray(raw), dtype=TRITON_TO_NUMPY[wire])[:count]
        elif which == "random_data":
            arr = rng.random(count).astype(TRITON_TO_NUMPY[wire])
        else:
            arr = np.zeros(count, dtype=TRITON_TO_NUMPY[wire])
        inputs[name] = InputTensor(name, wire, shape, array=arr)
    return inputs
