"""The exceptions of both clients, to import and catch by name.

Every error either client raises is an :class:`InferenceServerException` (the class
``tritonclient.utils`` has); these subclasses say more, and most are also the builtin
exception of the same meaning (``ReadTimeout`` is a ``TimeoutError``,
``ClientClosedError`` a ``RuntimeError``, ...)::

    from tritonhttp.errors import NotFoundError, ReadTimeout

The tree is drawn in :mod:`tritonhttp._errors`, where the classes are defined.
"""

from __future__ import annotations

from ._errors import (
    BadRequestError,
    ClientClosedError,
    ConnectError,
    ConnectTimeout,
    ForbiddenError,
    InferenceServerException,
    NotFoundError,
    NotImplementedError_,
    PoolTimeout,
    ProtocolError,
    ReadTimeout,
    RequestCancelled,
    ServerError,
    ServerInternalError,
    ServiceUnavailableError,
    TimeoutError_,
    TransportError,
)

__all__ = [
    "BadRequestError",
    "ClientClosedError",
    "ConnectError",
    "ConnectTimeout",
    "ForbiddenError",
    "InferenceServerException",
    "NotFoundError",
    "NotImplementedError_",
    "PoolTimeout",
    "ProtocolError",
    "ReadTimeout",
    "RequestCancelled",
    "ServerError",
    "ServerInternalError",
    "ServiceUnavailableError",
    "TimeoutError_",
    "TransportError",
]
