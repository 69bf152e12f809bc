"""``triton-cli model new``: the generated model passes ruff, mypy and its own test.

Everything runs as a user would run it: real subprocesses in a fresh folder outside this
repository (so ruff and mypy use their default settings, mypy in strict mode).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run(
    cwd: Path, *argv: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, cwd=cwd, capture_output=True, text=True, timeout=300, check=False, env=env
    )


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run(cwd, sys.executable, "-m", "tritonhttp_cli", *args)


def check_tools(project: Path, models: list[str]) -> None:
    """ruff check, ruff format --check, mypy --strict (each model.py, then the tests)."""
    for argv in (("ruff", "check", "."), ("ruff", "format", "--check", ".")):
        done = run(project, sys.executable, "-m", *argv)
        assert done.returncode == 0, done.stdout + done.stderr
    # (the editable install of this checkout is invisible to mypy: say where it is and,
    # as for an installed package, check the generated files only, not the library)
    env = {**os.environ, "MYPYPATH": f"{ROOT}{os.pathsep}{ROOT / 'src'}"}
    settings = project.parent / "mypy-settings.ini"
    settings.write_text("[mypy]\nstrict = True\n\n[mypy-tritonhttp.*]\nignore_errors = True\n")
    mypy = (sys.executable, "-m", "mypy", "--config-file", str(settings))
    mypy += ("--cache-dir", str(project.parent / ".mypy"))
    targets = [[f"models/{m}/1/model.py"] for m in models]
    targets.append([str(p.name) for p in project.glob("test_*.py")])
    for target in targets:
        done = run(project, *mypy, *target, env=env)
        assert done.returncode == 0, f"{target}: {done.stdout}{done.stderr}"


def run_tests(project: Path, expect: int) -> None:
    done = run(project, sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", ".")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{expect} passed" in done.stdout, done.stdout


@pytest.mark.slow
def test_default_model_passes_tools_and_its_test(tmp_path: Path) -> None:
    tmp_path = tmp_path / "project"
    tmp_path.mkdir()
    done = cli(tmp_path, "model", "new", "my_model")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "models" / "my_model" / "config.pbtxt").is_file()
    assert (tmp_path / "models" / "my_model" / "1" / "model.py").is_file()
    assert (tmp_path / "test_my_model.py").is_file()
    assert "model check models/my_model" in done.stdout
    check_tools(tmp_path, ["my_model"])
    run_tests(tmp_path, 1)


@pytest.mark.slow
def test_decoupled_bls_and_batched_variants(tmp_path: Path) -> None:
    tmp_path = tmp_path / "project"
    tmp_path.mkdir()
    for args in (
        ("stream", "--decoupled", "--input", "TEXT:BYTES:-1", "--input", "N:INT32:1",
         "--output", "OUT:BYTES:-1"),
        ("pipe", "--bls", "--max-batch-size", "8", "--input", "A:FP32:2,3",
         "--output", "B:FP64:2,3", "--output", "C:INT8:5"),
        ("ranker", "--bls", "--calls", "stream_like", "--input", "Q:INT64:[3]"),
    ):  # fmt: skip
        if "--calls" in args:
            assert (
                cli(tmp_path, "model", "new", "stream_like", "--input", "Q:INT64:3").returncode == 0
            )
        done = cli(tmp_path, "model", "new", *args)
        assert done.returncode == 0, done.stderr
    config = (tmp_path / "models" / "pipe" / "config.pbtxt").read_text()
    assert "max_batch_size: 8" in config and "dynamic_batching" in config
    assert "decoupled: true" in (tmp_path / "models" / "stream" / "config.pbtxt").read_text()
    # --bls without --calls writes the model it calls too
    assert (tmp_path / "models" / "pipe_inner" / "1" / "model.py").is_file()
    models = ["stream", "pipe", "pipe_inner", "ranker", "stream_like"]
    check_tools(tmp_path, models)
    # stream: served + streamed (2); pipe, ranker, stream_like: one each
    run_tests(tmp_path, 5)


def test_refuses_to_overwrite_without_force(tmp_path: Path) -> None:
    assert cli(tmp_path, "model", "new", "m").returncode == 0
    model = tmp_path / "models" / "m" / "1" / "model.py"
    model.write_text("# mine\n")
    again = cli(tmp_path, "model", "new", "m")
    assert again.returncode == 2
    assert "already exists" in again.stderr and "--force" in again.stderr
    assert model.read_text() == "# mine\n"
    forced = cli(tmp_path, "model", "new", "m", "--force")
    assert forced.returncode == 0, forced.stderr
    assert "TritonPythonModel" in model.read_text()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--input", "X:FLOAT:4"), "unknown data type"),
        (("--input", "X:FP32"), "NAME:DTYPE:DIMS"),
        (("--input", "X:FP32:0"), "positive integers or -1"),
        (("--decoupled", "--bls"), "choose one"),
        (("--calls", "other"), "--calls needs --bls"),
        (("--bls", "--calls", "absent"), "no model 'absent'"),
    ],
)
def test_bad_options_are_usage_errors(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    done = cli(tmp_path, "model", "new", "m", *args)
    assert done.returncode == 2
    assert message in done.stderr
    assert not (tmp_path / "models" / "m").exists()


def test_repository_in_the_current_folder_keeps_the_test_there(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    done = cli(project, "model", "new", "m", "--repository", ".")
    assert done.returncode == 0, done.stderr
    assert (project / "test_m.py").is_file() and not (tmp_path / "test_m.py").exists()
    run_tests(project, 1)


@pytest.mark.parametrize("calls", [(), ("--calls", "other")])
def test_the_check_it_suggests_passes(tmp_path: Path, calls: tuple[str, ...]) -> None:
    # for a BLS model the suggested check lacked --load, so it failed: the model it
    # calls was not loaded
    assert cli(tmp_path, "model", "new", "other").returncode == 0
    done = cli(tmp_path, "model", "new", "m", "--bls", *calls)
    assert done.returncode == 0, done.stderr
    (hint,) = [line for line in done.stdout.splitlines() if line.startswith("next: ")]
    check, _, test = hint.removeprefix("next: ").partition("; ")
    target = calls[-1] if calls else "m_inner"
    assert check == f"triton-cli model check models/m --load {target}"
    assert test == "pytest test_m.py"
    checked = cli(tmp_path, *check.split()[1:])
    assert checked.returncode == 0, checked.stdout + checked.stderr
