"""Access to NVIDIA's cuda-python bindings: loading, error checks, device switching.

Importing this module without cuda-python raises ``RuntimeError`` naming the
``tritonhttp[cuda]`` extra. Without a GPU (or driver) the import works and every CUDA
call raises :class:`CudaSharedMemoryException` saying so.
"""

from __future__ import annotations

import contextlib
import importlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

from ._errors import CudaSharedMemoryException

__all__ = ["call", "cudart", "ensure_unified_addressing", "memcpy", "on_device"]

_INSTALL_HINT = (
    "tritonhttp.utils.cuda_shared_memory needs NVIDIA's cuda-python bindings "
    "(module cuda.bindings.runtime); install them with: pip install 'tritonhttp[cuda]'"
)


def _load_bindings() -> tuple[Any, Any]:
    """(runtime, driver) modules of cuda-python, or RuntimeError naming the extra."""
    try:
        return (
            importlib.import_module("cuda.bindings.runtime"),
            importlib.import_module("cuda.bindings.driver"),
        )
    except ImportError as error:
        first_error: Exception = error
    except Exception as error:  # a broken installation: say what to do, never crash
        raise RuntimeError(f"{_INSTALL_HINT} ({type(error).__name__}: {error})") from error
    try:  # cuda-python < 12.6 spelled the modules differently
        return importlib.import_module("cuda.cudart"), importlib.import_module("cuda.cuda")
    except Exception:
        raise RuntimeError(_INSTALL_HINT) from first_error


cudart, cudadrv = _load_bindings()

_NO_GPU_ERRORS = {
    "cudaErrorNoDevice",
    "cudaErrorInsufficientDriver",
    "cudaErrorInitializationError",
    "cudaErrorSystemDriverMismatch",
    "cudaErrorCompatNotSupportedOnDevice",
    "CUDA_ERROR_NO_DEVICE",
    "CUDA_ERROR_NOT_INITIALIZED",
    "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
}


def _describe(error: Any) -> str:
    try:
        if isinstance(error, cudadrv.CUresult):
            name = cudadrv.cuGetErrorName(error)[1]
            text = cudadrv.cuGetErrorString(error)[1]
        else:
            name = cudart.cudaGetErrorName(error)[1]
            text = cudart.cudaGetErrorString(error)[1]
        name = name.decode() if isinstance(name, bytes) else str(name)
        text = text.decode() if isinstance(text, bytes) else str(text)
    except Exception:
        return str(error)
    hint = ""
    if name in _NO_GPU_ERRORS:
        hint = "; CUDA shared memory needs an NVIDIA GPU and its driver on this machine"
    return f"{name} ({text}){hint}"


def call(name: str, function: Callable[..., Any], *args: Any) -> Any:
    """Call a cuda-python function, check its ``(error, *values)`` result, return the value(s).

    ``name`` describes the call for the error message. cuda-python raises (rather than
    returns an error) when it cannot even load the driver library: that becomes a
    :class:`CudaSharedMemoryException` too.
    """
    try:
        result = function(*args)
    except Exception as e:
        raise CudaSharedMemoryException(
            f"{name} failed: {type(e).__name__}: {e}; CUDA shared memory needs an NVIDIA GPU "
            "and its driver on this machine"
        ) from e
    error = result[0]
    if int(error) != 0:  # cudaSuccess and CUDA_SUCCESS are both 0
        raise CudaSharedMemoryException(f"{name} failed: {_describe(error)}")
    values = result[1:]
    if not values:
        return None
    return values[0] if len(values) == 1 else values


def _primary_context_active(device_id: int) -> bool:
    try:
        device = call("cuDeviceGet", cudadrv.cuDeviceGet, device_id)
        _flags, active = call(
            "cuDevicePrimaryCtxGetState", cudadrv.cuDevicePrimaryCtxGetState, device
        )
        return bool(active)
    except CudaSharedMemoryException:
        return False


@contextlib.contextmanager
def on_device(device_id: int) -> Iterator[None]:
    """Make ``device_id`` current for the block, then restore the caller's device.

    The previous device is only made current again when its primary context is active,
    so switching back never creates a context (and its memory) on an idle GPU.
    """
    previous = call("cudaGetDevice", cudart.cudaGetDevice)
    if previous == device_id:
        yield
        return
    call(f"cudaSetDevice({device_id})", cudart.cudaSetDevice, device_id)
    try:
        yield
    finally:
        if _primary_context_active(previous):
            with contextlib.suppress(CudaSharedMemoryException):
                call(f"cudaSetDevice({previous})", cudart.cudaSetDevice, previous)


_uva_checked: set[int] = set()
_uva_lock = threading.Lock()


def ensure_unified_addressing(device_id: int) -> None:
    """Refuse devices without unified virtual addressing (cudaMemcpyDefault needs it)."""
    if device_id in _uva_checked:
        return
    supported = call(
        "cudaDeviceGetAttribute(cudaDevAttrUnifiedAddressing)",
        cudart.cudaDeviceGetAttribute,
        cudart.cudaDeviceAttr.cudaDevAttrUnifiedAddressing,
        device_id,
    )
    if not supported:
        raise CudaSharedMemoryException(
            f"device {device_id} does not support unified virtual addressing"
        )
    with _uva_lock:
        _uva_checked.add(device_id)


def memcpy(destination: int, source: int, nbytes: int) -> None:
    """Synchronous copy between any two addresses (host or device), on the legacy stream."""
    if nbytes:
        call(
            "cudaMemcpy",
            cudart.cudaMemcpy,
            destination,
            source,
            nbytes,
            cudart.cudaMemcpyKind.cudaMemcpyDefault,
        )
