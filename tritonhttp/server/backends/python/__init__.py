"""Runs Triton Python-backend models (``model.py`` with ``TritonPythonModel``).

Models import ``triton_python_backend_utils`` (the top-level package of that name). Each
instance runs in its own worker process (:mod:`._process`, the default) or inside the
server (:mod:`._inprocess`); :mod:`._execution` holds the rules both follow.
"""

from ._backend import PythonBackend

__all__ = ["PythonBackend"]
