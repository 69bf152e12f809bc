"""Authentication plugins (``tritonhttp.auth`` mirrors ``tritonclient.http.auth``)."""

from __future__ import annotations

import base64 as _base64
import typing as _typing

from ._plugin import InferenceServerClientPlugin as _Plugin

if _typing.TYPE_CHECKING:
    from ._plugin import Request

__all__ = ["BasicAuth"]


class BasicAuth(_Plugin):
    """HTTP Basic authentication: sets the ``authorization`` header on every request.

    ``username`` and ``password`` must be ASCII (``UnicodeEncodeError`` otherwise).
    """

    def __init__(self, username: str, password: str) -> None:
        token = _base64.b64encode(username.encode("ascii") + b":" + password.encode("ascii"))
        self._auth_string = "Basic " + token.decode("ascii")

    def __call__(self, request: Request) -> None:
        request.headers["authorization"] = self._auth_string

    def __repr__(self) -> str:
        return "BasicAuth(<credentials hidden>)"
