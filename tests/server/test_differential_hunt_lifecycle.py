"""Model control while a load or an unload is still under way, as real Triton 2.51 answers
it (``tests/repos/hunt_lifecycle``: ``slow_init`` and ``slow_two`` take 2 s to initialize,
``slow_exec`` takes 2 s for a request whose IN is 99).

Each test plays the same requests on both servers, at the same moments, and compares the
answers: what is compared never depends on how long a server takes to start or stop a
model process (the moments fall well inside the 2 s the model itself takes)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from ._wire import Reply, exchange, infer_body

pytestmark = pytest.mark.real_triton

ARGS = ("--model-control-mode=explicit", "--strict-readiness=true")
INDEX = "/v2/repository/index"


def _in_background(url: str, path: str, body: str = "") -> Callable[[], Reply]:
    """POST ``path`` on a thread of its own: the function returned waits for the answer."""
    box: list[Reply] = []
    thread = threading.Thread(target=lambda: box.append(exchange(url, "POST", path, body)))
    thread.start()

    def result() -> Reply:
        thread.join()
        return box[0]

    return result


def _settle(url: str) -> None:
    """Wait until no model is LOADING or UNLOADING."""
    for _ in range(200):
        index = json.loads(exchange(url, "POST", INDEX).body)
        if not any(m.get("state") in ("LOADING", "UNLOADING") for m in index):
            return
        time.sleep(0.05)


def _play(
    real_triton_factory: Any,
    bundled_server_factory: Any,
    model_repo: Any,
    script: Callable[[str], list[tuple[str, Reply]]],
) -> None:
    repo = model_repo("hunt_lifecycle")
    answers = [
        [(what, r.status, r.body) for what, r in script(server.url)]
        for server in (real_triton_factory(repo, *ARGS), bundled_server_factory(repo, *ARGS))
    ]
    real, ours = answers
    assert ours == real


def test_a_load_under_way_is_listed_loading_and_an_unload_waits_for_it(
    real_triton_factory: Any, bundled_server_factory: Any, model_repo: Any
) -> None:
    """While a model's first load runs, the index lists its version LOADING, a request
    for that version finds it not ready, and the server is not ready; an unload sent
    meanwhile waits for the load, then unloads what it brought up (it is not lost: the
    model does not end up READY)."""

    def script(url: str) -> list[tuple[str, Reply]]:
        _settle(url)
        out: list[tuple[str, Reply]] = []
        load = _in_background(url, "/v2/repository/models/slow_init/load")
        time.sleep(0.7)
        out.append(("index", exchange(url, "POST", INDEX)))
        out.append(("ready index", exchange(url, "POST", INDEX, '{"ready":true}')))
        out.append(("health", exchange(url, "GET", "/v2/health/ready")))
        out.append(("model ready", exchange(url, "GET", "/v2/models/slow_init/ready")))
        out.append(("metadata", exchange(url, "GET", "/v2/models/slow_init")))
        infer = infer_body(("IN", "INT32", [1], [1]))
        out.append(("infer", exchange(url, "POST", "/v2/models/slow_init/infer", infer)))
        # the version loading is known, not ready (503), where no version is not found (404)
        v1 = "/v2/models/slow_init/versions/1"
        out.append(("version metadata", exchange(url, "GET", v1)))
        out.append(("version infer", exchange(url, "POST", f"{v1}/infer", infer)))
        out.append(("unload", exchange(url, "POST", "/v2/repository/models/slow_init/unload")))
        out.append(("load", load()))
        _settle(url)
        out.append(("index after", exchange(url, "POST", INDEX)))
        out.append(("ready after", exchange(url, "GET", "/v2/models/slow_init/ready")))
        out.append(("health after", exchange(url, "GET", "/v2/health/ready")))
        return out

    _play(real_triton_factory, bundled_server_factory, model_repo, script)


def test_an_unload_with_a_request_in_flight_leaves_the_server_not_ready_until_done(
    real_triton_factory: Any, bundled_server_factory: Any, model_repo: Any
) -> None:
    """The request in flight is answered; meanwhile the version is UNLOADING, new requests
    find no version, and (strict readiness) the server is not ready."""

    def script(url: str) -> list[tuple[str, Reply]]:
        _settle(url)
        out = [("load", exchange(url, "POST", "/v2/repository/models/slow_exec/load"))]
        slow = _in_background(
            url, "/v2/models/slow_exec/infer", infer_body(("IN", "INT32", [1], [99]))
        )
        time.sleep(0.5)
        out.append(("unload", exchange(url, "POST", "/v2/repository/models/slow_exec/unload")))
        out.append(("index", exchange(url, "POST", INDEX)))
        out.append(("health", exchange(url, "GET", "/v2/health/ready")))
        infer = infer_body(("IN", "INT32", [1], [1]))
        out.append(("infer", exchange(url, "POST", "/v2/models/slow_exec/infer", infer)))
        out.append(("in flight", slow()))
        _settle(url)
        out.append(("health after", exchange(url, "GET", "/v2/health/ready")))
        out.append(("index after", exchange(url, "POST", INDEX)))
        return out

    _play(real_triton_factory, bundled_server_factory, model_repo, script)


def test_a_version_added_to_a_serving_model_is_listed_loading(
    real_triton_factory: Any, bundled_server_factory: Any, model_repo: Any
) -> None:
    """A load that adds version 1 next to version 2, which serves: version 2 stays READY
    and serving, version 1 is LOADING until it is up, and the server is not ready."""
    all_versions = json.dumps(
        {
            "parameters": {
                "config": json.dumps(
                    {
                        "backend": "python",
                        "version_policy": {"all": {}},
                        "input": [{"name": "IN", "data_type": "TYPE_INT32", "dims": [1]}],
                        "output": [{"name": "OUT", "data_type": "TYPE_INT32", "dims": [1]}],
                    }
                )
            }
        }
    )

    def script(url: str) -> list[tuple[str, Reply]]:
        _settle(url)
        out = [("load", exchange(url, "POST", "/v2/repository/models/slow_two/load"))]
        load = _in_background(url, "/v2/repository/models/slow_two/load", all_versions)
        time.sleep(0.7)
        out.append(("index", exchange(url, "POST", INDEX)))
        out.append(("health", exchange(url, "GET", "/v2/health/ready")))
        out.append(("metadata", exchange(url, "GET", "/v2/models/slow_two")))
        out.append(("version 1", exchange(url, "GET", "/v2/models/slow_two/versions/1")))
        infer = infer_body(("IN", "INT32", [1], [1]))
        out.append(("infer", exchange(url, "POST", "/v2/models/slow_two/infer", infer)))
        out.append(("load all", load()))
        out.append(("index after", exchange(url, "POST", INDEX)))
        out.append(("unload", exchange(url, "POST", "/v2/repository/models/slow_two/unload")))
        _settle(url)
        return out

    _play(real_triton_factory, bundled_server_factory, model_repo, script)


@pytest.mark.parametrize(
    "model",
    [
        "files_only",  # no configuration, no subfolder
        "first_empty",  # model.py in 2, but Triton looks in the first subfolder only
        "non_numeric",  # model.py in a folder that is no version: Python, with no version
        "cfg_no_backend",  # a configuration that names no backend, no model file
        "onnx_file",
        "plan_file",
        "pt_file",
    ],
)
def test_the_backend_is_told_by_the_first_subfolder_or_the_poll_fails(
    model: str, real_triton_factory: Any, bundled_server_factory: Any, model_repo: Any
) -> None:
    """A configuration naming no backend: Triton tells it by the model file in the
    model's first subfolder; with none there, the repository poll fails (500), the
    model is not listed with a version."""

    def script(url: str) -> list[tuple[str, Reply]]:
        load = exchange(url, "POST", f"/v2/repository/models/{model}/load")
        index = exchange(url, "POST", INDEX)
        mine = [m for m in json.loads(index.body) if m["name"] == model]
        return [("load", load), ("index", Reply(index.status, {}, json.dumps(mine).encode()))]

    _play(real_triton_factory, bundled_server_factory, model_repo, script)
