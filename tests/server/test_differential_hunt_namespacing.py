"""``--model-namespacing=true`` side by side with real tritonserver 2.51: two repositories
(``tests/repos/hunt_ns_a``, ``tests/repos/hunt_ns_b``) each hold a model ``m`` (``m`` of
``a`` multiplies by 10, that of ``b`` by 100) and an ensemble whose step is ``m``
(``ens_a``, ``ens_b``); ``a`` also has ``only_a``, which the ensemble ``ens_cross`` of
``b`` uses. Both ``m`` load; a request naming ``m`` is ambiguous; each ensemble's step
resolves to the ``m`` of its own repository; a name in one repository only serves as
without namespacing; a load or unload of ``m`` acts on both."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests._real import skip_without_real_triton
from tritonhttp.server import _launch
from tritonhttp.testing import _real_triton as rt

from ._wire import exchange, infer_body
from .test_ensemble_differential import Step, _play

pytestmark = pytest.mark.real_triton

NS = "--model-namespacing=true"
IN = ("IN", "INT32", [2], [1, 2])


def _servers(factories: tuple[Any, Any], model_repo: Any, *flags: str) -> tuple[Any, Any]:
    """Real Triton and ours serving both repositories with namespacing (and ``flags``)."""
    a, b = model_repo("hunt_ns_a"), model_repo("hunt_ns_b")
    args = (f"--model-repository={b}", NS, *flags)
    return factories[0](a, *args), factories[1](a, *args)


def _infer(model: str, version: str = "") -> Step:
    where = f"/versions/{version}" if version else ""
    return ("POST", f"/v2/models/{model}{where}/infer", infer_body(IN))


def _get(model: str, tail: str = "") -> Step:
    return ("GET", f"/v2/models/{model}{tail}", "")


def load(model: str) -> Step:
    return ("POST", f"/v2/repository/models/{model}/load", "")


def unload(model: str) -> Step:
    return ("POST", f"/v2/repository/models/{model}/unload", "")


INDEX: Step = ("POST", "/v2/repository/index", "")
READY_INDEX: Step = ("POST", "/v2/repository/index", '{"ready":true}')


def _out(server: Any, model: str) -> list[int]:
    reply = exchange(server.url, *_infer(model))
    assert reply.status == 200, reply.body
    data: list[int] = json.loads(reply.body)["outputs"][0]["data"]
    return data


def test_same_name_in_two_repositories(
    real_triton_factory: Any, bundled_server_factory: Any, model_repo: Any
) -> None:
    """Both ``m`` load and the index lists each, repository by repository; metadata,
    config, readiness, inference and statistics of ``m`` answer Triton's ambiguity
    error; an unknown name answers 400 (not 404); a name in one repository serves as
    usual, its unknown versions named ``<repository>::<name>``. An ensemble's config names
    its repository as each step's ``model_namespace``."""
    real, ours = _servers((real_triton_factory, bundled_server_factory), model_repo)
    steps: list[Step] = [
        ("GET", "/v2/health/ready", ""),
        INDEX,
        READY_INDEX,
        *[_get("m", tail) for tail in ("", "/config", "/ready", "/versions/1/ready")],
        *[_get("m", tail) for tail in ("/versions/1", "/versions/7", "/stats")],
        _infer("m"),
        _infer("m", "1"),
        *[_infer(m) for m in ("ens_a", "ens_b", "ens_cross", "only_a")],
        *[_get("only_a", tail) for tail in ("", "/config", "/ready", "/versions/7")],
        _get("only_a", "/versions/7/config"),
        _infer("only_a", "7"),
        *[_get("nope", tail) for tail in ("", "/config", "/ready", "/versions/1", "/stats")],
        _infer("nope"),
        *[_get(m, "/stats") for m in ("only_a", "ens_a", "ens_b", "ens_cross")],
        # (each step names the ensemble's repository as its model_namespace)
        *[_get(m, "/config") for m in ("ens_a", "ens_b", "ens_cross")],
    ]
    problems = _play(real, ours, steps)
    assert not problems, "\n".join(problems)
    # each ensemble's step is the m of its own repository
    assert _out(ours, "ens_a") == [10, 20]
    assert _out(ours, "ens_b") == [100, 200]


def test_load_and_unload_by_name_in_explicit_mode(
    real_triton_factory: Any, bundled_server_factory: Any, model_repo: Any
) -> None:
    """Loading an ensemble whose step ``m`` two repositories hold loads both ``m``; a load
    or unload of ``m`` acts on both (and an ensemble using one goes with it, back once
    it loads again); an ensemble's step in another repository is found there."""
    factories = (real_triton_factory, bundled_server_factory)
    real, ours = _servers(factories, model_repo, "--model-control-mode=explicit")
    dependents = '{"parameters":{"unload_dependents":true}}'
    steps: list[Step] = [
        INDEX,
        load("ens_a"),
        INDEX,
        _infer("ens_a"),
        load("m"),
        INDEX,
        unload("m"),
        INDEX,
        _get("ens_a", "/ready"),
        _infer("ens_a"),
        load("only_a"),
        load("ens_cross"),
        _infer("ens_cross"),
        ("POST", "/v2/repository/models/only_a/unload", dependents),
        INDEX,
        load("ens_b"),
        _infer("ens_b"),
        load("m"),
        _infer("ens_a"),
        _infer("ens_b"),
        READY_INDEX,
        ("POST", "/v2/repository/models/m/unload", dependents),
        INDEX,
    ]
    problems = _play(real, ours, steps)
    assert not problems, "\n".join(problems)


#: ``--model-namespacing`` values tritonserver takes and refuses (a boolean flag)
FLAG_VALUES = [("true", True), ("0", True), ("ON", True), ("yes", False), (" true", False)]


@pytest.mark.parametrize(("value", "taken"), FLAG_VALUES, ids=[v for v, _ in FLAG_VALUES])
def test_flag_values(tmp_path: Path, value: str, taken: bool) -> None:
    """The flag is a boolean as tritonserver reads one: a bad value stops the server
    (exit status 1, the flag named)."""
    skip_without_real_triton(rt.platform_problem())
    rt.ensure_installed()
    flag = f"--model-namespacing={value}"
    for start in (rt.start, _launch.start):
        log = tmp_path / f"{start.__module__}.log"
        try:
            server = start(tmp_path, flag, timeout=60, log_path=log)
        except RuntimeError as e:
            said = str(e) + log.read_text(errors="replace")
            assert not taken, (start.__module__, said[-600:])
            assert "exited with 1" in said and "--model-namespacing" in said, said[-600:]
            continue
        server.stop()
        assert taken, start.__module__
