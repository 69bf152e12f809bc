"""The quickstart example runs against real Triton (as a user would run it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tritonhttp.testing import _real_triton as rt
from tritonhttp.testing._process import free_port

pytestmark = pytest.mark.real_triton

EXAMPLE = Path(__file__).resolve().parent.parent.parent / "examples" / "client_quickstart.py"


def test_quickstart_example(real_triton: rt.RealTriton) -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), real_triton.url],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "INPUT0 + INPUT1 = [1. 2. 3. 4.]" in done.stdout
    assert "INPUT0 - INPUT1 = [-1.  0.  1.  2.]" in done.stdout


def test_quickstart_example_reports_an_unreachable_server() -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), f"127.0.0.1:{free_port()}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert "no Triton server answers" in done.stderr
