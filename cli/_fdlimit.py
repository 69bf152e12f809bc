"""The process's open-file limit (``RLIMIT_NOFILE``): every connection ``bench`` keeps
open holds a descriptor, so a run needs at least one per request in flight."""

from __future__ import annotations

import contextlib
import os

__all__ = ["files_in_use", "raise_open_file_limit"]


def raise_open_file_limit(wanted: int) -> int | None:
    """Raise the soft limit to the hard limit (best effort) when it is below ``wanted``.

    Returns the soft limit that holds afterwards, or None where there is no limit (or no
    ``resource`` module, on Windows)."""
    try:
        import resource
    except ImportError:  # pragma: no cover - Windows
        return None
    unlimited = resource.RLIM_INFINITY
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != unlimited and soft < wanted:
        target = wanted if hard == unlimited else hard
        # best effort: some systems cap it below the hard limit (macOS, fs.nr_open)
        with contextlib.suppress(OSError, ValueError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return None if soft == unlimited else int(soft)


def files_in_use() -> int:
    """How many descriptors the process holds now (3, for stdin/out/err, where the
    platform cannot list them)."""
    for folder in ("/proc/self/fd", "/dev/fd"):
        try:
            return max(len(os.listdir(folder)) - 1, 3)  # less the one listdir opened
        except OSError:
            continue
    return 3
