"""The sans-IO protocol core shared by the sync client, the asyncio client and the CLI.

Nothing in this package touches a socket, a thread or an event loop: it turns calls
into request descriptions and bytes, and bytes back into responses, results and
exceptions. Transports (``tritonhttp._transport``, ``tritonhttp.aio``) sit on top.
"""

from ._endpoints import GENERATE, JSON, NONE, PROBE, RESULT, STREAM, Call, Endpoints
from ._generate import (
    EventStreamDecoder,
    EventStreamState,
    generate_body,
    generate_error,
    generate_result,
    stream_event,
)
from ._http import Response, ResponseReader, encode_request_head, header_fields
from ._infer import (
    Buffer,
    InferBody,
    ParsedInferResponse,
    build_infer_body,
    compress_body,
    parse_infer_response,
)
from ._json import JSONDecodeError, dumps, loads
from ._pipeline import Prepared, RequestContext, interpret
from ._status import error_for
from ._urls import ServerAddress, parse_server_url, query_string, quote_name, request_target

__all__ = [
    "GENERATE",
    "JSON",
    "NONE",
    "PROBE",
    "RESULT",
    "STREAM",
    "Buffer",
    "Call",
    "Endpoints",
    "EventStreamDecoder",
    "EventStreamState",
    "InferBody",
    "JSONDecodeError",
    "ParsedInferResponse",
    "Prepared",
    "RequestContext",
    "Response",
    "ResponseReader",
    "ServerAddress",
    "build_infer_body",
    "compress_body",
    "dumps",
    "encode_request_head",
    "error_for",
    "generate_body",
    "generate_error",
    "generate_result",
    "header_fields",
    "interpret",
    "loads",
    "parse_infer_response",
    "parse_server_url",
    "query_string",
    "quote_name",
    "request_target",
    "stream_event",
]
