"""Shared fixtures.

The differential tier needs the *real* Triton Inference Server. ``real_triton`` provisions
it from ``nvidia-pytriton`` (cached venv, see ``tritonhttp.testing._real_triton``) and
serves ``tests/models``; it skips only where the platform cannot run tritonserver, and
fails instead when ``TRITONHTTP_REQUIRE_REAL_TRITON=1`` (``.ci/run`` sets it: CI must not
pass with the differential tier skipped). A provisioning failure is always an error.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from _pool import ServerPool
from _real import skip_without_real_triton
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
