"""The documentation builds with mkdocs in strict mode (warnings are errors)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_mkdocs_build_strict(tmp_path: Path) -> None:
    if shutil.which("mkdocs") is None and not (Path(sys.executable).parent / "mkdocs").exists():
        pytest.fail("mkdocs is not installed (pip install -e '.[dev]')")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    api = (tmp_path / "site" / "api" / "index.html").read_text()
    for name in ("InferenceServerClient", "async_infer", "InferResult", "BasicAuth"):
        assert name in api
