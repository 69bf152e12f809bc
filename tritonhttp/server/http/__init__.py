"""The HTTP/1.1 server that runs the front's ASGI application.

It knows HTTP and ASGI, not Triton's models: the front asks for more than plain ASGI
through the ``scope`` extensions of :mod:`._extensions`. :class:`HttpServer` is the
bundled server (:mod:`._httpserver`); :class:`UvicornServer` serves the same application
with stock uvicorn instead.
"""

from ._httpserver import HttpServer
from ._uvicorn import UvicornServer

__all__ = ["HttpServer", "UvicornServer"]
