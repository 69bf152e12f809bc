"""``TritonModelException`` (raised by pb_utils) and ``TritonError`` (returned by models)."""

from __future__ import annotations

import enum
from typing import Any

__all__ = ["ErrorCode", "TritonError", "TritonModelException"]


class TritonModelException(Exception):
    """Raised by the pb_utils API when a call is invalid or the server refuses it."""


class ErrorCode(enum.Enum):
    """Error codes of :class:`TritonError` (``TritonError.NOT_FOUND`` and so on)."""

    UNKNOWN = 0
    INTERNAL = 1
    NOT_FOUND = 2
    INVALID_ARG = 3
    UNAVAILABLE = 4
    UNSUPPORTED = 5
    ALREADY_EXISTS = 6
    CANCELLED = 7


ErrorCode.__name__ = "__ErrorCode"
ErrorCode.__qualname__ = "__ErrorCode"
globals()["__ErrorCode"] = ErrorCode  # so pickle finds the class under its shown name

_ARGS = (
    "__init__(): incompatible constructor arguments. The following argument types are "
    "supported:\n    1. TritonError(message: str, code: __ErrorCode = "
    "<__ErrorCode.INTERNAL: 1>)\n"
)


class TritonError:
    """An error a model puts in a response: ``TritonError(message, code=INTERNAL)``.

    Not an exception. The client sees ``message`` with the HTTP status of ``code``
    (INTERNAL 500, NOT_FOUND 404, UNAVAILABLE 503, UNSUPPORTED 501, the others 400).
    """

    UNKNOWN = ErrorCode.UNKNOWN
    INTERNAL = ErrorCode.INTERNAL
    NOT_FOUND = ErrorCode.NOT_FOUND
    INVALID_ARG = ErrorCode.INVALID_ARG
    UNAVAILABLE = ErrorCode.UNAVAILABLE
    UNSUPPORTED = ErrorCode.UNSUPPORTED
    ALREADY_EXISTS = ErrorCode.ALREADY_EXISTS
    CANCELLED = ErrorCode.CANCELLED

    __slots__ = ("_code", "_message")

    def __init__(self, message: str, code: ErrorCode = ErrorCode.INTERNAL) -> None:
        if not isinstance(message, str) or not isinstance(code, ErrorCode):
            raise TypeError(_ARGS)
        self._message = message
        self._code = code

    def code(self) -> ErrorCode:
        """The error code (an enum; ``.value`` is its number)."""
        return self._code

    def message(self) -> str:
        """The error message."""
        return self._message

    def __repr__(self) -> str:
        return f"TritonError({self._message!r}, {self._code.name})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (TritonError, (self._message, self._code))
