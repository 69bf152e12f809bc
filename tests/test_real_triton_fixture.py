"""The real-Triton fixture itself: it must hand back a live 2.51.0 server on loopback, and
skip only where the platform cannot run it (failing instead with
``TRITONHTTP_REQUIRE_REAL_TRITON=1``, which ``.ci/run`` sets)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tritonhttp.testing import _real_triton as rt
from tritonhttp.testing._process import free_ports, wait_until_up

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


def test_a_server_that_dies_starting_leaves_nothing_running(tmp_path: Path) -> None:
    """Real Triton that crashes while it starts can leave its Python stubs running (they
    share its process group): waiting for it stops the whole group before raising."""
    log = tmp_path / "log"
    log.write_text("")
    started = subprocess.Popen(
        ["sh", "-c", "sleep 300 & echo $! > child; exit 3"],
        cwd=tmp_path,
        start_new_session=True,
    )
    (port,) = free_ports(1)
    server = rt.RealTriton(
        process=started, http_port=port, metrics_port=port, grpc_port=port, log_path=log, args=[]
    )
    with pytest.raises(RuntimeError, match="exited with 3"):
        wait_until_up(server, "tritonserver", wait_ready=False, timeout=30, poll=0.05)
    child = int((tmp_path / "child").read_text())
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    pytest.fail("the crashed server's child process is still running")
