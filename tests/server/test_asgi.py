"""The front end driven in-process through httpx.ASGITransport (no socket)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Coroutine
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from tritonhttp.server import Server, parse_args

MODELS = Path(__file__).parent.parent / "models"

ADD = {
    "inputs": [
        {"name": "INPUT0", "datatype": "FP32", "shape": [4], "data": [1, 2, 3, 4]},
        {"name": "INPUT1", "datatype": "FP32", "shape": [4], "data": [1, 1, 1, 1]},
    ]
}


def run(coro: Coroutine[Any, Any, None]) -> None:
    asyncio.run(coro)


@contextlib.asynccontextmanager
async def in_process(*argv: str) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the server started from ``argv`` in this process, with no socket."""
    server = Server(parse_args(list(argv)))
    await server.load_models()
    try:
        transport = httpx.ASGITransport(app=server.http)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            yield client
    finally:
        await server.stop()


def test_health_metadata_and_json_infer() -> None:
    async def go() -> None:
        async with in_process(f"--model-repository={MODELS}") as c:
            r = await c.get("/v2/health/ready")
            assert (r.status_code, r.content) == (200, b"")
            r = await c.get("/v2")
            assert r.json()["version"] == "2.51.0"
            r = await c.post("/v2/models/add_sub/infer", json=ADD)
            assert r.status_code == 200
            assert r.content == (
                b'{"model_name":"add_sub","model_version":"1","outputs":[{"name":"OUTPUT0",'
                b'"datatype":"FP32","shape":[4],"data":[2.0,3.0,4.0,5.0]},{"name":"OUTPUT1",'
                b'"datatype":"FP32","shape":[4],"data":[0.0,1.0,2.0,3.0]}]}'
            )
            r = await c.get("/v2/models/nope")
            assert r.status_code == 404
            assert r.json() == {"error": "Request for unknown model: 'nope' is not found"}

    run(go())


def test_binary_round_trip_every_numeric_type() -> None:
    async def go() -> None:
        async with in_process(f"--model-repository={MODELS}") as c:
            rng = np.random.default_rng(3)
            for t, dt in (
                ("INT8", "<i1"),
                ("UINT16", "<u2"),
                ("INT64", "<i8"),
                ("FP16", "<f2"),
                ("FP64", "<f8"),
                ("BOOL", "?"),
            ):
                arr = rng.integers(0, 100, 7).astype(dt)
                blob = arr.tobytes()
                head = json.dumps(
                    {
                        "inputs": [
                            {
                                "name": f"IN_{t}",
                                "datatype": t,
                                "shape": [7],
                                "parameters": {"binary_data_size": len(blob)},
                            }
                        ],
                        "parameters": {"binary_data_output": True},
                    }
                ).encode()
                r = await c.post(
                    "/v2/models/identity_all/infer",
                    content=head + blob,
                    headers={"Inference-Header-Content-Length": str(len(head))},
                )
                assert r.status_code == 200, r.text
                n = int(r.headers["inference-header-content-length"])
                assert r.headers["content-type"] == "application/octet-stream"
                assert r.content[n:] == blob

    run(go())


def test_instances_run_concurrently_and_requests_queue() -> None:
    async def go() -> None:
        body = {"inputs": [{"name": "DELAY_MS", "datatype": "INT32", "shape": [1], "data": [300]}]}
        async with in_process(f"--model-repository={MODELS}") as c:
            t0 = time.monotonic()
            r = await c.post("/v2/models/slow_model/infer", json=body)
            alone = time.monotonic() - t0  # the baseline: one request, one round
            assert r.status_code == 200
            t0 = time.monotonic()
            replies = await asyncio.gather(
                *(c.post("/v2/models/slow_model/infer", json=body) for _ in range(4))
            )
            elapsed = time.monotonic() - t0
            assert all(r.status_code == 200 for r in replies)
            # two instances, four requests of 300 ms: two rounds, not one, not four
            assert elapsed >= 2 * 0.3, elapsed  # (two sleeps of 300 ms one after the other)
            assert elapsed < 3.5 * alone, (elapsed, alone)
            r = await c.get("/v2/health/live")
            assert r.status_code == 200

    run(go())


def test_model_api_through_param_echo(model_repo: Any) -> None:
    special = model_repo("special")

    async def go() -> None:
        async with in_process(
            f"--model-repository={special}",
            "--model-control-mode=explicit",
            "--load-model=param_echo",
        ) as c:
            body = {
                "id": "r1",
                "inputs": [{"name": "IN", "datatype": "INT32", "shape": [1], "data": [0]}],
                "parameters": {"a": 1, "b": "x", "priority": 2, "timeout": 7, "sequence_id": 9},
            }
            r = await c.post("/v2/models/param_echo/infer", json=body)
            out = {o["name"]: o["data"] for o in r.json()["outputs"]}
            assert out["INFO"] == ['r1|9|0|7|{"a":1,"b":"x"}|ARGS,INFO']
            keys, instance, kind, version = out["ARGS"]
            assert keys.split(",") == sorted(
                [
                    "model_config",
                    "model_instance_device_id",
                    "model_instance_kind",
                    "model_instance_name",
                    "model_name",
                    "model_repository",
                    "model_version",
                ]
            )
            assert (instance, kind, version) == ("param_echo_0_0", "CPU", "1")
            assert "EXTRA" not in out  # pruned: not a config output

    run(go())
