"""tritonhttp's bundled reference server: Triton's HTTP/REST protocol over a repository of
Python-backend models, answering like Triton Inference Server 2.51.0.

Run it with ``python -m tritonhttp.server --model-repository=<dir>`` (tritonserver's flag
names), or embed it::

    from tritonhttp.server import Server, parse_args
    server = Server(parse_args(["--model-repository=models"]))
    await server.serve()

``Server.http`` is a plain ASGI application, so ``httpx.ASGITransport`` can drive it
without a socket once ``await server.repository.load_startup()`` has run.
"""

from ._options import OptionsError, ServerOptions, parse_args
from ._server import Server, StartupError, run

__all__ = ["OptionsError", "Server", "ServerOptions", "StartupError", "parse_args", "run"]
