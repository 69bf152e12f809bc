"""Fixtures for the shared-memory tests, and the leak checks around them.

Every system segment a test creates has a key from :func:`new_key` (prefix
``/thtshm-<pid of the pytest process>-``). Each test must leave none of them in
/dev/shm and no live handle behind; the session additionally fails at the end if any
segment with the prefix is still there (created by a child process, a reference
tritonclient region, ...).
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator

import pytest
from shm_helpers import KeyFactory, cuda_device_count, leftover_segments, new_key, unlink_segments

from tritonhttp.utils import shared_memory as shm


@pytest.fixture
def key_factory() -> KeyFactory:
    return new_key


@pytest.fixture(autouse=True)
def _no_segment_or_handle_left() -> Iterator[None]:
    """Each test leaves no segment in /dev/shm and no live handle in this process."""
    before = set(leftover_segments())
    mapped_before = set(shm.mapped_shared_memory_regions())
    yield
    left = sorted(set(leftover_segments()) - before)
    mapped = sorted(set(shm.mapped_shared_memory_regions()) - mapped_before)
    unlink_segments(left)
    assert not left, f"the test left shared-memory segments behind: {left}"
    assert not mapped, f"the test left live handles behind: {mapped}"


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    left = leftover_segments()
    if not left:
        return
    unlink_segments(left)
    message = f"shared-memory leak check: segments left in /dev/shm by the tests: {left}"
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(message, red=True, bold=True)
    else:
        print(message, file=sys.stderr)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="session")
def python() -> str:
    """The interpreter running the tests (for child processes)."""
    return sys.executable or shutil.which("python3") or "python3"


# --- CUDA ---------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def gpu() -> int:
    """Device 0, or skip when there is no usable GPU (fail with TRITONHTTP_REQUIRE_GPU=1)."""
    if cuda_device_count() == 0:
        reason = "needs a CUDA GPU with its driver and cuda-python"
        if os.environ.get("TRITONHTTP_REQUIRE_GPU") == "1":
            pytest.fail(f"TRITONHTTP_REQUIRE_GPU=1 but no GPU is usable: {reason}")
        pytest.skip(reason)
    return 0
