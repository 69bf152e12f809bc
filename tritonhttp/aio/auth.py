"""Authentication plugins for the asyncio client (mirrors ``tritonclient.http.aio.auth``)."""

from ..auth import BasicAuth

__all__ = ["BasicAuth"]
