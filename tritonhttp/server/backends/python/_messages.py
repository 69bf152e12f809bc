"""Every message between the server and a worker process, as a typed record, and their framing.

Each message is a :class:`~typing.NamedTuple`: its type is its kind, and both sides
dispatch on it (``match``). On the socket a message travels as the plain tuple
``(kind number, fields)`` (records nested inside it flattened the same way),
pickled and framed by a 4-byte little-endian length: pickling named tuples themselves
costs several times more than plain ones, and this channel carries every request.

Two messages are packed with :mod:`struct` instead, flagged by the top bit of their
frame's length: :class:`DoneAnswered`, the end of a one-request batch whose answer the
worker wrote to the client (the message most requests end with), and
:class:`ExecUnparsed` with its body inline (how most requests start when the worker
parses them).

Segment descriptors (:class:`Segment`) and client connections (:class:`Connection`)
come with a file descriptor on the second socket (``SCM_RIGHTS``, :mod:`._ipc`).

Standard library only (the worker imports this module too).
"""

from __future__ import annotations

import functools
import pickle
import struct
from collections.abc import Callable
from typing import Any, NamedTuple

__all__ = [
    "MAIN_THREAD",
    "AnsweredDesc",
    "AutoComplete",
    "AutoCompleted",
    "Bls",
    "BlsCancel",
    "BlsRequest",
    "BlsResponse",
    "Call",
    "CallResult",
    "Connection",
    "DeclinedDesc",
    "Done",
    "DoneAnswered",
    "DropConnection",
    "DropSegment",
    "ErrorDesc",
    "Exec",
    "ExecRequest",
    "ExecUnparsed",
    "ExecWithUnparsed",
    "FamilyDelete",
    "Final",
    "Fini",
    "FiniDone",
    "FrameReader",
    "Init",
    "InitError",
    "IsReady",
    "Log",
    "Message",
    "MetricDelete",
    "MetricOp",
    "OutputsDesc",
    "Ready",
    "ReadyAnswer",
    "RegionFd",
    "ResponseDesc",
    "Segment",
    "Setup",
    "Streamed",
    "encode",
    "encode_exec",
]

_LEN = struct.Struct("<I")
#: the top bit of a frame's length: the message is packed, not pickled
_PACKED = 1 << 31
#: the largest pickled message a frame can carry
MAX_FRAME = _PACKED - 1
#: a packed DoneAnswered: batch id, token (first byte: which packed message)
_DONE_ANSWERED = struct.Struct("<Bqq")
#: a packed ExecUnparsed: batch id, token, header length, key; the body follows
_EXEC_UNPARSED = struct.Struct("<Bqqqq")
_DONE_ANSWERED_TAG, _EXEC_UNPARSED_TAG = 1, 2
_new = tuple.__new__
_dumps = pickle.dumps
_PROTOCOL = pickle.HIGHEST_PROTOCOL

# ---------------------------------------------------------------- response descriptors


class ErrorDesc(NamedTuple):
    """A response that is an error (``code``: pb_utils' TritonError code)."""

    code: int
    message: str


class OutputsDesc(NamedTuple):
    """A response's output tensors (a block of :mod:`._ipc`) and parameters."""

    block: Any
    parameters: dict[str, Any] | None
    #: outputs the worker wrote into their client's region (``ExecRequest.dests``), not
    #: in ``block``: ``(position among the outputs, name, datatype, shape)``; None: none
    placed: list[tuple[int, str, str, tuple[int, ...]]] | None = None


class DeclinedDesc(NamedTuple):
    """The worker did not take a request handed to it unparsed (the front answers it)."""


class AnsweredDesc(NamedTuple):
    """The worker wrote the answer to the client itself; ``rest``: what it could not
    write yet (the server sends it)."""

    rest: bytes


ResponseDesc = ErrorDesc | OutputsDesc | AnsweredDesc | DeclinedDesc
_DESCS: tuple[type[ResponseDesc], ...] = (ErrorDesc, OutputsDesc, AnsweredDesc, DeclinedDesc)
_DESC_KIND: dict[type[Any], int] = {c: i for i, c in enumerate(_DESCS)}


def _desc_out(d: ResponseDesc | None) -> Any:
    return None if d is None else (_DESC_KIND[type(d)], tuple(d))


def _desc_in(w: Any) -> ResponseDesc | None:
    return None if w is None else _new(_DESCS[w[0]], w[1])


# ---------------------------------------------------------------- server -> worker


class Setup(NamedTuple):
    """The worker's arena settings, how long it polls for its next message, and how much
    it lowers its priority once its model proves slow."""

    shm_prefix: str
    shm_default: int
    shm_growth: int
    spin_us: int
    slow_nice: int


class Init(NamedTuple):
    """Load ``model.py`` and run ``initialize(args)``: the worker's role from then on."""

    model_dir: str
    version: int
    filename: str
    instance_name: str
    decoupled: bool
    args: dict[str, str]
    #: the model's admission rules (``core._admission.Admission(*rules)``), for a worker
    #: that may be handed requests unparsed; None: it never is
    rules: Any


class AutoComplete(NamedTuple):
    """Run the model class's ``auto_complete_config`` on ``config_json`` and exit."""

    model_dir: str
    version: int
    filename: str
    model_name: str
    config_json: str


class ExecRequest(NamedTuple):
    """One request of a batch. ``answer``: the front's spec of the client's answer when
    the worker may write it itself (:class:`Connection`), else None. ``trace``: a traced
    request's ``(trace id, context)`` (what ``request.trace()`` gives), else None."""

    token: int
    request_id: str
    correlation_id: int | str
    flags: int
    timeout_us: int
    parameters: str
    wanted: tuple[str, ...]
    block: Any
    answer: Any
    trace: tuple[int, str | None] | None = None
    #: inputs the worker maps from a client's shared-memory region (copy-on-write)
    #: instead of reading them from ``block``: ``(position among the inputs, name,
    #: datatype, shape, handle of a RegionFd, offset in the object, nbytes)``; None: none
    mapped: list[tuple[int, str, str, tuple[int, ...], int, int, int]] | None = None
    #: the outputs the client asked into system shared-memory regions: ``(name, handle
    #: of a RegionFd or -1, offset in the object, byte size)``; the worker writes a large
    #: one into its object itself (handle not -1) when every output of the response
    #: is listed and fits (:meth:`._worker.Worker.encode_response`); None: none
    dests: list[tuple[str, int, int, int]] | None = None


class Exec(NamedTuple):
    """Execute a batch."""

    batch_id: int
    requests: list[ExecRequest]


class ExecUnparsed(NamedTuple):
    """Parse, check and execute one request the front did not parse, and answer the
    client on connection ``key``; or decline it. ``body``: inline ``bytes``, or a block
    of one UINT8 tensor in the arena."""

    batch_id: int
    token: int
    header_len: int
    body: Any
    key: int


class ExecWithUnparsed(NamedTuple):
    """Execute a batch that holds requests the front did not parse (:class:`ExecUnparsed`,
    in the batch's order among the others): each is parsed and checked as one alone is,
    and declined unless it has the batch size the batcher counted for it (``sizes``, one
    per request); the others run as one batch."""

    batch_id: int
    requests: list[ExecRequest | ExecUnparsed]
    sizes: list[int]


class IsReady(NamedTuple):
    """Ask the model's ``is_ready()``; answered by :class:`ReadyAnswer`."""

    call_id: int


class Fini(NamedTuple):
    """Run ``finalize()``; answered by :class:`FiniDone`."""


class CallResult(NamedTuple):
    """The answer to a worker's :class:`Call` (``ok`` False: ``value`` is the error text)."""

    call_id: int
    ok: bool
    value: Any


class BlsResponse(NamedTuple):
    """A response to a BLS request the worker made (:class:`Bls`)."""

    call_id: int
    response: ResponseDesc | None
    final: bool


class Segment(NamedTuple):
    """A new shared-memory segment of the sender's arena (its descriptor follows)."""

    segment_id: int
    size: int


class RegionFd(NamedTuple):
    """A descriptor of a client's shared-memory object (it follows), for the inputs and
    outputs of the next :class:`Exec` that name ``handle`` (``ExecRequest.mapped``,
    ``ExecRequest.dests``)."""

    handle: int


class DropSegment(NamedTuple):
    """The sender's arena no longer uses a segment."""

    segment_id: int


class Connection(NamedTuple):
    """A client connection the worker may answer on (its descriptor follows);
    ``writer``: the arguments of the reply writer for it (opaque to the backend)."""

    key: int
    writer: tuple[Any, ...]


class DropConnection(NamedTuple):
    """The client connection ``key`` closed: let its descriptor go."""

    key: int


# ---------------------------------------------------------------- worker -> server


class Ready(NamedTuple):
    """``initialize`` succeeded."""

    pid: int
    has_ready_hook: bool
    #: the worker parses requests handed to it unparsed
    parses: bool


class InitError(NamedTuple):
    """Loading or initialising the model failed (the text is the error's)."""

    message: str


class AutoCompleted(NamedTuple):
    """The completed config JSON (None: the model has no ``auto_complete_config``)."""

    config_json: str | None


class Final(NamedTuple):
    """The final response of one request of a batch."""

    token: int
    response: ResponseDesc | None
    failed: bool


class Done(NamedTuple):
    """A batch's ``execute`` returned; ``finals``: the responses given by then;
    ``rescheduled``: per request, whether it was released with RESCHEDULE (None: the
    batch failed as a whole, e.g. ``execute`` raised: every request of it counts as
    failed, a decoupled one that sent FINAL before included)."""

    batch_id: int
    finals: list[Final]
    rescheduled: list[bool] | None
    #: the batch sizes of unparsed requests the worker admitted, by token (where not 1)
    sizes: dict[int, int] | None = None


class DoneAnswered(NamedTuple):
    """A one-request batch's ``execute`` returned, the worker wrote its answer to the
    client in full, and the request was not rescheduled (a :class:`Done` in short)."""

    batch_id: int
    token: int


class Streamed(NamedTuple):
    """A response sent outside the batch's return (decoupled models, other threads)."""

    token: int
    response: ResponseDesc | None
    final: bool
    failed: bool


class Log(NamedTuple):
    """A line for the server's log."""

    level: int
    message: str
    file: str
    line: int


class MetricOp(NamedTuple):
    """Change a custom metric's value (``op``: pb_utils' metric operation)."""

    metric_id: int
    op: int
    value: float


class Call(NamedTuple):
    """A request to the server that the worker waits for (:class:`CallResult`)."""

    call_id: int
    op: str
    args: tuple[Any, ...]


class BlsRequest(NamedTuple):
    """What a BLS request carries besides its model; ``trace``: the id of the trace the
    model passed (its request becomes a child of that trace), else None."""

    request_id: str
    correlation_id: int | str
    flags: int
    timeout_us: int
    parameters: dict[str, Any]
    requested: list[str]
    block: Any
    trace: int | None = None


class Bls(NamedTuple):
    """An inference request the model makes to another model."""

    call_id: int
    model: str
    version: int
    decoupled: bool
    request: BlsRequest


class BlsCancel(NamedTuple):
    """The model cancelled its BLS request ``call_id``."""

    call_id: int


class FamilyDelete(NamedTuple):
    """The model deleted a custom metric family."""

    family_id: int


class MetricDelete(NamedTuple):
    """The model deleted a custom metric."""

    metric_id: int


class ReadyAnswer(NamedTuple):
    """The model's ``is_ready()`` (None: it has none)."""

    call_id: int
    ready: bool | None


class FiniDone(NamedTuple):
    """``finalize()`` returned."""


Message = (
    Setup | Init | AutoComplete | Exec | ExecUnparsed | ExecWithUnparsed | IsReady | Fini
    | CallResult
    | BlsResponse | Segment | RegionFd | DropSegment | Connection | DropConnection | Ready
    | InitError
    | AutoCompleted | Done | DoneAnswered | Streamed | Log | MetricOp | Call | Bls | BlsCancel
    | FamilyDelete | MetricDelete | ReadyAnswer | FiniDone
)  # fmt: skip

#: the messages a worker's main thread handles (any thread reading the socket routes the
#: others at once)
MAIN_THREAD: frozenset[type[Message]] = frozenset(
    (Setup, Init, AutoComplete, Exec, ExecUnparsed, ExecWithUnparsed, IsReady, Fini, DropConnection)
)

# ---------------------------------------------------------------- framing

_Flatten = Callable[[Any], tuple[Any, ...]]
_Build = Callable[[Any], Message]


def _flat_exec(m: Exec) -> tuple[Any, ...]:
    return _exec_fields(m.batch_id, m.requests)


def _exec_fields(batch_id: int, requests: list[ExecRequest]) -> tuple[Any, ...]:
    return (batch_id, [tuple(r) for r in requests])


def _build_exec(w: Any) -> Exec:
    return Exec(w[0], [_new(ExecRequest, r) for r in w[1]])


def _flat_with_unparsed(m: ExecWithUnparsed) -> tuple[Any, ...]:
    requests = [(type(r) is ExecUnparsed, tuple(r)) for r in m.requests]
    return (m.batch_id, requests, m.sizes)


def _build_with_unparsed(w: Any) -> ExecWithUnparsed:
    requests = [_new(ExecUnparsed, r) if unparsed else _new(ExecRequest, r) for unparsed, r in w[1]]
    return ExecWithUnparsed(w[0], requests, w[2])


def _flat_done(m: Done) -> tuple[Any, ...]:
    finals = [(f.token, _desc_out(f.response), f.failed) for f in m.finals]
    return (m.batch_id, finals, m.rescheduled, m.sizes)


def _build_done(w: Any) -> Done:
    return Done(w[0], [Final(t, _desc_in(d), f) for t, d, f in w[1]], w[2], w[3])


def _flat_streamed(m: Streamed) -> tuple[Any, ...]:
    return (m.token, _desc_out(m.response), m.final, m.failed)


def _build_streamed(w: Any) -> Streamed:
    return Streamed(w[0], _desc_in(w[1]), w[2], w[3])


def _flat_bls_response(m: BlsResponse) -> tuple[Any, ...]:
    return (m.call_id, _desc_out(m.response), m.final)


def _build_bls_response(w: Any) -> BlsResponse:
    return BlsResponse(w[0], _desc_in(w[1]), w[2])


def _flat_bls(m: Bls) -> tuple[Any, ...]:
    return (m.call_id, m.model, m.version, m.decoupled, tuple(m.request))


def _build_bls(w: Any) -> Bls:
    return Bls(w[0], w[1], w[2], w[3], _new(BlsRequest, w[4]))


_ALL: tuple[type[Message], ...] = (
    Setup, Init, AutoComplete, Exec, ExecUnparsed, IsReady, Fini, CallResult, BlsResponse, Segment,
    DropSegment, Connection, DropConnection, Ready, InitError, AutoCompleted, Done,
    DoneAnswered, Streamed, Log, MetricOp, Call, Bls, BlsCancel, FamilyDelete, MetricDelete,
    ReadyAnswer, FiniDone, ExecWithUnparsed, RegionFd,
)  # fmt: skip
#: message type -> its number on the wire
_KIND_OF: dict[type[Any], int] = {c: i for i, c in enumerate(_ALL)}
_EXEC_KIND = _KIND_OF[Exec]
#: message type -> its fields as plain tuples (records with nested records only)
_FLATTEN: dict[type[Any], _Flatten] = {
    Exec: _flat_exec,
    ExecWithUnparsed: _flat_with_unparsed,
    Done: _flat_done,
    Streamed: _flat_streamed,
    BlsResponse: _flat_bls_response,
    Bls: _flat_bls,
}
_BUILDERS: dict[type[Any], _Build] = {
    Exec: _build_exec,
    ExecWithUnparsed: _build_with_unparsed,
    Done: _build_done,
    Streamed: _build_streamed,
    BlsResponse: _build_bls_response,
    Bls: _build_bls,
}
#: kind number -> the record rebuilt from its wire fields
_BUILD: tuple[_Build, ...] = tuple(_BUILDERS.get(c) or functools.partial(_new, c) for c in _ALL)


def _frame(payload: bytes) -> bytes:
    if len(payload) > MAX_FRAME:
        raise ValueError(f"a control message of {len(payload)} bytes is over the 2 GiB limit")
    return _LEN.pack(len(payload)) + payload


def encode(message: Message) -> bytes:
    """One framed message."""
    cls = type(message)
    if cls is DoneAnswered:
        return _LEN.pack(_DONE_ANSWERED.size | _PACKED) + _DONE_ANSWERED.pack(
            _DONE_ANSWERED_TAG, *message
        )
    if cls is ExecUnparsed:
        packed = _pack_exec_unparsed(message)  # type: ignore[arg-type]
        if packed is not None:
            return _LEN.pack(len(packed) | _PACKED) + packed
    flatten = _FLATTEN.get(cls)
    fields = flatten(message) if flatten is not None else tuple(message)
    return _frame(_dumps((_KIND_OF[cls], fields), _PROTOCOL))


def encode_exec(batch_id: int, requests: list[ExecRequest]) -> bytes:
    """``encode(Exec(batch_id, requests))``, without making the record first (the server
    sends one per batch)."""
    return _frame(_dumps((_EXEC_KIND, _exec_fields(batch_id, requests)), _PROTOCOL))


def _pack_exec_unparsed(m: ExecUnparsed) -> bytes | None:
    """``m`` packed when its body is inline (else None: pickled)."""
    if type(m.body) is not bytes:
        return None
    try:
        head = _EXEC_UNPARSED.pack(_EXEC_UNPARSED_TAG, m.batch_id, m.token, m.header_len, m.key)
    except struct.error:  # (a number past 64 bits)
        return None
    return head + m.body


def _unpack(payload: Any) -> DoneAnswered | ExecUnparsed:
    """The message a packed frame's payload holds."""
    if payload[0] == _DONE_ANSWERED_TAG:
        done: DoneAnswered = _new(DoneAnswered, _DONE_ANSWERED.unpack_from(payload)[1:])
        return done
    _, batch_id, token, header_len, key = _EXEC_UNPARSED.unpack_from(payload)
    return ExecUnparsed(batch_id, token, header_len, bytes(payload[_EXEC_UNPARSED.size :]), key)


def _decode(payload: Any) -> Message:
    kind, fields = pickle.loads(payload)
    message: Message = _BUILD[kind](fields)
    return message


class FrameReader:
    """Splits received bytes into messages."""

    __slots__ = ("_buf",)

    def __init__(self) -> None:
        self._buf = b""

    def feed(self, data: bytes) -> list[Message]:
        if not self._buf and len(data) >= 4:
            (head,) = _LEN.unpack_from(data)
            if head & MAX_FRAME == len(data) - 4:  # (the usual case: one whole message)
                if head & _PACKED:
                    return [_unpack(memoryview(data)[4:])]
                return [_decode(memoryview(data)[4:])]
        buf = self._buf + data if self._buf else data
        out = []
        pos = 0
        end = len(buf)
        while end - pos >= 4:
            (head,) = _LEN.unpack_from(buf, pos)
            size = head & MAX_FRAME
            if end - pos - 4 < size:
                break
            payload = buf[pos + 4 : pos + 4 + size]
            out.append(_unpack(payload) if head & _PACKED else _decode(payload))
            pos += 4 + size
        self._buf = buf[pos:] if pos < end else b""
        return out
