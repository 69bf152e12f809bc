"""The generate extension: ``/generate`` (one JSON object) and ``/generate_stream`` (SSE)."""

from __future__ import annotations

import asyncio
import contextlib
import math
from typing import Any

import rapidjson

from ..core._bridge import decoupled_responses
from ..core._core import ServerCore
from ..core._errors import Code, CoreError
from ..core._model import ModelVersion
from ..core._repo_files import parse_version
from ..core._trace import Trace, trace_queued
from ..core._types import InferRequest, InferResponse, InputTensor, OutputTensor
from ..support import _json
from ._answer import json_values
from ._http import (
    FirstWins,
    Receive,
    Scope,
    Send,
    bom_length,
    error_body,
    keep_first,
    parse_body,
    read_body,
    send_error,
)
from ._infer import _json_data

__all__ = ["handle_generate"]


class _Members(dict[str, Any]):
    """An object's first value of each member, and every member name as written."""

    names: list[str]


class _KeepNames(FirstWins):
    def end_object(self, pairs: list[tuple[str, Any]]) -> _Members:
        obj = _Members(keep_first(pairs))
        obj.names = [key for key, _ in pairs]
        return obj


_KEEP_NAMES = _KeepNames(number_mode=rapidjson.NM_NAN | rapidjson.NM_NATIVE)


def _names(obj: dict[str, Any]) -> list[str]:
    """``obj``'s member names, a repeated one as often as written (each lookup of it finds
    its first value: Triton's generate walks the names and looks each up)."""
    return obj.names if isinstance(obj, _Members) else list(obj)


def _parse_keeping_names(body: bytes | bytearray | memoryview) -> Any:
    """:func:`parse_body`, objects as :class:`_Members` where Python's parser can read the
    text (invalid UTF-8 in strings: plain objects, repeated names seen once)."""
    doc = parse_body(body)
    if isinstance(doc, dict):
        raw = bytes(body)[bom_length(body) :].partition(b"\0")[0]
        with contextlib.suppress(ValueError, UnicodeDecodeError):
            doc = _KEEP_NAMES(raw)
    return doc


def _derive_shape(dims: list[int], n: int, name: str) -> list[int]:
    shape = list(dims)
    rem = n
    for d in reversed(dims):
        if d != -1:
            if d == 0 or rem % d:
                raise CoreError(
                    f"The schema can not convert input '{name}' to tensor with proper shape"
                )
            rem //= d
    variable = [i for i, d in enumerate(dims) if d == -1]
    for i in variable:
        shape[i] = 1
    if variable:
        shape[variable[-1]] = rem
        rem = 1
    if rem != 1:
        raise CoreError(f"The schema can not convert input '{name}' to tensor with proper shape")
    return shape


def _scalar_or_list(out: OutputTensor) -> str:
    values = json_values(out.datatype, out.array).decode("utf-8", "surrogateescape")
    return values if out.array.size == 1 else "[" + values + "]"


async def handle_generate(
    core: ServerCore,
    scope: Scope,
    receive: Receive,
    send: Send,
    name: str,
    version: str,
    stream: bool,
) -> None:
    """Answer a request to ``/generate`` or (``stream``) ``/generate_stream`` of model
    ``name`` (of its ``version``, where given): its errors as JSON, else the model's
    responses."""
    trace: Trace | None = None
    try:
        if version:
            parse_version(version)
        model = core.repository.get(name, version)
        if core.tracer.active and not model.decoupled:
            trace = core.tracer.sample(name, model.version)
            if trace is not None:
                trace.stamp("HTTP_RECV_START", trace.start_ns)
        for k, v in scope["headers"]:
            if k == b"content-encoding" and v != b"identity":
                raise CoreError("Unsupported content-encoding, only 'identity' is supported.")
            if k == b"traceparent" and trace is not None:
                trace.context = v.decode("latin-1")
        doc = _parse_keeping_names(await read_body(receive))
        req = _build_request(model, doc)
        if trace is not None:
            trace.stamp("HTTP_RECV_END")
            req.trace = trace
            trace.request_id = req.id
        model.admit(req)
    except CoreError as e:
        await send_error(send, e)
        if trace is not None:
            trace.end()
        return
    if model.decoupled:
        await _send_decoupled(model, req, receive, send, stream)
        return
    try:
        trace_queued(req)
        response = await model.infer(req)
        status, body = _response_body(response, req, model)
        if trace is not None:
            trace.stamp("INFER_RESPONSE_COMPLETE")
            trace.stamp("REQUEST_END")
            trace.stamp("HTTP_SEND_START")
        await _start(send, stream, 200 if status == 200 else 400)
        if stream:
            body = b"data: " + body + b"\n\n"
        await send({"type": "http.response.body", "body": body, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
    finally:
        if trace is not None:
            trace.stamp("HTTP_SEND_END")
            trace.end()


#: a model's inputs by name: the shape its configuration declares (with the batch
#: dimension, -1, first where the model batches) and the wire datatype
_Schema = dict[str, tuple[list[int], str]]


def _schema(model: ModelVersion) -> _Schema:
    """``model``'s inputs, as the generate extension maps a request's members onto them."""
    assert model.config is not None
    batch = [-1] if model.config.max_batch_size > 0 else []
    from ..core._config import wire_datatype

    return {i.name: (batch + list(i.dims), wire_datatype(i.data_type)) for i in model.config.input}


def _build_request(model: ModelVersion, doc: Any) -> InferRequest:
    """The inference request that the generate body ``doc`` asks of ``model``: the members
    named as inputs are its input tensors, the others its parameters, as are the members of
    a ``parameters`` object."""
    req = InferRequest(id="", inputs={})
    schema = _schema(model)
    if not isinstance(doc, dict):
        raise CoreError("attempt to get members for non-object", Code.INTERNAL)
    if "id" in doc:  # the request id: the body's own "id" only, read as a C string
        if not isinstance(doc["id"], str):
            raise CoreError(
                "Unable to parse 'id': attempt to access JSON non-string as string",
                Code.INTERNAL,
            )
        req.id = doc["id"].partition("\0")[0]
    for key in _names(doc):
        value = doc[key]
        if key == "parameters":
            _put_parameters(req, schema, value)
        else:
            _put(req, schema, key, value, "")
    return req


def _put_parameters(req: InferRequest, schema: _Schema, value: Any) -> None:
    """Put the members of the body's ``parameters`` object into ``req`` (each error says
    it comes from there)."""
    if "parameters" in schema:
        raise CoreError("Keyword 'parameters' for nested schema also given as input tensor name")
    if not isinstance(value, dict):
        raise CoreError(
            "Expected JSON object for keyword: 'parameters': attempt to "
            "access JSON non-object as object",
            Code.INTERNAL,
        )
    prefix = "Converting keyword: 'parameters': "
    for key in _names(value):
        try:
            _put(req, schema, key, value[key], prefix)
        except CoreError as e:  # (every error here says where it is)
            if e.message.startswith(prefix):
                raise
            raise CoreError(prefix + e.message, e.code) from None


def _put(req: InferRequest, schema: _Schema, key: str, value: Any, prefix: str) -> None:
    """Put member ``key`` into ``req``: an input tensor where ``schema`` names an input so,
    else a parameter; ``prefix`` starts the messages of its errors."""
    if key in schema:
        if key in req.inputs:
            raise CoreError(
                f"{prefix}[request id: {req.id or '<id_unknown>'}] input '{key}' "
                "already exists in request"
            )
        dims, wire = schema[key]
        values = value if isinstance(value, list) else [value]
        shape = _derive_shape(dims, len(values), key)
        if wire in ("FP16", "BF16"):
            raise CoreError(
                f"{prefix}receiving {wire} data via JSON is not supported. "
                f"Please use the binary data format for input {key}"
            )
        arr = _json_data(values, wire, key, len(values))
        if arr.size == math.prod(shape):
            arr = arr.reshape(shape)
        # (else BYTES of nested lists that disagree with the shape: the model's admission
        # refuses them with Triton's text; numbers that do are refused as they parse)
        req.inputs[key] = InputTensor(key, wire, shape, array=arr)
        return
    if isinstance(value, str):
        req.parameters[key] = value.partition("\0")[0]  # (a C string)
    elif isinstance(value, (bool, float)):
        req.parameters[key] = value
    elif type(value) is int:
        req.parameters[key] = value if -(2**63) <= value < 2**63 else float(value)
    else:
        raise CoreError(
            f"{prefix}parameter '{key}' has invalid type. It should be either "
            "'int', 'bool', or 'string'."
        )


_ONE_RESPONSE = (
    "generate expects model to produce exactly 1 response, use generate stream for model "
    "that generates various number of responses"
)


async def _start(send: Send, stream: bool, status: int) -> None:
    content_type = b"text/event-stream; charset=utf-8" if stream else b"application/json"
    headers = [(b"content-type", content_type), (b"transfer-encoding", b"chunked")]
    await send({"type": "http.response.start", "status": status, "headers": headers})


def _response_body(
    response: InferResponse, req: InferRequest, model: ModelVersion
) -> tuple[int, bytes]:
    """(200 or 400, the JSON object) for one model response."""
    if response.error is not None:
        return 400, error_body(response.error.message)
    fields: dict[str, str] = {}
    for out in response.outputs:
        if out.datatype in ("FP16", "BF16"):
            return 400, error_body(f"sending {out.datatype} data via JSON is not supported")
        fields[out.name] = _scalar_or_list(out)
    for k, v in (response.parameters or {}).items():
        fields[k] = _json.dumps(v).decode()
    if req.id:
        fields["id"] = _json.escape_str(req.id)
    fields["model_name"] = _json.escape_str(model.name)
    fields["model_version"] = f'"{model.version}"'
    ordered = sorted(fields.items(), key=lambda kv: kv[0].encode())
    body = "{" + ",".join(f"{_json.escape_str(k)}:{v}" for k, v in ordered) + "}"
    return 200, body.encode("utf-8", "surrogateescape")


async def _watch_disconnect(receive: Receive, model: ModelVersion, req: InferRequest) -> None:
    """The client went away: the request is cancelled (dropped if still queued; the model
    sees ``is_cancelled()``) and what the model still sends is dropped."""
    while True:
        message = await receive()
        if message.get("type") == "http.disconnect":
            model.cancel(req)
            if req.response_stream is not None:
                req.response_stream.close()
            return


async def _send_decoupled(
    model: ModelVersion, req: InferRequest, receive: Receive, send: Send, stream: bool
) -> None:
    """Every response of a decoupled model: one SSE event each as it is sent
    (``generate_stream``), or the single response ``generate`` expects."""
    watcher = asyncio.ensure_future(_watch_disconnect(receive, model, req))
    started = False
    try:
        if not stream:
            responses = [r async for r, _ in decoupled_responses(model, req) if r is not None]
            # the status follows the first response, as Triton's does
            status = 400 if responses and responses[0].error is not None else 200
            if len(responses) != 1:
                body = error_body(_ONE_RESPONSE)
            else:
                status, body = _response_body(responses[0], req, model)
            await _start(send, False, status)
            await send({"type": "http.response.body", "body": body, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
            return
        async for response, _final in decoupled_responses(model, req):
            if response is None:
                continue
            status, body = _response_body(response, req, model)
            if not started:
                await _start(send, True, status)
                started = True
            await send(
                {
                    "type": "http.response.body",
                    "body": b"data: " + body + b"\n\n",
                    "more_body": True,
                }
            )
        if not started:
            await _start(send, True, 200)
        await send({"type": "http.response.body", "body": b""})
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
