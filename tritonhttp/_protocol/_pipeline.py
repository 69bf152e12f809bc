"""From a :class:`Call` to request bytes, and from a response to the method's result.

This is tritonclient's request pipeline without the I/O: the caller's headers (copied,
never modified) plus the library's, the plugin, header validation, the request target,
verbose printing, the request head; then, for the answer, the error check and the
result by kind. A transport only has to move :attr:`Prepared.head` and
:attr:`Prepared.body` and hand back status, headers and body.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .._errors import raise_error
from .._plugin import Request
from ._endpoints import GENERATE, JSON, NONE, PROBE, RESULT, Call
from ._generate import generate_result
from ._http import encode_request_head, header_fields
from ._infer import Buffer, ParsedInferResponse, parse_infer_response
from ._json import loads
from ._status import error_for
from ._urls import request_target

__all__ = ["Prepared", "RequestContext", "interpret"]

_TRANSFER_ENCODING_MESSAGE = (
    "Unsupported HTTP header: 'Transfer-Encoding' is not supported in the Python client "
    "library. Use raw HTTP request libraries or the C++ client instead for this header."
)


class Prepared:
    """A request ready for the wire."""

    __slots__ = ("body", "fields", "head", "idempotent", "method", "size", "target")

    def __init__(
        self,
        method: str,
        target: str,
        fields: list[tuple[str, str]] | None,
        head: bytes,
        body: list[Buffer],
        size: int,
    ) -> None:
        self.method = method
        self.target = target
        self.fields = fields  # None on the fast path (only the fixed layout)
        self.head = head
        self.body = body
        self.size = size
        self.idempotent = method == "GET"


class RequestContext:
    """Per-client settings of the pipeline: where requests go and how they are written."""

    __slots__ = (
        "_fast",
        "_fixed_tail",
        "authorization",
        "base_path",
        "head_encoding",
        "host",
        "printed_origin",
        "user_agent",
        "verbose",
    )

    def __init__(
        self,
        base_path: str,
        host: str,
        user_agent: str,
        verbose: bool,
        fields: bool = False,
        printed_origin: str = "",
        head_encoding: str = "latin-1",
        authorization: str | None = None,
    ) -> None:
        """``fields``: always fill :attr:`Prepared.fields` (for transports that take
        header lines rather than the request head); ``printed_origin``: what verbose
        output prints before the request target (the asyncio client prints full URLs);
        ``head_encoding``: how header values are written (the asyncio client: UTF-8);
        ``authorization``: an ``Authorization`` value sent unless the request has one
        (the asyncio client: credentials in its URL, as aiohttp sent them).
        """
        self.authorization = authorization
        self.head_encoding = head_encoding
        self.printed_origin = printed_origin
        # a query right after the host ("host:port?q=1") follows "/" on the request
        # line, as both tritonclient clients sent it
        self.base_path = "/" + base_path if base_path.startswith("?") else base_path
        self.host = host
        self.user_agent = user_agent
        self.verbose = verbose
        self._fast = not verbose and not fields
        self._fixed_tail = f"Host: {host}\r\n"
        if authorization is not None:
            self._fixed_tail = f"Authorization: {authorization}\r\n{self._fixed_tail}"

    def prepare(
        self,
        call: Call,
        headers: Mapping[str, Any] | None,
        query_params: Mapping[str, Any] | None,
        plugin: Callable[[Request], Any] | None,
    ) -> Prepared:
        """Build the request for ``call`` (the caller's ``headers`` are not modified).

        Raises ``InferenceServerException`` for a ``Transfer-Encoding`` header (checked
        after the plugin ran, as tritonclient does) and for invalid header names/values.
        """
        method = call.method
        size = call.size
        if not headers and plugin is None and query_params is None and self._fast:
            # Fast path: the fixed layout with the library headers only.
            extra = ""
            if call.headers:
                extra = "".join(f"{k}: {v}\r\n" for k, v in call.headers.items())
            length = f"Content-Length: {size}\r\n" if method == "POST" else ""
            target = f"{self.base_path}/{call.path}"
            head = (
                f"{method} {target} HTTP/1.1\r\nUser-Agent: {self.user_agent}\r\n"
                f"{extra}{self._fixed_tail}{length}\r\n"
            ).encode("latin-1")
            return Prepared(method, target, None, head, call.body, size)
        effective: dict[str, Any] = dict(headers) if headers else {}
        if call.headers:
            effective.update(call.headers)
        if plugin is not None:
            request = Request(effective)
            plugin(request)
            effective = request.headers
        if effective and any(
            isinstance(k, str) and k.lower() == "transfer-encoding" for k in effective
        ):
            raise_error(_TRANSFER_ENCODING_MESSAGE)
        target = request_target(self.base_path, call.path, query_params)
        if self.verbose:
            shown = self.printed_origin + target
            if method == "GET":
                print(f"GET {shown}, headers {effective}")
            else:
                body = b"".join(call.body) if call.kind == RESULT else call.printable
                print(f"POST {shown}, headers {effective}\n{body}")
        if self.authorization is not None and not any(
            isinstance(k, str) and k.lower() == "authorization" for k in effective
        ):
            effective = {**effective, "Authorization": self.authorization}
        fields = header_fields(
            self.user_agent, effective, self.host, size if method == "POST" else None
        )
        return Prepared(
            method,
            target,
            fields,
            encode_request_head(method, target, fields, self.head_encoding),
            call.body,
            size,
        )


def interpret(
    call: Call,
    status: int,
    body: Buffer,
    header: Callable[[str], str | None],
    verbose: bool,
) -> Any:
    """The method's result for the answer ``(status, body)``; raises the server's error.

    PROBE -> bool (no error check); JSON -> parsed body; NONE -> None (prints the done
    message when verbose); RESULT -> :class:`ParsedInferResponse`; GENERATE -> the
    parsed answer (an error object in it is raised). ``header(name)`` looks up a
    response header.
    """
    kind = call.kind
    if kind == PROBE:
        return status == 200
    if kind == GENERATE:
        if verbose:
            print(bytes(body))
        return generate_result(status, body)
    error = error_for(status, body)
    if error is not None:
        raise error
    if kind == RESULT:
        result: ParsedInferResponse = parse_infer_response(
            body,
            header("Inference-Header-Content-Length"),
            header("Content-Encoding"),
            verbose,
        )
        return result
    if kind == NONE:
        if verbose and call.done_message:
            print(call.done_message)
        return None
    assert kind == JSON
    content = bytes(body)
    if verbose:
        print(content)
    return loads(content)
