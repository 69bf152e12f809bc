"""Fixtures for the triton-cli tests.

``triton`` is real tritonserver serving ``tests/models`` plus the generate models of
``tests/repos/cli_generate``, in explicit model-control mode (so that ``model load`` and
``model unload`` can be exercised) with every model loaded at start.

``run_cli(*args)`` runs the installed ``triton-cli`` script in a subprocess; ``invoke``
runs the click group in-process with click's ``CliRunner``.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from cli_helpers import GENERATE_REPO, MODELS, Run, run_script
from click.testing import CliRunner, Result
from tritonhttp_cli import cli

from tritonhttp.testing import _real_triton as rt

RunCli = Callable[..., Run]
Invoke = Callable[..., Result]


@pytest.fixture(scope="session")
def triton(real_triton_factory: Callable[..., rt.RealTriton]) -> rt.RealTriton:
    """Real Triton: tests/models + tests/repos/cli_generate, explicit mode, all loaded."""
    return real_triton_factory(
        MODELS,
        f"--model-repository={GENERATE_REPO}",
        "--model-control-mode=explicit",
        "--load-model=*",
    )


@pytest.fixture
def run_cli(triton: rt.RealTriton) -> RunCli:
    """``run_cli(*args)``: the triton-cli script, pointed at ``triton``."""

    def run(*args: str, timeout: float = 120) -> Run:
        return run_script(["--url", triton.url, *args], timeout)

    return run


@pytest.fixture
def invoke(triton: rt.RealTriton) -> Invoke:
    """``invoke(*args)``: the click group in-process, pointed at ``triton``."""

    def call(*args: str) -> Result:
        return CliRunner().invoke(cli, ["--url", triton.url, *args], catch_exceptions=False)

    return call
