"""The life cycle of a Python model as Triton 2.51 runs it (python-backend spec §3), on
real Triton and on our server in both isolation modes (``--model-control-mode=explicit``:
every model is loaded through the API, so load errors are compared too)."""

from __future__ import annotations

import json
import os
import time
from typing import Any

import pytest

from ._http import exchange, infer_body, instance_agnostic, load, mode_call
from .conftest import REPOS

REPO = REPOS / "backend_lifecycle"
ARGS = ("--model-control-mode=explicit",)
MODELS = [
    "init_args", "multi_file", "alt_name", "model_env", "ac_keep", "ac_not_static",
    "ac_wrong_return", "ac_raise", "init_error", "fini_error", "async_default", "ret_none",
    "error_codes", "reschedule_wrong", "is_ready_model", "import_error", "helper_error",
    "bare_assert", "ctor_errors",
]  # fmt: skip
CODES = ["UNKNOWN", "INTERNAL", "NOT_FOUND", "INVALID_ARG", "UNAVAILABLE", "UNSUPPORTED",
         "ALREADY_EXISTS", "CANCELLED", "DEFAULT"]  # fmt: skip

os.environ["TRITONHTTP_TEST_MODEL_ENV"] = "inherited"  # before any server starts


_load = load


@pytest.mark.real_triton
@pytest.mark.parametrize("model", MODELS)
def test_load_answers_match_triton(real: Any, server: Any, model: str) -> None:
    """Successful loads, and the exact load errors: import, initialize and
    auto_complete_config failures."""
    assert _load(server.url, model) == _load(real.url, model)


@pytest.mark.real_triton
@pytest.mark.parametrize("model", ["init_args", "alt_name", "model_env"])
def test_what_the_model_sees_matches_triton(real: Any, server: Any, model: str) -> None:
    for url in (real.url, server.url):
        _load(url, model)
    assert instance_agnostic(mode_call(server.url, model, 0)) == instance_agnostic(
        mode_call(real.url, model, 0)
    )


def test_initialize_args(server: Any, isolation: str) -> None:
    _load(server.url, "init_args")
    got = mode_call(server.url, "init_args", 0)
    args = got["args"]
    assert got["types"] == ["str"] and len(args) == 7
    assert args["model_name"] == "init_args" and args["model_version"] == "1"
    assert args["model_repository"] == str(REPO / "init_args")
    assert args["model_instance_kind"] == "CPU" and args["model_instance_device_id"] == "0"
    assert args["model_instance_name"] in ("init_args_0_0", "init_args_0_1")
    config = json.loads(args["model_config"])
    assert config == exchange(server.url, "GET", "/v2/models/init_args/config").json()
    assert config["parameters"] == {"custom_key": {"string_value": "custom_value"}}
    assert config["instance_group"][0]["count"] == 2


@pytest.mark.real_triton
def test_module_imports_as_version_dot_model(real: Any, server: Any, isolation: str) -> None:
    for url in (real.url, server.url):
        _load(url, "multi_file")
    ours, theirs = mode_call(server.url, "multi_file", 0), mode_call(real.url, "multi_file", 0)
    if isolation == "in-process":
        # one interpreter for every model: the folders are on sys.path only while importing
        for key in ("version_dir_on_path", "model_folder_on_path"):
            ours.pop(key)
            theirs.pop(key)
    assert ours == theirs
    assert theirs["name"] == "1.model" and theirs["rel"] == "relative"


@pytest.mark.real_triton
def test_auto_complete_keeps_only_what_triton_keeps(real: Any, server: Any) -> None:
    for url in (real.url, server.url):
        _load(url, "ac_keep")
    config = exchange(server.url, "GET", "/v2/models/ac_keep/config")
    assert config.body == exchange(real.url, "GET", "/v2/models/ac_keep/config").body
    doc = config.json()
    assert doc["max_batch_size"] == 4 and doc["output"][0]["name"] == "OUT"
    assert doc["parameters"] == {"p": {"string_value": "from the file"}}  # edit dropped
    assert doc["instance_group"][0]["count"] == 1
    assert doc["dynamic_batching"]["preferred_batch_size"] == [4]


@pytest.mark.real_triton
@pytest.mark.parametrize("code", CODES)
def test_triton_error_codes_reach_the_client(real: Any, server: Any, code: str) -> None:
    body = infer_body(("CODE", "BYTES", [1], [code]))
    replies = []
    for url in (real.url, server.url):
        _load(url, "error_codes")
        r = exchange(url, "POST", "/v2/models/error_codes/infer", body)
        replies.append((r.status, r.body))
    assert replies[1] == replies[0]


@pytest.mark.real_triton
@pytest.mark.parametrize("mode", [0, 1])
def test_an_exception_without_a_message_reads_as_triton_s(
    real: Any, server: Any, mode: int
) -> None:
    for url in (real.url, server.url):
        _load(url, "bare_assert")
    theirs = mode_call(real.url, "bare_assert", mode)
    assert mode_call(server.url, "bare_assert", mode) == theirs
    assert ": <EMPTY MESSAGE>\n\nAt:\n" in json.loads(theirs["body"])["error"]


@pytest.mark.real_triton
def test_constructor_errors_read_as_triton_s(real: Any, server: Any) -> None:
    """pybind11's words for wrong arguments, with the call's arguments."""
    for url in (real.url, server.url):
        _load(url, "ctor_errors")
    theirs = mode_call(real.url, "ctor_errors", 0)
    assert mode_call(server.url, "ctor_errors", 0) == theirs
    assert theirs["error_code_by_name"].endswith("\n\nInvoked with: 'm'; kwargs: code=3")


@pytest.mark.real_triton
@pytest.mark.parametrize("mode", [0, 1])
def test_async_execute_in_default_mode(real: Any, server: Any, mode: int) -> None:
    for url in (real.url, server.url):
        _load(url, "async_default")
    assert mode_call(server.url, "async_default", mode) == mode_call(
        real.url, "async_default", mode
    )


@pytest.mark.real_triton
def test_reschedule_flag_with_a_returned_response_is_an_error(real: Any, server: Any) -> None:
    for url in (real.url, server.url):
        _load(url, "reschedule_wrong")
    theirs = mode_call(real.url, "reschedule_wrong", 0)
    assert mode_call(server.url, "reschedule_wrong", 0) == theirs
    assert (
        "Expected a None object in the execute function return list for reschduled"
        in (theirs["body"])
    )


@pytest.mark.parametrize(("mode", "text"), [
    (0, "Expected a list in the execute return, found type '<class 'NoneType'>'."),
    (1, "Expected an 'InferenceResponse' object in the execute function return list, found "
        "type '<class 'NoneType'>'."),
])  # fmt: skip
def test_none_without_the_sender_is_an_error_not_a_hang(server: Any, mode: int, text: str) -> None:
    # Triton 2.51 never answers these requests; here the client gets an error at once.
    _load(server.url, "ret_none")
    got = mode_call(server.url, "ret_none", mode)
    assert got["status"] == 500
    assert json.loads(got["body"])["error"] == (
        f"Failed to process the request(s) for model 'ret_none_0', message: {text}"
    )


def test_missing_model_file_fails_the_load(server: Any) -> None:
    # Triton 2.51 leaves such a model LOADING forever
    status, body = _load(server.url, "no_model_file")
    assert status == 400
    assert "Failed to preinitialize Python stub: Python model file not found in" in body


@pytest.mark.real_triton
def test_finalize_errors_are_logged_and_ignored(real: Any, server: Any) -> None:
    for s in (real, server):
        _load(s.url, "fini_error")
        assert exchange(s.url, "POST", "/v2/repository/models/fini_error/unload").status == 200
    text = "name 'undefined_variable' is not defined"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not (text in server.log() and text in real.log()):
        time.sleep(0.05)
    assert text in server.log()
    assert text in real.log()


def test_model_is_ready_hook(server: Any) -> None:
    """``is_ready()`` (Triton 2.52+) decides the model's readiness."""
    flag = REPO / "is_ready_model" / "not_ready"
    _load(server.url, "is_ready_model")
    try:
        assert exchange(server.url, "GET", "/v2/models/is_ready_model/ready").status == 200
        flag.touch()
        assert exchange(server.url, "GET", "/v2/models/is_ready_model/ready").status == 400
    finally:
        flag.unlink(missing_ok=True)
    assert exchange(server.url, "GET", "/v2/models/is_ready_model/ready").status == 200
