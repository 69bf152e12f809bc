"""Errors carried through the core, with Triton's error codes and their HTTP statuses."""

from __future__ import annotations

import enum

__all__ = ["BackendError", "Code", "CoreError"]


class Code(enum.IntEnum):
    """TRITONSERVER_Error codes (the numbers pb_utils.TritonError uses too)."""

    UNKNOWN = 0
    INTERNAL = 1
    NOT_FOUND = 2
    INVALID_ARG = 3
    UNAVAILABLE = 4
    UNSUPPORTED = 5
    ALREADY_EXISTS = 6
    CANCELLED = 7

    @property
    def http_status(self) -> int:
        return _HTTP.get(self, 400)

    @property
    def label(self) -> str:
        """The prefix Triton's status strings use (``Internal``, ``Invalid argument``...)."""
        return _LABEL[self]


_HTTP = {
    Code.INTERNAL: 500,
    Code.NOT_FOUND: 404,
    Code.UNAVAILABLE: 503,
    Code.UNSUPPORTED: 501,
}
_LABEL = {
    Code.UNKNOWN: "Unknown",
    Code.INTERNAL: "Internal",
    Code.NOT_FOUND: "Not found",
    Code.INVALID_ARG: "Invalid argument",
    Code.UNAVAILABLE: "Unavailable",
    Code.UNSUPPORTED: "Unsupported",
    Code.ALREADY_EXISTS: "Already exists",
    Code.CANCELLED: "Cancelled",
}


class CoreError(Exception):
    """A failure with a Triton error code and the exact message a client sees."""

    def __init__(self, message: str, code: Code = Code.INVALID_ARG) -> None:
        super().__init__(message)
        self.message = message
        self.code = code

    @property
    def http_status(self) -> int:
        return self.code.http_status

    def __repr__(self) -> str:
        return f"CoreError({self.message!r}, {self.code.name})"


class BackendError(CoreError):
    """A request that passed admission but that Triton's backend fails: Triton answers it
    as text/plain (no request-id prefix) and counts a failed request (reason BACKEND)."""
