"""The documentation builds with mkdocs in strict mode (warnings are errors, broken anchors
included), its links hold, and its examples run as written."""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tritonhttp.server import _launch
from tritonhttp.testing._process import free_ports

ROOT = Path(__file__).resolve().parent.parent


def test_mkdocs_build_strict(tmp_path: Path) -> None:
    if shutil.which("mkdocs") is None and not (Path(sys.executable).parent / "mkdocs").exists():
        pytest.fail("mkdocs is not installed (pip install -e '.[dev]')")
    # mkdocs only reports links to missing anchors unless told to warn about them
    config = tmp_path / "mkdocs.yml"
    config.write_text(
        f"INHERIT: {ROOT / 'mkdocs.yml'}\ndocs_dir: {ROOT / 'docs'}\nvalidation:\n  anchors: warn\n"
    )
    site = tmp_path / "site"
    build = [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config)]
    done = subprocess.run(
        [*build, "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    api = (site / "api" / "index.html").read_text()
    for name in ("InferenceServerClient", "async_infer", "InferResult", "BasicAuth"):
        assert name in api


# -- docs/model-authors.md, "Your first model": every command is run ---------------------

FIRST_MODEL = ROOT / "docs" / "model-authors.md"


def _walkthrough() -> list[tuple[str, str]]:
    """The (language, text) of each code block of the "Your first model" section."""
    text = FIRST_MODEL.read_text()
    section = text.split("## Your first model\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```(bash|console)\n(.*?)```", section, re.S)


def _matches(expected: str, output: str) -> bool:
    """Whether ``expected`` (``...`` stands for anything) is on one line of ``output``."""
    pattern = ".*".join(re.escape(part) for part in expected.split("..."))
    return re.search(pattern, output) is not None


def test_first_model_walkthrough(tmp_path: Path) -> None:
    """Runs the section's commands in a fresh folder, in order, as a user would (the
    server on free ports, which TRITON_URL points the CLI at). Console blocks: each
    ``$`` command gets the ``(Pdb)`` lines after it as its input, and every other line
    shown must be in its output. (``pip install`` is the environment this runs in.)"""
    http, metrics = free_ports(2)
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    env["TRITON_URL"] = f"127.0.0.1:{http}"
    background: list[subprocess.Popen[bytes]] = []

    def run(command: str, stdin: str = "") -> str:
        command, ampersand, _ = command.partition(" &")
        if command.startswith("triton-cli serve"):
            command += f" --http-address 127.0.0.1 --http-port {http} --metrics-port {metrics}"
        if ampersand:
            background.append(
                subprocess.Popen(
                    ["bash", "-c", f"exec {command}"],
                    cwd=tmp_path,
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
            return ""
        done = subprocess.run(
            ["bash", "-c", command], cwd=tmp_path, env=env, input=stdin, capture_output=True,
            text=True, timeout=300, check=False,
        )  # fmt: skip
        assert done.returncode == 0, f"$ {command}\n{done.stdout}{done.stderr}"
        return done.stdout + done.stderr

    blocks = _walkthrough()
    assert [lang for lang, _ in blocks].count("bash") >= 2, blocks
    ran: list[str] = []
    try:
        for lang, text in blocks:
            lines = [line for line in text.splitlines() if line.strip()]
            if lang == "bash":
                for line in lines:
                    if not line.startswith("#"):
                        run(line)
                        ran.append(line.split()[0] + " " + line.split()[1])
                continue
            for i, line in enumerate(lines):
                if not line.startswith("$ "):
                    continue
                rest = lines[i + 1 :]
                end = next((k for k, x in enumerate(rest) if x.startswith("$ ")), len(rest))
                shown = rest[:end]
                stdin = "".join(x[len("(Pdb) ") :] + "\n" for x in shown if x.startswith("(Pdb) "))
                output = run(line[2:], stdin)
                ran.append(line[2:].split()[0] + " " + line[2:].split()[1])
                for expected in shown:
                    if not expected.startswith("(Pdb) "):
                        assert _matches(expected.rstrip(), output), (line, expected, output)
    finally:
        for process in background:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    # the walkthrough's steps, each run: new, check, serve, infer, test, debug
    for step in ("triton-cli model", "triton-cli serve", "triton-cli infer", "pytest -q", "sed -i"):
        assert any(r.startswith(step) for r in ran), (step, ran)


def test_aio_in_process_test_example_passes(tmp_path: Path) -> None:
    """The async test of docs/aio.md passes as written (with the plugin it names), run
    from another directory than the test file's (its repository path is the file's)."""
    text = (ROOT / "docs" / "aio.md").read_text()
    section = text.split("## Testing in-process with the bundled server", 1)[1]
    (code,) = re.findall(r"```python\n(.*?)```", section.split("\n## ", 1)[0], re.S)
    suite = tmp_path / "suite"
    shutil.copytree(ROOT / "examples" / "models", suite / "models")
    (suite / "test_aio_example.py").write_text(code)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "suite"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout


def test_quickstart_starts_a_server_before_the_first_inference(tmp_path: Path) -> None:
    """The quickstart's server commands work as written, from the repository's root."""
    text = (ROOT / "docs" / "quickstart.md").read_text()
    start = text.index("## Start a server")
    assert start < text.index("## A first inference")
    blocks = re.findall(
        r"```bash\n(.*?)```", text[start : text.index("## A first inference")], re.S
    )
    serve, probe = blocks[0].strip(), blocks[1].strip().splitlines()
    assert serve.startswith("triton-cli serve --model-repository examples/models")
    http, metrics = free_ports(2)
    env = {**os.environ, "TRITON_URL": f"127.0.0.1:{http}"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    command = serve.split("#")[0] + f" --http-port {http} --metrics-port {metrics}"
    server = subprocess.Popen(
        ["bash", "-c", f"exec {command}"], cwd=ROOT, env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        for line in probe:
            done = subprocess.run(
                ["bash", "-c", line], cwd=ROOT, env=env, capture_output=True, text=True,
                timeout=120, check=False,
            )  # fmt: skip
            assert done.returncode == 0, (line, done.stdout, done.stderr)
        assert "[11., 22., 33., 44.]" in done.stdout
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(60)


def test_readme_links_point_at_files() -> None:
    """README.md is read outside mkdocs (GitHub, PyPI): its relative links name files."""
    text = (ROOT / "README.md").read_text()
    targets = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text)
    local = [t for t in targets if not re.match(r"[a-z]+:", t)]
    assert local, targets
    for target in local:
        assert (ROOT / target).exists(), target


# -- python examples run against the bundled server serving examples/models ---------------


@pytest.fixture(scope="module")
def example_server() -> Iterator[str]:
    with _launch.running(ROOT / "examples" / "models") as server:
        yield server.url


def _python_blocks(page: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", (ROOT / page).read_text(), re.S)


def _run_blocks(blocks: list[str], url: str) -> str:
    """Runs ``blocks`` in order in one namespace, as a user pasting them would, with
    ``localhost:8000`` pointing at ``url``; returns what they printed."""
    namespace: dict[str, object] = {"__name__": "__docs__"}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for i, block in enumerate(blocks):
            code = compile(block.replace("localhost:8000", url), f"block {i}", "exec")
            exec(code, namespace)
    return out.getvalue()


def _check_printed(blocks: list[str], output: str) -> None:
    """Every ``print(...)  # shown`` comment is on a line of ``output`` (``...``: anything)."""
    shown = [c for b in blocks for c in re.findall(r"^\s*print\(.*\)  # (.+)$", b, re.M)]
    assert shown, blocks
    for expected in shown:
        assert _matches(expected, output), (expected, output)


@pytest.mark.parametrize("page", ["README.md", "docs/quickstart.md"])
def test_python_examples_run_and_print_what_they_show(page: str, example_server: str) -> None:
    blocks = _python_blocks(page)
    _check_printed(blocks, _run_blocks(blocks, example_server))


def test_aio_basics_and_system_shared_memory_examples_run(example_server: str) -> None:
    """The first example of each page, which needs nothing but ``add_sub``."""
    (basics,) = [b for b in _python_blocks("docs/aio.md") if "asyncio.run(main())" in b]
    assert "True" in _run_blocks([basics], example_server)
    system = _python_blocks("docs/shared-memory.md")[0]
    assert "create_shared_memory_region" in system
    printed = _run_blocks([system], example_server)
    assert printed.split() == ["[1.", "2.", "3.", "4.]", "[-1.", "0.", "1.", "2.]"], printed


def test_model_author_unit_test_examples_pass(tmp_path: Path) -> None:
    """The unit tests of docs/model-authors.md (without a server and with the pytest
    fixtures) pass as written, next to a copy of examples/python_models as models/."""
    text = (ROOT / "docs" / "model-authors.md").read_text()
    section = text.split("## Unit tests\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    tests = [b for b in blocks if "def test_" in b]
    assert len(tests) == 2, blocks
    shutil.copytree(ROOT / "examples" / "python_models", tmp_path / "models")
    for i, code in enumerate(tests):
        (tmp_path / f"test_doc_example_{i}.py").write_text(code)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "."],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 passed" in done.stdout
