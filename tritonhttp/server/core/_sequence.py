"""The sequence batcher: stateful models, one correlation id per sequence.

A sequence starts with a request flagged START and holds a *slot* until a request
flagged END has been scheduled, or until it stayed idle for
``max_sequence_idle_microseconds``. New sequences wait in a backlog while every slot
is taken. Requests of a sequence run in order, on the instance that owns its slot,
and receive the configured control inputs (START, END, READY, CORRID).

* ``direct`` (the default): each instance has ``max(1, max_batch_size)`` slots; a batch
  holds the next request of each slot, and empty slots below the last used one are
  padded with *null* requests (empty id, zero data, READY false) whose responses are
  dropped, as Triton does. With ``minimum_slot_utilization`` and
  ``max_queue_delay_microseconds`` both set, a batch with fewer ready slots than that
  share of the instance's slots waits until its oldest request has waited the delay.
* ``oldest``: each instance has ``max_candidate_sequences`` slots; the next request of
  each candidate sequence joins a dynamic batcher (``preferred_batch_size``,
  ``max_queue_delay_microseconds``), so sequences are batched as they arrive; an ending
  sequence keeps its slot until its END request is answered.
* ``iterative_sequence``: a model may release a request with RESCHEDULE; it runs again
  at the head of its sequence (flags cleared). Requests without a correlation id get
  one of their own (1, 2, ...), and a sequence ends when its request completes.

Under the rate limiter each lane (instance) executes only once it is granted its
resources (:mod:`._rate_limit`); its requests wait meanwhile, counted pending.
"""

from __future__ import annotations

import asyncio
import collections
import heapq
import struct
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ...utils._dtypes import TRITON_TO_NUMPY
from ._admission import triton_map_order
from ._config import wire_datatype
from ._dynamic_batcher import BatchingRules, DynamicBatcher
from ._errors import Code, CoreError
from ._queue import Pending, PriorityQueue
from ._rate_limit import Gate
from ._scheduler import Executor, Scheduler, reschedule_refused
from ._types import InferRequest, InferResponse, InputTensor
from .model_config_pb2 import ModelConfig, ModelSequenceBatching

if TYPE_CHECKING:
    from ._backend_api import ModelInstance
    from ._stats import ModelStats

__all__ = ["SequenceBatcher"]

_START = 1
_END = 2
_Kind = ModelSequenceBatching.Control
#: the order Triton adds control inputs to a request (the implicit states follow, in
#: config order); the model sees them in the order of Triton's map of them
_CONTROL_ORDER: dict[int, int] = {
    _Kind.CONTROL_SEQUENCE_START: 0,
    _Kind.CONTROL_SEQUENCE_END: 1,
    _Kind.CONTROL_SEQUENCE_READY: 2,
    _Kind.CONTROL_SEQUENCE_CORRID: 3,
}


def _now() -> int:
    return time.monotonic_ns()


class _Control:
    __slots__ = ("dtype", "kind", "name", "values", "wire")

    def __init__(self, name: str, kind: int, wire: str, values: list[Any]) -> None:
        self.name = name
        self.kind = kind
        self.wire = wire
        self.values = values
        self.dtype = TRITON_TO_NUMPY[wire] if wire != "BYTES" else np.dtype(np.object_)


def _parse_controls(config: ModelConfig) -> list[_Control]:
    controls: list[_Control] = []
    for ci in config.sequence_batching.control_input:
        for ctl in ci.control:
            wire = wire_datatype(ctl.data_type) if ctl.data_type else ""
            values: list[Any]
            if ctl.fp32_false_true:
                values, wire = list(ctl.fp32_false_true), "FP32"
            elif ctl.int32_false_true:
                values, wire = list(ctl.int32_false_true), "INT32"
            elif ctl.bool_false_true:
                values, wire = list(ctl.bool_false_true), "BOOL"
            else:
                values = []
            if not wire:
                continue
            controls.append(_Control(ci.name, ctl.kind, wire, values))
    controls.sort(key=lambda c: _CONTROL_ORDER.get(c.kind, 4))
    return controls


class _State:
    """An implicit state input and the value every request of a sequence gets for it.

    Python models never update a state, so each request receives its initial value
    (``zero_data``, the bytes of ``initial_state/<data_file>``; zeros without one).
    """

    __slots__ = ("name", "value", "wire")

    def __init__(self, name: str, wire: str, value: np.ndarray[Any, Any]) -> None:
        self.name = name
        self.wire = wire
        self.value = value


def _parse_states(config: ModelConfig, model_dir: Path | None) -> list[_State]:
    """The states of ``config``, shaped as the state (-1 read as 1), with Triton's load
    errors for their initial values."""
    states: list[_State] = []
    for st in config.sequence_batching.state:
        if not st.input_name:  # (Triton 2.51 crashes on such a state)
            raise CoreError(
                f"state of model '{config.name}' must specify 'input_name'", Code.INVALID_ARG
            )
        wire = wire_datatype(st.data_type)
        dtype = TRITON_TO_NUMPY[wire] if wire != "BYTES" else np.dtype(np.object_)
        shape = [1 if d == -1 else max(0, d) for d in st.dims]
        value = np.zeros(shape, dtype) if dtype != np.object_ else np.full(shape, b"", np.object_)
        if len(st.initial_state) > 1:
            raise CoreError(
                f"initial_state field for state input '{st.input_name}' must contain exactly "
                f"one or zero element. Found '{len(st.initial_state)}' elements.",
                Code.INVALID_ARG,
            )
        if st.initial_state:
            init = st.initial_state[0]
            for want, got in zip(st.dims, init.dims, strict=False):
                if want not in (-1, got):
                    raise CoreError(
                        f"'initial_state' dim for input name '{st.input_name}' doesn't match "
                        f"'state' dim description. {got} != {want}",
                        Code.INVALID_ARG,
                    )
            if init.WhichOneof("state_data") == "data_file":
                size = int(np.prod(init.dims)) * dtype.itemsize
                value = _initial_data(init.data_file, size, value, model_dir)
        states.append(_State(st.input_name, wire, value))
    return states


def _initial_data(
    file: str, size: int, value: np.ndarray[Any, Any], model_dir: Path | None
) -> np.ndarray[Any, Any]:
    """``value`` filled from the model's ``initial_state/<file>`` (``size`` bytes expected,
    as Triton reads it)."""
    if model_dir is None or value.dtype == np.object_:
        return value
    path = model_dir / "initial_state" / file
    try:
        data = path.read_bytes()
    except OSError:
        raise CoreError(
            f"failed to open text file for read {path}: No such file or directory",
            Code.INTERNAL,
        ) from None
    if len(data) < size:
        raise CoreError(
            f"initial_state setting expects {size} bytes, but the data provided from "
            f"{file}only has {len(data)} bytes.",
            Code.INVALID_ARG,
        )
    data = data[: min(size, value.nbytes)].ljust(value.nbytes, b"\0")
    filled: np.ndarray[Any, Any] = np.frombuffer(data, value.dtype).copy()
    filled.shape = value.shape
    return filled


def _corrid_value(cid: int | str, dtype: np.dtype[Any]) -> Any:
    if isinstance(cid, int):
        return np.array(cid, dtype=np.uint64).astype(dtype)
    # Triton reads a string id's serialised form (4-byte length, then the bytes) as
    # the control's number
    data = cid.encode()
    raw = (struct.pack("<I", len(data)) + data).ljust(dtype.itemsize, b"\0")
    return np.frombuffer(raw[: dtype.itemsize], dtype=dtype)[0]


class _Sequence:
    __slots__ = ("cid", "in_flight", "queue", "slot", "timer")

    def __init__(self, cid: int | str) -> None:
        self.cid = cid
        self.queue: collections.deque[_Item] = collections.deque()
        self.slot: _Slot | None = None
        self.in_flight = 0
        self.timer: asyncio.TimerHandle | None = None


class _Item(Pending):
    """A request of a sequence, with the inputs it arrived with (before controls)."""

    __slots__ = ("inputs", "seq")

    def __init__(
        self, request: InferRequest, future: asyncio.Future[InferResponse], seq: _Sequence
    ) -> None:
        super().__init__(request, future, _now())
        self.seq = seq
        self.inputs = dict(request.inputs)


class _Slot:
    __slots__ = ("index", "instance", "order", "sequence")

    def __init__(self, instance: int, index: int) -> None:
        self.instance = instance
        self.index = index
        self.order = (index, instance)
        self.sequence: _Sequence | None = None

    def __lt__(self, other: _Slot) -> bool:
        return self.order < other.order


class _Lane:
    """One instance with its slots (and, for ``oldest``, its dynamic batcher)."""

    __slots__ = ("batcher", "busy", "gate", "idle", "instance", "leaving", "slots", "timer")

    def __init__(self, instance: ModelInstance, slots: list[_Slot], gate: Gate | None) -> None:
        self.instance = instance
        self.slots = slots
        self.busy = False
        #: (rate limiter) the instance's gate, and the instance while it is idle
        self.gate = gate
        self.idle: collections.deque[ModelInstance] = collections.deque([instance])
        #: (``direct``) runs the lane once a batch below the minimum utilisation is due
        self.timer: asyncio.TimerHandle | None = None
        self.batcher: DynamicBatcher | None = None
        #: an instance update left the instance out: it takes no new sequence, and this
        #: future ends once its sequences are over and it is free
        self.leaving: asyncio.Future[None] | None = None


class SequenceBatcher(Scheduler):
    """Triton's sequence batcher (``direct`` and ``oldest`` strategies)."""

    def __init__(
        self,
        config: ModelConfig,
        instances: list[ModelInstance],
        execute: Executor,
        stats: ModelStats,
        model_dir: Path | None = None,
        gate: Gate | None = None,
    ) -> None:
        super().__init__(instances, execute, stats)
        #: (rate limiter) the model's gate: each lane executes through a gate of its own
        self._model_gate = gate
        sb = config.sequence_batching
        self.model_name = config.name
        self.iterative = sb.iterative_sequence
        self.idle_ns = (sb.max_sequence_idle_microseconds or 1_000_000) * 1000
        self.batching = config.max_batch_size > 0
        self.oldest = sb.WhichOneof("strategy_choice") == "oldest"
        self.controls = _parse_controls(config)
        self.states = _parse_states(config, model_dir)
        #: the names of the inputs the batcher adds (controls, then states; a name added
        #: twice keeps its place and takes the later value), in Triton's map order
        added = list(
            dict.fromkeys([c.name for c in self.controls] + [st.name for st in self.states])
        )
        self._added_names = [added[i] for i in triton_map_order(added)]
        self._control_names = frozenset(c.name for c in self.controls)
        self._input_specs = {i.name: wire_datatype(i.data_type) for i in config.input}
        if self.oldest:
            self._per_instance = max(1, sb.oldest.max_candidate_sequences)
            self._rules = BatchingRules.from_config(
                config, list(sb.oldest.preferred_batch_size), sb.oldest.max_queue_delay_microseconds
            )
        else:
            self._per_instance = max(1, config.max_batch_size)
        #: (``direct``) the share of slots a batch must fill, else how long it may wait
        self._min_use = sb.direct.minimum_slot_utilization if not self.oldest else 0.0
        self._delay_ns = sb.direct.max_queue_delay_microseconds * 1000 if not self.oldest else 0
        self._lanes: list[_Lane] = []
        self._free: list[_Slot] = []
        self._active: dict[int | str, _Sequence] = {}
        self._backlog: collections.deque[_Sequence] = collections.deque()
        self._next_cid = 1
        #: instances left out by an instance update, not free yet
        self._lanes_leaving = 0
        for inst in instances:
            self._add_lane(inst)

    def _add_lane(self, inst: ModelInstance) -> None:
        """An instance joins with its slots (waiting sequences take them at once)."""
        i = len(self._lanes)
        gate = None if self._model_gate is None else self._model_gate.lane(inst)
        lane = _Lane(inst, [_Slot(i, j) for j in range(self._per_instance)], gate)
        if self.oldest:
            lane.batcher = DynamicBatcher(
                [inst],
                self._execute,
                self._stats,
                self._rules,
                PriorityQueue(None),
                self._done,
                gate=gate,
            )
        elif gate is not None:
            gate.attach(lambda: self._run_direct(lane))
        self._lanes.append(lane)
        for slot in lane.slots:
            if self._backlog:
                seq = self._backlog.popleft()
                self._bind(seq, slot)
                self._kick(seq)
                self._idle_check(seq)
            else:
                heapq.heappush(self._free, slot)

    def update_instances(
        self, instances: list[ModelInstance], config: ModelConfig | None = None
    ) -> list[asyncio.Future[None]]:
        """Serve with ``instances`` from now on (Triton's in-place instance update).

        A new instance takes sequences at once. One left out takes no new sequence; those
        it holds run on it to their end (or idle out), then it is free: the returned
        futures end as each one is.
        """
        staying = {id(inst) for inst in instances}
        serving = {id(lane.instance) for lane in self._lanes if lane.leaving is None}
        loop = asyncio.get_running_loop()
        leaving: list[_Lane] = []
        for lane in self._lanes:
            if lane.leaving is None and id(lane.instance) not in staying:
                lane.leaving = loop.create_future()
                leaving.append(lane)
                self._lanes_leaving += 1
        if leaving:
            self._free = [s for s in self._free if self._lanes[s.instance].leaving is None]
            heapq.heapify(self._free)
        self.instances = list(instances)
        if self._model_gate is not None and config is not None:
            self._model_gate.set_instances(instances, config, check=False)
        for inst in instances:
            if id(inst) not in serving:
                self._add_lane(inst)
        for lane in leaving:
            self._check_left(lane)
        return [lane.leaving for lane in leaving if lane.leaving is not None]

    def _check_left(self, lane: _Lane) -> None:
        """Let a leaving instance go once no sequence holds it and it runs nothing."""
        future = lane.leaving
        if future is None or future.done() or lane.busy:
            return
        if any(slot.sequence is not None for slot in lane.slots):
            return
        if lane.batcher is not None and not lane.batcher.is_idle:
            return  # (its last requests are queued or running: checked again after them)
        future.set_result(None)
        self._lanes_leaving -= 1
        if lane.gate is not None:
            lane.gate.close()

    def _check_all_left(self) -> None:
        for lane in self._lanes:
            self._check_left(lane)

    # ------------------------------------------------------------------ admission

    def check(self, req: InferRequest) -> None:
        """The sequence rules a request must meet before it is accepted (400 otherwise)."""
        if req.batch_size > 1:
            raise CoreError(
                f"inference request to model '{self.model_name}' must specify batch-size 1 "
                "due to requirements of sequence batcher"
            )
        cid = req.correlation_id
        if cid == 0 or cid == "":
            if self.iterative:
                return
            raise CoreError(
                f"inference request to model '{self.model_name}' must specify a non-zero "
                "or non-empty correlation ID"
            )
        if not req.flags & _START and cid not in self._active:
            raise CoreError(
                f"inference request for sequence {cid} to model '{self.model_name}' must "
                "specify the START flag on the first request of the sequence"
            )

    async def infer(self, req: InferRequest) -> InferResponse:
        cid = req.correlation_id
        if cid == 0 or cid == "":  # iterative model, no sequence of its own
            cid = req.correlation_id = self._next_cid
            self._next_cid += 1
            req.flags |= _START
        seq = self._active.get(cid)
        if seq is None:  # a START (checked at admission); a START on a live sequence
            seq = self._active[cid] = _Sequence(cid)  # continues in its slot
            self._place(seq)
        if req.flags & _END and not self.iterative:
            self._active.pop(cid, None)  # later requests must START again
        if seq.timer is not None:
            seq.timer.cancel()
            seq.timer = None
        fut: asyncio.Future[InferResponse] = asyncio.get_running_loop().create_future()
        item = _Item(req, fut, seq)
        seq.queue.append(item)
        self._waiting[id(req)] = item
        self._kick(seq)
        return await fut

    # ------------------------------------------------------------------ slots

    def _place(self, seq: _Sequence) -> None:
        if self._free and not self._backlog:
            self._bind(seq, heapq.heappop(self._free))
        else:
            self._backlog.append(seq)

    def _bind(self, seq: _Sequence, slot: _Slot) -> None:
        seq.slot = slot
        slot.sequence = seq

    def _release(self, seq: _Sequence) -> None:
        """The sequence is over: its slot goes to the backlog or back to the free set."""
        if self._active.get(seq.cid) is seq and not seq.queue:
            del self._active[seq.cid]
        if seq.timer is not None:
            seq.timer.cancel()
            seq.timer = None
        slot = seq.slot
        if slot is None:
            return
        seq.slot = None
        slot.sequence = None
        lane = self._lanes[slot.instance]
        if lane.leaving is not None:
            # (checked once the request that ended the sequence is on its way to the model)
            asyncio.get_running_loop().call_soon(self._check_left, lane)
            return
        if self._backlog:
            nxt = self._backlog.popleft()
            self._bind(nxt, slot)
            self._kick(nxt)
            self._idle_check(nxt)  # a sequence whose requests were all cancelled idles out
        else:
            heapq.heappush(self._free, slot)

    def _idle_check(self, seq: _Sequence) -> None:
        if seq.slot is None or seq.queue or seq.in_flight or self._closed:
            return
        if seq.timer is not None:
            seq.timer.cancel()
        seq.timer = asyncio.get_running_loop().call_later(self.idle_ns / 1e9, self._expire, seq)

    def _expire(self, seq: _Sequence) -> None:
        seq.timer = None
        if seq.queue or seq.in_flight:
            return
        self._release(seq)
        if self._active.get(seq.cid) is seq:
            del self._active[seq.cid]

    # ------------------------------------------------------------------ dispatch

    def _with_controls(self, req: InferRequest, inputs: dict[str, InputTensor]) -> None:
        """``req`` gets ``inputs`` after the control and state inputs, in Triton's order."""
        if not self.controls and not self.states:
            return
        shape = [1, 1] if self.batching else [1]
        added: list[InputTensor] = []
        for ctl in self.controls:
            if ctl.kind == _Kind.CONTROL_SEQUENCE_CORRID:
                cid = req.correlation_id
                if ctl.wire == "BYTES":
                    arr = np.empty(shape, dtype=np.object_)
                    arr[...] = str(cid).encode()
                else:
                    arr = np.full(shape, _corrid_value(cid, ctl.dtype), ctl.dtype)
            else:
                if ctl.kind == _Kind.CONTROL_SEQUENCE_START:
                    on = bool(req.flags & _START)
                elif ctl.kind == _Kind.CONTROL_SEQUENCE_END:
                    on = bool(req.flags & _END)
                else:
                    on = True
                values = ctl.values
                value = values[1] if on and len(values) > 1 else (values[0] if values else 0)
                arr = np.full(shape, value, ctl.dtype)
            added.append(InputTensor(ctl.name, ctl.wire, list(shape), array=arr))
        for st in self.states:
            arr = st.value[None, ...] if self.batching else st.value
            added.append(InputTensor(st.name, st.wire, list(arr.shape), array=arr.copy()))
        by_name = {t.name: t for t in added}
        tensors = {name: by_name[name] for name in self._added_names}
        tensors.update((k, v) for k, v in inputs.items() if k not in tensors)
        req.inputs = tensors

    def _null_request(self, template: InferRequest, inputs: dict[str, InputTensor]) -> InferRequest:
        """A padding request shaped like ``template`` (Triton's null request)."""
        zeros: dict[str, InputTensor] = {}
        for name, t in inputs.items():
            if t.array is not None and t.array.dtype == np.object_:
                arr = np.empty(t.array.shape, dtype=np.object_)
                arr[...] = b""
            elif t.array is not None:
                arr = np.zeros(t.array.shape, dtype=t.array.dtype)
            else:
                continue
            zeros[name] = InputTensor(name, t.datatype, list(t.shape), array=arr)
        null = InferRequest(id="", inputs={}, requested_outputs=[], batch_size=template.batch_size)
        if self.controls or self.states:
            self._with_controls(null, zeros)
            for ctl in self.controls:  # everything off, READY included
                t = null.inputs[ctl.name]
                assert t.array is not None
                if ctl.kind == _Kind.CONTROL_SEQUENCE_CORRID:
                    t.array = (
                        np.full(t.array.shape, b"", np.object_)
                        if ctl.wire == "BYTES"
                        else np.zeros(t.array.shape, ctl.dtype)
                    )
                else:
                    off = ctl.values[0] if ctl.values else 0
                    t.array = np.full(t.array.shape, off, ctl.dtype)
        else:
            null.inputs = zeros
        return null

    def _kick(self, seq: _Sequence) -> None:
        slot = seq.slot
        if slot is None or self._closed:
            return
        lane = self._lanes[slot.instance]
        if lane.batcher is None:
            self._run_direct(lane)
            return
        if seq.in_flight or not seq.queue:
            return
        item = seq.queue.popleft()
        self._waiting.pop(id(item.request), None)
        self._prepare(item, when_answered=True)
        seq.in_flight += 1
        lane.batcher.submit(item, 0)

    def _prepare(self, item: _Item, when_answered: bool = False) -> None:
        """Set the request's control inputs. An END request frees its sequence's slot:
        once it is scheduled (``direct``), or ``when_answered`` (or cancelled; ``oldest``,
        whose slot stays taken while the request waits in the batcher), as in Triton."""
        self._with_controls(item.request, item.inputs)
        if item.request.flags & _END and not self.iterative:
            if when_answered:
                item.future.add_done_callback(lambda _: self._release(item.seq))
            else:
                self._release(item.seq)

    def _under_used(self, lane: _Lane) -> bool:
        """Whether the lane's next batch fills too few slots and may wait longer (a timer
        runs the lane once its oldest request has waited the delay)."""
        if self._min_use <= 0 or self._delay_ns <= 0:
            return False
        heads = [s.sequence.queue[0] for s in lane.slots if s.sequence and s.sequence.queue]
        if not heads or len(heads) / len(lane.slots) >= self._min_use:
            return False
        due = min(item.enqueue_ns for item in heads) + self._delay_ns - _now()
        if due <= 0:
            return False
        if lane.timer is None:
            lane.timer = asyncio.get_running_loop().call_later(due / 1e9, self._due, lane)
        return True

    def _due(self, lane: _Lane) -> None:
        lane.timer = None
        self._run_direct(lane)

    def _run_direct(self, lane: _Lane) -> None:
        if lane.busy or self._under_used(lane):
            return
        if lane.timer is not None:
            lane.timer.cancel()
            lane.timer = None
        if lane.gate is not None:
            if not any(s.sequence is not None and s.sequence.queue for s in lane.slots):
                return
            if lane.gate.pick(lane.idle) is None:
                return  # (run again once the lane is granted its resources)
        picked: list[tuple[int, _Item]] = []
        for slot in lane.slots:
            seq = slot.sequence
            if seq is not None and seq.queue:
                picked.append((slot.index, seq.queue.popleft()))
        if not picked:
            return
        lane.busy = True
        for _, item in picked:
            self._waiting.pop(id(item.request), None)
            item.seq.in_flight += 1
            self._prepare(item)
        batch: list[InferRequest] = []
        real: list[_Item | None] = []
        template = picked[0][1]
        by_slot = dict(picked)
        for index in range(picked[-1][0] + 1):
            found = by_slot.get(index)
            if found is None:
                batch.append(self._null_request(template.request, template.inputs))
            else:
                batch.append(found.request)
            real.append(found)
        self._spawn(self._execute_direct(lane, batch, real))

    async def _execute_direct(
        self, lane: _Lane, batch: list[InferRequest], real: list[_Item | None]
    ) -> None:
        items = [p for p in real if p is not None]
        try:
            nulls = tuple(i for i, p in enumerate(real) if p is None)
            responses = await self._execute(lane.instance, batch, nulls)
            for item, response in zip(real, responses, strict=False):
                if item is not None:
                    self._done(item, response)
        except BaseException as e:  # never leave a waiter hanging
            self._fail(items, e)
            for item in items:
                item.seq.in_flight -= 1
            if not isinstance(e, Exception):
                raise
        finally:
            lane.busy = False
            if lane.gate is not None:
                lane.idle.append(lane.instance)
                lane.gate.release(lane.instance)  # (runs the lane, then grants what is free)
            else:
                self._run_direct(lane)
            if lane.leaving is not None:
                self._check_left(lane)

    def _done(self, pending: Pending, response: InferResponse) -> None:
        """A request came back from the model (both strategies)."""
        assert isinstance(pending, _Item)
        item = pending
        seq = item.seq
        seq.in_flight -= 1
        if self._lanes_leaving:
            # (checked once the batcher has its instance back, after these answers)
            asyncio.get_running_loop().call_soon(self._check_all_left)
        req = item.request
        if response.rescheduled:
            if self.iterative and response.error is None:
                req.flags = 0  # later passes are neither START nor END
                seq.queue.appendleft(item)
                self._waiting[id(req)] = item
                self._continue(seq)
                return
            response = reschedule_refused()
        self._answer(item, response)
        if self.iterative:
            # Triton ends the request's sequence by cancelling it, which 2.51 counts
            # as one failed (CANCELED) request
            self._stats.record_failure("CANCELED", 0)
            if not seq.queue and not seq.in_flight:
                self._release(seq)
                return
        self._continue(seq)

    def _continue(self, seq: _Sequence) -> None:
        if seq.slot is not None and self._lanes[seq.slot.instance].batcher is not None:
            # the instance takes its next payload before this sequence's next request
            # joins the batcher (Triton's instance thread wins that race)
            asyncio.get_running_loop().call_soon(self._kick_later, seq)
        else:
            self._kick(seq)
            self._idle_check(seq)

    def _kick_later(self, seq: _Sequence) -> None:
        self._kick(seq)
        self._idle_check(seq)

    # ------------------------------------------------------------------ cancellation

    def _dequeue(self, item: Pending) -> bool:
        assert isinstance(item, _Item)
        seq = item.seq
        try:
            seq.queue.remove(item)
        except ValueError:
            if seq.slot is not None:
                batcher = self._lanes[seq.slot.instance].batcher
                if batcher is not None and batcher._dequeue(item):
                    batcher._waiting.pop(id(item.request), None)
                    seq.in_flight -= 1
                    self._kick(seq)
                    self._idle_check(seq)
                    return True
            return False
        self._idle_check(seq)
        return True

    def cancel(self, req: InferRequest) -> None:
        req.cancelled = True
        item = self._waiting.get(id(req))
        if item is None:
            for lane in self._lanes:
                if lane.batcher is not None and id(req) in lane.batcher._waiting:
                    item = lane.batcher._waiting[id(req)]
                    break
        if item is not None and self._dequeue(item):
            self._refuse(item, "CANCELED", CoreError("Request was cancelled", Code.CANCELLED))

    @property
    def pending(self) -> int:
        return len(self._waiting) + sum(
            lane.batcher.pending for lane in self._lanes if lane.batcher is not None
        )

    def close(self) -> None:
        super().close()
        for seq in list(self._active.values()):
            if seq.timer is not None:
                seq.timer.cancel()
                seq.timer = None
        for lane in self._lanes:
            if lane.timer is not None:
                lane.timer.cancel()
                lane.timer = None
            if lane.batcher is not None:
                lane.batcher.close()
            if lane.gate is not None:
                lane.gate.close()
            if lane.leaving is not None and not lane.leaving.done():
                lane.leaving.set_result(None)  # (nothing runs any more)
