"""Fixtures of the backend tests: our server in both isolation modes, real Triton."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from _pool import ServerPool

from tritonhttp.server import _launch

TESTS = Path(__file__).parent.parent
REPOS = TESTS / "repos"
EXAMPLES = TESTS.parent / "examples" / "python_models"

ISOLATIONS = ("process", "in-process")

Start = Callable[..., _launch.BundledServer]


@pytest.fixture(scope="module")
def servers() -> Iterator[Start]:
    """``servers(repo, *flags)``: our server, started once per module and flag set."""
    pool = ServerPool(_launch.start)
    yield pool
    pool.stop()


@pytest.fixture(scope="module", params=ISOLATIONS)
def isolation(request: pytest.FixtureRequest) -> str:
    """Each test using it runs once per isolation mode."""
    return str(request.param)


@pytest.fixture(scope="module")
def ours(servers: Start, isolation: str) -> Start:
    """``ours(repo, *flags)``: our server in the module's current isolation mode."""

    def start(repo: Path | str, *flags: str) -> _launch.BundledServer:
        return servers(repo, f"--python-isolation={isolation}", *flags)

    return start


@pytest.fixture(scope="module")
def real(request: pytest.FixtureRequest, real_triton_factory: Any) -> Any:
    """Real Triton serving the module's ``REPO`` with its ``ARGS`` (modules that need
    another real Triton define their own ``real``)."""
    return real_triton_factory(request.module.REPO, *request.module.ARGS)


@pytest.fixture(scope="module")
def server(request: pytest.FixtureRequest, ours: Start) -> Any:
    """Our server serving the module's ``REPO`` with its ``ARGS``, in each isolation mode."""
    return ours(request.module.REPO, *request.module.ARGS)


def until(check: Callable[[], bool], timeout: float = 10.0) -> bool:
    """Whether ``check()`` turns true within ``timeout`` seconds (polled every 20 ms)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.02)
    return False
