"""CUDA shared memory for Triton, mirroring ``tritonclient.utils.cuda_shared_memory``.

Needs NVIDIA's cuda-python bindings (``pip install 'tritonhttp[cuda]'``); importing this
module without them raises ``RuntimeError`` saying so. Without a GPU the import works and
every call that needs the device raises :class:`CudaSharedMemoryException`.

Same names and semantics as tritonclient 2.73.0, with its weak spots fixed: destroy
frees the device memory (after the last DLPack consumer, if any), reads and writes are
bounds-checked and take an ``offset``, reads copy only what is asked for, DLPack exports
never leak, and no CUDA stream is left behind. See ``docs/shared-memory.md``.
"""

from ._dlpack import SharedMemoryTensor
from ._errors import CudaSharedMemoryException
from ._region import (
    CudaSharedMemoryRegion,
    allocated_shared_memory_regions,
    allocated_shm_regions,
    as_shared_memory_tensor,
    create_shared_memory_region,
    destroy_shared_memory_region,
    get_contents_as_numpy,
    get_raw_handle,
    set_shared_memory_region,
    set_shared_memory_region_from_dlpack,
)

__all__ = [
    "CudaSharedMemoryException",
    "CudaSharedMemoryRegion",
    "SharedMemoryTensor",
    "allocated_shared_memory_regions",
    "allocated_shm_regions",
    "as_shared_memory_tensor",
    "create_shared_memory_region",
    "destroy_shared_memory_region",
    "get_contents_as_numpy",
    "get_raw_handle",
    "set_shared_memory_region",
    "set_shared_memory_region_from_dlpack",
]
