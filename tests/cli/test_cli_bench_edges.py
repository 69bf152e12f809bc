"""The command line at its edges, through the installed script: numbers that are not
finite."""

from __future__ import annotations

import pytest
from cli_helpers import run_script


@pytest.mark.parametrize(
    "args",
    [
        ["bench", "m", "-c", "nan"],
        ["bench", "m", "-r", "inf"],
        ["bench", "m", "-r", "1:inf"],
        ["bench", "m", "-c", "1:1e12"],
        ["bench", "m", "-d", "nan"],
        ["bench", "m", "--warmup", "inf"],
        ["bench", "m", "-s", "nan"],
        ["bench", "m", "-l", "nan"],
        ["--timeout", "nan", "model", "list"],
        ["--timeout", "inf", "model", "list"],
        ["health", "ready", "--wait", "nan"],
        ["health", "ready", "--interval", "inf"],
    ],
)
def test_numbers_that_are_not_finite_are_usage_errors(args: list[str]) -> None:
    # these used to hang (a NaN duration or rate never ends) or fail late with exit 1
    done = run_script(["--url", "127.0.0.1:9", *args], timeout=30)
    assert done.code == 2, (args, done.stderr)
    assert "finite" in done.stderr or "levels" in done.stderr, done.stderr
