"""The server's macOS and Windows code paths, selected on Linux.

Every platform decision of the server reads the platform through
``tritonhttp.server.support._platform.system()``; these tests make it say ``darwin`` or
``win32`` (in-process with monkeypatch, or in a subprocess that also takes away what
Windows lacks) and check what the server then does: shared-memory names that fit
macOS's 31 characters, a clear error for a prefix too long for the platform, worker
processes only where they can run (in-process models and one log line on Windows), a
parent-death watchdog where ``PR_SET_PDEATHSIG`` is missing, and no busy polling where
``select.poll``/``os.sched_yield`` are missing.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tritonhttp.server.backends.python._settings import BackendSettings
from tritonhttp.server.core._errors import Code, CoreError
from tritonhttp.server.core.model_config_pb2 import ModelConfig
from tritonhttp.server.http._poll import NextRequestPoll
from tritonhttp.server.support import _platform

from ._http import exchange
from .conftest import Start, until

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
EXAMPLES = ROOT / "examples" / "models"
PLATFORMS = ("linux", "darwin", "win32")


@pytest.fixture(params=PLATFORMS)
def platform(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test using it runs once per platform, ``system()`` saying that platform."""
    name = str(request.param)
    monkeypatch.setattr(_platform, "system", lambda: name)
    return name


def _segment_name_length(prefix: str) -> int:
    return len("/" + prefix) + _platform.SHM_SUFFIX_LEN


# ---------------------------------------------------------------- shared-memory names


def test_default_segment_names_fit_the_platform(platform: str) -> None:
    prefix = BackendSettings.parse({}).shm_prefix
    assert prefix == BackendSettings().shm_prefix
    assert _segment_name_length(prefix) <= _platform.shm_name_max()
    if platform == "darwin":
        assert _platform.shm_name_max() == 31 and prefix == _platform.SHORT_SHM_PREFIX
        assert _segment_name_length(_platform.LINUX_SHM_PREFIX) > 31  # (why it differs)
    else:
        assert prefix == "triton_python_backend_shm_region_"  # Triton's, where it fits


def test_longest_prefix_is_accepted_one_more_is_refused(platform: str) -> None:
    longest = _platform.shm_prefix_max()
    assert _segment_name_length("p" * longest) == _platform.shm_name_max()
    assert BackendSettings.parse({"shm-region-prefix-name": "p" * longest}).shm_prefix == (
        "p" * longest
    )
    with pytest.raises(CoreError) as caught:
        BackendSettings.parse({"shm-region-prefix-name": "p" * (longest + 1)})
    assert caught.value.code == Code.INVALID_ARG
    assert str(caught.value) == (
        f"shm-region-prefix-name '{'p' * (longest + 1)}' is {longest + 1} characters long: "
        f"on this platform ({platform}) shared-memory names allow at most {longest} before "
        "the 16 characters each segment adds"
    )


def test_darwin_refuses_tritons_default_prefix_when_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_platform, "system", lambda: "darwin")
    with pytest.raises(CoreError, match=r"at most 14 before the 16 characters"):
        BackendSettings.parse({"shm-region-prefix-name": _platform.LINUX_SHM_PREFIX})


def test_short_prefix_segments_carry_tensors(servers: Start, model_repo: Any) -> None:
    """The darwin default prefix works end to end (segments are created under it)."""
    repo = Path(model_repo("backend_isolation"))
    server = servers(repo, f"--backend-config=python,shm-region-prefix-name="
                           f"{_platform.default_shm_prefix('darwin')}")  # fmt: skip
    values = list(range(100_000))
    body = json.dumps({"inputs": [{"name": "F", "datatype": "FP32", "shape": [len(values)],
                                   "data": values}]})  # fmt: skip
    r = exchange(server.url, "POST", "/v2/models/identity/infer", body)
    assert r.status == 200, r.body
    assert r.json()["outputs"][0]["data"][-1] == 99_999.0


def test_too_long_prefix_fails_the_load_with_the_reason(servers: Start, model_repo: Any) -> None:
    repo = Path(model_repo("backend_isolation"))
    prefix = "p" * (_platform.shm_prefix_max("linux") + 1)
    server = servers(repo, "--model-control-mode=explicit",
                     f"--backend-config=python,shm-region-prefix-name={prefix}")  # fmt: skip
    r = exchange(server.url, "POST", "/v2/repository/models/healthy/load")
    assert r.status == 400
    assert r.json()["error"].startswith(
        "load failed for model 'healthy': version 1 is at UNAVAILABLE state: Invalid "
        f"argument: shm-region-prefix-name '{prefix}' is {len(prefix)} characters long"
    )


# ---------------------------------------------------------------- where models run


def _with_isolation(value: str | None) -> ModelConfig:
    config = ModelConfig(name="m")
    if value is not None:
        config.parameters["ISOLATION"].string_value = value
    return config


@pytest.mark.parametrize("asked", [None, "process", "in-process"])
def test_models_run_in_process_only_where_workers_cannot(platform: str, asked: str | None) -> None:
    settings = BackendSettings.parse({})
    got = settings.isolation_of(_with_isolation(asked))
    if platform == "win32":
        assert not _platform.workers_supported()
        assert got == "in-process"
    else:
        assert _platform.workers_supported()
        assert got == (asked or "process")


def test_a_bad_isolation_parameter_is_refused_on_every_platform(platform: str) -> None:
    with pytest.raises(CoreError, match="unknown value 'thread' for parameter 'ISOLATION'"):
        BackendSettings.parse({}).isolation_of(_with_isolation("thread"))


def test_an_execution_environment_needs_worker_processes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """On Windows a model with EXECUTION_ENV_PATH fails to load with the reason, before
    anything POSIX-only (the unpacking lock) is reached."""
    from google.protobuf import text_format

    from tritonhttp.server.backends.python._envs import resolve_env
    from tritonhttp.server.core._errors import CoreError
    from tritonhttp.server.core.model_config_pb2 import ModelConfig

    config = text_format.Parse(
        'parameters { key: "EXECUTION_ENV_PATH" value { string_value: "env.tar.gz" } }',
        ModelConfig(),
    )
    monkeypatch.setattr(_platform, "system", lambda: "win32")
    with pytest.raises(CoreError, match=r"needs worker processes.*\(win32\)"):
        resolve_env(config, tmp_path)


def test_platform_facts_by_name() -> None:
    assert [_platform.workers_supported(p) for p in PLATFORMS] == [True, True, False]
    assert [_platform.parent_death_signal(p) for p in PLATFORMS] == [True, False, False]
    assert [_platform.shm_name_max(p) for p in PLATFORMS] == [255, 31, 255]
    assert _platform.can_busy_poll("win32") is False


# ---------------------------------------------------------------- polling fallbacks


def test_no_busy_poll_where_poll_or_sched_yield_are_missing(platform: str) -> None:
    assert (NextRequestPoll.for_option(300) is None) == (platform == "win32")
    assert NextRequestPoll.for_option(300, platform="win32") is None
    poll = NextRequestPoll.for_option(300, platform="linux")
    assert poll is not None and poll.window_s == pytest.approx(300e-6)
    assert NextRequestPoll.for_option(0, platform="linux") is None


def test_yield_falls_back_to_a_zero_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _platform.yield_function("linux") is os.sched_yield
    fallback = _platform.yield_function("win32")
    assert fallback is not os.sched_yield
    calls: list[float] = []
    monkeypatch.setattr(_platform.time, "sleep", calls.append)
    fallback()
    assert calls == [0]
    monkeypatch.delattr(os, "sched_yield")
    assert _platform.yield_function("linux") is fallback


# ---------------------------------------------------------------- dying with the parent

_ORPHAN = """
import os, sys, time
sys.path.insert(0, {root!r})
from tritonhttp.server.support import _platform
parent = os.getppid()
_platform.die_with_parent(parent, platform={platform!r})
print(os.getpid(), flush=True)
time.sleep(120)
"""
_MIDDLE = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", sys.argv[1]], stdout=subprocess.PIPE)
print(child.stdout.readline().decode().strip(), flush=True)
time.sleep(120)
"""


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"  # (a zombie has ended)
    except FileNotFoundError:
        return False


@pytest.mark.parametrize("platform", ["darwin", "linux"])
def test_worker_dies_with_its_parent(platform: str) -> None:
    """darwin: the watchdog thread; linux: PR_SET_PDEATHSIG. A grandchild dies once its
    parent is SIGKILLed, and lives while the parent does."""
    code = _ORPHAN.format(root=str(ROOT), platform=platform)
    middle = subprocess.Popen([sys.executable, "-c", _MIDDLE, code], stdout=subprocess.PIPE)
    try:
        assert middle.stdout is not None
        child = int(middle.stdout.readline())
        # alive over several watchdog periods while its parent runs
        time.sleep(4 * _platform.WATCH_INTERVAL_S)
        assert _running(child)
        middle.send_signal(signal.SIGKILL)
        middle.wait(10)
        assert until(lambda: not _running(child), 30), "the orphan outlived its parent"
    finally:
        middle.kill()
        middle.wait()
        if middle.stdout is not None:
            middle.stdout.close()


def test_watchdog_exits_at_once_when_the_parent_is_already_gone() -> None:
    code = (
        f"import sys; sys.path.insert(0, {str(ROOT)!r})\n"
        "from tritonhttp.server.support import _platform\n"
        "_platform.die_with_parent(1 << 22, platform='darwin')\n"  # (not our parent)
        "print('still here')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "still here" not in done.stdout


# ---------------------------------------------------------------- whole server, simulated


def _simulate(platform: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(HERE / "_platform_sim.py"), str(EXAMPLES), platform],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


def test_windows_serves_models_in_process_and_says_so_once() -> None:
    """Without fcntl, _posixshmem, AF_UNIX, send_fds, MSG_DONTWAIT, fork, sched_yield,
    select.poll, SIGKILL or uvloop, the client, the CLI and the server import, and the
    server (worker processes asked for by default) answers through in-process models."""
    result = _simulate("win32")
    assert result["answer"] == [5.0, 5.0, 5.0, 5.0]
    notes = [line for line in result["log"] if "worker processes are not supported" in line]
    assert notes == [
        "worker processes are not supported on this platform (win32): Python models run "
        "in the server's process"
    ]
    assert result["workers"] == []


def test_darwin_serves_models_from_worker_processes() -> None:
    result = _simulate("darwin")
    assert result["answer"] == [5.0, 5.0, 5.0, 5.0]
    assert not any("not supported" in line for line in result["log"])
    assert len(result["workers"]) >= 1  # (add_sub ran in a worker, started with Popen)
