"""The real-Triton fixture itself: it must hand back a live 2.51.0 server on loopback, and
skip only where the platform cannot run it (failing instead with
``TRITONHTTP_REQUIRE_REAL_TRITON=1``, which ``.ci/run`` sets)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from tritonhttp.testing import _real_triton as rt

REQUIRE_REAL_TRITON = "TRITONHTTP_REQUIRE_REAL_TRITON"


@pytest.mark.real_triton
def test_real_triton_serves_the_shared_repository(real_triton: rt.RealTriton) -> None:
    with urllib.request.urlopen(f"http://{real_triton.url}/v2") as r:
        meta = json.loads(r.read())
    assert meta["version"] == rt.TRITON_VERSION
    assert real_triton.url.startswith("127.0.0.1:")
    req = urllib.request.Request(f"http://{real_triton.url}/v2/repository/index", method="POST")
    with urllib.request.urlopen(req) as r:
        index = json.loads(r.read())
    assert {m["name"] for m in index if m.get("state") == "READY"} >= {
        "add_sub",
        "identity_all",
        "simple",
    }


# ------------------------------------------------------------------ the tier's switch

_NO_TRITON_PLUGIN = """
from tritonhttp.testing import _real_triton as rt

rt.platform_problem = lambda: "simulated: this host cannot run tritonserver"
"""


def _run_fixture_test(tmp_path: Path, require: str | None) -> subprocess.CompletedProcess[str]:
    """This file's first test in a pytest of its own, on a host that cannot run real
    Triton (the plugin makes ``platform_problem`` say so), the switch set to ``require``."""
    (tmp_path / "no_triton_plugin.py").write_text(_NO_TRITON_PLUGIN)
    env = {k: v for k, v in os.environ.items() if k != REQUIRE_REAL_TRITON}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp_path), env.get("PYTHONPATH")]))
    if require is not None:
        env[REQUIRE_REAL_TRITON] = require
    test = f"{Path(__file__)}::test_real_triton_serves_the_shared_repository"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p",
         "no_triton_plugin", test],
        capture_output=True, text=True, timeout=240, env=env, cwd=Path(__file__).parent.parent,
    )  # fmt: skip


def test_without_the_switch_the_tier_skips_where_triton_cannot_run(tmp_path: Path) -> None:
    done = _run_fixture_test(tmp_path, None)
    assert done.returncode == 0, done.stdout
    assert "1 skipped" in done.stdout
    assert "real Triton unavailable: simulated: this host cannot run tritonserver" in done.stdout


@pytest.mark.parametrize("value", ["1", " 1 "])
def test_the_switch_turns_that_skip_into_a_failure(tmp_path: Path, value: str) -> None:
    done = _run_fixture_test(tmp_path, value)
    assert done.returncode == 1, done.stdout
    assert "1 error" in done.stdout or "1 failed" in done.stdout
    assert (
        "TRITONHTTP_REQUIRE_REAL_TRITON=1 but real Triton cannot run: simulated: this host "
        "cannot run tritonserver"
    ) in done.stdout


def test_ci_sets_the_switches() -> None:
    root = Path(__file__).parent.parent
    ci = (root / ".ci" / "run").read_text()
    assert f"export {REQUIRE_REAL_TRITON}=1" in ci
    assert "export TRITONHTTP_REQUIRE_OLDEST=1" in ci
    # a developer's ./scripts/test leaves them as the environment has them
    assert "export " not in (root / "scripts" / "test").read_text()
