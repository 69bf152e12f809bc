"""The schedulers in-process, with a scripted model instance: no sockets, no timing.

The instance implements the core's ``ModelInstance`` interface (the contract the Python
runtime implements): it records every batch, can be held inside ``execute`` until the
test releases it, and answers as scripted (rescheduling included). What is under test
is the core: batch formation, queue policies, cancellation, rescheduling, statistics.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from google.protobuf import text_format

from tritonhttp.server.core._config import normalize
from tritonhttp.server.core._errors import Code, CoreError
from tritonhttp.server.core._model import ModelVersion
from tritonhttp.server.core._scheduler import Refusal
from tritonhttp.server.core._types import (
    ExecutionTimes,
    InferRequest,
    InferResponse,
    InputTensor,
    OutputTensor,
)
from tritonhttp.server.core.model_config_pb2 import ModelConfig

IO = """
input [ { name: "IN" data_type: TYPE_INT32 dims: [ -1 ] } ]
output [ { name: "OUT" data_type: TYPE_INT32 dims: [ -1 ] } ]
"""


class ScriptedInstance:
    """A model instance whose ``execute`` the test drives."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.batches: list[list[str]] = []
        self.seen: list[list[InferRequest]] = []
        self.cancelled_seen: list[list[bool]] = []
        self.flags: list[list[int]] = []
        self.hold: asyncio.Event | None = None
        self.started = asyncio.Event()
        #: request id -> passes still to reschedule
        self.reschedule: dict[str, int] = {}

    async def execute(
        self, requests: list[InferRequest], times: ExecutionTimes
    ) -> list[InferResponse]:
        self.batches.append([r.id for r in requests])
        self.seen.append(list(requests))
        self.flags.append([r.flags for r in requests])
        self.started.set()
        if self.hold is not None:
            await self.hold.wait()
        self.cancelled_seen.append([r.cancelled for r in requests])
        out = []
        for r in requests:
            left = self.reschedule.get(r.id, 0)
            if left:
                self.reschedule[r.id] = left - 1
                out.append(InferResponse(rescheduled=True))
                continue
            value = r.inputs["IN"].array
            assert value is not None
            out.append(
                InferResponse(outputs=[OutputTensor("OUT", "INT32", list(value.shape), value)])
            )
        return out

    async def finalize(self) -> None:
        pass


def make_model(
    config_text: str, instances: int = 1, cache: Any = None
) -> tuple[ModelVersion, list[ScriptedInstance]]:
    cfg = ModelConfig()
    text_format.Parse(f'name: "m" backend: "python"\n{config_text}\n{IO}', cfg)
    normalize(cfg, "m", [])
    mv = ModelVersion("m", 1)
    insts = [ScriptedInstance(f"m_{i}") for i in range(instances)]
    mv.activate(cfg, insts, cache)  # type: ignore[arg-type]
    return mv, insts


def request(
    rid: str, batch: int | None = 1, value: int = 0, width: int = 1, **fields: Any
) -> InferRequest:
    shape = [width] if batch is None else [batch, width]
    arr = np.full(shape, value, dtype=np.int32)
    return InferRequest(
        id=rid, inputs={"IN": InputTensor("IN", "INT32", shape, array=arr)}, **fields
    )


class Driver:
    """Submits requests to a model version like the HTTP front does."""

    def __init__(self, mv: ModelVersion) -> None:
        self.mv = mv
        self.tasks: dict[str, asyncio.Task[InferResponse]] = {}

    async def send(self, req: InferRequest) -> asyncio.Task[InferResponse]:
        self.mv.admit(req)
        task = asyncio.ensure_future(self.mv.infer(req))
        await asyncio.sleep(0)  # let it reach the scheduler
        if task.done() and task.exception() is not None:
            raise task.exception()  # type: ignore[misc]  # refused outright
        self.tasks[req.id] = task
        return task

    async def results(self) -> dict[str, InferResponse]:
        return {rid: await t for rid, t in self.tasks.items()}


def run(coro_fn: Callable[[], Any]) -> Any:
    return asyncio.run(asyncio.wait_for(coro_fn(), 10))


async def _hold_first(
    inst: ScriptedInstance, d: Driver, rid: str = "a", **kw: Any
) -> asyncio.Event:
    inst.hold = asyncio.Event()
    await d.send(request(rid, **kw))
    await inst.started.wait()
    return inst.hold


# ----------------------------------------------------------------------------- batching


def test_preferred_sizes_close_payloads_while_the_instance_is_busy() -> None:
    async def main() -> list[list[str]]:
        mv, (inst,) = make_model(
            "max_batch_size: 8 dynamic_batching { preferred_batch_size: [2, 4] }"
        )
        d = Driver(mv)
        hold = await _hold_first(inst, d)
        for rid in "bcdefgh":
            await d.send(request(rid))
        assert mv.pending == 7
        hold.set()
        await d.results()
        return inst.batches

    assert run(main) == [["a"], ["b", "c"], ["d", "e", "f", "g"], ["h"]]


def test_batches_stop_at_the_maximum_batch_size_and_keep_request_batches() -> None:
    async def main() -> tuple[list[list[str]], dict[str, Any]]:
        mv, (inst,) = make_model("max_batch_size: 8 dynamic_batching { }")
        d = Driver(mv)
        hold = await _hold_first(inst, d)
        for rid, b in zip("bcdefg", [1, 2, 1, 3, 1, 2], strict=True):
            await d.send(request(rid, batch=b))
        hold.set()
        await d.results()
        shapes = [r.inputs["IN"].shape for r in inst.seen[1]]
        return inst.batches, {"shapes": shapes, "stats": mv.stats.as_json("m", 1)}

    batches, extra = run(main)
    assert batches == [["a"], ["b", "c", "d", "e", "f"], ["g"]]
    assert extra["shapes"] == [[1, 1], [2, 1], [1, 1], [3, 1], [1, 1]]
    stats = extra["stats"]
    assert (stats["inference_count"], stats["execution_count"]) == (11, 3)
    assert [b["batch_size"] for b in stats["batch_stats"]] == [1, 2, 8]


def test_different_shapes_are_not_batched() -> None:
    async def main() -> list[list[str]]:
        mv, (inst,) = make_model(
            "max_batch_size: 8 dynamic_batching { preferred_batch_size: [2, 4] }"
        )
        d = Driver(mv)
        hold = await _hold_first(inst, d, width=3)
        for rid, width in zip("bcdef", [1, 1, 2, 2, 1], strict=True):
            await d.send(request(rid, width=width))
        hold.set()
        await d.results()
        return inst.batches

    assert run(main) == [["a"], ["b", "c"], ["d", "e"], ["f"]]


def test_priorities_and_queue_limits() -> None:
    async def main() -> tuple[list[list[str]], str]:
        mv, (inst,) = make_model(
            "max_batch_size: 4 dynamic_batching { priority_levels: 3 default_priority_level: 2 "
            "priority_queue_policy { key: 1 value: { max_queue_size: 1 } } }"
        )
        d = Driver(mv)
        hold = await _hold_first(inst, d)
        refused = ""
        for rid, priority in [("b", 3), ("c", 2), ("d", 1), ("e", 1), ("f", 0), ("g", 7)]:
            try:
                await d.send(request(rid, priority=priority))
            except CoreError as e:
                refused = e.message
        hold.set()
        await d.results()
        return inst.batches, refused

    batches, refused = run(main)
    assert batches == [["a"], ["d", "c", "f", "g"], ["b"]]
    assert refused == "[request id: e] Exceeds maximum queue size"


def test_timeouts_reject_and_count_as_rejected() -> None:
    async def main() -> tuple[Any, ...]:
        mv, (inst,) = make_model(
            "max_batch_size: 4 dynamic_batching { default_queue_policy { timeout_action: REJECT "
            "default_timeout_microseconds: 50000 allow_timeout_override: true } }"
        )
        d = Driver(mv)
        hold = await _hold_first(inst, d)
        late = await d.send(request("b"))
        quick = await d.send(request("c", timeout_us=10_000))
        long = await d.send(request("d", timeout_us=10_000_000))
        answers = [await t for t in (late, quick, long)]  # while a still runs
        hold.set()
        await d.tasks["a"]
        return answers, mv.stats.failures, mv.stats.stages["fail"][0], inst.batches

    answers, failures, fail_count, batches = run(main)
    for answer in answers:
        assert isinstance(answer, Refusal)
        assert answer.error is not None
        assert (answer.error.message, answer.error.code) == (
            "Request timeout expired",
            Code.UNAVAILABLE,
        )
    assert failures["REJECTED"] == 3 and fail_count == 3
    assert batches == [["a"]]


# ----------------------------------------------------------------------------- cancellation


@pytest.mark.parametrize(
    "config",
    [
        "max_batch_size: 0",
        "max_batch_size: 4 dynamic_batching { }",
        "max_batch_size: 4 dynamic_batching { default_queue_policy { max_queue_size: 5 } }",
    ],
)
def test_cancelled_requests_leave_the_queue(config: str) -> None:
    async def main() -> tuple[Any, ...]:
        mv, (inst,) = make_model(config)
        d = Driver(mv)
        batch = 1 if "dynamic" in config else None
        hold = await _hold_first(inst, d, batch=batch)
        b = request("b", batch=batch)
        await d.send(b)
        await d.send(request("c", batch=batch))
        assert mv.pending == 2
        mv.cancel(b)
        assert mv.pending == 1
        hold.set()
        results = await d.results()
        return results["b"], inst.batches, mv.stats.failures["CANCELED"], mv.stats.execution_count

    answer, batches, cancelled, executions = run(main)
    assert isinstance(answer, Refusal) and answer.error is not None
    assert answer.error.code == Code.CANCELLED
    assert ["b"] not in batches and all("b" not in batch for batch in batches)
    assert (cancelled, executions) == (1, 2)


def test_a_batch_emptied_by_cancellation_still_takes_later_requests() -> None:
    """A payload formed ahead of a busy instance whose requests all leave (their clients
    went away) stays the batch being formed: requests that join it later still run."""

    async def main() -> tuple[list[list[str]], str | None]:
        mv, (inst,) = make_model("max_batch_size: 4 dynamic_batching { }")
        d = Driver(mv)
        hold = await _hold_first(inst, d)
        b = request("b")
        await d.send(b)  # formed into a payload ahead of the busy instance
        mv.cancel(b)
        await d.send(request("c"))
        hold.set()
        results = await d.results()
        return inst.batches, results["c"].error and results["c"].error.message

    batches, error = run(main)
    assert batches == [["a"], ["c"]]
    assert error is None


def test_a_running_request_is_flagged_cancelled() -> None:
    async def main() -> list[list[bool]]:
        mv, (inst,) = make_model("max_batch_size: 0")
        d = Driver(mv)
        a = request("a", batch=None)
        inst.hold = asyncio.Event()
        await d.send(a)
        await inst.started.wait()
        mv.cancel(a)
        inst.hold.set()
        await d.results()
        return inst.cancelled_seen

    assert run(main) == [[True]]


def test_fifo_turns_survive_waiting_tasks_being_cancelled() -> None:
    """FIFO starts a queued request on the instance freed for it, in the hand-over
    itself: a task cancelled while queued leaves the queue (never executed); one
    cancelled after its execution started lets it finish (as a client that goes away
    during execute does) and the instance goes on to the next (nothing hangs)."""

    async def main() -> tuple[Any, ...]:
        mv, (inst,) = make_model("max_batch_size: 0")
        d = Driver(mv)
        hold = await _hold_first(inst, d, batch=None)
        for rid in "bcde":
            await d.send(request(rid, batch=None))
        assert mv.pending == 4
        d.tasks["b"].cancel()  # queued: it leaves the queue
        await asyncio.sleep(0)
        assert mv.pending == 3
        scheduler: Any = mv.scheduler
        start = scheduler._start

        def start_then_cancel(inst: Any, item: Any) -> None:
            start(inst, item)
            if item.request.id == "c":
                d.tasks["c"].cancel()  # c is executing: its waiting task is cancelled

        scheduler._start = start_then_cancel
        hold.set()  # "a" ends: its instance goes to "c", then on to "d" and "e"
        results = {}
        for rid, task in d.tasks.items():
            try:
                results[rid] = await task
            except asyncio.CancelledError:
                results[rid] = None
        await asyncio.sleep(0)
        return results, inst.batches, mv.pending, list(scheduler._idle)

    results, batches, pending, idle = run(main)
    assert results["b"] is None and results["c"] is None
    assert all(results[r].outputs for r in "ade")
    assert batches == [["a"], ["c"], ["d"], ["e"]]
    assert pending == 0 and len(idle) == 1  # the instance came back


class EarlyFree(ScriptedInstance):
    """An instance that says it is free before its execute returns (a worker process at
    its ``done``) for a batch led by one of ``early``, twice (still one release), and
    notes the batches executed by then."""

    def __init__(self, name: str, early: str) -> None:
        super().__init__(name)
        self.early = early
        self.seen_at_free: list[list[list[str]]] = []

    async def execute(
        self, requests: list[InferRequest], times: ExecutionTimes
    ) -> list[InferResponse]:
        out = await super().execute(requests, times)
        if requests[0].id in self.early:
            assert times.on_free is not None
            times.on_free()
            self.seen_at_free.append([list(b) for b in self.batches])
            times.on_free()
            await asyncio.sleep(0)
        return out


def _early_free_model(config: str, early: str) -> tuple[ModelVersion, EarlyFree, Any]:
    """A model version whose one instance is an :class:`EarlyFree`, and its scheduler."""
    mv, _ = make_model(config)
    inst = EarlyFree("m_0", early)
    scheduler: Any = mv.scheduler  # (its one instance swapped for ours)
    scheduler.instances = [inst]
    scheduler._idle.clear()
    scheduler._idle.append(inst)
    return mv, inst, scheduler


def test_fifo_starts_the_next_request_inside_the_instances_on_free() -> None:
    """An instance that says it is free before its execute returns (a worker process at
    its ``done``) has the next queued request started within that call, synchronously;
    a second ``on_free`` (and the return) free nothing more."""

    async def main() -> tuple[Any, ...]:
        mv, inst, scheduler = _early_free_model("max_batch_size: 0", "a")
        d = Driver(mv)
        hold = await _hold_first(inst, d, batch=None)
        for rid in "bc":
            await d.send(request(rid, batch=None))
        hold.set()
        results = await d.results()
        return inst.seen_at_free, inst.batches, results, list(scheduler._idle), mv.pending

    seen, batches, results, idle, pending = run(main)
    assert seen == [[["a"], ["b"]]]  # b was executing when on_free returned
    assert batches == [["a"], ["b"], ["c"]]
    assert all(r.outputs for r in results.values())
    assert len(idle) == 1 and pending == 0


def test_batcher_starts_the_next_payload_inside_the_instances_on_free() -> None:
    """The dynamic batcher, too, hands a freed instance its next payload inside the
    instance's ``on_free``, before the finished execute returns, for a lone request on
    an idle instance and for a payload alike; the payload formed while the instance was
    busy goes as it was formed."""

    async def main() -> tuple[Any, ...]:
        mv, inst, scheduler = _early_free_model("max_batch_size: 8 dynamic_batching { }", "ab")
        d = Driver(mv)
        hold = await _hold_first(inst, d)
        for rid in "bcd":
            await d.send(request(rid))
        inst.hold = None
        hold.set()
        results = await d.results()
        await d.send(request("e"))
        await d.results()
        return inst.seen_at_free, inst.batches, results, list(scheduler._idle), mv.pending

    seen, batches, results, idle, pending = run(main)
    # b, c and d were executing when a's on_free returned; nothing was queued at b's
    assert seen == [[["a"], ["b", "c", "d"]], [["a"], ["b", "c", "d"]]]
    assert batches == [["a"], ["b", "c", "d"], ["e"]]
    assert all(r.outputs for r in results.values())
    assert len(idle) == 1 and pending == 0


# ----------------------------------------------------------------------------- sequences

SEQ = """
max_batch_size: 2
sequence_batching {
  control_input [
    { name: "START" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] },
    { name: "READY" control [ { kind: CONTROL_SEQUENCE_READY int32_false_true: [ 0, 1 ] } ] },
    { name: "CORRID" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 } ] }
  ]
}
"""


def test_sequences_take_slots_and_pad_batches_with_null_requests() -> None:
    async def main() -> tuple[Any, ...]:
        mv, (inst,) = make_model(SEQ)
        d = Driver(mv)
        await d.send(request("s1", correlation_id=1, flags=1))
        await d.send(request("s2", correlation_id=2, flags=1))
        await d.results()
        null, real = inst.seen[1]
        controls = {
            name: (t.array.tolist() if t.array is not None else None)
            for name, t in null.inputs.items()
        }
        return inst.batches, controls, list(real.inputs), mv.stats.as_json("m", 1)

    batches, null_controls, order, stats = run(main)
    assert batches == [["s1"], ["", "s2"]]
    assert null_controls == {"READY": [[0]], "CORRID": [[0]], "START": [[0]], "IN": [[0]]}
    assert order == ["CORRID", "READY", "START", "IN"]  # Triton 2.51's map order
    assert stats["inference_count"] == 2  # the null request is not an inference
    assert [b["batch_size"] for b in stats["batch_stats"]] == [1, 2]


def test_iterative_requests_are_rescheduled_until_answered() -> None:
    async def main() -> tuple[Any, ...]:
        mv, (inst,) = make_model("max_batch_size: 0 sequence_batching { iterative_sequence: true }")
        inst.reschedule = {"it": 2}
        d = Driver(mv)
        req = request("it", batch=None, value=3)
        await d.send(req)
        results = await d.results()
        flags = inst.flags
        return results["it"], flags, req.correlation_id, mv.stats

    answer, flags, cid, stats = run(main)
    assert answer.error is None and answer.outputs[0].array.tolist() == [3]
    assert flags == [[1], [0], [0]]  # START on the first pass only
    assert cid == 1  # a sequence of its own
    assert (stats.execution_count, stats.stages["success"][0]) == (3, 3)
    assert stats.failures["CANCELED"] == 1  # Triton 2.51 counts the sequence's end so


def test_rescheduling_needs_an_iterative_sequence() -> None:
    async def main() -> InferResponse:
        mv, (inst,) = make_model("max_batch_size: 4 dynamic_batching { }")
        inst.reschedule = {"r": 1}
        d = Driver(mv)
        await d.send(request("r"))
        return (await d.results())["r"]

    answer = run(main)
    assert answer.error is not None
    assert answer.error.message.startswith(
        "Request is released with TRITONSERVER_REQUEST_RELEASE_RESCHEDULE"
    )


def test_cancelling_a_backlogged_sequence_request() -> None:
    async def main() -> tuple[Any, ...]:
        mv, (inst,) = make_model("max_batch_size: 0 sequence_batching { }")
        d = Driver(mv)
        await d.send(request("s1", batch=None, correlation_id=1, flags=1))
        await d.results()
        waiting = request("s2", batch=None, correlation_id=2, flags=1)  # no free slot
        task = await d.send(waiting)
        assert not task.done() and mv.pending == 1
        mv.cancel(waiting)
        answer = await task
        return answer, mv.pending, inst.batches

    answer, pending, batches = run(main)
    assert isinstance(answer, Refusal) and pending == 0
    assert batches == [["s1"]]


def test_fifo_sends_one_request_ahead_to_busy_instances_that_take_it() -> None:
    """An instance that ``takes_ahead`` (a worker process running a quick model) is sent
    one more request while busy, but only when no instance is idle; the oldest busy
    instance goes first; past that, requests queue. Everything is answered and the
    instances come back idle with nothing left ahead."""

    class Ahead(ScriptedInstance):
        takes_ahead = True

    async def main() -> tuple[Any, ...]:
        mv, _ = make_model("max_batch_size: 0")
        insts = [Ahead("m_0"), Ahead("m_1")]
        scheduler: Any = mv.scheduler
        scheduler.instances = insts
        scheduler._idle.clear()
        scheduler._idle.extend(insts)
        hold = asyncio.Event()
        for inst in insts:
            inst.hold = hold
        d = Driver(mv)
        for rid in "abcde":
            await d.send(request(rid, batch=None))
        running = [[r.id for b in inst.seen for r in b] for inst in insts]
        pending = mv.pending
        hold.set()
        results = await d.results()
        await asyncio.sleep(0)
        return running, pending, results, scheduler, insts

    running, pending, results, scheduler, insts = run(main)
    assert running == [["a", "c"], ["b", "d"]]  # idle ones first, then one ahead each
    assert pending == 1  # "e" waited in the queue
    assert sorted(r for i in insts for b in i.batches for r in b) == list("abcde")
    assert all(r.outputs for r in results.values())
    assert len(scheduler._idle) == 2 and not scheduler._ahead and not scheduler._load


def test_fifo_sends_nothing_ahead_to_instances_that_do_not_take_it() -> None:
    """An instance without ``takes_ahead`` (in-process, or a slow or decoupled model in
    a worker) runs one request at a time; the rest queue."""

    async def main() -> tuple[Any, ...]:
        mv, (inst,) = make_model("max_batch_size: 0")
        d = Driver(mv)
        hold = await _hold_first(inst, d, batch=None)
        for rid in "bc":
            await d.send(request(rid, batch=None))
        seen = [r.id for b in inst.seen for r in b]
        pending = mv.pending
        hold.set()
        await d.results()
        return seen, pending, inst.batches

    seen, pending, batches = run(main)
    assert seen == ["a"] and pending == 2
    assert batches == [["a"], ["b"], ["c"]]


def test_initial_state_files(tmp_path: Any) -> None:
    """A state's ``data_file`` is read from the model's ``initial_state`` folder at load
    (Triton's load errors for a missing or short file; extra bytes are ignored)."""
    from tritonhttp.server.core._sequence import SequenceBatcher
    from tritonhttp.server.core._stats import ModelStats

    cfg = ModelConfig()
    text_format.Parse(
        'name: "m" backend: "python" max_batch_size: 0 sequence_batching { state [ {'
        ' input_name: "S" output_name: "S_OUT" data_type: TYPE_INT32 dims: [ 2 ]'
        ' initial_state: { data_type: TYPE_INT32 dims: [ 2 ] data_file: "init.bin" } } ] }'
        f"\n{IO}",
        cfg,
    )

    def batcher() -> SequenceBatcher:
        return SequenceBatcher(cfg, [], None, ModelStats(), model_dir=tmp_path)  # type: ignore[arg-type]

    with pytest.raises(CoreError) as missing:
        batcher()
    assert missing.value.message == (
        f"failed to open text file for read {tmp_path}/initial_state/init.bin: "
        "No such file or directory"
    )
    (tmp_path / "initial_state").mkdir()
    (tmp_path / "initial_state" / "init.bin").write_bytes(np.int32([11]).tobytes())
    with pytest.raises(CoreError) as short:
        batcher()
    assert short.value.code == Code.INVALID_ARG
    assert short.value.message == (
        "initial_state setting expects 8 bytes, but the data provided from init.binonly has "
        "4 bytes."
    )
    (tmp_path / "initial_state" / "init.bin").write_bytes(np.int32([11, -3, 9]).tobytes())
    assert batcher().states[0].value.tolist() == [11, -3]


def test_a_state_without_an_input_name_fails_the_load() -> None:
    """Real Triton 2.51 crashes on it (docs/server.md, deliberate differences)."""
    from tritonhttp.server.core._sequence import SequenceBatcher
    from tritonhttp.server.core._stats import ModelStats

    cfg = ModelConfig()
    text_format.Parse(
        'name: "m" backend: "python" max_batch_size: 0 sequence_batching { state [ {'
        ' output_name: "S_OUT" data_type: TYPE_INT32 dims: [ 2 ] } ] }'
        f"\n{IO}",
        cfg,
    )
    with pytest.raises(CoreError) as refused:
        SequenceBatcher(cfg, [], None, ModelStats())  # type: ignore[arg-type]
    assert (refused.value.code, refused.value.message) == (
        Code.INVALID_ARG,
        "state of model 'm' must specify 'input_name'",
    )


def test_preserve_ordering_keeps_no_answer_of_a_request_whose_client_left() -> None:
    """Under ``preserve_ordering`` an answer waits for those dispatched before it; a
    request whose client went away while it ran is passed over, and its answer, coming
    later, is dropped rather than kept (where a later request could be given it)."""

    async def main() -> tuple[bool, list[str], int]:
        cfg = "max_batch_size: 4 dynamic_batching { preserve_ordering: true }"
        mv, (first, second) = make_model(cfg, instances=2)
        d = Driver(mv)
        first.hold, second.hold = asyncio.Event(), asyncio.Event()
        a = await d.send(request("a"))
        await first.started.wait()
        b = await d.send(request("b"))
        await second.started.wait()
        a.cancel()
        await asyncio.sleep(0)
        second.hold.set()  # b's answer goes out: a, before it, has no client any more
        answer = await b
        first.hold.set()  # a's answer comes after it was passed over
        while len(first.cancelled_seen) < 1:
            await asyncio.sleep(0)
        for _ in range(5):
            await asyncio.sleep(0)
        batcher = mv.scheduler
        return (
            answer.error is None,
            [*first.batches[0], *second.batches[0]],
            len(
                batcher._outcomes  # type: ignore[union-attr]
            ),
        )

    ok, ran, kept = run(main)
    assert ok and ran == ["a", "b"]
    assert kept == 0
