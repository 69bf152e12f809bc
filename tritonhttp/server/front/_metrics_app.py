"""The metrics port: ``GET /metrics`` in Prometheus text format."""

from __future__ import annotations

from ..core._core import ServerCore
from ..core._metrics import render
from ._http import TEXT, Receive, Scope, Send, send_response

__all__ = ["MetricsApp"]


class MetricsApp:
    """ASGI app for ``--metrics-port``: any other GET path answers 200 with no body."""

    def __init__(self, core: ServerCore) -> None:
        self.core = core

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                else:
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        if scope["method"] != "GET":
            await send_response(
                send, 405, b'{"error":"Method Not Allowed"}', TEXT, length_first=True
            )
            return
        if scope["path"] in ("/metrics", "/metrics/"):
            assert self.core.registry is not None
            body = render(self.core.registry)
            await send_response(send, 200, body, b"text/plain; charset=utf-8")
            return
        await send_response(send, 200, b"", b"text/plain; charset=utf-8")
