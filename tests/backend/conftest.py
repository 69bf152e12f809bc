"""Fixtures of the backend tests: our server in both isolation modes, real Triton."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tritonhttp.server import _launch

TESTS = Path(__file__).parent.parent
REPOS = TESTS / "repos"
EXAMPLES = TESTS.parent / "examples" / "python_models"

ISOLATIONS = ("process", "in-process")

Start = Callable[..., _launch.BundledServer]


@pytest.fixture(scope="module")
def servers() -> Iterator[Start]:
    """``servers(repo, *flags)``: our server, started once per module and flag set."""
    running: dict[tuple[str, tuple[str, ...]], _launch.BundledServer] = {}

    def start(repo: Path | str, *flags: str) -> _launch.BundledServer:
        key = (str(repo), flags)
        server = running.get(key)
        if server is None or server.process.poll() is not None:
            server = running[key] = _launch.start(repo, *flags)
        return server

    yield start
    for server in running.values():
        server.stop()


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
