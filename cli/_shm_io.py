"""``infer --shm system|cuda``: one region for a request's inputs and outputs.

The region is created, filled, registered, used and then always unregistered and
destroyed (also on errors and Ctrl-C). Outputs whose byte size is known from the model
metadata (fixed shape, not BYTES) are written by the server into the region; the others
come back in the HTTP response.
"""

from __future__ import annotations

import contextlib
import importlib
import math
import os
import secrets
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ._errors import CliError, describe

if TYPE_CHECKING:
    import numpy as np

    import tritonhttp

    from ._values import TensorSpec

__all__ = ["ShmIO", "shared_memory_io", "unregister_region"]


def _byte_size(array: np.ndarray[Any, Any]) -> int:
    from tritonhttp.utils import serialize_byte_tensor

    if array.dtype.kind == "O":
        if array.size == 0:
            return 0
        return len(serialize_byte_tensor(array).item())
    return int(array.nbytes)


def _dtype_size(datatype: str) -> int | None:
    import numpy as np

    from tritonhttp.utils import triton_to_np_dtype

    if datatype == "BYTES":
        return None
    dtype = triton_to_np_dtype(datatype)
    return None if dtype is None else int(np.dtype(dtype).itemsize)


def unregister_region(
    call: Any, name: str, headers: Any, patience_s: float = 5.0, waiting: str = ""
) -> None:
    """Unregister a region with ``call``. The server refuses while a request still uses
    the region (``... is currently in use``), as after Ctrl-C stopped the client during a
    request: try again for up to ``patience_s`` seconds (saying ``waiting`` on stderr
    first, when given)."""
    import sys
    import time

    import tritonhttp

    deadline = time.monotonic() + patience_s
    said = False
    while True:
        try:
            call(name, headers=headers)
            return
        except tritonhttp.InferenceServerException as e:
            if "in use" not in str(e.message()) or time.monotonic() > deadline:
                raise
        if waiting and not said:
            sys.stderr.write(waiting + "\n")
            said = True
        time.sleep(0.02)


@dataclass
class ShmIO:
    """Where each tensor lives in the region."""

    kind: str
    region_name: str
    handle: Any
    module: Any
    inputs: dict[str, tuple[int, int]] = field(default_factory=dict)  # name -> (offset, size)
    outputs: dict[str, tuple[int, int]] = field(default_factory=dict)

    def read_output(self, name: str, datatype: str, shape: Sequence[int]) -> np.ndarray[Any, Any]:
        """A copy of an output the server wrote into the region."""
        import numpy as np

        from tritonhttp.utils import triton_to_np_dtype

        offset, size = self.outputs[name]
        dtype = triton_to_np_dtype(datatype)
        needed = math.prod(shape) * np.dtype(dtype).itemsize
        if needed > size:
            raise CliError(
                f"output '{name}' of shape {list(shape)} ({needed} bytes) does not fit the "
                f"{size} bytes reserved for it in shared memory"
            )
        array = self.module.get_contents_as_numpy(self.handle, dtype, list(shape), offset)
        return np.array(array, copy=True)


@contextlib.contextmanager
def shared_memory_io(
    kind: str,
    client: tritonhttp.InferenceServerClient,
    headers: dict[str, str] | None,
    arrays: dict[str, np.ndarray[Any, Any]],
    outputs: Sequence[TensorSpec],
    batch: int | None,
    device_id: int,
    patience: float = 60.0,
) -> Iterator[ShmIO]:
    """Create, fill and register a region for ``arrays`` and the fixed-size ``outputs``.

    At the end the region is unregistered: while a request the client gave up on (after
    Ctrl-C) still uses it, unregistering is retried for up to ``patience`` seconds, so
    that the server is not left holding it."""
    inputs: dict[str, tuple[int, int]] = {}
    offset = 0
    for name, array in arrays.items():
        size = _byte_size(array)
        inputs[name] = (offset, size)
        offset += size
    placed: dict[str, tuple[int, int]] = {}
    for spec in outputs:
        itemsize = _dtype_size(spec.datatype)
        dims = list(spec.shape)
        if dims and dims[0] < 0 and batch is not None:
            dims[0] = batch
        if itemsize is None or any(d < 0 for d in dims):
            continue  # unknown size: this output comes back over HTTP
        size = math.prod(dims) * itemsize
        placed[spec.name] = (offset, size)
        offset += size
    total = max(offset, 1)
    tag = f"{os.getpid()}_{secrets.token_hex(4)}"
    region_name = f"triton_cli_{tag}"
    key = f"/triton_cli_{tag}"
    waiting = (
        f"waiting (up to {patience:g} s) for the server to finish with shared-memory region "
        f"'{region_name}' before unregistering it"
    )
    module: Any
    if kind == "system":
        module = importlib.import_module("tritonhttp.utils.shared_memory")
    else:
        try:
            module = importlib.import_module("tritonhttp.utils.cuda_shared_memory")
        except (ImportError, RuntimeError) as e:
            raise CliError(f"--shm cuda needs CUDA support: {describe(e)}") from None
    with contextlib.ExitStack() as cleanup:
        if kind == "system":
            handle = module.create_shared_memory_region(region_name, key, total, create_only=True)
        else:
            handle = module.create_shared_memory_region(region_name, total, device_id)
        cleanup.callback(module.destroy_shared_memory_region, handle)
        for name, array in arrays.items():
            if inputs[name][1]:
                module.set_shared_memory_region(handle, [array], offset=inputs[name][0])
        if kind == "system":
            client.register_system_shared_memory(region_name, key, total, headers=headers)
            cleanup.callback(
                unregister_region, client.unregister_system_shared_memory, region_name, headers,
                patience, waiting,
            )  # fmt: skip
        else:
            raw = module.get_raw_handle(handle)
            client.register_cuda_shared_memory(region_name, raw, device_id, total, headers=headers)
            cleanup.callback(
                unregister_region, client.unregister_cuda_shared_memory, region_name, headers,
                patience, waiting,
            )  # fmt: skip
        yield ShmIO(kind, region_name, handle, module, inputs, placed)
