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


def test_model_list_shows_a_failed_model_state_and_reason(tmp_path: Path) -> None:
    (tmp_path / "broken" / "1").mkdir(parents=True)
    (tmp_path / "broken" / "config.pbtxt").write_text(CONFIG)
    (tmp_path / "broken" / "1" / "model.py").write_text(
        "class TritonPythonModel:\n    def initialize(self, args):\n        raise KeyError('w')\n"
    )
    with _launch.running(tmp_path, "--exit-on-error=false", wait_ready=False) as server:
        done = run_script(["--url", server.url, "model", "list"])
        assert done.code == 0, done.stderr
        (row,) = [line for line in done.stdout.splitlines() if line.startswith("broken")]
        assert "UNAVAILABLE" in row and "KeyError: 'w'" in row
        assert "At:" not in done.stdout  # the traceback stays in --json
        whole = run_script(["--url", server.url, "--json", "model", "list"]).json()
        assert "At:" in whole[0]["reason"] and "model.py" in whole[0]["reason"]
