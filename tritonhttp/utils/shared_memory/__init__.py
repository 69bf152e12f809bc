"""System (POSIX) shared memory for Triton, mirroring ``tritonclient.utils.shared_memory``.

Same names, arguments, keys and semantics as tritonclient 2.73.0 -- attach-or-create,
per-key reference counts, ``create_only``, the size-mismatch warning, BYTES handling,
zero-copy ``get_contents_as_numpy`` -- with the crashes and leaks taken out: a destroyed
handle raises :class:`SharedMemoryException` (also on a second destroy), arrays read
from a region keep its memory mapped instead of segfaulting after a destroy, offsets and
sizes are bounds-checked, keys cannot name other files, and Python's resource tracker
is never involved. See ``docs/shared-memory.md``.
"""

from ._errors import SharedMemoryException
from ._region import (
    SharedMemoryRegion,
    create_shared_memory_region,
    destroy_shared_memory_region,
    get_contents_as_numpy,
    mapped_shared_memory_regions,
    set_shared_memory_region,
)

__all__ = [
    "SharedMemoryException",
    "SharedMemoryRegion",
    "create_shared_memory_region",
    "destroy_shared_memory_region",
    "get_contents_as_numpy",
    "mapped_shared_memory_regions",
    "set_shared_memory_region",
]
