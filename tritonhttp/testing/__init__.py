"""Testing helpers for model authors: requests as ``execute`` receives them
(:func:`server_request`), and pytest fixtures serving a repository
(:mod:`tritonhttp.testing.pytest_plugin`, registered with pytest automatically).

``_real_triton`` (private) provisions the real Triton server for differential tests.
"""

from ._models import ResponseSink, server_request

__all__ = ["ResponseSink", "server_request"]
