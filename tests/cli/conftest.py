"""Fixtures for the triton-cli tests.

``triton`` is a server serving ``tests/models`` plus the generate models of
``tests/repos/cli_generate``, in explicit model-control mode (so that ``model load`` and
``model unload`` can be exercised) with every model loaded at start. It is parametrized:
every test that uses it (directly or through ``run_cli``/``invoke``) runs once against
real tritonserver 2.51.0 (``[real]``, marked ``real_triton``) and once against the
bundled server ``python -m tritonhttp.server`` (``[bundled]``), with the same flags.
Both are session-scoped: each is started once.

``run_cli(*args)`` runs the installed ``triton-cli`` script in a subprocess; ``invoke``
runs the click group in-process with click's ``CliRunner``.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from cli_helpers import GENERATE_REPO, MODELS, Run, run_script
from click.testing import CliRunner, Result
from tritonhttp_cli import cli

from tritonhttp.server import _launch as bundled
from tritonhttp.testing import _real_triton as rt

RunCli = Callable[..., Run]
Invoke = Callable[..., Result]
#: Either server: both have ``url``, ``metrics_url``, ``http_port`` and ``process``.
Server = rt.RealTriton | bundled.BundledServer

SERVER_ARGS = (
    f"--model-repository={GENERATE_REPO}",
    "--model-control-mode=explicit",
    "--load-model=*",
)


@pytest.fixture(
    scope="session",
    params=[pytest.param("real", marks=pytest.mark.real_triton), "bundled"],
)
def triton(request: pytest.FixtureRequest) -> Server:
    """tests/models + tests/repos/cli_generate, explicit mode, all loaded: real Triton
    (``[real]``) or the bundled server (``[bundled]``)."""
    factory_name = "real_triton_factory" if request.param == "real" else "bundled_server_factory"
    factory: Callable[..., Server] = request.getfixturevalue(factory_name)
    return factory(MODELS, *SERVER_ARGS)


def is_bundled(server: Server) -> bool:
    """Whether ``server`` is the bundled server (for its documented differences)."""
    return isinstance(server, bundled.BundledServer)


@pytest.fixture
def run_cli(triton: Server) -> RunCli:
    """``run_cli(*args)``: the triton-cli script, pointed at ``triton``."""

    def run(*args: str, timeout: float = 120) -> Run:
        return run_script(["--url", triton.url, *args], timeout)

    return run


@pytest.fixture
def invoke(triton: Server) -> Invoke:
    """``invoke(*args)``: the click group in-process, pointed at ``triton``."""

    def call(*args: str) -> Result:
        return CliRunner().invoke(cli, ["--url", triton.url, *args], catch_exceptions=False)

    return call
