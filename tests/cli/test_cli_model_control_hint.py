"""``model load``/``unload`` on a server that is not in explicit mode say how to fix it."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_helpers import run_script

from tritonhttp.server import _launch

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "models"


@pytest.mark.parametrize("mode", ["none", "poll"])
def test_load_and_unload_hint_at_explicit_mode(mode: str) -> None:
    with _launch.running(EXAMPLES, f"--model-control-mode={mode}") as server:
        for command in ("load", "unload"):
            done = run_script(["--url", server.url, "model", command, "add_sub"])
            assert (done.code, done.stdout) == (1, "")
            (line,) = done.stderr.splitlines()
            assert line.startswith(
                "Error: explicit model load / unload is not allowed if polling is enabled"
            )
            assert line.endswith("start it with --model-control-mode=explicit")
