"""Small HTTP helpers for the backend tests (raw exchanges, infer bodies, SSE)."""

from __future__ import annotations

import json
import re
import sys
from typing import Any

import pytest
from server._wire import Reply, exchange, infer_body

from tritonhttp.testing._process import ServerProcess

__all__ = [
    "Reply",
    "exchange",
    "infer",
    "infer_body",
    "instance_agnostic",
    "mode_call",
    "output",
    "reference",
]

#: Real Triton 2.51's Python-backend stubs for Python 3.12 and 3.13 (not 3.11, which CI
#: runs, nor earlier) now and then hang in BLS calls; Triton then answers this for the
#: model until it restarts the stub.
_STUB_HUNG = re.compile(r"Stub process '[^']*' is not healthy\.")


def reference(answer: Any, server: ServerProcess | None = None) -> Any:
    """Real Triton's ``answer``, or a skip when its stub hung on Python 3.12+ (its defect,
    reported by Triton itself: there is nothing to compare with). A hung ``server`` is
    stopped, so that the next test gets a fresh one from the pool."""
    if isinstance(answer, bytes):
        text = answer.decode(errors="replace")
    else:  # JSON keeps the quotes of the error text as they are (repr would escape them)
        text = answer if isinstance(answer, str) else json.dumps(answer, default=str)
    if sys.version_info >= (3, 12) and _STUB_HUNG.search(text):
        if server is not None:
            server.stop()
        pytest.skip(
            f"real Triton 2.51's Python {sys.version_info[0]}.{sys.version_info[1]} stub "
            "hung (its defect, not seen on 3.11): nothing to compare with"
        )
    return answer


def infer(
    url: str, model: str, *inputs: tuple[str, str, list[int], list[Any]], **extra: Any
) -> Reply:
    return exchange(url, "POST", f"/v2/models/{model}/infer", infer_body(*inputs, **extra))


def output(reply: Reply, name: str) -> list[Any]:
    for o in reply.json()["outputs"]:
        if o["name"] == name:
            return o["data"]  # type: ignore[no-any-return]
    raise KeyError(name)


def mode_call(url: str, model: str, mode: int) -> Any:
    """Models of the backend repos take MODE and answer a JSON text in RESULT."""
    r = infer(url, model, ("MODE", "INT32", [1], [mode]))
    if r.status != 200:
        return {"status": r.status, "body": r.body.decode()}
    return json.loads(output(r, "RESULT")[0])


def instance_agnostic(value: Any) -> Any:
    """Instance names (``m_0_1``) replaced: which instance answers is not fixed."""
    return json.loads(re.sub(r"(\w+?)_0_\d\b", r"\1_0_N", json.dumps(value)))


def load(url: str, model: str) -> tuple[int, str]:
    """Load ``model`` through the repository API: the status and the body's text."""
    r = exchange(url, "POST", f"/v2/repository/models/{model}/load")
    return r.status, r.body.decode()
