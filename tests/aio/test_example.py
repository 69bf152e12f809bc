"""The asyncio quickstart example runs against real Triton (as a user would run it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tritonhttp.testing import _real_triton as rt
from tritonhttp.testing._process import free_port

pytestmark = pytest.mark.real_triton

EXAMPLE = Path(__file__).resolve().parent.parent.parent / "examples" / "aio_quickstart.py"


def run_example(url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-X", "dev", "-W", "error", str(EXAMPLE), url],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_aio_quickstart_example(generate_triton: rt.RealTriton) -> None:
    done = run_example(generate_triton.url)
    assert done.returncode == 0, done.stderr
    assert "first sum: [1. 2. 3. 4.] last sum: [16. 17. 18. 19.]" in done.stdout
    assert "streamed: tokens arrive one by one\n" in done.stdout
    assert done.stderr == ""


def test_aio_quickstart_example_reports_an_unreachable_server() -> None:
    done = run_example(f"127.0.0.1:{free_port()}")
    assert done.returncode == 1
    assert "no Triton server answers" in done.stderr
