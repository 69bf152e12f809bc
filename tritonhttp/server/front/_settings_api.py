"""The settings endpoints: trace settings (``/v2/trace/setting``, a model's
``/trace/setting``) and log settings (``/v2/logging``), each read by GET and updated by
POST.

Plain functions: each handler takes the :class:`~._routes.Frontend` (for its core), the
ASGI triple and the route's captures.
"""

from __future__ import annotations

from ..core._errors import CoreError
from ..support import _json
from ._http import Receive, Scope, Send, parse_body, read_body, send_response
from ._routes import Frontend

__all__ = ["log_settings", "trace_settings"]


async def trace_settings(
    front: Frontend, scope: Scope, receive: Receive, send: Send, name: str | None = None
) -> None:
    """The trace settings of model ``name``, or the server's: read (GET), updated (POST)."""
    trace = front.core.trace
    if name is not None and not front.core.repository.is_ready(name):
        raise CoreError(f"Request for unknown model : {name}")
    if scope["method"] == "POST":
        body = await read_body(receive)
        trace.update(parse_body(body), name)
    await send_response(send, 200, _json.dumps(trace.view(name)))


async def log_settings(front: Frontend, scope: Scope, receive: Receive, send: Send) -> None:
    """The log settings: read (GET), updated (POST)."""
    settings = front.core.log
    if scope["method"] == "POST":
        body = await read_body(receive)
        settings.update(parse_body(body))
    await send_response(send, 200, _json.dumps(settings.view()))
