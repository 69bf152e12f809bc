"""The wheel users install: built from this checkout, it holds every module and data file
of the three packages, declares the console script and the pytest plugin, and, unpacked
away from the checkout, serves a model (worker processes included) and answers
``triton-cli``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: where each installed package's files come from in the checkout
SOURCES = {
    "tritonhttp": ROOT / "tritonhttp",
    "triton_python_backend_utils": ROOT / "src" / "triton_python_backend_utils",
    "tritonhttp_cli": ROOT / "cli",
}


def _checkout_files() -> list[str]:
    """The checkout's files as a clean clone would have them (what git does not ignore)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
        capture_output=True, check=False,
    )  # fmt: skip
    if listed.returncode != 0 or not listed.stdout:
        pytest.skip("not a git checkout")
    return [n for n in listed.stdout.decode().split("\0") if n and (ROOT / n).is_file()]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Built from a copy holding only what a clean clone holds: an editable install leaves
    # tritonhttp.egg-info and build/ in the checkout, whose file lists setuptools would
    # reuse, hiding a data file the package configuration no longer names.
    clean = tmp_path_factory.mktemp("clean")
    for name in _checkout_files():
        target = clean / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target)
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
         "--disable-pip-version-check", "-w", str(out), str(clean)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    (built,) = out.glob("tritonhttp-*.whl")
    return built


def test_wheel_holds_every_file_of_the_three_packages(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    checkout = _checkout_files()
    missing = []
    for package, folder in SOURCES.items():
        prefix = folder.relative_to(ROOT).as_posix() + "/"
        for file in checkout:
            if file.startswith(prefix):
                name = f"{package}/{file[len(prefix) :]}"
                if name not in names:
                    missing.append(name)
    assert not missing, f"not in the wheel: {missing}"
    # typed packages (PEP 561) and the model configuration schema
    for name in ("tritonhttp/py.typed", "triton_python_backend_utils/py.typed",
                 "tritonhttp/server/core/model_config.proto"):  # fmt: skip
        assert name in names
    # nothing of the checkout's tests, benchmarks or caches
    assert not [n for n in names if n.startswith(("tests/", "benchmarks/", "examples/"))]
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]


def test_wheel_declares_the_console_script_the_plugin_and_the_extras(wheel: Path) -> None:
    archive = zipfile.ZipFile(wheel)
    info = next(n for n in archive.namelist() if n.endswith(".dist-info/entry_points.txt"))
    entry_points = archive.read(info).decode()
    assert "triton-cli = tritonhttp_cli.main:main" in entry_points
    assert "tritonhttp = tritonhttp.testing.pytest_plugin" in entry_points
    metadata_name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
    metadata = Parser().parsestr(archive.read(metadata_name).decode())
    extras = set(metadata.get_all("Provides-Extra") or [])
    assert {"aio", "server", "cli", "cuda", "all"} <= extras
    requires = " ".join(metadata.get_all("Requires-Dist") or [])
    for dependency in ("numpy", "python-rapidjson", "httptools", "uvicorn", "protobuf",
                       "prometheus_client", "click", "rich"):  # fmt: skip
        assert dependency in requires
    assert metadata["License-Expression"] == "BSD-3-Clause"
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in archive.namelist())


SMOKE = """
import sys
from pathlib import Path

import numpy as np

unpacked = Path(sys.argv[1])
import tritonhttp, triton_python_backend_utils, tritonhttp_cli
for module in (tritonhttp, triton_python_backend_utils, tritonhttp_cli):
    assert Path(module.__file__).is_relative_to(unpacked), module.__file__

import tritonhttp as httpclient
from tritonhttp.server import _launch
from click.testing import CliRunner
from tritonhttp_cli.main import cli

with _launch.running(sys.argv[2]) as server:  # worker processes: the default isolation
    client = httpclient.InferenceServerClient(server.url)
    a = np.arange(4, dtype=np.float32)
    inputs = [httpclient.InferInput(n, [4], "FP32").set_data_from_numpy(a)
              for n in ("INPUT0", "INPUT1")]
    result = client.infer("add_sub", inputs)
    assert result.as_numpy("OUTPUT0").tolist() == [0.0, 2.0, 4.0, 6.0]
    run = CliRunner().invoke(cli, ["--url", server.url, "health", "ready"])
    assert run.exit_code == 0, run.output
print("served from", unpacked)
"""


def test_the_unpacked_wheel_serves_a_model_away_from_the_checkout(
    wheel: Path, tmp_path: Path
) -> None:
    unpacked = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(unpacked)
    workdir = tmp_path / "elsewhere"
    workdir.mkdir()
    env = {**os.environ, "PYTHONPATH": str(unpacked)}
    done = subprocess.run(
        [sys.executable, "-c", SMOKE, str(unpacked), str(ROOT / "examples" / "models")],
        cwd=workdir, env=env, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"served from {unpacked}" in done.stdout
