"""Load failures where the user looks: the server log (Triton's lines) and the pytest
fixtures' exception."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from _repos import ECHO_MODEL

from tritonhttp.server import _launch
from tritonhttp.testing._load_log import message_of

pytest_plugins = ["pytester"]

GOOD_CONFIG = """backend: "python"
input [{ name: "IN" data_type: TYPE_FP32 dims: [4] }]
output [{ name: "OUT" data_type: TYPE_FP32 dims: [4] }]
"""


def make_repository(root: Path) -> Path:
    """good (loads), bad (a syntax error in model.py), badcfg (config.pbtxt line 3)."""
    for name in ("good", "bad", "badcfg"):
        (root / name / "1").mkdir(parents=True)
        (root / name / "config.pbtxt").write_text(GOOD_CONFIG)
        (root / name / "1" / "model.py").write_text(ECHO_MODEL)
    (root / "bad" / "1" / "model.py").write_text("import numpy\nx = 1 +\n")
    broken = GOOD_CONFIG.splitlines()[:2]  # the input list is never closed
    (root / "badcfg" / "config.pbtxt").write_text(broken[0] + "\n" + broken[1][:-1] + "\n")
    return root


def _messages(log: str) -> list[str]:
    return [message_of(line) for line in log.splitlines() if "] " in line]


def test_server_logs_loading_as_triton_does(tmp_path: Path) -> None:
    repo = make_repository(tmp_path / "repo")
    flags = ("--exit-on-error=false", "--model-control-mode=poll", "--repository-poll-secs=1")
    with _launch.running(repo, *flags, wait_ready=False) as server:
        messages = _messages(server.log())
        for line in (
            "loading: good:1",
            "loading: bad:1",
            "successfully loaded 'good'",
            "failed to load 'bad' version 1: Internal: SyntaxError: invalid syntax "
            "(model.py, line 2)",
            "failed to load 'bad'",
        ):
            assert line in messages, server.log()
        poll = [m for m in messages if m.startswith("Poll failed for model directory 'badcfg'")]
        assert poll and "3:1" in poll[0], server.log()
        # a changed model is reloaded by the next poll, with the same lines
        model = repo / "good" / "1" / "model.py"
        model.write_text(model.read_text() + "\n# changed\n")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if "successfully unloaded 'good' version 1" in _messages(server.log()):
                break
            time.sleep(0.1)
        messages = _messages(server.log())
        assert messages.count("loading: good:1") >= 2, server.log()
        assert messages.count("successfully loaded 'good'") >= 2, server.log()
        assert "successfully unloaded 'good' version 1" in messages, server.log()


FIXTURE_TEST = """
import pytest
from tritonhttp.testing.pytest_plugin import ModelLoadError


@pytest.mark.parametrize("isolation", ["in-process", "process"])
def test_reasons(triton_server, isolation):
    with pytest.raises(ModelLoadError) as info:
        triton_server("models", isolation=isolation)
    text = str(info.value)
    assert set(info.value.failures) == {"bad", "badcfg"}, text
    assert "bad: version 1: Internal: SyntaxError: invalid syntax (model.py, line 2)" in text
    assert "badcfg: failed to read text proto" in text and "3:1" in text


def test_path_from_the_test_file(triton_server):
    served = triton_server("models", models=["good"])
    assert served.client.is_model_ready("good")
"""


def test_fixture_raises_with_each_reason(pytester: pytest.Pytester) -> None:
    # The test file and its models live in a subfolder; pytest runs from the parent, so
    # "models" is found only when resolved from the test file's directory.
    sub = pytester.path / "suite"
    sub.mkdir()
    make_repository(sub / "models")
    (sub / "test_models.py").write_text(FIXTURE_TEST)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q", "suite")
    result.assert_outcomes(passed=3)
