"""``health ready`` on a server whose models failed to load says which and why."""

from __future__ import annotations

from pathlib import Path

from cli_helpers import run_script

from tritonhttp.server import _launch

CONFIG = """backend: "python"
input [{ name: "IN" data_type: TYPE_FP32 dims: [4] }]
output [{ name: "OUT" data_type: TYPE_FP32 dims: [4] }]
"""


def test_not_ready_names_the_failed_models(tmp_path: Path) -> None:
    (tmp_path / "broken" / "1").mkdir(parents=True)
    (tmp_path / "broken" / "config.pbtxt").write_text(CONFIG)
    (tmp_path / "broken" / "1" / "model.py").write_text("x = 1 +\n")
    with _launch.running(tmp_path, "--exit-on-error=false", wait_ready=False) as server:
        url = ["--url", server.url]
        live = run_script([*url, "health", "live"])
        assert (live.code, live.stderr) == (0, "")
        ready = run_script([*url, "health", "ready"])
        assert ready.code == 1
        (line,) = ready.stderr.splitlines()
        assert "is not ready: models failed to load: broken (" in line
        assert "SyntaxError" in line
        model = run_script([*url, "health", "ready", "-m", "broken"])
        assert model.code == 1
        assert model.stderr.startswith("not healthy: model 'broken' is not ready: UNAVAILABLE")
        assert run_script([*url, "health", "ready", "-q"]).stderr == ""
