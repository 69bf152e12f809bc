"""The HTTP front end: an ASGI application speaking Triton's HTTP/REST protocol."""

from ._app import HttpFrontend
from ._metrics_app import MetricsApp

__all__ = ["HttpFrontend", "MetricsApp"]
