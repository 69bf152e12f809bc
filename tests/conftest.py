"""Shared fixtures.

The differential tier needs the *real* Triton Inference Server. ``real_triton`` provisions
it from ``nvidia-pytriton`` (cached venv, see ``tritonhttp.testing._real_triton``) and
serves ``tests/models``; it skips only where the platform cannot run tritonserver, and
fails instead when ``TRITONHTTP_REQUIRE_REAL_TRITON=1`` (``.ci/run`` sets it: CI must not
pass with the differential tier skipped). A provisioning failure is always an error.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from _pool import ServerPool
from _repos import materialise

from tritonhttp.testing import _real_triton as rt

TESTS = Path(__file__).parent
#: The shared model repository: every model in it loads on both servers.
MODELS = TESTS / "models"

ModelRepo = Callable[[str], Path]


@pytest.fixture(scope="session")
def model_repo(tmp_path_factory: pytest.TempPathFactory) -> ModelRepo:
    """``model_repo(name)``: ``tests/repos/<name>`` materialised once a session (see ``_repos``)."""
    made: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in made:
            made[name] = materialise(name, tmp_path_factory.mktemp("repos"))
        return made[name]

    return get


RealTritonFactory = Callable[..., rt.RealTriton]
#: set to 1 to make the differential tier fail, not skip, where real Triton cannot run
REQUIRE_REAL_TRITON = "TRITONHTTP_REQUIRE_REAL_TRITON"


def skip_without_real_triton(problem: str | None) -> None:
    """Skip for ``problem`` (why real Triton cannot run here; None: it can), or fail
    when :data:`REQUIRE_REAL_TRITON` is ``1``."""
    if not problem:
        return
    if os.environ.get(REQUIRE_REAL_TRITON, "").strip() == "1":
        pytest.fail(f"{REQUIRE_REAL_TRITON}=1 but real Triton cannot run: {problem}")
    pytest.skip(f"real Triton unavailable: {problem}")


@pytest.fixture(scope="session")
def real_triton_factory() -> Iterator[RealTritonFactory]:
    """Start real tritonserver for (repository, *args), once per distinct combination."""
    skip_without_real_triton(rt.platform_problem())
    rt.ensure_installed()
    pool = ServerPool(rt.start, MODELS)
    yield pool
    pool.stop()


@pytest.fixture(scope="session")
def real_triton(real_triton_factory: RealTritonFactory) -> rt.RealTriton:
    """Real tritonserver 2.51.0 serving ``tests/models`` on 127.0.0.1."""
    return real_triton_factory(MODELS)


# ----------------------------------------------------------------------------- bundled server

from tritonhttp.server import _launch as _bundled  # noqa: E402

BundledFactory = Callable[..., _bundled.BundledServer]


@pytest.fixture(scope="session")
def bundled_server_factory() -> Iterator[BundledFactory]:
    """Start OUR server (``python -m tritonhttp.server``) for (repository, *args), once each."""
    pool = ServerPool(_bundled.start, MODELS)
    yield pool
    pool.stop()


@pytest.fixture(scope="session")
def bundled_server(bundled_server_factory: BundledFactory) -> _bundled.BundledServer:
    """Our server serving ``tests/models`` on 127.0.0.1 (``.url`` like ``real_triton``)."""
    return bundled_server_factory(MODELS)
