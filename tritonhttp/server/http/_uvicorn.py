"""Stock uvicorn serving the application instead of :mod:`._httpserver` (``--http-server=uvicorn``).

The application is plain ASGI, so any ASGI server runs it; this one is kept selectable to
compare against (``benchmarks/server_bench.py --http-server uvicorn``) and as a fallback.
Under it the application does without the bundled server's ``scope`` extensions: a
disconnect is noticed through ``receive()``, header names are forwarded lower-cased, large
bodies go through uvicorn's buffers. The one change made to uvicorn is Triton's ``405
Not Allowed`` reason phrase.
"""

from __future__ import annotations

from typing import Any

__all__ = ["UvicornServer"]


def _triton_reason_phrases() -> None:
    """Make uvicorn's status line for 405 Triton's (``405 Not Allowed``)."""
    try:
        from uvicorn.protocols.http import httptools_impl

        httptools_impl.STATUS_LINE[405] = b"HTTP/1.1 405 Not Allowed\r\n"
    except (ImportError, AttributeError):  # pragma: no cover - other uvicorn layouts
        pass


class UvicornServer:
    """The same interface as :class:`~._httpserver.HttpServer`, served by uvicorn."""

    def __init__(self, app: Any, **_ignored: Any) -> None:
        self.app = app
        self._servers: list[Any] = []

    async def listen(self, host: str, port: int) -> None:
        """Serve on ``host:port`` (raises OSError when uvicorn cannot listen there)."""
        import uvicorn

        _triton_reason_phrases()
        config = uvicorn.Config(
            self.app,
            host=host,
            port=port,
            loop="none",
            http="httptools",
            lifespan="off",
            access_log=False,
            log_level="warning",
            server_header=False,
            date_header=False,
            proxy_headers=False,
        )
        config.load()
        server = uvicorn.Server(config)
        server.lifespan = config.lifespan_class(config)
        await server.startup()
        if server.should_exit or not server.started:
            raise OSError(f"uvicorn could not listen on {host}:{port}")
        self._servers.append(server)

    async def shutdown(self, timeout: float | None = None) -> bool:
        """Stop serving, letting requests in progress finish (up to ``timeout``); True
        when every connection ended in time."""
        for server in self._servers:
            server.should_exit = True
            server.config.timeout_graceful_shutdown = timeout
        in_time = True
        for server in self._servers:
            await server.shutdown()
            state = server.server_state
            in_time = in_time and not (state.connections or state.tasks)
        self._servers = []
        return in_time
