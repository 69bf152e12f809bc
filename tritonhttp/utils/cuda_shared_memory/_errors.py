"""The one exception type of the CUDA shared-memory utilities."""

from __future__ import annotations

__all__ = ["CudaSharedMemoryException"]


class CudaSharedMemoryException(Exception):
    """A CUDA shared-memory operation failed; ``str(e)`` is the message.

    Same name and base as tritonclient's; unlike it, the message is also in ``args``
    (so the exception pickles and has a useful ``repr``).
    """

    def __init__(self, msg: str) -> None:
        super().__init__(msg)
        self._msg = msg

    def __str__(self) -> str:
        return self._msg
