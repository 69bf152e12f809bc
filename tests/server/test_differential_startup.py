"""Start-up side by side on real Triton and ours: start-up models that no repository has or
that two repositories have (readiness, the index, later loads), and a flag value
tritonserver reads its own way."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests._real import skip_without_real_triton
from tritonhttp.server import _launch
from tritonhttp.testing import _real_triton as rt

from ._wire import exchange

pytestmark = pytest.mark.real_triton

MODELS = Path(__file__).parent.parent / "models"
EXPLICIT = ("--exit-on-error=false", "--model-control-mode=explicit")


def _observe(start: Callable[..., Any], repos: list[Path], flags: tuple[str, ...]) -> list[Any]:
    """What a client sees of a server started with ``flags``: readiness, the index (all,
    then ready only), add_sub's readiness, then loads of add_sub and of a missing model."""
    server = start(repos, *flags, wait_ready=False, timeout=90)
    try:
        seen: list[Any] = [
            exchange(server.url, "GET", "/v2/health/ready").status,
            exchange(server.url, "POST", "/v2/repository/index").body,
            exchange(server.url, "POST", "/v2/repository/index", '{"ready":true}').body,
            exchange(server.url, "GET", "/v2/models/add_sub/ready").status,
        ]
        if "--model-control-mode=explicit" in flags:
            for name in ("add_sub", "nope"):
                load = exchange(server.url, "POST", f"/v2/repository/models/{name}/load")
                seen.append((load.status, load.body))
            seen.append(exchange(server.url, "GET", "/v2/health/ready").status)
            seen.append(exchange(server.url, "POST", "/v2/repository/index").body)
        return seen
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("twice", "flags"),
    [
        pytest.param(True, ("--exit-on-error=false",), id="add_sub-twice"),
        pytest.param(True, (*EXPLICIT, "--load-model=simple"), id="add_sub-twice-explicit"),
        pytest.param(True, (*EXPLICIT, "--load-model=add_sub"), id="add_sub-twice-loaded"),
        pytest.param(False, (*EXPLICIT, "--load-model=nope", "--load-model=add_sub"), id="nope"),
        pytest.param(
            False, ("--model-control-mode=EXPLICIT", "--load-model=simple"), id="EXPLICIT"
        ),
    ],
)
def test_startup_models_as_triton_reads_them(
    tmp_path: Path, twice: bool, flags: tuple[str, ...]
) -> None:
    skip_without_real_triton(rt.platform_problem())
    rt.ensure_installed()
    repos = [MODELS]
    if twice:
        shutil.copytree(MODELS / "add_sub", tmp_path / "add_sub")
        repos.append(tmp_path)
    real = _observe(rt.start, repos, flags)
    ours = _observe(_launch.start, repos, flags)
    assert ours == real


def _indexes(repo: Path, flags: Sequence[str]) -> list[tuple[Any, str]]:
    """The repository index and the log of real Triton, then of ours, serving ``repo``."""
    answers = []
    for start in (rt.start, _launch.start):
        server = start(repo, *flags, wait_ready=False, timeout=90)
        try:
            index = exchange(server.url, "POST", "/v2/repository/index").json()
        finally:
            server.stop()
        answers.append((index, server.log()))
    return answers


@pytest.mark.parametrize("auto_complete", [True, False], ids=["auto-complete", "no-auto-complete"])
def test_inputs_and_outputs_refused_as_triton_refuses_them(
    model_repo: Any, auto_complete: bool
) -> None:
    """tests/repos/io_checks: names, data types, dims, reshapes, shape tensors. Without
    auto-completion Triton refuses them while polling (the index names the model only),
    with it when the version loads (``Invalid argument: …``)."""
    skip_without_real_triton(rt.platform_problem())
    rt.ensure_installed()
    flags = ["--exit-on-error=false", "--strict-readiness=false"]
    if not auto_complete:
        flags.append("--disable-auto-complete-config")
    (real, _), (ours, _) = _indexes(model_repo("io_checks"), flags)
    assert sum(item.get("state") == "READY" for item in real) == 6  # the rest are refused
    assert ours == real


#: the models of tests/repos/sched_checks that Triton refuses while polling, and why (a
#: config without a name: the messages name the folder)
SCHEDULING_PROBLEMS = {
    "not_an_ensemble": "ensemble scheduling cannot be set for model 'not_an_ensemble' whose "
    "platform is not ensemble",
    "dynamic_big": "dynamic batching preferred size must be <= max batch size for dynamic_big",
    "no_name": "sequence batching control tensor must have a name for no_name",
    "no_list": "sequence batching must specify either 'int32_false_true', 'fp32_false_true' "
    "or 'bool_false_true' for CONTROL_SEQUENCE_START for no_list",
    "two_lists": "sequence batching specifies more than one from 'int32_false_true', "
    "'fp32_false_true' and 'bool_false_true' for CONTROL_SEQUENCE_START for two_lists",
    "three_entries": "sequence batching control 'bool_false_true' must have exactly 2 entries "
    "for CONTROL_SEQUENCE_START for three_entries",
    "corrid_list": "sequence batching must not specify either 'int32_false_true', "
    "'fp32_false_true' or 'bool_false_true' for CONTROL_SEQUENCE_CORRID for corrid_list",
    "two_starts": "sequence batching specifies multiple CONTROL_SEQUENCE_START tensors for "
    "two_starts",
    "same_tensor": "sequence batching control tensor 'CTL' is specified for multiple control "
    "kinds for same_tensor",
    "oldest_zero": "sequence batching preferred batch size must be positive for oldest_zero",
    "oldest_big": "sequence batching preferred batch size must be <= max batch size for oldest_big",
}


def test_scheduler_settings_refused_as_triton_refuses_them(model_repo: Any) -> None:
    skip_without_real_triton(rt.platform_problem())
    rt.ensure_installed()
    flags = ("--exit-on-error=false", "--strict-readiness=false")
    answers = _indexes(model_repo("sched_checks"), flags)
    (real, _), (ours, _) = answers
    logs = [log for _, log in answers]
    assert real == [
        {"name": name, "version": "1", "state": "READY"} if name == "ok" else {"name": name}
        for name in sorted([*SCHEDULING_PROBLEMS, "ok"])
    ]
    assert ours == real
    for model, why in SCHEDULING_PROBLEMS.items():
        for log in logs:
            assert f"Poll failed for model directory '{model}': {why}" in log, (model, why)
