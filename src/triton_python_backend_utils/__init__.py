"""``triton_python_backend_utils``: the API of Triton Python-backend models.

Models import it as ``import triton_python_backend_utils as pb_utils``. Served by
tritonhttp (``python -m tritonhttp.server``) every name behaves as in Triton 2.51
(python_backend r24.10). Imported in a plain Python session it is the same module, so
model code can be unit-tested and read in an IDE: tensors, requests, responses, the
response sender, ``ModelConfig``, ``Logger`` (to stderr) and metrics (a local store)
work; BLS and model control raise :class:`TritonModelException` there.
"""

import json  # noqa: F401  (Triton's module leaks these three names; models may use them)
import struct  # noqa: F401
import sys as _sys

import numpy as np  # noqa: F401

from . import _runtime
from ._errors import TritonError, TritonModelException
from ._helpers import (
    TRITON_STRING_TO_NUMPY,
    TRITONSERVER_MEMORY_CPU,
    TRITONSERVER_MEMORY_GPU,
    TRITONSERVER_REQUEST_FLAG_SEQUENCE_END,
    TRITONSERVER_REQUEST_FLAG_SEQUENCE_START,
    TRITONSERVER_REQUEST_RELEASE_ALL,
    TRITONSERVER_REQUEST_RELEASE_RESCHEDULE,
    TRITONSERVER_RESPONSE_COMPLETE_FINAL,
    deserialize_bytes_tensor,
    get_input_config_by_name,
    get_input_tensor_by_name,
    get_output_config_by_name,
    get_output_tensor_by_name,
    numpy_to_triton_type,
    serialize_byte_tensor,
    triton_string_to_numpy,
    triton_to_numpy_type,
    using_decoupled_model_transaction_policy,
)
from ._logger import Logger
from ._metrics import Metric as _Metric
from ._metrics import MetricFamily
from ._model_config import ModelConfig
from ._request import InferenceRequest, InferenceResponse, PreferredMemory
from ._request import InferenceResponseSender as _InferenceResponseSender
from ._request import InferenceTrace as _InferenceTrace
from ._request import ResponseIterator as _ResponseIterator
from ._tensor import Tensor

# In Triton these classes come from the stub's C++ module, c_python_backend_utils, and
# that is the name error messages show (found type '<class 'c_python_backend_utils.X'>').
for _cls in (Tensor, InferenceRequest, InferenceResponse, _InferenceResponseSender,
             _ResponseIterator, _InferenceTrace, PreferredMemory, TritonError,
             TritonModelException, Logger, MetricFamily, _Metric):  # fmt: skip
    _cls.__module__ = "c_python_backend_utils"
_sys.modules.setdefault("c_python_backend_utils", _sys.modules[__name__])
del _cls

__all__ = [
    "TRITONSERVER_MEMORY_CPU",
    "TRITONSERVER_MEMORY_GPU",
    "TRITONSERVER_REQUEST_FLAG_SEQUENCE_END",
    "TRITONSERVER_REQUEST_FLAG_SEQUENCE_START",
    "TRITONSERVER_REQUEST_RELEASE_ALL",
    "TRITONSERVER_REQUEST_RELEASE_RESCHEDULE",
    "TRITONSERVER_RESPONSE_COMPLETE_FINAL",
    "TRITON_STRING_TO_NUMPY",
    "InferenceRequest",
    "InferenceResponse",
    "Logger",
    "MetricFamily",
    "ModelConfig",
    "PreferredMemory",
    "Tensor",
    "TritonError",
    "TritonModelException",
    "deserialize_bytes_tensor",
    "get_input_config_by_name",
    "get_input_tensor_by_name",
    "get_model_dir",
    "get_output_config_by_name",
    "get_output_tensor_by_name",
    "is_model_ready",
    "load_model",
    "numpy_to_triton_type",
    "serialize_byte_tensor",
    "triton_string_to_numpy",
    "triton_to_numpy_type",
    "unload_model",
    "using_decoupled_model_transaction_policy",
]


def get_model_dir() -> str:
    """The calling model's version directory (``<repository>/<model>/<version>``)."""
    return _runtime.current().model_dir()


def load_model(model_name: str, config: str = "", files: dict[str, bytes] | None = None) -> None:
    """Load (or reload) ``model_name``; needs ``--model-control-mode=explicit``.

    ``config`` is a JSON config override; ``files`` maps ``"file:<path>"`` to contents
    (and needs ``config``). Raises :class:`TritonModelException` when the load fails.
    """
    if not isinstance(model_name, str) or not isinstance(config, str):
        raise TypeError("load_model(): incompatible function arguments")
    if files is not None and not isinstance(files, dict):
        raise TritonModelException(
            f"failed to load model '{model_name}', files should be a dictionary of file paths "
            "and file contents"
        )
    _runtime.current().load_model(model_name, config, dict(files or {}))


def unload_model(model_name: str, unload_dependents: bool = False) -> None:
    """Start unloading ``model_name``; needs ``--model-control-mode=explicit``."""
    if not isinstance(model_name, str):
        raise TypeError("unload_model(): incompatible function arguments")
    _runtime.current().unload_model(model_name, bool(unload_dependents))


def is_model_ready(model_name: str, model_version: str = "") -> bool:
    """Whether ``model_name`` (``model_version``, or its latest version) is ready."""
    if not isinstance(model_name, str) or not isinstance(model_version, str):
        raise TypeError("is_model_ready(): incompatible function arguments")
    return _runtime.current().is_model_ready(model_name, model_version)
