"""Helpers shared by the shared-memory tests."""

from __future__ import annotations

import contextlib
import itertools
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from tritonhttp.utils import shared_memory as shm

ROOT = Path(__file__).resolve().parents[2]
DEV_SHM = Path("/dev/shm")
KEY_PREFIX = f"thtshm-{os.getpid()}-"
_counter = itertools.count()

KeyFactory = Callable[[], str]


def new_key() -> str:
    """A fresh key ("/thtshm-<pid>-<n>") that no other test uses."""
    return f"/{KEY_PREFIX}{next(_counter)}"


def leftover_segments() -> list[str]:
    """Names of segments with this session's prefix that exist now."""
    if not DEV_SHM.is_dir():
        return []
    return sorted(p.name for p in DEV_SHM.iterdir() if p.name.startswith(KEY_PREFIX))


def unlink_segments(names: list[str]) -> None:
    for name in names:
        with contextlib.suppress(FileNotFoundError):
            (DEV_SHM / name).unlink()


@contextlib.contextmanager
def region(name: str, key: str, byte_size: int, **kw: Any) -> Iterator[shm.SharedMemoryRegion]:
    """A region made with our utils, destroyed afterwards (unless the test did)."""
    handle = shm.create_shared_memory_region(name, key, byte_size, **kw)
    try:
        yield handle
    finally:
        if not handle.destroyed:
            shm.destroy_shared_memory_region(handle)


def tc_attach(name: str, key: str, byte_size: int) -> Any:
    """Attach tritonclient's utils to an existing segment without its resource tracker.

    On Python < 3.13 ``multiprocessing.shared_memory`` registers even attached segments
    with the resource tracker, which would unlink them (and warn) when this process exits.
    """
    import tritonclient.utils.shared_memory as tc_shm

    handle = tc_shm.create_shared_memory_region(name, key, byte_size)
    _untrack(handle)
    return handle


def _untrack(handle: Any) -> None:
    if sys.version_info >= (3, 13):
        return
    from multiprocessing import resource_tracker

    resource_tracker.unregister(handle._mpsm_handle._name, "shared_memory")


def tc_detach(handle: Any) -> None:
    """Destroy a tritonclient handle obtained from :func:`tc_attach` (never unlinks)."""
    import tritonclient.utils.shared_memory as tc_shm

    tc_shm.destroy_shared_memory_region(handle)


#: prepended to a run_python script: every ``cuda`` import fails as if cuda-python were absent
WITHOUT_CUDA_PYTHON = """
import sys
class Hide:
    def find_spec(self, name, path=None, target=None):
        if name == "cuda" or name.startswith("cuda."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Hide())
"""


def run_python(
    code: str, *args: str, timeout: float = 60, prelude: str = ""
) -> subprocess.CompletedProcess[str]:
    """Run ``prelude`` then ``code`` (dedented) in a fresh interpreter (so a segfault is a
    return code, not our crash)."""
    return subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )


def cuda_device_count() -> int:
    """Number of usable CUDA devices (0 without cuda-python, driver or GPU)."""
    try:
        from cuda.bindings import runtime as cudart
    except Exception:
        return 0
    try:
        error, count = cudart.cudaGetDeviceCount()
    except Exception:
        return 0
    return int(count) if int(error) == 0 else 0
