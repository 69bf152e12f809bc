"""The exception hierarchy, in one place.

``InferenceServerException`` keeps tritonclient's API (``message()``, ``status()``,
``debug_details()``, ``str(e) == "[status] msg"``) so existing ``except`` clauses work.
Everything tritonhttp raises for a failed call is an ``InferenceServerException``; the
typed subclasses let new code be precise::

    InferenceServerException                 tritonclient's root, unchanged API
    ├── TransportError                       nothing usable came back from the server
    │   ├── ConnectError                     also a ConnectionRefusedError (when refused)
    │   ├── TimeoutError_                    also the builtin TimeoutError
    │   │   ├── ConnectTimeout
    │   │   ├── ReadTimeout
    │   │   └── PoolTimeout                  (aio) no free connection in time
    │   └── ProtocolError                    the peer broke HTTP or the framing
    ├── ServerError                          the server answered with a non-200 status
    │   ├── BadRequestError          400
    │   ├── ForbiddenError           403
    │   ├── NotFoundError            404
    │   ├── ServerInternalError      500
    │   ├── NotImplementedError_     501
    │   └── ServiceUnavailableError  503
    └── ClientClosedError                    the client was closed (also a RuntimeError)

Transport errors also derive from the builtin exception that tritonclient let through
(``ConnectionRefusedError``, ``TimeoutError``, ``RuntimeError``), so code written as
``except ConnectionRefusedError`` keeps working; the timeouts are also
``asyncio.TimeoutError`` (which tritonclient's asyncio client raised; the same class as
``TimeoutError`` from Python 3.11). All of them pickle.
"""

from __future__ import annotations

import builtins
import socket
import ssl
import sys
from typing import Any

if sys.version_info >= (3, 11):
    _TIMEOUT_BASES: tuple[type[BaseException], ...] = (builtins.TimeoutError,)
else:  # asyncio.TimeoutError is its own class before 3.11
    import asyncio

    _TIMEOUT_BASES = (builtins.TimeoutError, asyncio.TimeoutError)

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
    "raise_error",
    "server_error",
    "transport_error",
]


class InferenceServerException(Exception):
    """An error from the client or the server.

    ``msg`` is the message, ``status`` the HTTP status as a string (or None) and
    ``debug_details`` extra text (or None). ``str(e)`` is ``"[<status>] <msg>"``.
    """

    def __init__(
        self,
        msg: str | None = None,
        status: str | None = None,
        debug_details: str | None = None,
    ) -> None:
        # tritonclient does not call Exception.__init__, so ``args`` are the positional
        # arguments (what str() shows for a None message). We keep a message in ``args``
        # so that repr(), logging and pickling are useful.
        if msg is not None:
            super().__init__(msg)
        self._msg = msg
        self._status = status
        self._debug_details = debug_details

    def __str__(self) -> str:
        # Same text as tritonclient's; a message or status that is not a str is
        # converted (tritonclient's str() raised TypeError for those).
        text = super().__str__() if self._msg is None else self._msg
        if type(text) is not str:
            text = str(text)
        if self._status is not None:
            text = f"[{self._status}] {text}"
        return text

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._msg!r}, status={self._status!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            _rebuild,
            (type(self), self._msg, self._status, self._debug_details, self.args),
        )

    def message(self) -> str | None:
        """The error message."""
        return self._msg

    def status(self) -> str | None:
        """The HTTP status code as a string (``"400"``), or None."""
        return self._status

    def debug_details(self) -> str | None:
        """Extra details (e.g. an undecodable response body), or None."""
        return self._debug_details


def _rebuild(
    cls: type[InferenceServerException],
    msg: str | None,
    status: str | None,
    debug: str | None,
    args: tuple[Any, ...] = (),
) -> InferenceServerException:
    exc = cls.__new__(cls)
    InferenceServerException.__init__(exc, msg, status, debug)
    exc.args = args
    return exc


class TransportError(InferenceServerException):
    """The request did not complete at the transport level (no HTTP answer)."""


class ConnectError(TransportError, ConnectionError):
    """The connection to the server could not be established."""


class _Refused(ConnectError, ConnectionRefusedError):
    """Connection refused (also a ``ConnectionRefusedError``, as tritonclient raised)."""


class TimeoutError_(TransportError, *_TIMEOUT_BASES):  # type: ignore[misc]
    """A client-side timeout (also a builtin ``TimeoutError`` and ``asyncio.TimeoutError``)."""


class ConnectTimeout(TimeoutError_):
    """Establishing the connection took longer than the connection timeout."""


class ReadTimeout(TimeoutError_):
    """The server did not answer within the network (read) timeout or request deadline."""


class PoolTimeout(TimeoutError_):
    """No connection became free within the pool timeout (asyncio client)."""


class ProtocolError(TransportError):
    """The server's answer broke HTTP or Triton's framing."""


class _Reset(TransportError, ConnectionResetError):
    """The server closed or reset the connection (also a ``ConnectionResetError``)."""


class _Unresolvable(ConnectError, socket.gaierror):
    """The host name did not resolve (also a ``socket.gaierror``, as tritonclient raised)."""


class _TLSFailure(ConnectError, ssl.SSLError):
    """The TLS handshake failed (also an ``ssl.SSLError``, as tritonclient raised)."""


class _InvalidArgument(InferenceServerException, ValueError):
    """An argument that cannot be put on the wire (also a ``ValueError``, as before)."""


class _InvalidType(InferenceServerException, TypeError):
    """An argument of the wrong type (also a ``TypeError``, as before)."""


class ClientClosedError(InferenceServerException, RuntimeError):
    """The client was used after ``close()`` (also a ``RuntimeError``, as before)."""


class RequestCancelled(InferenceServerException):
    """The caller cancelled the request (``InferAsyncRequest.cancel()``); its connection
    was closed, which the bundled server turns into Triton's cancellation."""


class ServerError(InferenceServerException):
    """The server answered with a non-200 HTTP status."""


class BadRequestError(ServerError):
    """HTTP 400."""


class ForbiddenError(ServerError):
    """HTTP 403 (restricted API)."""


class NotFoundError(ServerError):
    """HTTP 404 (unknown model, version, region or path)."""


class ServerInternalError(ServerError):
    """HTTP 500."""


class NotImplementedError_(ServerError):
    """HTTP 501."""


class ServiceUnavailableError(ServerError):
    """HTTP 503 (e.g. queue full, model control disabled)."""


_BY_STATUS: dict[int, type[ServerError]] = {
    400: BadRequestError,
    403: ForbiddenError,
    404: NotFoundError,
    500: ServerInternalError,
    501: NotImplementedError_,
    503: ServiceUnavailableError,
}


def server_error(status: int, msg: str | None, debug_details: str | None = None) -> ServerError:
    """The typed exception for an HTTP error status (``str(e)`` is ``"[<status>] <msg>"``).

    Built with keyword arguments, as tritonclient builds it: ``args`` stays empty, so a
    ``None`` message (``{"error": null}``) reads ``"[<status>] "`` as before.
    """
    cls = _BY_STATUS.get(status, ServerError)
    return cls(msg=msg, status=str(status), debug_details=debug_details)


def raise_error(msg: str) -> None:
    """Raise ``InferenceServerException(msg)`` without exception context."""
    raise InferenceServerException(msg=msg) from None


def transport_error(exc: BaseException, url: str, *, connecting: bool) -> TransportError:
    """The typed error for an ``OSError`` raised while talking to ``url``.

    The message names the URL and keeps the original text; the original exception is
    meant to be chained by the caller (``raise transport_error(e, url, ...) from e``).
    """
    what = "connect to" if connecting else "talk to"
    text = f"failed to {what} {url}: {exc or type(exc).__name__}"
    if isinstance(exc, builtins.TimeoutError):
        return (ConnectTimeout if connecting else ReadTimeout)(text)
    if isinstance(exc, ConnectionRefusedError):
        return _Refused(text)
    if isinstance(exc, socket.gaierror):
        return _Unresolvable(text)
    if isinstance(exc, ssl.SSLError):
        return _TLSFailure(text)
    if isinstance(exc, (ConnectionResetError, ConnectionAbortedError, BrokenPipeError)):
        return _Reset(text)
    if connecting:
        return ConnectError(text)
    return TransportError(text)
