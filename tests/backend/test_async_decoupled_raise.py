"""A decoupled model's ``async def execute`` that raises after it has answered, or part of
it (``tests/repos/hunt_sender/async_raise``), and one whose ``execute`` is an async
generator (``async_gen``), compared with real Triton 2.51.

The coroutine runs in the background: what it raises is only logged (Python's traceback
text, at pb_stub.cc:945), and what it returns is ignored. The client keeps what was sent;
a request that was not closed with FINAL stays open; the statistics count each request
as a success when ``execute`` hands its coroutine over. An async generator is no
coroutine: ``execute`` returned something other than None, and the batch fails.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

import pytest

from ._http import exchange
from .conftest import REPOS

REPO = REPOS / "hunt_sender"
ARGS = ("--exit-timeout-secs=3",)  # (requests left open do not hold the servers up)

#: modes whose request is closed with FINAL before the model raises (or returns)
CLOSED = [1, 2, 4, 6]
#: modes that raise before FINAL: the request stays open
LEFT_OPEN = [0, 3, 5]


def _stats(url: str, model: str) -> dict[str, int]:
    doc = json.loads(exchange(url, "GET", f"/v2/models/{model}/stats").body)
    s = doc["model_stats"][0]
    counts = {
        "inference_count": s["inference_count"],
        "execution_count": s["execution_count"],
        "success": s["inference_stats"]["success"]["count"],
        "fail": s["inference_stats"]["fail"]["count"],
    }
    for b in s["batch_stats"]:
        counts[f"batch {b['batch_size']}"] = b["compute_infer"]["count"]
    return counts


def _stream(url: str, model: str, doc: dict[str, Any], timeout: float = 60) -> Any:
    path = f"/v2/models/{model}/generate_stream"
    try:
        r = exchange(url, "POST", path, json.dumps(doc), timeout=timeout)
    except TimeoutError:
        return "still open"
    return (r.status, r.body)


def _counted(url: str, model: str, before: dict[str, int]) -> dict[str, int]:
    """What the model's statistics counted since ``before``, once they moved (a request
    may be counted just after its answer went out)."""
    deadline = time.monotonic() + 3
    now = _stats(url, model)
    while now["execution_count"] == before["execution_count"] and time.monotonic() < deadline:
        time.sleep(0.05)
        now = _stats(url, model)
    return {k: v - before.get(k, 0) for k, v in now.items()}


def _logged(server: Any, mode: int) -> list[str]:
    """The log lines (from the file name on) that name the exception of ``mode``."""
    deadline = time.monotonic() + 5
    found: list[str] = []
    while not found and time.monotonic() < deadline:
        lines = server.log().splitlines()
        found = [re.sub(r"^.*? \d+ ", "", x) for x in lines if f"boom after mode {mode}" in x]
        time.sleep(0.05)
    return found


@pytest.mark.real_triton
@pytest.mark.parametrize("mode", CLOSED + LEFT_OPEN)
def test_raise_after_answering(real: Any, server: Any, mode: int) -> None:
    """The same stream, the same statistics and the same log text as on Triton."""
    seen = []
    for s in (real, server):
        before = _stats(s.url, "async_raise")
        timeout = 2 if mode in LEFT_OPEN else 60
        answer = _stream(s.url, "async_raise", {"MODE": [mode]}, timeout)
        seen.append((answer, _counted(s.url, "async_raise", before), _logged(s, mode)[-1:]))
    assert seen[1] == seen[0]


@pytest.mark.real_triton
def test_async_generator_execute(real: Any, server: Any) -> None:
    seen = []
    for s in (real, server):
        before = _stats(s.url, "async_gen")
        answer = _stream(s.url, "async_gen", {"N": [2]})
        seen.append((answer, _counted(s.url, "async_gen", before)))
    assert seen[1] == seen[0]


def test_what_the_client_and_the_log_see(server: Any) -> None:
    """Ours on its own: FINAL then raise answers the response; the raise is logged as
    Python's traceback; statistics count a success."""
    before = _stats(server.url, "async_raise")
    status, body = _stream(server.url, "async_raise", {"MODE": [1]})
    assert status == 200
    assert [json.loads(x[6:])["OUT"] for x in body.decode().split("\n\n") if x] == [1]
    counted = _counted(server.url, "async_raise", before)
    assert (counted["success"], counted["fail"], counted["execution_count"]) == (1, 0, 1)
    line = _logged(server, 1)[-1]
    assert line.startswith('pb_stub.cc:945] "Traceback (most recent call last):\\n  File ')
    assert line.endswith('in execute\\n    raise ValueError(f\\"boom after mode {mode}\\")'
                         '\\nValueError: boom after mode 1\\n"')  # fmt: skip
    assert _stream(server.url, "async_raise", {"MODE": [3]}, timeout=1) == "still open"
