"""Whether the differential tier may skip: real Triton's platform check, turned into a
failure where CI requires the tier (``TRITONHTTP_REQUIRE_REAL_TRITON=1``).

A module of its own (not ``conftest``) so that test modules anywhere under ``tests/``
can import it by one unambiguous name."""

from __future__ import annotations

import os

import pytest

__all__ = ["REQUIRE_REAL_TRITON", "skip_without_real_triton"]

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
