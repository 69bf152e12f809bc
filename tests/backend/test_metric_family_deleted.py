"""A custom metric used after its ``MetricFamily`` is gone: each operation raises
``TritonModelException`` with Triton 2.51's words, ``Failed to <op> metric value:``
first (also for a family that was only a temporary), and the model goes on serving."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _real import skip_without_real_triton

import tritonhttp
from tritonhttp.server import _launch
from tritonhttp.testing import _real_triton as rt

pytestmark = pytest.mark.real_triton

REPO = Path(__file__).resolve().parent.parent / "repos" / "metric_family_deleted"
OPS = "increment,set,observe,value,set_temporary"


def _raised(server: Any) -> list[dict[str, str]]:
    client = tritonhttp.InferenceServerClient(server.url)
    try:
        ops = tritonhttp.InferInput("OP", [1], "BYTES")
        ops.set_data_from_numpy(np.array([OPS.encode()], dtype=object))
        return [  # twice: the model serves on after the errors
            json.loads(client.infer("deleted_family", [ops]).as_numpy("RESULT")[0])
            for _ in range(2)
        ]
    finally:
        client.close()


def test_operations_on_a_deleted_family_raise_as_in_triton() -> None:
    skip_without_real_triton(rt.platform_problem())
    seen = []
    for start in (rt.start, _launch.start):
        server = start(REPO)
        try:
            seen.append(_raised(server))
        finally:
            server.stop()
    assert seen[0] == seen[1]
    assert seen[1][0]["value"].startswith(
        "TritonModelException: Failed to get metric value: Invalid metric operation"
    )
