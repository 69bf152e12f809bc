"""The bundled HTTP/1.1 server: listening sockets, their connections, a clean shutdown.

:class:`HttpServer` serves an ASGI 3 application, so the same application also runs
under uvicorn (``--http-server=uvicorn``, :mod:`._uvicorn`) and in-process through
``httpx.ASGITransport``. What it does per connection and per request is in
:mod:`._connection` (parsing, keep-alive, pipelining, flow control, the poll for a quick
client's next request: :mod:`._poll`) and :mod:`._asgi` (the scope, ``receive`` and
``send``, running the application eagerly); the bytes of its answers follow real
Triton's (:mod:`._wire`); what it offers the application beyond plain ASGI is in
:mod:`._extensions`.
"""

from __future__ import annotations

import asyncio
import time

from ._asgi import App
from ._connection import Connection
from ._extensions import ImmediateAnswer
from ._poll import NextRequestPoll

__all__ = ["HttpServer"]


class HttpServer:
    """Serves an ASGI application over HTTP/1.1 on one or more listening sockets.

    ``busy_wait_us``: how long a connection polls for a quick client's next request
    (:class:`~._poll.NextRequestPoll`; 0 turns polling off, and it is off where the
    platform cannot poll). ``keep_raw_header_names`` records the header names as sent in
    ``scope[RAW_HEADER_NAMES]``. The application's ``immediate_answer`` method, where it
    has one, answers what it can at once (see :mod:`._extensions`).
    """

    def __init__(
        self, app: App, *, busy_wait_us: int = 0, keep_raw_header_names: bool = False
    ) -> None:
        self.app = app
        self.immediate: ImmediateAnswer | None = getattr(app, "immediate_answer", None)
        self.keep_raw_header_names = keep_raw_header_names
        #: the policy of polling for a quick client's next request (None: no polling)
        self.next_request_poll = NextRequestPoll.for_option(busy_wait_us)
        self.connections: set[Connection] = set()
        #: requests whose application is running
        self.active = 0
        self.tasks: set[asyncio.Task[None]] = set()
        self._listeners: list[asyncio.Server] = []

    async def listen(self, host: str, port: int) -> None:
        """Open a listening socket (raises OSError when the address is taken)."""
        loop = asyncio.get_running_loop()
        listener = await loop.create_server(
            lambda: Connection(self), host, port, backlog=2048, reuse_address=True
        )
        self._listeners.append(listener)

    @property
    def ports(self) -> list[int]:
        """The ports listened on (useful with port 0)."""
        return [s.getsockname()[1] for listener in self._listeners for s in listener.sockets or ()]

    async def shutdown(self, timeout: float | None = None) -> bool:
        """Stop listening at once, close idle connections, let the requests in progress
        (and those already sent on their connections) finish, up to ``timeout``; then
        close what is left. True when every connection ended in time."""
        for listener in self._listeners:
            listener.close()
        for conn in list(self.connections):
            conn.shutdown()
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.connections and (deadline is None or time.monotonic() < deadline):
            await asyncio.sleep(0.01)
        in_time = not self.connections
        for conn in list(self.connections):
            conn.transport.abort()
        for task in list(self.tasks):
            task.cancel()
        for listener in self._listeners:
            await listener.wait_closed()
        self._listeners = []
        return in_time
