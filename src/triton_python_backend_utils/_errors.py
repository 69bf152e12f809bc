"""``TritonModelException`` (raised by pb_utils) and ``TritonError`` (returned by models)."""

from __future__ import annotations

import contextlib
import enum
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

__all__ = [
    "ErrorCode",
    "TritonError",
    "TritonModelException",
    "bind_call",
    "invoked_with",
    "pybind_repr",
]


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
    "supported:\n    1. c_python_backend_utils.TritonError(message: str, code: "
    "c_python_backend_utils.TritonError.__ErrorCode = <__ErrorCode.INTERNAL: 1>)\n"
)


def pybind_repr(obj: object, name: str) -> str:
    """What pybind11 shows for an object of Triton's stub class ``name`` (its repr, and
    its str)."""
    return f"<c_python_backend_utils.{name} object at {id(obj):#x}>"


def invoked_with(args: Sequence[Any], kwargs: dict[str, Any]) -> str:
    """What pybind11 appends to an incompatible-arguments error: the call's arguments."""
    text = "\nInvoked with: " + ", ".join(repr(a) for a in args)
    if kwargs:
        named = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
        text += ("; " if args else "") + "kwargs: " + named
    return text


def bind_call(
    args: Sequence[Any],
    kwargs: dict[str, Any],
    names: Sequence[str],
    defaults: dict[str, Any],
    error: str,
) -> list[Any]:
    """The values of the parameters ``names`` in a call, or ``TypeError(error)`` with the
    call's arguments where it does not fit them (too many, unknown, missing), as
    pybind11 refuses such a call."""
    values = list(args)
    if len(values) > len(names) or any(k not in names[len(values) :] for k in kwargs):
        raise TypeError(error + invoked_with(args, kwargs))
    for name in names[len(values) :]:
        if name in kwargs:
            values.append(kwargs[name])
        elif name in defaults:
            values.append(defaults[name])
        else:
            raise TypeError(error + invoked_with(args, kwargs))
    return values


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
    _code: ErrorCode
    _message: str

    if TYPE_CHECKING:

        def __init__(self, message: str, code: ErrorCode = ErrorCode.INTERNAL) -> None: ...

    else:

        def __init__(self, *args, **kwargs):
            message, code = bind_call(
                args, kwargs, ("message", "code"), {"code": ErrorCode.INTERNAL}, _ARGS
            )
            if isinstance(message, bytes):  # (pybind11 takes UTF-8 bytes for a str)
                with contextlib.suppress(UnicodeDecodeError):
                    message = message.decode("utf-8")
            if not isinstance(message, str) or not isinstance(code, ErrorCode):
                raise TypeError(_ARGS + invoked_with(args, kwargs))
            self._message = message
            self._code = code

    def code(self) -> ErrorCode:
        """The error code (an enum; ``.value`` is its number)."""
        return self._code

    def message(self) -> str:
        """The error message."""
        return self._message

    def __repr__(self) -> str:
        return pybind_repr(self, "TritonError")

    def __reduce__(self) -> tuple[Any, ...]:
        return (TritonError, (self._message, self._code))
