"""Fixtures for the client tests: both clients on real Triton, and the comparison helper.

``same(scenario)`` runs ``scenario(module, client)`` through tritonhttp and through
tritonclient.http against the same server and asserts the outcomes are the same:
equal return values (inference results compared output by output, dtype included),
or exceptions with the same ``str()``, ``status()`` and ``message()``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import tritonclient.http as ref_http

import tritonhttp
from tritonhttp.testing import _real_triton as rt

Scenario = Callable[[Any, Any], Any]


@dataclass
class Outcome:
    kind: str  # "ok" or "err"
    value: Any

    def describe(self) -> Any:
        if self.kind == "err":
            e = self.value
            if isinstance(
                e, (tritonhttp.InferenceServerException, ref_http.InferenceServerException)
            ):
                return ("ISE", str(e), e.status(), e.message(), e.debug_details())
            return (type(e).__name__, str(e))
        return ("ok", normalize(self.value))


def normalize(value: Any) -> Any:
    """Comparable form of a client return value."""
    if hasattr(value, "as_numpy") and hasattr(value, "get_response"):
        response = value.get_response()
        arrays = {}
        for output in response.get("outputs", []):
            array = value.as_numpy(output["name"])
            arrays[output["name"]] = None if array is None else array_form(array)
        return ("InferResult", response, arrays)
    return value


def array_form(array: np.ndarray[Any, Any]) -> tuple[str, tuple[int, ...], Any]:
    if array.dtype == object:
        return ("object", array.shape, array.tolist())
    return (array.dtype.str, array.shape, array.tobytes())


def run(scenario: Scenario, module: Any, client: Any) -> Outcome:
    try:
        return Outcome("ok", scenario(module, client))
    except Exception as e:
        return Outcome("err", e)


@dataclass
class Pair:
    ours: tritonhttp.InferenceServerClient
    ref: Any

    def both(self, scenario: Scenario) -> tuple[Outcome, Outcome]:
        return run(scenario, tritonhttp, self.ours), run(scenario, ref_http, self.ref)

    def same(self, scenario: Scenario) -> Outcome:
        """Run on both clients, assert identical outcomes, return ours."""
        ours, ref = self.both(scenario)
        assert ours.kind == ref.kind, (ours.value, ref.value)
        if ours.kind == "err" and not isinstance(ref.value, ref_http.InferenceServerException):
            # tritonclient let a builtin exception through (e.g. TimeoutError); ours is a
            # typed InferenceServerException that is also an instance of that builtin.
            assert isinstance(ours.value, type(ref.value)), (ours.value, ref.value)
            assert isinstance(ours.value, tritonhttp.InferenceServerException)
            return ours
        assert ours.describe() == ref.describe()
        if ours.kind == "err":
            assert isinstance(ours.value, tritonhttp.InferenceServerException)
        return ours


@pytest.fixture(scope="session")
def triton_url(real_triton: rt.RealTriton) -> str:
    return real_triton.url


@pytest.fixture
def pair(triton_url: str) -> Iterator[Pair]:
    ours = tritonhttp.InferenceServerClient(triton_url)
    ref = ref_http.InferenceServerClient(triton_url)
    try:
        yield Pair(ours, ref)
    finally:
        ours.close()
        ref.close()


@pytest.fixture
def client(triton_url: str) -> Iterator[tritonhttp.InferenceServerClient]:
    with tritonhttp.InferenceServerClient(triton_url, concurrency=4) as c:
        yield c
