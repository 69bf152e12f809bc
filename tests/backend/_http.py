"""Small HTTP helpers for the backend tests (raw exchanges, infer bodies, SSE)."""

from __future__ import annotations

import json
import re
from typing import Any

from server._wire import Reply, exchange, infer_body

__all__ = [
    "Reply",
    "exchange",
    "infer",
    "infer_body",
    "instance_agnostic",
    "mode_call",
    "output",
]


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
