"""Request tracing as Triton does it: sampling, trace records and Triton's JSON trace file.

A :class:`Tracer` holds the sampling state of the global trace settings and of each
model with settings of its own (:class:`TraceSetting`: level, rate, count,
log-frequency, and the counters Triton keeps with them). The front asks it for a trace
when a request arrives (:meth:`Tracer.sample`); a sampled request carries its
:class:`Trace` (``InferRequest.trace``) through the core and the backend, which stamp
the moments Triton names (``HTTP_RECV_START`` ... ``HTTP_SEND_END``). A request made
from a traced one (a BLS call given the caller's trace, an ensemble step) gets a child
trace (:meth:`Trace.spawn`) that names its parent.

When a trace and all its children have ended, the group goes where the mode says:

* ``triton``: Triton's trace file (:class:`TraceFile`): a JSON array with one object per
  timestamp (``{"id":N,"timestamps":[{"name":...,"ns":...}]}``), one per trace naming
  its model (``{"id","model_name","model_version"[,"request_id"][,"parent_id"]}``) and,
  at level ``TENSORS``, one per traced tensor (``{"id","activity","tensor":{...}}``).
  Every ``log_frequency`` traces go to ``FILE.<n>``; with ``count`` the collected traces
  go to ``FILE.<n>`` once the count is reached; the rest is written when the setting is
  replaced or the server stops (``FILE``, or ``FILE.<n>`` with a log frequency).
* ``opentelemetry``: spans handed to an exporter (:mod:`._otel`).

Timestamps are monotonic nanoseconds (``time.monotonic_ns``), as Triton's steady clock.
When no setting can sample, :attr:`Tracer.active` is False and the front does nothing
more per request than read that flag.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ...utils._dtypes import TRITON_TO_NUMPY
from ..support import _json

if TYPE_CHECKING:
    from ._settings import TraceSettings
    from ._types import ExecutionTimes, InferRequest, InferResponse

__all__ = [
    "TENSORS",
    "TIMESTAMPS",
    "Trace",
    "TraceFile",
    "TraceSetting",
    "Tracer",
    "format_tensor",
    "live_trace",
    "trace_child",
    "trace_end",
    "trace_execution",
    "trace_queued",
]

log = logging.getLogger("tritonhttp.server")

#: trace level bits
TIMESTAMPS = 1
TENSORS = 2
LEVEL_BITS = {"TIMESTAMPS": TIMESTAMPS, "TENSORS": TENSORS}

#: where each record goes in a trace's part of the file (Triton's reporting order)
_RANK = {
    name: i
    for i, name in enumerate(
        (
            "HTTP_RECV_START",
            "HTTP_RECV_END",
            "REQUEST_START",
            "QUEUE_START",
            "TENSOR_QUEUE_INPUT",
            "TENSOR_BACKEND_OUTPUT",
            "INFER_RESPONSE_COMPLETE",
            "COMPUTE_START",
            "COMPUTE_INPUT_END",
            "COMPUTE_OUTPUT_START",
            "COMPUTE_END",
            "REQUEST_END",
            "HTTP_SEND_START",
            "HTTP_SEND_END",
        )
    )
}

_ids = itertools.count(1)


class Sink(Protocol):
    """Where finished trace groups go (the file of a setting, or an exporter)."""

    def done(self, root: Trace) -> None: ...

    def context(self, trace: Trace) -> str | None:
        """The trace context a model sees for ``trace`` (None in Triton's mode)."""

    def version_of(self, model_name: str) -> int:
        """The version a request to ``model_name`` without a version goes to (-1: none)."""


#: traces whose request is in progress, by id (a BLS request names its parent's id)
_LIVE: dict[int, Trace] = {}


def live_trace(trace_id: int) -> Trace | None:
    """The trace ``trace_id`` while its request is in progress."""
    return _LIVE.get(trace_id)


class Trace:
    """One traced request: its id, model, parent, and what was recorded for it.

    ``stamps`` holds ``(name, ns)``; ``tensors`` holds ``(activity, tensor as JSON)``.
    A root trace is written (with its children) once it and every child have ended.
    """

    __slots__ = (
        "children",
        "context",
        "ended",
        "id",
        "level",
        "model_name",
        "model_version",
        "open_children",
        "parent",
        "queued",
        "request_id",
        "root",
        "sink",
        "span_id",
        "stamps",
        "start_ns",
        "tensors",
        "trace_id",
    )

    def __init__(
        self,
        level: int,
        sink: Sink,
        model_name: str = "",
        model_version: int = -1,
        parent: Trace | None = None,
    ) -> None:
        self.id = next(_ids)
        self.level = level
        self.sink = sink
        self.model_name = model_name
        self.model_version = model_version
        self.request_id = ""
        self.parent = parent
        self.root: Trace = self if parent is None else parent.root
        self.stamps: list[tuple[str, int]] = []
        self.tensors: list[tuple[str, str]] = []
        self.children: list[Trace] = []
        self.open_children = 0
        self.ended = False
        self.queued = False
        self.start_ns = time.monotonic_ns()
        #: OpenTelemetry ids (W3C): set by the exporter's sink when it samples
        self.trace_id = 0
        self.span_id = 0
        #: a W3C ``traceparent`` the request arrived with (its remote parent), or ""
        self.context = ""
        _LIVE[self.id] = self

    @property
    def parent_id(self) -> int:
        return 0 if self.parent is None else self.parent.id

    @property
    def timestamps(self) -> bool:
        return bool(self.level & TIMESTAMPS)

    def stamp(self, name: str, ns: int | None = None) -> None:
        """Record the moment ``name`` (now unless ``ns``), at level TIMESTAMPS."""
        if self.level & TIMESTAMPS:
            self.stamps.append((name, time.monotonic_ns() if ns is None else ns))

    def tensor(
        self, activity: str, name: str, datatype: str, shape: Sequence[int], data: Any
    ) -> None:
        """Record a tensor (``TENSOR_QUEUE_INPUT``, ``TENSOR_BACKEND_OUTPUT``) at level
        TENSORS; ``data`` is an array, or raw bytes as the wire carries them. It is
        formatted now: no view of a request body or shared-memory region is kept."""
        if self.level & TENSORS:
            self.tensors.append((activity, format_tensor(name, datatype, shape, data)))

    def handle(self) -> tuple[int, str | None]:
        """What a model's ``request.trace()`` is made of: (id, context)."""
        return (self.id, self.sink.context(self))

    def spawn(self, model_name: str, model_version: int = -1) -> Trace:
        """A child trace for a request made from this one (BLS, ensemble step) to
        ``model_name`` (version -1: the one such a request goes to)."""
        if model_version <= 0:
            model_version = self.sink.version_of(model_name)
        child = Trace(self.level, self.sink, model_name, model_version, self)
        root = self.root
        root.children.append(child)
        root.open_children += 1
        return child

    def end(self) -> None:
        """This trace's request is over; the group goes out once all of it has ended."""
        if self.ended:
            return
        self.ended = True
        _LIVE.pop(self.id, None)
        root = self.root
        if root is not self:
            root.open_children -= 1
        if root.ended and root.open_children == 0:
            root.sink.done(root)

    def group(self) -> list[Trace]:
        """The traces written together with this root, in Triton's order: the newest
        child first, the root last."""
        return [*reversed(self.children), self]

    def records(self) -> list[str]:
        """This trace's objects of Triton's trace file, in Triton's order (the model info
        right before ``REQUEST_START``, written only with it)."""
        head = f'{{"id":{self.id},'
        out: list[tuple[int, str]] = []
        for name, ns in self.stamps:
            rank = _RANK.get(name, 99)
            if name == "REQUEST_START":
                out.append((rank, self._info(head)))
            out.append((rank, f'{head}"timestamps":[{{"name":"{name}","ns":{ns}}}]}}'))
        for activity, text in self.tensors:
            out.append((_RANK[activity], f'{head}"activity":"{activity}","tensor":{text}}}'))
        out.sort(key=lambda item: item[0])  # (stable: the info stays first of its rank)
        return [text for _, text in out]

    def _info(self, head: str) -> str:
        name = _quote(self.model_name)
        info = f'{head}"model_name":{name},"model_version":{self.model_version}'
        if self.request_id:
            info += f',"request_id":{_quote(self.request_id)}'
        if self.parent is not None:
            info += f',"parent_id":{self.parent.id}'
        return info + "}"


def _quote(text: str) -> str:
    return _json.escape_str(text)


# ----------------------------------------------------------------------------- tensors


def _number_text(value: Any, kind: str) -> str:
    if kind == "f":
        return format(float(value), "g")  # (as a C++ stream prints it: 6 significant digits)
    if kind == "b":
        return "1" if value else "0"
    return str(int(value))


def format_tensor(name: str, datatype: str, shape: Sequence[int], data: Any) -> str:
    """A tensor as Triton's trace file shows it: ``{"name","data","shape","dtype"}`` with
    the elements comma-separated in ``data`` (BYTES elements in double quotes, FP16/BF16
    left empty) and the dims comma-separated in ``shape``."""
    text = ""
    if datatype not in ("FP16", "BF16"):
        text = ",".join(_elements(datatype, data))
    dims = ",".join(str(d) for d in shape)
    return f'{{"name":{_quote(name)},"data":{_quote(text)},"shape":"{dims}","dtype":"{datatype}"}}'


def _elements(datatype: str, data: Any) -> list[str]:
    if datatype == "BYTES":
        if isinstance(data, np.ndarray):
            items = [x if isinstance(x, bytes) else str(x).encode() for x in data.reshape(-1)]
        else:
            items = _unframe(bytes(data))
        return ['"' + x.decode("utf-8", "replace") + '"' for x in items]
    dtype = TRITON_TO_NUMPY.get(datatype)
    if dtype is None:
        return []
    array = data if isinstance(data, np.ndarray) else np.frombuffer(bytes(data), dtype=dtype)
    flat = array.reshape(-1)
    kind = "b" if datatype == "BOOL" else dtype.kind
    if datatype in ("INT8", "UINT8"):
        # (Triton streams these as characters)
        return [chr(int(x) & 0xFF) for x in flat.tolist()]
    return [_number_text(x, kind) for x in flat.tolist()]


def _unframe(raw: bytes) -> list[bytes]:
    out: list[bytes] = []
    at = 0
    while at + 4 <= len(raw):
        size = int.from_bytes(raw[at : at + 4], "little")
        at += 4
        if at + size > len(raw):
            break
        out.append(raw[at : at + size])
        at += size
    return out


# ----------------------------------------------------------------------------- the file


class TraceFile:
    """Triton's trace file: ``save`` appends a chunk of trace objects to ``name`` (one
    JSON array, closed by :meth:`close`) or writes it to the next ``name.<n>``."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.index = 0
        self._handle: Any = None

    def save(self, chunk: str, indexed: bool) -> None:
        try:
            if indexed:
                path = f"{self.name}.{self.index}"
                self.index += 1
                with open(path, "w", encoding="utf-8") as f:
                    f.write("[" + chunk + "]")
                return
            if self._handle is None:
                self._handle = open(self.name, "w", encoding="utf-8")  # noqa: SIM115
                self._handle.write("[")
            else:
                self._handle.write(",")
            self._handle.write(chunk)
            self._handle.flush()
        except OSError as e:
            log.error("failed creating trace file: %s", e)

    def close(self) -> None:
        if self._handle is not None:
            try:
                self._handle.write("]")
                self._handle.close()
            except OSError as e:
                log.error("failed creating trace file: %s", e)
            self._handle = None


class TraceSetting:
    """One trace setting in force (global or a model's) with Triton's counters: requests
    seen (``sample``), traces collected, and the traces not yet written."""

    def __init__(
        self,
        level: int,
        rate: int,
        count: int,
        log_frequency: int,
        file: TraceFile | None,
        mode: str,
        exporter: Any = None,
    ) -> None:
        self.level = level
        self.rate = rate
        self.count = count
        self.log_frequency = log_frequency
        self.file = file
        self.mode = mode
        self.exporter = exporter
        self.sampled = 0
        self.collected = 0
        self.in_stream = 0
        self.stream: list[str] = []
        self.live = 0
        self.retired = False
        #: the version a request to a model without a version goes to
        self.resolve: Callable[[str], int] | None = None

    def context(self, trace: Trace) -> str | None:
        if self.mode == "triton" or self.exporter is None:
            return None
        return str(self.exporter.context(trace))

    def version_of(self, model_name: str) -> int:
        return self.resolve(model_name) if self.resolve is not None else -1

    def valid(self) -> bool:
        if self.level == 0 or self.rate == 0 or self.count == 0:
            return False
        if self.mode == "triton":
            return self.file is not None and bool(self.file.name)
        return self.exporter is not None

    def sample(self, model_name: str, model_version: int) -> Trace | None:
        """A trace for the next request when this is the ``rate``-th one (None else)."""
        if not self.valid():
            return None
        self.sampled += 1
        if self.sampled % self.rate:
            return None
        if self.count > 0:
            self.count -= 1
        self.live += 1
        return Trace(self.level, self, model_name, model_version)

    def done(self, root: Trace) -> None:
        """A root trace and its children ended: write them (triton) or export them."""
        self.live -= 1
        if self.mode != "triton":
            if self.exporter is not None:
                self.exporter.export(root)
            return
        parts: list[str] = []
        for trace in root.group():
            parts.extend(trace.records())
        self.stream.append(",".join(parts))
        self.in_stream += 1
        self.collected += 1
        if (self.count == 0 and self.collected == self.sampled) or (
            self.log_frequency and self.in_stream >= self.log_frequency
        ):
            self._save(indexed=True)
        elif self.retired and self.live == 0:
            self.flush()

    def _save(self, indexed: bool) -> None:
        chunk = ",".join(self.stream)
        self.stream = []
        self.in_stream = 0
        if self.file is not None:
            self.file.save(chunk, indexed)

    def flush(self) -> None:
        """Write what is collected and not yet written (the setting is being replaced,
        or the server stops)."""
        if self.mode == "triton" and self.in_stream:
            self._save(indexed=self.log_frequency != 0)

    def retire(self) -> None:
        """Replaced by a new setting: the rest goes out once its last trace ends."""
        self.retired = True
        if self.live == 0:
            self.flush()


# ----------------------------------------------------------------------------- the tracer


class Tracer:
    """The server's tracing: a :class:`TraceSetting` for the global settings and for
    each model with settings of its own, rebuilt when the trace API changes them."""

    def __init__(
        self,
        settings: TraceSettings,
        exporter_factory: Callable[[], Any] | None = None,
        resolve: Callable[[str], int] | None = None,
    ) -> None:
        self.settings = settings
        self.resolve = resolve
        self.file = TraceFile(settings.file)
        self.exporter: Any = None
        if settings.mode == "opentelemetry":
            self.exporter = (exporter_factory or _otel_exporter(settings))()
        self.global_setting = self._build(None)
        self.models: dict[str, TraceSetting] = {}
        self._retired: list[TraceSetting] = []
        for name in settings.model:
            self.models[name] = self._build(name)
        #: whether any setting may sample a request (read by the front per request)
        self.active = False
        self._update_active()
        settings.on_change = self.refresh
        settings.remaining = self.remaining

    def remaining(self, model: str | None) -> int:
        """The count left to the setting in force for ``model`` (None: the global one):
        each traced request takes one from a positive count; -1 never runs out."""
        setting = self.global_setting if model is None else self.models.get(model)
        return (setting or self.global_setting).count

    def _build(self, model: str | None) -> TraceSetting:
        view = self.settings.values(model)
        level = 0
        for name in view["trace_level"]:
            level |= LEVEL_BITS.get(name, 0)
        setting = TraceSetting(
            level,
            view["trace_rate"],
            view["trace_count"],
            view["log_frequency"],
            self.file,
            self.settings.mode,
            self.exporter,
        )
        setting.resolve = self.resolve
        return setting

    def _update_active(self) -> None:
        self.active = self.global_setting.valid() or any(s.valid() for s in self.models.values())

    def refresh(self, names: list[str | None]) -> None:
        """The settings of ``names`` (a model's; None: the global ones) changed through
        the API."""
        for name in names:
            if name is None:
                self._replace_global()
            else:
                self._replace_model(name)
        self._update_active()

    def _replace_global(self) -> None:
        old = self.global_setting
        self.global_setting = self._build(None)
        old.retire()

    def _replace_model(self, name: str) -> None:
        old = self.models.pop(name, None)
        if self.settings.model.get(name):
            self.models[name] = self._build(name)
        if old is not None:
            old.retire()

    def sample(self, model_name: str, model_version: int) -> Trace | None:
        """A trace for a request to ``model_name`` when its setting samples it."""
        setting = self.models.get(model_name, self.global_setting)
        return setting.sample(model_name, model_version)

    def close(self) -> None:
        """Write every collected trace and close the file (the server stops)."""
        for setting in (self.global_setting, *self.models.values()):
            setting.flush()
        self.file.close()
        if self.exporter is not None:
            self.exporter.shutdown()


def _otel_exporter(settings: TraceSettings) -> Callable[[], Any]:
    """What makes the OpenTelemetry exporter (:mod:`._otel`); without the SDK, a maker
    of none (tracing stays off, said once in the log)."""
    try:
        from ._otel import OtelExporter
    except ImportError as e:
        log.error(
            "OpenTelemetry trace mode needs the OpenTelemetry SDK (pip install "
            "tritonhttp[otel]): %s; requests are not traced",
            e,
        )
        return lambda: None
    return lambda: OtelExporter(settings)


# ----------------------------------------------------------------------------- the backend


def trace_execution(
    requests: Sequence[InferRequest],
    responses: Sequence[InferResponse],
    start_ns: int,
    times: ExecutionTimes,
) -> None:
    """Stamp the compute moments of one ``execute`` on the traced requests of the batch
    (from its start and the parts ``times`` measured) and record their outputs."""
    begin = start_ns + times.waited_ns
    input_end = begin + times.input_ns
    output_start = input_end + times.infer_ns
    end = output_start + times.output_ns
    for req, resp in zip(requests, responses, strict=False):
        trace = req.trace
        if trace is None:
            continue
        if trace.level & TENSORS:
            for out in resp.outputs:
                trace.tensor("TENSOR_BACKEND_OUTPUT", out.name, out.datatype, out.shape, out.array)
        trace.stamp("COMPUTE_START", begin)
        trace.stamp("COMPUTE_INPUT_END", input_end)
        trace.stamp("COMPUTE_OUTPUT_START", output_start)
        trace.stamp("COMPUTE_END", end)


def trace_queued(req: InferRequest) -> None:
    """Stamp ``REQUEST_START`` (its admission) and ``QUEUE_START`` (now) on a traced
    request handed to its model, with its inputs; once (the front calls it for a
    client's request, a scheduler for any request)."""
    trace = req.trace
    if trace is None or trace.queued:
        return
    trace.queued = True
    trace.stamp("REQUEST_START", req.start_ns or None)
    trace.stamp("QUEUE_START")
    if trace.level & TENSORS:
        for t in req.inputs.values():
            data = t.array if t.array is not None else t.raw
            trace.tensor("TENSOR_QUEUE_INPUT", t.name, t.datatype, t.shape, data)


def trace_child(parent: InferRequest, child: InferRequest, model_name: str, version: int) -> None:
    """Trace ``child``, a request made from ``parent`` to ``model_name`` (an ensemble step,
    a BLS call), as a child of ``parent``'s trace when ``parent`` is traced; end it with
    :func:`trace_end`."""
    trace = parent.trace
    if trace is not None:
        child.trace = trace.spawn(model_name, version)
        child.trace.request_id = child.id


def trace_end(req: InferRequest) -> None:
    """The request made with :func:`trace_child` is answered: stamp ``REQUEST_END``."""
    trace = req.trace
    if trace is not None:
        trace.stamp("REQUEST_END")
        trace.end()
