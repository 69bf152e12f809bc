"""Both servers on the scheduling probe repository (with the response cache on)."""

from __future__ import annotations

from collections.abc import Iterator
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


@pytest.fixture(scope="session")
def probes(
    real_triton_factory: Any, bundled_server_factory: Any, model_repo: Any, sched_scratch: Path
) -> Iterator[dict[str, Probe]]:
    """``{"triton": ..., "ours": ...}`` serving ``tests/repos/sched_models``."""
    args = server_args()
    repo = model_repo("sched_models")
    real = real_triton_factory(repo, *args)
    ours = bundled_server_factory(repo, *args)
    yield {
        "triton": Probe(real, sched_scratch, "triton"),
        "ours": Probe(ours, sched_scratch, "ours"),
    }
