"""tritonhttp: a fast, thread-safe, drop-in replacement for ``tritonclient.http``.

``import tritonhttp as httpclient`` gives the same names as ``import tritonclient.http as
httpclient``: the client, the tensor classes, the exception, the plugin hook, and (as
module attributes) the helpers of ``tritonhttp.utils``; new here, :class:`Retry` (the
``retries=`` policy of both clients).
"""

import struct  # noqa: F401  (tritonclient.http exposes it as an attribute)

import ml_dtypes  # noqa: F401  (idem)
import numpy as np  # noqa: F401  (idem)

from ._client import InferAsyncRequest, InferenceServerClient
from ._errors import InferenceServerException
from ._plugin import InferenceServerClientPlugin, Request
from ._routing import Retry
from ._tensors import InferInput, InferRequestedOutput, InferResult
from .utils import (  # noqa: F401  (re-exported as attributes, like tritonclient.http)
    TRITON_RESERVED_REQUEST_PARAMS,
    TRITON_RESERVED_REQUEST_PARAMS_PREFIX,
    deserialize_bytes_tensor,
    np_to_triton_dtype,
    raise_error,
    serialize_byte_tensor,
    serialized_byte_size,
    triton_to_np_dtype,
)

__all__ = [
    "InferAsyncRequest",
    "InferInput",
    "InferRequestedOutput",
    "InferResult",
    "InferenceServerClient",
    "InferenceServerClientPlugin",
    "InferenceServerException",
    "Request",
    "Retry",
]
