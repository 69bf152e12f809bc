"""Golden tests of the ``--json`` output: its shape (keys and value types) is stable.

Scripts depend on these keys. One golden file serves both servers (real Triton and the
bundled server answer with the same documents). A golden file holds the shape of one command's JSON
(see ``cli_helpers.json_shape``); regenerate after a deliberate change with
``TRITON_CLI_UPDATE_GOLDEN=1 pytest tests/cli/test_cli_golden.py`` and review the diff.
"""

from __future__ import annotations

import json
import os

import pytest
from cli_helpers import GOLDEN, json_shape
from conftest import Invoke, Server

ADD_SUB = ["infer", "add_sub", "-i", "INPUT0=1,2,3,4", "-i", "INPUT1=10,20,30,40"]

CASES: dict[str, list[str]] = {
    "infer": ADD_SUB,
    "infer_bytes": ["infer", "identity_bytes", "-i", 'INPUT0=["a"]'],
    "generate": ["generate", "text_echo", "-t", "hi"],
    "health_live": ["health", "live"],
    "health_ready": ["health", "ready", "--model", "add_sub"],
    "model_list": ["model", "list"],
    "model_metadata": ["model", "metadata", "simple"],
    "model_config": ["model", "config", "simple"],
    "model_stats": ["model", "stats", "add_sub"],
    "model_ready": ["model", "ready", "add_sub"],
    "model_load": ["model", "load", "add_sub"],
    "server_metadata": ["server", "metadata"],
    "log_get": ["log", "get"],
    "trace_get": ["trace", "get"],
    "shm_status": ["shm", "status"],
    "bench": ["bench", "add_sub", "-n", "5", "--warmup", "0"],
}


def check(name: str, value: object) -> None:
    shape = json_shape(value)
    path = GOLDEN / f"{name}.json"
    if os.environ.get("TRITON_CLI_UPDATE_GOLDEN"):
        path.write_text(json.dumps(shape, indent=2, sort_keys=True) + "\n")
    assert shape == json.loads(path.read_text()), f"the --json shape of {name} changed"


@pytest.mark.parametrize("name", sorted(CASES))
def test_json_shape(invoke: Invoke, name: str) -> None:
    if name == "model_stats":
        # batch_stats is empty until the model has run since it was (re)loaded (the
        # model_load case reloads add_sub): run it once so the shape does not depend on
        # test order.
        assert invoke(*ADD_SUB).exit_code == 0
    result = invoke(*CASES[name], "--json")
    assert result.exit_code == 0, result.output
    check(name, json.loads(result.output))


def test_generate_stream_lines(invoke: Invoke) -> None:
    result = invoke("generate", "text_stream", "-t", "a b", "--stream", "--json")
    events = [json.loads(line) for line in result.output.splitlines()]
    assert len(events) == 2
    check("generate_stream_event", events)


def test_metrics(invoke: Invoke, triton: Server) -> None:
    result = invoke("metrics", "--metrics-url", triton.metrics_url, "--filter", "add_sub", "--json")
    check("metrics", json.loads(result.output))


def test_shm_and_model_actions(invoke: Invoke) -> None:
    unregister = invoke("shm", "unregister", "none", "--json")
    check("shm_unregister", json.loads(unregister.output))
    try:
        unload = invoke("model", "unload", "text_echo", "--json")
        check("model_unload", json.loads(unload.output))
    finally:
        invoke("model", "load", "text_echo")
