"""The pytest plugin (entry point ``pytest11``): fixtures that serve a repository."""

from __future__ import annotations

import importlib.metadata
from typing import Any

import pytest

from .conftest import EXAMPLES

pytest_plugins = ["pytester"]

INNER = """
import json, os
import numpy as np
import pytest
import tritonhttp


def add_sub_inputs():
    a = tritonhttp.InferInput("INPUT0", [4], "FP32")
    a.set_data_from_numpy(np.arange(4, dtype=np.float32))
    b = tritonhttp.InferInput("INPUT1", [4], "FP32")
    b.set_data_from_numpy(np.ones(4, dtype=np.float32))
    return [a, b]


@pytest.mark.parametrize("isolation", ["in-process", "process"])
def test_serves_and_connects(triton_server, isolation):
    served = triton_server({examples!r}, isolation=isolation, models=["add_sub"])
    assert served.client.is_model_ready("add_sub")
    result = served.client.infer("add_sub", add_sub_inputs())
    assert result.as_numpy("OUTPUT0").tolist() == [1.0, 2.0, 3.0, 4.0]


@pytest.mark.parametrize("isolation", ["in-process", "process"])
def test_where_the_model_runs(triton_server, isolation):
    served = triton_server({isolation_repo!r}, isolation=isolation, models=["identity"])
    f = tritonhttp.InferInput("F", [1], "FP32")
    f.set_data_from_numpy(np.zeros(1, dtype=np.float32))
    info = json.loads(served.client.infer("identity", [f]).as_numpy("INFO")[0])
    assert (info["pid"] == os.getpid()) == (isolation == "in-process")


@pytest.mark.triton_repository({examples!r})
def test_client_from_the_marker(triton_client):
    assert triton_client.is_model_ready("sub_add")
    result = triton_client.infer("sub_add", add_sub_inputs())
    assert result.as_numpy("OUTPUT1").tolist() == [1.0, 2.0, 3.0, 4.0]
"""


def test_registered_as_a_pytest_plugin() -> None:
    names = {e.value for e in importlib.metadata.entry_points(group="pytest11")}
    assert "tritonhttp.testing.pytest_plugin" in names


def test_fixtures_in_a_test_suite(pytester: pytest.Pytester, model_repo: Any) -> None:
    isolation_repo = model_repo("backend_isolation")
    pytester.makepyfile(INNER.format(examples=str(EXAMPLES), isolation_repo=str(isolation_repo)))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q")
    result.assert_outcomes(passed=5)


def test_triton_client_without_a_repository_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_x(triton_client):\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q")
    result.assert_outcomes(errors=1)
    assert "needs @pytest.mark.triton_repository" in result.stdout.str()


def test_in_process_models_are_covered_by_tracing(pytester: pytest.Pytester) -> None:
    """A tracer set in the test process sees model.py lines (what coverage.py relies on)."""
    pytester.makepyfile(
        f"""
import sys, threading
import numpy as np
import tritonhttp

def test_trace(triton_server):
    seen = set()
    def tracer(frame, event, arg):
        if frame.f_code.co_filename.endswith("add_sub/1/model.py"):
            seen.add(frame.f_lineno)
        return tracer
    threading.settrace(tracer)
    sys.settrace(tracer)
    try:
        served = triton_server({str(EXAMPLES)!r}, models=["add_sub"],
                               args=["--backend-config=python,inline-execution=never"])
        a = tritonhttp.InferInput("INPUT0", [4], "FP32")
        a.set_data_from_numpy(np.zeros(4, dtype=np.float32))
        b = tritonhttp.InferInput("INPUT1", [4], "FP32")
        b.set_data_from_numpy(np.zeros(4, dtype=np.float32))
        served.client.infer("add_sub", [a, b])
    finally:
        sys.settrace(None)
        threading.settrace(None)
    assert len(seen) > 5, seen
"""
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q")
    result.assert_outcomes(passed=1)
