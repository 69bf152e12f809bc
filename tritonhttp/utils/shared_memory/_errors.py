"""The one exception type of the system shared-memory utilities."""

from __future__ import annotations

__all__ = ["SharedMemoryException"]


class SharedMemoryException(Exception):
    """A system shared-memory operation failed; ``str(e)`` is the message.

    Same class name and base as tritonclient's, so ``except SharedMemoryException``
    clauses keep working. The message is the single argument (it pickles).
    """
