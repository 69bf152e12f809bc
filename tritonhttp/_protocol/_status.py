"""Map an HTTP error answer to the exception tritonclient raises (typed by status)."""

from __future__ import annotations

from .._errors import ServerError, server_error
from ._json import loads

__all__ = ["error_for"]

_EMPTY = "client received an empty response from the server."


def error_for(status: int, body: bytes | bytearray | memoryview) -> ServerError | None:
    """None for 200; otherwise the exception for ``status`` and the response ``body``.

    Like tritonclient: a JSON object's ``error`` value becomes the message; an empty body
    gets a fixed message; anything else reports the decoding problem with the body as
    the debug details. ``str(e)`` is ``"[<status>] <message>"``.
    """
    if status == 200:
        return None
    text = None
    try:
        text = bytes(body).decode("utf-8")
        message = loads(text)["error"] if text else _EMPTY
        return server_error(status, message)
    except Exception as e:
        return server_error(
            status,
            "an exception occurred in the client while decoding the response: "
            f"{e}\nresponse: {text}",
            text,
        )
