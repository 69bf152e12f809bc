"""tritonhttp.aio: the asyncio client, a drop-in for ``tritonclient.http.aio``.

``import tritonhttp.aio as aioclient`` gives the same names as ``import
tritonclient.http.aio as aioclient``: the asyncio ``InferenceServerClient`` plus the
tensor classes, the exception and the plugin hook of :mod:`tritonhttp`. New here:
:class:`Timeouts` (per-call ``client_timeout``), ``async_infer``, ``generate`` and
``generate_stream``.
"""

import base64  # noqa: F401  (tritonclient.http.aio exposes it as an attribute)
import gzip  # noqa: F401  (idem)
import zlib  # noqa: F401  (idem)
from urllib.parse import quote  # noqa: F401  (idem)

import rapidjson as json  # noqa: F401  (idem: tritonclient's json is python-rapidjson)

from .. import (
    InferAsyncRequest,
    InferenceServerClientPlugin,
    InferenceServerException,
    InferInput,
    InferRequestedOutput,
    InferResult,
    Request,
)
from .._plugin import InferenceServerClientBase
from ._client import InferenceServerClient
from ._timeouts import Timeouts

__all__ = [
    "InferAsyncRequest",
    "InferInput",
    "InferRequestedOutput",
    "InferResult",
    "InferenceServerClient",
    "InferenceServerClientBase",
    "InferenceServerClientPlugin",
    "InferenceServerException",
    "Request",
    "Timeouts",
]
