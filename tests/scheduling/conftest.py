"""Both servers on the scheduling probe repository (with the response cache on)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ._probe import Probe

CACHE_SIZE = 1 << 20


def server_args() -> tuple[str, ...]:
    """Flags both servers get: real Triton needs the folder of its cache library."""
    from tritonhttp.testing import _real_triton as rt

    caches = rt.ensure_installed().server_dir / "caches"
    return (f"--cache-directory={caches}", f"--cache-config=local,size={CACHE_SIZE}")


@pytest.fixture(scope="session")
def sched_scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("sched-gates")


ProbePair = Callable[..., dict[str, Probe]]


@pytest.fixture(scope="session")
def probe_pair(
    real_triton_factory: Any, bundled_server_factory: Any, model_repo: Any, sched_scratch: Path
) -> ProbePair:
    """``probe_pair(repo_name, *flags, tag="")``: ``{"triton": ..., "ours": ...}`` serving
    ``tests/repos/<repo_name>`` with ``flags``."""

    def pair(repo_name: str, *flags: str, tag: str = "") -> dict[str, Probe]:
        repo = model_repo(repo_name)
        real = real_triton_factory(repo, *flags)
        ours = bundled_server_factory(repo, *flags)
        return {
            "triton": Probe(real, sched_scratch, f"triton{tag}"),
            "ours": Probe(ours, sched_scratch, f"ours{tag}"),
        }

    return pair


@pytest.fixture(scope="session")
def probes(probe_pair: ProbePair) -> dict[str, Probe]:
    """``{"triton": ..., "ours": ...}`` serving ``tests/repos/sched_models``."""
    return probe_pair("sched_models", *server_args())
