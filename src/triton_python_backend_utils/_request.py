"""Requests, responses, the response sender and BLS response iterators."""

from __future__ import annotations

import asyncio
import json
import operator
import threading
from typing import TYPE_CHECKING, Any, Protocol

from . import _runtime
from ._errors import TritonError, TritonModelException, bind_call, invoked_with, pybind_repr
from ._helpers import (
    TRITONSERVER_REQUEST_RELEASE_ALL,
    TRITONSERVER_RESPONSE_COMPLETE_FINAL,
    MemoryType,
)
from ._tensor import Tensor

__all__ = [
    "InferenceRequest",
    "InferenceResponse",
    "InferenceResponseSender",
    "InferenceTrace",
    "PreferredMemory",
    "RequestLink",
    "ResponseIterator",
]


class RequestLink(Protocol):
    """How a server-side request reaches back to the server (implemented by the backend)."""

    decoupled: bool

    def deliver(self, response: InferenceResponse | None, final: bool) -> None:
        """Hand a response (and/or the FINAL flag) to the server."""
        ...

    def fail(self, message: str) -> None:
        """Answer with a final error: the model failed (raised, returned a bad value)."""
        ...

    def is_cancelled(self) -> bool:
        """Whether the server cancelled the request."""
        ...


def _check_parameters(parameters: Any, not_a_dict: str) -> dict[str, bool | int | str]:
    """``parameters`` checked as Triton's stub checks them; ``not_a_dict``: the error for
    a value that is no dict, with ``{}`` for its type."""
    if parameters is None:
        return {}
    if not isinstance(parameters, dict):
        raise TritonModelException(not_a_dict.format(type(parameters)))
    for k, v in parameters.items():
        if not isinstance(k, str):
            raise TritonModelException(
                f"Expect parameters keys to have type str, found type {type(k)}"
            )
        if not isinstance(v, (bool, int, str)):
            raise TritonModelException(
                f"Expect parameters values to have type bool/int/str, found type {type(v)}"
            )
    return dict(parameters)


# ----------------------------------------------------------------------------- responses


_RESPONSE_ARGS = (
    "__init__(): incompatible constructor arguments. The following argument types are "
    "supported:\n    1. c_python_backend_utils.InferenceResponse(output_tensors: "
    "List[c_python_backend_utils.Tensor] = [], error: c_python_backend_utils.TritonError = "
    "None, parameters: object = None)\n"
)
_RESPONSE_PARAMS = ("output_tensors", "error", "parameters")
_RESPONSE_DEFAULTS: dict[str, Any] = {"output_tensors": [], "error": None, "parameters": None}


class InferenceResponse:
    """A model's answer to one request: output tensors, or an error.

    ``InferenceResponse(output_tensors=[], error=None, parameters=None)``; with an error,
    the tensors are not sent. ``parameters`` (a dict of bool/int/str) is a Triton 2.52+
    feature; the generate endpoints show them in each response.
    """

    __slots__ = ("_error", "_outputs", "_parameters")
    _outputs: list[Tensor]
    _error: TritonError | None
    _parameters: dict[str, bool | int | str]

    if TYPE_CHECKING:

        def __init__(
            self,
            output_tensors: list[Tensor] | tuple[Tensor, ...] = [],  # noqa: B006
            error: TritonError | None = None,
            parameters: dict[str, bool | int | str] | None = None,
        ) -> None: ...

    else:

        def __init__(self, *args, **kwargs):
            output_tensors, error, parameters = bind_call(
                args, kwargs, _RESPONSE_PARAMS, _RESPONSE_DEFAULTS, _RESPONSE_ARGS
            )
            if (
                not isinstance(output_tensors, (list, tuple))
                or (error is not None and not isinstance(error, TritonError))
                or any(t is not None and not isinstance(t, Tensor) for t in output_tensors)
            ):
                raise TypeError(_RESPONSE_ARGS + invoked_with(args, kwargs))
            if any(t is None for t in output_tensors):
                raise TritonModelException(
                    "Output tensor for inference response should not be empty."
                )
            self._outputs = list(output_tensors)
            self._error = error
            self._parameters = _check_parameters(
                parameters, "Response parameters must be a dictionary, found type {}"
            )

    def output_tensors(self) -> list[Tensor]:
        """The output tensors."""
        return self._outputs

    def has_error(self) -> bool:
        """Whether the response carries an error."""
        return self._error is not None

    def error(self) -> TritonError | None:
        """The error, or None."""
        return self._error

    def parameters(self) -> str:
        """The response parameters as a JSON object text."""
        return json.dumps(self._parameters)

    def __repr__(self) -> str:
        return pybind_repr(self, "InferenceResponse")


_SEND_ARGS = (
    "send(): incompatible function arguments. The following argument types are supported:"
    "\n    1. (self: c_python_backend_utils.InferenceResponseSender, response: "
    "c_python_backend_utils.InferenceResponse = None, flags: int = 0) -> None\n"
)
_SEND_PARAMS = ("self", "response", "flags")
_SEND_DEFAULTS: dict[str, Any] = {"response": None, "flags": 0}


def _c_int(value: Any, low: int, high: int) -> int | None:
    """``value`` as pybind11 takes it for a C integer argument in ``[low, high)`` (None
    where it does not): an int (a bool too) or an object with ``__index__``, else, a float
    aside, any number ``int()`` reads (``np.float32(1)`` is 1); then in range."""
    if isinstance(value, float):
        return None
    kind = type(value)
    try:
        if isinstance(value, int) or hasattr(kind, "__index__"):
            number = operator.index(value)
        elif hasattr(kind, "__int__") or hasattr(kind, "__float__"):
            number = int(value)
        else:
            return None
    except (TypeError, ValueError, OverflowError):
        return None
    return number if low <= number < high else None


def _c_uint32(value: Any) -> int | None:
    """``value`` as pybind11 takes it for a C ``uint32_t`` argument (None where it does
    not)."""
    return _c_int(value, 0, 2**32)


def _c_bool(value: Any) -> bool | None:
    """``value`` as pybind11 takes it for a C ``bool`` argument (None where it does not):
    True, False, or an object of a type with ``__bool__`` (a number); not None, a list or
    a str."""
    if value is None or not hasattr(type(value), "__bool__"):
        return None
    try:
        return bool(value)
    except (TypeError, ValueError):
        return None


def _c_str(value: Any) -> str | None:
    """``value`` as pybind11 takes it for a C++ string argument: a str, or bytes and
    bytearray read as UTF-8 (None for anything else)."""
    if isinstance(value, str):
        return str(value)
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "replace")
    return None


def _c_list(value: Any) -> list[Any] | None:
    """``value`` as pybind11 takes it for a C++ vector argument: the items of a sequence
    (a list, tuple, deque, NumPy array, range), not of a str, bytes, dict, set or
    iterator (None for those)."""
    if isinstance(value, (str, bytes, dict)):
        return None
    kind = type(value)
    if not (hasattr(kind, "__getitem__") and hasattr(kind, "__len__")):
        return None
    try:
        return list(value)
    except TypeError:
        return None


class InferenceResponseSender:
    """Sends responses for one request; get it with ``request.get_response_sender()``.

    ``send(response=None, flags=0)`` from any thread, before or after ``execute``
    returns; ``flags=TRITONSERVER_RESPONSE_COMPLETE_FINAL`` closes the request.
    Non-decoupled models may send one response and the FINAL flag (the response reaches
    the client with the FINAL flag).
    """

    __slots__ = ("_closed", "_link", "_lock", "_pending", "_sent")

    def __init__(self, link: RequestLink | None) -> None:
        self._link = link
        self._lock = threading.Lock()
        self._sent = 0
        self._closed = False
        self._pending: InferenceResponse | None = None

    if TYPE_CHECKING:

        def send(self, response: InferenceResponse | None = None, flags: int = 0) -> None: ...

    else:

        def send(self, *args, **kwargs):
            """Send ``response`` and/or the FINAL flag."""
            _, response, flags = bind_call(
                (self, *args), kwargs, _SEND_PARAMS, _SEND_DEFAULTS, _SEND_ARGS
            )
            flags = _c_uint32(flags)
            if flags is None or (
                response is not None and not isinstance(response, InferenceResponse)
            ):
                raise TypeError(_SEND_ARGS + invoked_with((self, *args), kwargs))
            if flags not in (0, TRITONSERVER_RESPONSE_COMPLETE_FINAL):
                raise TritonModelException("Unable to send response. Unsupported flag provided.")
            if flags == 0 and response is None:
                raise TritonModelException(
                    "Inference Response object must be provided when the response flags is "
                    "set to zero."
                )
            self._send(response, flags == TRITONSERVER_RESPONSE_COMPLETE_FINAL)

    def _send(self, response: InferenceResponse | None, final: bool) -> None:
        link = self._link
        if link is None:
            raise TritonModelException(
                "Unable to send response. Response sender has no reference to the decoupled "
                "state of the model."
            )
        with self._lock:
            if self._closed:
                raise TritonModelException(
                    "Unable to send response. Response sender has been closed."
                )
            if not link.decoupled:
                if response is not None and self._sent:
                    raise TritonModelException(
                        "Unable to send response. Non-decoupled model cannot send more than one "
                        "response."
                    )
                if response is None and not self._sent:
                    raise TritonModelException(
                        "Unable to send response. Non-decoupled model cannot send complete final "
                        "before sending a response."
                    )
            if response is not None:
                self._sent += 1
            if final:
                self._closed = True
            if not link.decoupled:
                if not final:
                    self._pending = response
                    return
                if response is None:
                    response, self._pending = self._pending, None
            link.deliver(response, final)

    def __repr__(self) -> str:
        return pybind_repr(self, "InferenceResponseSender")

    def is_cancelled(self) -> bool:
        """Whether the request was cancelled (its responses are then dropped)."""
        return self._link is not None and self._link.is_cancelled()


# ----------------------------------------------------------------------------- misc


class InferenceTrace:
    """The trace of a request, as ``request.trace()`` gives it.

    ``get_context()`` is the request's trace context as a JSON object text (OpenTelemetry
    mode: ``{"traceparent": "00-<trace id>-<span id>-01"}``), or None when the request is
    not traced or the server traces in Triton's mode. Passed as ``trace=`` to a BLS
    ``InferenceRequest``, it makes the BLS request's trace a child of this one.
    """

    __slots__ = ("_context", "_id")

    def __init__(self) -> None:
        self._id = 0
        self._context: str | None = None

    @classmethod
    def _of(cls, handle: tuple[int, str | None] | None) -> InferenceTrace:
        """The trace the server handed over as ``(trace id, context)`` (None: untraced)."""
        trace = cls()
        if handle is not None:
            trace._id, trace._context = handle
        return trace

    def _handle(self) -> tuple[int, str | None] | None:
        return (self._id, self._context) if self._id else None

    def get_context(self) -> str | None:
        return self._context


class PreferredMemory:
    """Where BLS outputs should live (CPU-only here: accepted, not used). As in Triton,
    it shows model code no attributes."""

    __slots__ = ("_device_id", "_memory_type")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kind, device = bind_call(args, kwargs, _PM_NAMES, {"preferred_device_id": 0}, _PM_ARGS)
        if not isinstance(kind, MemoryType) or not (
            isinstance(device, int) and -(2**63) <= device < 2**63
        ):
            raise TypeError(_PM_ARGS + invoked_with(args, kwargs))
        self._memory_type = kind
        self._device_id = device


_PM_NAMES = ("preferred_memory_type", "preferred_device_id")
_PM_ARGS = (
    "__init__(): incompatible constructor arguments. The following argument types are "
    "supported:\n    1. c_python_backend_utils.PreferredMemory(preferred_memory_type: "
    "triton::backend::python::PreferredMemory::MemoryType, preferred_device_id: int = 0)\n"
)


class ResponseIterator:
    """The responses of ``exec(decoupled=True)``, as the callee sends them.

    Iterating blocks until the next response. A callee ending with a bare FINAL flag
    yields one last response without outputs. Once the final response has been taken,
    iterating again replays the responses; before that, a new ``for`` loop (or
    ``list()``) goes on from the next response, as in Triton.
    """

    def __init__(self, stream: _runtime.ResponseStream) -> None:
        self._stream = stream
        self._seen: list[InferenceResponse] = []
        self._index = 0
        self._done = False

    def __iter__(self) -> ResponseIterator:
        if self._done:
            self._index = 0
        return self

    def _take(self, item: _runtime.StreamItem) -> InferenceResponse:
        response, final = item
        if response is None:
            response = InferenceResponse()
        if final:
            self._done = True
        self._seen.append(response)
        return response

    def __next__(self) -> InferenceResponse:
        if self._index < len(self._seen):
            self._index += 1
            return self._seen[self._index - 1]
        if self._done:
            raise StopIteration
        response = self._take(self._stream.get())
        self._index += 1
        return response

    async def _first(self) -> ResponseIterator:
        self._take(await self._stream.aget())
        return self

    def cancel(self) -> None:
        """Ask the callee to stop (its request becomes cancelled)."""
        hook = self._stream.cancel_hook
        if hook is not None and not self._done:
            hook()


# ----------------------------------------------------------------------------- requests

#: pybind11's words for an integer correlation id outside uint64_t
_UNCAST = (
    "Unable to cast Python instance to C++ type (#define PYBIND11_DETAILED_ERROR_MESSAGES or "
    "compile in debug mode for details)"
)
#: the defaults pybind11 shows by address in the constructor's signature
_SHOWN_DEFAULTS = (object(), object())
_REQUIRED = (
    "__init__(): incompatible constructor arguments. The following argument types are "
    "supported:\n    1. c_python_backend_utils.InferenceRequest(request_id: str = '', "
    "correlation_id: object = 0, inputs: List[triton::backend::python::PbTensor], "
    "requested_output_names: List[str], model_name: str, model_version: int = -1, flags: "
    "int = 0, timeout: int = 0, preferred_memory: c_python_backend_utils.PreferredMemory = "
    f"<c_python_backend_utils.PreferredMemory object at {id(_SHOWN_DEFAULTS[0]):#x}>, trace: "
    "c_python_backend_utils.InferenceTrace = <c_python_backend_utils.InferenceTrace object "
    f"at {id(_SHOWN_DEFAULTS[1]):#x}>, parameters: object = None)\n"
)
#: an argument left out (pybind11 refuses an explicit None for these)
_DEFAULT: Any = object()
_REQUEST_PARAMS = (
    "request_id", "correlation_id", "inputs", "requested_output_names", "model_name",
    "model_version", "flags", "timeout", "preferred_memory", "trace", "parameters",
)  # fmt: skip
_REQUEST_DEFAULTS: dict[str, Any] = {
    "request_id": "", "correlation_id": 0, "model_version": -1, "flags": 0, "timeout": 0,
    "preferred_memory": _DEFAULT, "trace": _DEFAULT, "parameters": None,
}  # fmt: skip


class InferenceRequest:
    """A request handed to ``execute``, or built by a model for a BLS call.

    BLS: ``InferenceRequest(model_name=..., inputs=[...], requested_output_names=[...],
    request_id="", correlation_id=0, model_version=-1, flags=0, timeout=0 (µs),
    preferred_memory=None, trace=None, parameters=None)``, then ``exec()`` or
    ``await async_exec()``.
    """

    __slots__ = (
        "__weakref__",
        "_correlation_id",
        "_flags",
        "_handle",
        "_inputs",
        "_link",
        "_model_name",
        "_model_version",
        "_param_dict",
        "_parameters",
        "_release_flags",
        "_request_id",
        "_requested",
        "_sender",
        "_timeout",
        "_trace",
    )
    _request_id: str
    _correlation_id: int | str
    _requested: set[str]
    _model_name: str
    _model_version: int
    _flags: int
    _timeout: int

    if TYPE_CHECKING:

        def __init__(
            self,
            request_id: str = "",
            correlation_id: int | str = 0,
            inputs: list[Tensor] | None = None,
            requested_output_names: list[str] | None = None,
            model_name: str | bytes | None = None,
            model_version: int = -1,
            flags: int = 0,
            timeout: int = 0,
            preferred_memory: PreferredMemory | None = None,
            trace: InferenceTrace | None = None,
            parameters: dict[str, bool | int | str] | None = None,
        ) -> None: ...

    else:

        def __init__(self, *args, **kwargs):
            self._build(args, kwargs, *bind_call(
                args, kwargs, _REQUEST_PARAMS, _REQUEST_DEFAULTS, _REQUIRED))  # fmt: skip

    def _build(
        self,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        request_id: Any,
        correlation_id: Any,
        inputs: Any,
        requested_output_names: Any,
        model_name: Any,
        model_version: Any,
        flags: Any,
        timeout: Any,
        preferred_memory: Any,
        trace: Any,
        parameters: Any,
    ) -> None:
        # each argument converted as pybind11 converts it for the stub's C++ types
        request_id = _c_str(request_id)
        model_name = _c_str(model_name)
        inputs = _c_list(inputs)
        names = _c_list(requested_output_names)
        requested = None if names is None else [_c_str(n) for n in names]
        model_version = _c_int(model_version, -(2**63), 2**63)
        flags = _c_uint32(flags)
        timeout = _c_int(timeout, 0, 2**64)
        if (
            correlation_id is None
            or request_id is None
            or model_name is None
            or inputs is None
            or requested is None
            or any(n is None for n in requested)
            or model_version is None
            or flags is None
            or timeout is None
            or (
                preferred_memory is not _DEFAULT
                and not isinstance(preferred_memory, PreferredMemory)
            )
            or (trace is not _DEFAULT and not isinstance(trace, InferenceTrace))
            or any(t is not None and not isinstance(t, Tensor) for t in inputs)
        ):
            raise TypeError(_REQUIRED + invoked_with(args, kwargs))
        if isinstance(correlation_id, int):
            if not 0 <= correlation_id < 1 << 64:
                raise RuntimeError(_UNCAST)  # an integer id is a uint64_t in Triton
            correlation_id = int(correlation_id)
        elif isinstance(correlation_id, str):
            correlation_id = str(correlation_id)
        else:
            raise TritonModelException("Correlation ID must be integer or string")
        if any(t is None for t in inputs):
            raise TritonModelException(
                f"Input tensor for request with id '{request_id}' and model name "
                f"'{model_name}' should not be empty."
            )
        for n in requested:
            if n == "":
                raise TritonModelException(
                    f"Requested output name for request with id '{request_id}' and model "
                    f"name '{model_name}' should not be empty."
                )
        params = _check_parameters(
            parameters,
            "Expect N8pybind114dictE, got {}",  # (pybind11's words, as the stub's)
        )
        self._request_id = request_id
        self._correlation_id = correlation_id
        self._inputs = list(inputs)
        self._requested = {n for n in requested if n is not None}
        self._model_name = model_name
        self._model_version = model_version
        self._flags = flags
        self._timeout = timeout
        self._param_dict = params
        self._parameters = json.dumps(params)
        self._release_flags = TRITONSERVER_REQUEST_RELEASE_ALL
        self._sender = InferenceResponseSender(None)
        self._link: RequestLink | None = None
        self._handle: Any = None
        self._trace = trace if isinstance(trace, InferenceTrace) else InferenceTrace()

    @classmethod
    def _server_side(
        cls,
        request_id: str,
        correlation_id: int | str,
        inputs: list[Tensor],
        requested: set[str],
        flags: int,
        timeout: int,
        parameters: str,
        link: RequestLink,
        trace: tuple[int, str | None] | None = None,
    ) -> InferenceRequest:
        """A request as ``execute`` receives it (built by the backend); ``trace``: the
        server's ``(trace id, context)`` of a traced request."""
        self = cls.__new__(cls)
        self._request_id = request_id
        self._correlation_id = correlation_id
        self._inputs = inputs
        self._requested = requested
        self._model_name = ""
        self._model_version = -1
        self._flags = flags
        self._timeout = timeout
        self._param_dict = {}
        self._parameters = parameters
        self._release_flags = TRITONSERVER_REQUEST_RELEASE_ALL
        self._sender = InferenceResponseSender(link)
        self._link = link
        self._handle = None
        self._trace = InferenceTrace._of(trace)
        return self

    # ------------------------------------------------------------------ accessors

    def inputs(self) -> list[Tensor]:
        """The input tensors, in the order the client sent them."""
        return self._inputs

    def request_id(self) -> str:
        """The request id (``""`` when none was given)."""
        return self._request_id

    def correlation_id(self) -> int | str:
        """The sequence id (0 outside sequences; a str for string sequence ids)."""
        return self._correlation_id

    def flags(self) -> int:
        """Sequence flags: SEQUENCE_START=1 | SEQUENCE_END=2."""
        return self._flags

    def set_flags(self, flags: int) -> None:
        """Overwrite the flags (for BLS requests)."""
        self._flags = flags

    def parameters(self) -> str:
        """The request parameters as a JSON object text."""
        return self._parameters

    def requested_output_names(self) -> set[str]:
        """The outputs the client asked for (all config outputs when it asked for none)."""
        return self._requested

    def timeout(self) -> int:
        """The client's timeout in microseconds (0: none)."""
        return self._timeout

    def is_cancelled(self) -> bool:
        """Whether the request was cancelled (always False for BLS-built requests)."""
        return self._link is not None and self._link.is_cancelled()

    def get_response_sender(self) -> InferenceResponseSender:
        """This request's response sender (always the same object)."""
        return self._sender

    def set_release_flags(self, flags: int) -> None:
        """TRITONSERVER_REQUEST_RELEASE_RESCHEDULE queues this request again after execute
        (``sequence_batching { iterative_sequence: true }`` models)."""
        self._release_flags = flags

    def trace(self) -> InferenceTrace:
        """The request's trace (see :class:`InferenceTrace`)."""
        return self._trace

    # ------------------------------------------------------------------ BLS

    if TYPE_CHECKING:

        def exec(self, decoupled: bool = False) -> Any: ...

        def async_exec(self, decoupled: bool = False) -> asyncio.Future[Any]: ...

    else:

        def exec(*args, **kwargs):
            """Run this request on ``model_name`` and wait: an InferenceResponse, or with
            ``decoupled=True`` an iterator of them. Errors come back as error responses."""
            self, decoupled = _exec_args("exec", args, kwargs)
            stream = self._start(decoupled)
            if decoupled:
                return ResponseIterator(stream)
            return _single(stream.get)

        def async_exec(*args, **kwargs):
            """Like :meth:`exec`, as an awaitable; call it inside ``async def execute``."""
            self, decoupled = _exec_args("async_exec", args, kwargs)
            loop = asyncio.get_running_loop()
            stream = self._start(decoupled)
            if decoupled:
                return asyncio.ensure_future(ResponseIterator(stream)._first(), loop=loop)
            return asyncio.ensure_future(_single_async(stream), loop=loop)

    def _start(self, decoupled: bool) -> _runtime.ResponseStream:
        runtime = _runtime.current()
        runtime.check_bls()
        refusal = self._refusal()
        if refusal is not None:  # refused with the error Triton gives
            stream = _runtime.ResponseStream()
            stream.push(InferenceResponse(error=refusal), True)
            return stream
        return runtime.infer(self, decoupled)

    def _refusal(self) -> TritonError | None:
        """The error Triton answers this request with before it runs: a duplicate input
        name, a parameter integer outside int64."""
        seen: set[str] = set()
        for tensor in self._inputs:
            if tensor._name in seen:
                return self._duplicate(tensor._name)
            seen.add(tensor._name)
        for value in self._param_dict.values():
            if isinstance(value, int) and not -(2**63) <= value < 2**63:
                return TritonError(
                    f"Model {self._model_name} - Error when running inference: Unsupported "
                    "value type on parameters",
                    TritonError.INVALID_ARG,
                )
        return None

    def _duplicate(self, name: str) -> TritonError:
        return TritonError(
            f"Model {self._model_name} - Error when running inference: [request id: "
            f"{self._request_id or '<id_unknown>'}] input '{name}' already exists in request",
            TritonError.INVALID_ARG,
        )

    def __repr__(self) -> str:
        return pybind_repr(self, "InferenceRequest")


def _exec_args(
    method: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[InferenceRequest, bool]:
    """The request and ``decoupled`` of an ``exec``/``async_exec`` call, or the TypeError
    pybind11 raises for arguments that do not fit ``(self, decoupled: bool = False)``."""
    error = (
        f"{method}(): incompatible function arguments. The following argument types are "
        "supported:\n    1. (self: c_python_backend_utils.InferenceRequest, decoupled: bool = "
        "False) -> object\n"
    )
    self, decoupled = bind_call(args, kwargs, ("self", "decoupled"), {"decoupled": False}, error)
    flag = _c_bool(decoupled)
    if not isinstance(self, InferenceRequest) or flag is None:
        raise TypeError(error + invoked_with(args, kwargs))
    return self, flag


def _single(get: Any) -> InferenceResponse:
    first: InferenceResponse | None = None
    while True:
        response, final = get()
        if first is None and response is not None:
            first = response
        if final:
            return first if first is not None else InferenceResponse()


async def _single_async(stream: _runtime.ResponseStream) -> InferenceResponse:
    first: InferenceResponse | None = None
    while True:
        response, final = await stream.aget()
        if first is None and response is not None:
            first = response
        if final:
            return first if first is not None else InferenceResponse()
