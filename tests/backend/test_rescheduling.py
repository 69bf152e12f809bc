"""Request rescheduling (``TRITONSERVER_REQUEST_RELEASE_RESCHEDULE`` with
``sequence_batching { iterative_sequence: true }``), decoupled and not, against real
Triton 2.51 in both isolation modes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ._http import exchange, infer_body
from .conftest import REPOS, Start

pytestmark = pytest.mark.real_triton

REPO = REPOS / "backend_sequences"
CASES = [
    ("/v2/models/iterative_dec/generate_stream", json.dumps({"IN": 3})),
    ("/v2/models/iterative_dec/generate_stream", json.dumps({"IN": 1})),
    ("/v2/models/iterative_addsub/infer",
     infer_body(("INPUT0", "FP32", [1, 4], [[1, 2, 3, 4]]), ("INPUT1", "FP32", [1, 4], [[1] * 4]))),
]  # fmt: skip


@pytest.fixture(scope="module")
def real(real_triton_factory: Any) -> Any:
    return real_triton_factory(REPO)


@pytest.mark.parametrize(("path", "body"), CASES)
def test_rescheduled_requests_match_triton(real: Any, ours: Start, path: str, body: str) -> None:
    theirs = exchange(real.url, "POST", path, body)
    got = exchange(ours(REPO).url, "POST", path, body)
    assert (got.status, got.body) == (theirs.status, theirs.body)


def test_countdown_over_three_passes(ours: Start) -> None:
    r = exchange(ours(REPO).url, "POST", "/v2/models/iterative_dec/generate_stream",
                 json.dumps({"IN": 3}))  # fmt: skip
    assert [e["OUT"] for e in r.events()] == [2, 1, 0]
