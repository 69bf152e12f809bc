"""Per-key reference counts of the segments this process has mapped.

tritonclient keeps the same bookkeeping (``needs_unlink`` + ``active_handle_count`` per
key). On top of it we remember which process created a segment and the identity of the
object it created, so that

* only the creating process ever unlinks (a forked child's destroy, or its exit, leaves
  the parent's segment alone), and
* a name that was unlinked and re-created by someone else is never unlinked by us.

Segments this process created and never destroyed are unlinked at interpreter exit,
as Python's resource tracker does for tritonclient (minus the tracker process and its
warnings).
"""

from __future__ import annotations

import atexit
import os
import threading
from dataclasses import dataclass

from ._posix import ObjectIdentity, unlink_if_same

__all__ = ["KeyState", "lock", "registry"]


@dataclass
class KeyState:
    """Bookkeeping for one shared-memory object (one normalized key)."""

    key: str  # the key as the user first spelled it (what mapped_shared_memory_regions lists)
    handles: int = 0  # live (not destroyed) handles in this process
    creator_pid: int | None = None  # set when this process created the object
    identity: ObjectIdentity | None = None  # identity of the object we created

    @property
    def owned(self) -> bool:
        """True when this very process created the object (and so must unlink it)."""
        return self.creator_pid == os.getpid()


#: normalized path ("/name") -> state. Guarded by ``lock``.
registry: dict[str, KeyState] = {}
lock = threading.Lock()


def _reset_lock_in_child() -> None:
    global lock
    lock = threading.Lock()


def _unlink_owned_at_exit() -> None:
    with lock:
        owned = [(path, st.identity) for path, st in registry.items() if st.owned]
    for path, identity in owned:
        try:
            unlink_if_same(path, identity)
        except Exception:  # best effort at exit: nothing to report to
            continue


os.register_at_fork(after_in_child=_reset_lock_in_child)
atexit.register(_unlink_owned_at_exit)
