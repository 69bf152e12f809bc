"""Runs Triton Python-backend models (``model.py`` with ``TritonPythonModel``).

``triton_python_backend_utils`` inside those models is :mod:`._pb_utils`; execution goes
through :class:`~tritonhttp.server.core._backend_api.ModelInstance`, implemented here
in-process by :class:`._instance.InProcessInstance`.
"""

from ._backend import PythonBackend

__all__ = ["PythonBackend"]
