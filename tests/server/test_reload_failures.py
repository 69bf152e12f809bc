"""A load that fails takes nothing out of service (real Triton's rules; the differential
cases in ``test_differential_fuzz_endpoints.py`` compare them with real Triton).

The model has two version folders: 1, whose ``initialize`` raises, and 2, which serves.
Its own config keeps the latest version (2); the overrides ask for others.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from _repos import ECHO_MODEL

from tritonhttp.server import _launch

from ._wire import json_call

CONFIG = """backend: "python"
input [{ name: "IN" data_type: TYPE_INT32 dims: [1] }]
output [{ name: "OUT" data_type: TYPE_INT32 dims: [1] }]
"""
IO = {
    "backend": "python",
    "input": [{"name": "IN", "data_type": "TYPE_INT32", "dims": [1]}],
    "output": [{"name": "OUT", "data_type": "TYPE_INT32", "dims": [1]}],
}
FAILS = """class TritonPythonModel:
    def initialize(self, args):
        raise RuntimeError("version 1 does not start")
"""


@pytest.fixture
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_launch.BundledServer]:
    """A server of its own per test: a version that failed stays failed for good."""
    repo = tmp_path_factory.mktemp("repo")
    (repo / "m" / "1").mkdir(parents=True)
    (repo / "m" / "2").mkdir()
    (repo / "m" / "config.pbtxt").write_text(CONFIG)
    (repo / "m" / "1" / "model.py").write_text(FAILS)
    (repo / "m" / "2" / "model.py").write_text(ECHO_MODEL)
    with _launch.running(repo, "--model-control-mode=explicit", "--load-model=m") as s:
        yield s


def call(server: _launch.BundledServer, method: str, path: str, body: Any = None) -> Any:
    return json_call(server.url, method, path, body)


def load(
    server: _launch.BundledServer, policy: dict[str, Any] | None, **more: Any
) -> tuple[int, Any]:
    config = {**IO, **more}
    if policy is not None:
        config["version_policy"] = policy
    body = {"parameters": {"config": json.dumps(config)}}
    result: tuple[int, Any] = call(server, "POST", "/v2/repository/models/m/load", body)
    return result


def serves_version_2(server: _launch.BundledServer) -> bool:
    status, meta = call(server, "GET", "/v2/models/m")
    infer = {"inputs": [{"name": "IN", "datatype": "INT32", "shape": [1], "data": [7]}]}
    answer = call(server, "POST", "/v2/models/m/infer", infer)
    return bool(
        status == 200
        and meta["versions"] == ["2"]
        and answer[0] == 200
        and answer[1]["model_version"] == "2"
        and answer[1]["outputs"][0]["data"] == [7]
    )


@pytest.fixture(autouse=True)
def fresh(server: _launch.BundledServer) -> None:
    """Each test starts from the model's own config: version 2 serving, server ready."""
    assert call(server, "POST", "/v2/repository/models/m/load")[0] == 200
    assert serves_version_2(server)
    assert call(server, "GET", "/v2/health/ready")[0] == 200


def test_failed_reload_keeps_the_version_its_policy_leaves_out(
    server: _launch.BundledServer,
) -> None:
    status, body = load(server, {"specific": {"versions": [1]}})
    assert status == 400
    assert "version 1 is at UNAVAILABLE state" in body["error"]
    assert serves_version_2(server)
    index = call(server, "POST", "/v2/repository/index")[1]
    states = {e["version"]: e["state"] for e in index if e["name"] == "m"}
    assert states == {"1": "UNAVAILABLE", "2": "READY"}
    # version 1 failed with nothing of its own serving: not ready (strict readiness)
    assert call(server, "GET", "/v2/health/ready")[0] == 400
    # nor after loads that leave version 1 alone, or an unload (as real Triton 2.51)
    assert call(server, "POST", "/v2/repository/models/m/load")[0] == 200
    assert serves_version_2(server)
    assert call(server, "GET", "/v2/health/ready")[0] == 400
    assert call(server, "POST", "/v2/repository/models/m/unload")[0] == 200
    assert call(server, "GET", "/v2/health/ready")[0] == 400


def test_policy_without_versions_leaves_the_server_ready(server: _launch.BundledServer) -> None:
    status, body = load(server, {"specific": {"versions": [7]}})
    assert status == 400
    assert "at least one version must be available" in body["error"]
    assert serves_version_2(server)
    assert call(server, "GET", "/v2/health/ready")[0] == 200


def test_failed_override_tried_again_fails_again(server: _launch.BundledServer) -> None:
    """(Tried again, the override is not taken for the configuration already loaded.
    It changes only the instance groups: an update in place, which fails and leaves the
    version serving as it was.)"""
    gpu = [{"kind": "KIND_GPU", "count": 1}]
    for _ in range(2):
        status, body = load(server, None, instance_group=gpu)
        assert status == 400
        assert "version 2 is at READY state" in body["error"]
        assert "has kind KIND_GPU but no GPUs are available" in body["error"]
        assert serves_version_2(server)
    # the configuration that serves is still the model's own
    config = call(server, "GET", "/v2/models/m/config")[1]
    assert config["version_policy"] == {"latest": {"num_versions": 1}}
