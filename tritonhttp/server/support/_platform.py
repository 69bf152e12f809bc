"""What the server relies on that differs between operating systems, in one place.

Every platform-dependent decision of the server reads the platform through
:func:`system` (``sys.platform``), so that the code paths of macOS (``darwin``) and
Windows (``win32``) can be selected, and tested, on Linux. The facts:

* **worker processes** (``isolation=process``) need Unix sockets that carry file
  descriptors (``socket.socketpair(AF_UNIX)``, ``send_fds``) and POSIX shared memory:
  every POSIX platform, not Windows (models run in the server's process there);
* **shared-memory names**: macOS allows 31 characters (``PSHMNAMLEN``) where Linux allows
  255, so the default ``shm-region-prefix-name`` is shorter there;
* **dying with the parent**: Linux has ``PR_SET_PDEATHSIG``; elsewhere a worker watches
  its parent's pid from a thread (:func:`parent_death_signal` says which);
* **polling**: ``select.poll`` and ``os.sched_yield`` are missing on Windows
  (:func:`can_busy_poll`, :func:`yield_cpu`);
* **priority**: Linux keeps a nice value per thread, other POSIX systems per process;
  Windows has no ``os.setpriority`` (:func:`lower_priority`).

Standard library only (worker processes import this module too).
"""

from __future__ import annotations

import os
import select
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable

__all__ = [
    "KILL_SIGNAL",
    "LINUX_SHM_PREFIX",
    "SHM_SUFFIX_LEN",
    "SHORT_SHM_PREFIX",
    "WATCH_INTERVAL_S",
    "can_busy_poll",
    "default_shm_prefix",
    "die_with_parent",
    "lower_priority",
    "parent_death_signal",
    "shm_name_max",
    "shm_prefix_max",
    "system",
    "workers_supported",
    "yield_cpu",
    "yield_function",
]

#: Triton's default ``shm-region-prefix-name`` (kept wherever names may be that long)
LINUX_SHM_PREFIX = "triton_python_backend_shm_region_"
#: the default prefix where shared-memory names are short (macOS)
SHORT_SHM_PREFIX = "tpb_shm_"
#: characters a segment's name adds after the prefix (16 hex digits)
SHM_SUFFIX_LEN = 16
#: the signal that ends a process at once (``SIGKILL``; Windows has none: ``SIGTERM``,
#: which ``Popen.send_signal`` there turns into ``TerminateProcess``)
KILL_SIGNAL: int = int(getattr(signal, "SIGKILL", signal.SIGTERM))
_PR_SET_PDEATHSIG = 1


def system() -> str:
    """The platform as ``sys.platform`` names it (``linux``, ``darwin``, ``win32``...)."""
    return sys.platform


def _is_windows(platform: str) -> bool:
    return platform.startswith(("win", "cygwin", "msys"))


def shm_name_max(platform: str | None = None) -> int:
    """The longest name ``shm_open`` takes, its leading ``/`` included."""
    platform = system() if platform is None else platform
    return 31 if platform == "darwin" else 255


def shm_prefix_max(platform: str | None = None) -> int:
    """The longest ``shm-region-prefix-name`` whose segment names fit the platform."""
    return shm_name_max(platform) - 1 - SHM_SUFFIX_LEN


def default_shm_prefix(platform: str | None = None) -> str:
    """The default ``shm-region-prefix-name``: Triton's where it fits, else a short one."""
    if len(LINUX_SHM_PREFIX) <= shm_prefix_max(platform):
        return LINUX_SHM_PREFIX
    return SHORT_SHM_PREFIX


def workers_supported(platform: str | None = None) -> bool:
    """Whether models can run in worker processes here (``isolation=process``).

    For the running platform, also checks that the primitives exist."""
    if platform is not None:
        return not _is_windows(platform)
    return (
        not _is_windows(system())
        and hasattr(socket, "AF_UNIX")
        and hasattr(socket, "send_fds")
        and hasattr(os, "pipe")
    )


def parent_death_signal(platform: str | None = None) -> bool:
    """Whether the kernel can kill a process when its parent ends
    (``prctl(PR_SET_PDEATHSIG)``: Linux only); elsewhere a watchdog thread does it."""
    platform = system() if platform is None else platform
    return platform.startswith("linux")


#: how often a watchdog checks that its process's parent still runs (seconds)
WATCH_INTERVAL_S = 0.5


def die_with_parent(parent: int, platform: str | None = None) -> None:
    """End this process (at once, as ``SIGKILL`` would) when its parent ``parent`` ends,
    whatever way the parent ends.

    Linux: ``prctl(PR_SET_PDEATHSIG, SIGKILL)`` (the kernel does it when the thread that
    started this process ends). Elsewhere, or should that call fail: a daemon thread
    that checks every :data:`WATCH_INTERVAL_S` whether ``os.getppid()`` is still
    ``parent`` (an orphan is given another parent) and calls ``os._exit`` once it is
    not. ``parent`` 0: the current parent. Either way, a parent already gone ends this
    process now."""
    parent = parent or os.getppid()
    if not (parent_death_signal(platform) and _set_pdeathsig()):
        threading.Thread(
            target=_watch_parent, args=(parent,), name="parent-watchdog", daemon=True
        ).start()
    if os.getppid() != parent:  # (it ended before either took effect)
        os._exit(0)


def _set_pdeathsig() -> bool:
    """``prctl(PR_SET_PDEATHSIG, SIGKILL)``; False where the call is unavailable."""
    try:
        import ctypes

        return int(ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, KILL_SIGNAL)) == 0
    except (OSError, AttributeError):
        return False


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(WATCH_INTERVAL_S)
    os._exit(0)


def can_busy_poll(platform: str | None = None) -> bool:
    """Whether ``select.poll`` and ``os.sched_yield`` are there to poll sockets with."""
    if _is_windows(system() if platform is None else platform):
        return False
    return hasattr(select, "poll") and hasattr(os, "sched_yield")


def _sleep0() -> None:
    time.sleep(0)


def yield_function(platform: str | None = None) -> Callable[[], None]:
    """What lets another thread or process that wants this CPU run first:
    ``os.sched_yield``, or a zero sleep where it is missing."""
    sched_yield: Callable[[], None] | None = getattr(os, "sched_yield", None)
    if sched_yield is None or (platform is not None and _is_windows(platform)):
        return _sleep0
    return sched_yield


#: :func:`yield_function` for the running platform
yield_cpu = yield_function()


def lower_priority(by: int) -> bool:
    """Raise the nice value of this process, every thread of it, by ``by`` (the system
    clamps it at its lowest priority). Threads started later inherit it from the thread
    that starts them. False where the platform cannot."""
    setpriority = getattr(os, "setpriority", None)
    if setpriority is None:
        return False
    try:  # Linux: one nice value per thread
        ids = [int(tid) for tid in os.listdir("/proc/self/task")]
    except OSError:  # elsewhere: the process's
        ids = [0]
    done = False
    for tid in ids:
        try:
            setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + by)
            done = True
        except OSError:  # the thread ended meanwhile, or no permission
            pass
    return done
