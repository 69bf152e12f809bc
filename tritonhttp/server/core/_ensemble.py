"""Ensembles (``platform: "ensemble"``): the step graph, its checks with Triton's texts,
and the execution of one ensemble request.

An ensemble is a :class:`ModelVersion` without instances: :class:`EnsembleVersion`
admits a request with the ensemble's own rules, then runs its steps as requests to the
step models through their usual path (``admit`` then ``infer``: their schedulers, dynamic
batching included, and their statistics), passing tensors from step to step as arrays.
Every step request is made from the ensemble's request by :func:`step_request`.

A decoupled step fans out: each of its responses carries on through the steps that
depend on it, and the ensemble (decoupled itself then) sends one response each time all
its outputs are set.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, cast

from ._cache import ResponseCache
from ._config import PollError
from ._errors import Code, CoreError
from ._model import ModelVersion
from ._trace import trace_child, trace_end
from ._types import InferRequest, InferResponse, InputTensor, OutputTensor, ParamValue
from .model_config_pb2 import DataType, ModelConfig

__all__ = [
    "EnsembleVersion",
    "Lookup",
    "Step",
    "check_steps",
    "step_models",
    "step_request",
    "steps_of",
    "validate_graph",
]

#: request flags (sequence start / end), as the front sets them
_START, _END = 1, 2


@dataclass(frozen=True)
class Step:
    """One ``ensemble_scheduling.step``: the model (version -1: the latest ready one),
    its inputs (step input -> ensemble tensor) and outputs (step output -> tensor)."""

    model: str
    version: int
    inputs: dict[str, str]
    outputs: dict[str, str]


def steps_of(cfg: ModelConfig) -> list[Step]:
    """The steps of an ensemble config, in config order."""
    return [
        Step(s.model_name, s.model_version, dict(s.input_map), dict(s.output_map))
        for s in cfg.ensemble_scheduling.step
    ]


def step_models(cfg: ModelConfig) -> list[str]:
    """The names of the models an ensemble config's steps use (each once, in order)."""
    return list(dict.fromkeys(s.model_name for s in cfg.ensemble_scheduling.step))


# ----------------------------------------------------------------------------- graph checks


def validate_graph(cfg: ModelConfig) -> None:
    """The checks Triton makes on an ensemble's graph while polling (PollError texts)."""
    name = cfg.name
    if cfg.backend:
        raise PollError(
            f"Ensemble model '{name}' must have platform type 'ensemble' and empty backend type"
        )
    if cfg.instance_group:
        raise PollError(f"instance group should not be specified for ensemble '{name}'")
    if cfg.HasField("optimization"):
        raise PollError(f"optimization should not be specified for ensemble '{name}'")
    if cfg.model_warmup:
        raise PollError(f"model_warmup can not be specified for ensemble '{name}'")
    if not cfg.HasField("ensemble_scheduling"):
        raise PollError(
            f"ensemble scheduling must be set for ensemble {name} whose platform is ensemble"
        )
    steps = steps_of(cfg)
    if not steps:
        raise PollError(f"must specify 'step' for ensemble '{name}'")
    producer: dict[str, int] = {}
    for i, step in enumerate(steps):
        for what, given in (
            ("model_name", step.model),
            ("input_map", step.inputs),
            ("output_map", step.outputs),
        ):
            if not given:
                raise PollError(f"must specify '{what}' in step {i} of ensemble {name}")
        for tensor in step.outputs.values():
            if tensor in producer:
                raise PollError(
                    f"ensemble tensor '{tensor}' can appear in an output map only once for "
                    f"ensemble '{name}' step {i}"
                )
            producer[tensor] = i
    inputs = [t.name for t in cfg.input]
    used = _needed_tensors(cfg, steps, producer, inputs)
    every = dict.fromkeys(
        [*inputs, *(t for s in steps for t in (*s.inputs.values(), *s.outputs.values()))]
    )
    for tensor in every:
        if tensor not in used:
            if tensor in inputs:
                raise PollError(f"ensemble input '{tensor}' for ensemble {name}' is not used")
            raise PollError(f"ensemble tensor '{tensor}' is unused in ensemble '{name}'")


def _needed_tensors(
    cfg: ModelConfig, steps: list[Step], producer: dict[str, int], inputs: list[str]
) -> set[str]:
    """Every tensor the ensemble's outputs depend on (PollError for an output no step
    writes, or one that depends on a tensor nothing produces)."""
    name = cfg.name
    seen: set[str] = set()
    for out in cfg.output:
        if out.name not in producer and out.name not in inputs:  # (an input may be an output)
            raise PollError(f"ensemble output '{out.name}' for ensemble {name}' is not used")
        todo = [out.name]
        while todo:
            tensor = todo.pop()
            if tensor in seen:
                continue
            seen.add(tensor)
            if tensor in inputs:
                continue
            at = producer.get(tensor)
            if at is None:
                raise PollError(
                    f"output '{out.name}' for ensemble '{name}' is not written: at least one "
                    f"of its depending tensors, '{tensor}', is not connected"
                )
            todo.extend(steps[at].inputs.values())
    return seen


Lookup = Callable[[str, int], ModelVersion | None]
_Responses = AsyncGenerator[tuple[InferResponse | None, bool], None]


def check_steps(cfg: ModelConfig, lookup: Lookup, failed: dict[str, str] | None = None) -> None:
    """The checks Triton makes when an ensemble loads, against its step models as loaded
    (``lookup(model, version)``: the ready version, or None; ``failed``: the load error
    of each step model that was just tried and failed, as its load answer gives it).
    Raises CoreError with the message Triton gives (without the ``load failed for model``
    prefix)."""
    name = cfg.name
    steps = steps_of(cfg)
    missing = [m for m in step_models(cfg) if lookup(m, -1) is None]
    for step_name in missing:
        if failed and step_name in failed:
            raise CoreError(
                f"ensemble '{name}' depends on '{step_name}' which has no loaded version. "
                f"Model '{step_name}' loading failed with error: "
                + _load_error_text(step_name, failed[step_name])
            )
    if missing:
        raise CoreError(
            f"ensemble {name} contains models that are not available or ambiguous: "
            + ", ".join(missing)
        )
    models: list[ModelVersion] = []
    for step in steps:
        # (-1 is the latest version; any other number names a version, 0 included)
        mv = lookup(step.model, step.version) if step.version == -1 or step.version > 0 else None
        if mv is None:
            raise CoreError(
                f"ensemble '{name}' depends on '{step.model}' whose required version "
                f"{step.version} is not loaded."
            )
        models.append(mv)
    for step, mv in zip(steps, models, strict=True):
        step_cfg = mv.config
        assert step_cfg is not None
        # (a step that does not batch takes whatever the ensemble's batch makes of it)
        if 0 < step_cfg.max_batch_size < cfg.max_batch_size:
            raise CoreError(
                f"ensemble {name} allows maximum batch size {cfg.max_batch_size}, but it "
                f"contains model {step.model} which only allows maximum batch size to be "
                f"{step_cfg.max_batch_size}"
            )
    _check_tensors(cfg, steps, models)
    _check_decoupled_origins(cfg, steps, models)


def _load_error_text(model: str, message: str) -> str:
    """A step model's load error as an ensemble's load error quotes it: without its
    ``load failed for model '...':`` prefix and its last newline."""
    prefix = f"load failed for model '{model}': "
    message = message.removeprefix(prefix)
    return message.removesuffix("\n")


@dataclass(frozen=True)
class _Seen:
    """What one model says of an ensemble tensor: its data type, its dims (without the
    batch dimension), whether that model batches."""

    dtype: int
    dims: list[int]
    batching: bool
    source: str

    @property
    def full(self) -> list[int]:
        return [-1, *self.dims] if self.batching else self.dims


def _check_tensors(cfg: ModelConfig, steps: list[Step], models: list[ModelVersion]) -> None:
    """Every ensemble tensor has one data type and one shape, whoever reads or writes it:
    the ensemble's own inputs and outputs first, then each step in order (its inputs,
    every required one mapped, then its outputs)."""
    name = cfg.name
    known: dict[str, _Seen] = {}

    def note(tensor: str, seen: _Seen) -> None:
        first = known.setdefault(tensor, seen)
        if first.dtype != seen.dtype:
            raise CoreError(
                f"in ensemble {name}, ensemble tensor {tensor}: inconsistent data type: "
                f"{DataType.Name(first.dtype)} is inferred from model {first.source} while "
                f"{DataType.Name(seen.dtype)} is inferred from model {seen.source}"
            )
        # (the dims as given, or with the batch dimension of the one that batches: a
        # non-batching model may spell out [-1, ...] what a batching one calls [...])
        if not (_compatible(first.dims, seen.dims) or _compatible(first.full, seen.full)):
            raise CoreError(
                f"in ensemble {name}, ensemble tensor {tensor}: inconsistent shape: "
                f"{_dims(first.full)} is inferred from model {first.source} while "
                f"{_dims(seen.full)} is inferred from model {seen.source}"
            )

    batching = cfg.max_batch_size > 0
    for t in cfg.input:
        note(t.name, _Seen(t.data_type, list(t.dims), batching, name))
    for o in cfg.output:
        note(o.name, _Seen(o.data_type, list(o.dims), batching, name))
    for step, mv in zip(steps, models, strict=True):
        step_cfg = mv.config
        assert step_cfg is not None
        batching = step_cfg.max_batch_size > 0
        ins = {t.name: t for t in step_cfg.input}
        outs = {t.name: t for t in step_cfg.output}
        for key, tensor in step.inputs.items():
            spec = ins.get(key)
            if spec is None:
                raise CoreError(
                    f"in ensemble {name}, ensemble tensor {tensor} is mapping to non-existing "
                    f"input {key} in model {step.model}"
                )
            note(tensor, _Seen(spec.data_type, list(spec.dims), batching, step.model))
        for key, spec in ins.items():
            if key not in step.inputs and not spec.optional:
                raise CoreError(
                    f"in ensemble {name}, input {key} in model {step.model} is not mapped to "
                    "any ensemble tensors"
                )
        for key, tensor in step.outputs.items():
            out = outs.get(key)
            if out is None:
                raise CoreError(
                    f"in ensemble {name}, ensemble tensor {tensor} is mapped from "
                    f"non-existing output {key} in model {step.model}"
                )
            note(tensor, _Seen(out.data_type, list(out.dims), batching, step.model))


def _check_decoupled_origins(
    cfg: ModelConfig, steps: list[Step], models: list[ModelVersion]
) -> None:
    """A step may not read tensors that come from different decoupled steps (the
    ensemble's inputs come from the ensemble): their responses could not be matched."""
    name = cfg.name
    origin = {t.name: name for t in cfg.input}
    todo = list(range(len(steps)))
    while todo:
        ready = [i for i in todo if all(t in origin for t in steps[i].inputs.values())]
        if not ready:
            return  # (what is left reads tensors nothing makes: refused elsewhere)
        for i in ready:
            todo.remove(i)
            step, mv = steps[i], models[i]
            sources = {origin[t] for t in step.inputs.values()}
            if len(sources) > 1:
                raise CoreError(
                    f"in ensemble {name}, step of model '{name}' receives inputs originated "
                    "from different decoupled models"
                )
            made_by = step.model if mv.decoupled else sources.pop()
            for tensor in step.outputs.values():
                origin[tensor] = made_by


def _compatible(a: list[int], b: list[int]) -> bool:
    return len(a) == len(b) and all(x == y or x == -1 or y == -1 for x, y in zip(a, b, strict=True))


def _dims(shape: Iterable[int]) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


# ----------------------------------------------------------------------------- requests


def step_request(
    parent: InferRequest, inputs: dict[str, InputTensor], outputs: list[str]
) -> InferRequest:
    """The request for one step, made from the ensemble's request: its id, sequence,
    priority, timeout and parameters, with the step's inputs, asking for the step outputs
    its ``output_map`` names (the one place a step's request is created, so whatever a
    step inherits from its ensemble request is set here)."""
    return InferRequest(
        id=parent.id,
        inputs=inputs,
        requested_outputs=outputs,
        parameters=dict(parent.parameters),
        correlation_id=parent.correlation_id,
        flags=parent.flags,
        priority=parent.priority,
        timeout_us=parent.timeout_us,
        cancelled=parent.cancelled,
    )


class SequenceParameters(dict[str, ParamValue]):
    """Response parameters holding the same names more than once: Triton's ensemble
    response repeats ``sequence_id``/``sequence_start``/``sequence_end`` once per output
    it carries. ``items()`` yields every pair, repeats included (the JSON writer walks
    ``items()``); as a mapping it holds each name once."""

    def __init__(self, pairs: list[tuple[str, ParamValue]]) -> None:
        super().__init__(pairs)
        self._pairs = pairs

    def items(self) -> Any:
        return list(self._pairs)


def _sequence_parameters(req: InferRequest, outputs: int) -> SequenceParameters:
    one: list[tuple[str, ParamValue]] = [
        ("sequence_id", req.correlation_id),
        ("sequence_start", bool(req.flags & _START)),
        ("sequence_end", bool(req.flags & _END)),
    ]
    return SequenceParameters(one * outputs)


class _StepFailed(Exception):
    def __init__(self, error: CoreError) -> None:
        super().__init__(error.message)
        self.error = error


def _as_input(name: str, out: OutputTensor) -> InputTensor:
    return InputTensor(name, out.datatype, list(out.shape), array=out.array)


def _batch_fitted(shape: list[int], dims: Iterable[int], batches: bool, batch: int) -> list[int]:
    """The shape a tensor takes for a model (a step, or the ensemble for its response)
    whose dims are ``dims``: a tensor without batch dimension (``batch`` 0) gets one of 1
    for a model that batches; one of a batch of 1 loses it for a model that does not
    batch, when it does not fit the dims as it is (as Triton reshapes them)."""
    dims = list(dims)
    if batches and batch == 0 and _compatible(shape, dims):
        return [1, *shape]
    unbatched = not batches and batch == 1 and shape[:1] == [1]
    if unbatched and not _compatible(shape, dims) and _compatible(shape[1:], dims):
        return shape[1:]
    return shape


def _reshaped(name: str, t: InputTensor, shape: list[int]) -> InputTensor:
    if shape == list(t.shape):
        return InputTensor(name, t.datatype, shape, t.array, t.raw)
    array = t.array.reshape(shape) if t.array is not None else None
    return InputTensor(name, t.datatype, shape, array, t.raw)


def _pruned(steps: list[Step], outputs: list[str], wanted: list[str] | None) -> set[int]:
    """The steps that run for a request asking for ``wanted`` outputs (None: all), as
    Triton prunes them: an output not asked for is dropped, a step whose every output is
    dropped is dropped, and so is a tensor that no remaining step reads (even one that
    was asked for), and so on up the graph."""
    live = set(range(len(steps)))
    if not wanted:
        return live
    producer = {t: i for i, s in enumerate(steps) for t in s.outputs.values()}
    readers: dict[str, int] = {}
    for s in steps:
        for t in s.inputs.values():
            readers[t] = readers.get(t, 0) + 1
    dropped_out: dict[int, set[str]] = {}
    todo = [o for o in outputs if o not in wanted]
    while todo:
        tensor = todo.pop()
        at = producer.get(tensor)
        if at is None or at not in live:
            continue
        gone = dropped_out.setdefault(at, set())
        gone.add(tensor)
        if gone >= set(steps[at].outputs.values()):
            live.discard(at)
            for t in steps[at].inputs.values():
                readers[t] -= 1
                if readers[t] == 0:
                    todo.append(t)
    return live


# ----------------------------------------------------------------------------- execution


@dataclass
class _Run:
    """One ensemble request on its way through the steps."""

    req: InferRequest
    live: set[int]
    wanted: list[str]
    #: optional ensemble inputs the request left out (steps run without them)
    absent: set[str]
    #: the batch size of each tensor set (0: it has no batch dimension)
    batch: dict[str, int] = field(default_factory=dict)
    error: CoreError | None = None
    #: whether no other step request was in flight when the error came (then Triton 2.51
    #: counts the failure twice)
    alone: bool = True
    #: responses sent (decoupled ensembles) or the one response made
    responses: list[InferResponse] = field(default_factory=list)
    #: the step requests in flight, with their models (cancelled with the request)
    active: list[tuple[ModelVersion, InferRequest]] = field(default_factory=list)
    #: the last step's answer came from an execution of several requests, whose next
    #: steps arrive together (``InferRequest.gathered``)
    gathered: bool = False


class EnsembleVersion(ModelVersion):
    """A version of an ensemble model: admission by the ensemble's config, execution by
    its steps (looked up by ``lookup`` at each request, so a step reloaded meanwhile
    serves the next request)."""

    def __init__(self, name: str, version: int, lookup: Lookup) -> None:
        super().__init__(name, version)
        self._lookup = lookup
        self.steps: list[Step] = []
        self._outputs: list[str] = []
        self._optional: set[str] = set()
        #: the requests running, by ``id()``
        self._runs: dict[int, _Run] = {}

    @property
    def step_names(self) -> set[str]:
        """The models the steps use."""
        return {s.model for s in self.steps}

    def activate_ensemble(
        self, config: ModelConfig, decoupled: bool, cache: ResponseCache | None = None
    ) -> None:
        """Take the ensemble's config (and the server's response cache, used when the
        config enables it); the version becomes READY."""
        self.activate(config, [], cache)
        self.decoupled = decoupled
        self.steps = steps_of(config)
        self._outputs = [o.name for o in config.output]
        self._optional = {i.name for i in config.input if i.optional}

    async def infer(self, req: InferRequest) -> InferResponse:
        """Run the steps for an admitted request (or answer it from the response cache
        when the ensemble enables it); its response, or (decoupled) the completion marker
        once every response went to ``req.response_stream``."""
        self.in_flight += 1
        try:
            cache = self.cache
            if cache is not None and req.response_stream is None:
                return await self._infer_from_cache(cache, req)
            return await self._infer(req)
        finally:
            self.in_flight -= 1
            if self.in_flight == 0 and self._drain_waiters:
                for waiter in self._drain_waiters:
                    if not waiter.done():
                        waiter.set_result(None)
                self._drain_waiters.clear()

    async def _infer_from_cache(self, cache: ResponseCache, req: InferRequest) -> InferResponse:
        """The cached response (its outputs only, as Triton keeps them), or the steps' one,
        then cached; a failed request is neither cached nor counted as a miss."""
        return await self._through_cache(
            cache,
            req,
            lambda: self._infer(req),
            lambda r: InferResponse(r.outputs) if r.error is None else None,
        )

    async def _infer(self, req: InferRequest) -> InferResponse:
        t0 = time.monotonic_ns()
        wanted = req.requested_outputs or list(self._outputs)
        live = _pruned(self.steps, self._outputs, req.requested_outputs)
        run = _Run(req, live, wanted, self._optional - req.inputs.keys())
        batch = req.batch_size if self.config is not None and self.config.max_batch_size else 0
        run.batch = dict.fromkeys(req.inputs, batch)
        tensors = {
            name: InputTensor(name, t.datatype, list(t.shape), t.array, t.raw)
            for name, t in req.inputs.items()
        }
        t_in = time.monotonic_ns()
        self._runs[id(req)] = run
        try:
            await self._branch(run, tensors, frozenset())
        finally:
            del self._runs[id(req)]
        t1 = time.monotonic_ns()
        stream = req.response_stream
        if run.error is None and not run.responses and stream is None:
            run.error = CoreError(
                f"in ensemble '{self.name}', {req.log_prefix()}unexpected deadlock, at least "
                "one output is not set while no more ensemble steps can be made"
            )
        if run.error is not None:
            if req.cancelled:  # (its client went away)
                self.stats.record_failure("CANCELED", t1 - req.start_ns)
            else:  # Triton 2.51 counts a request that failed in its steps twice, once when
                # other step requests were still in flight (and one its admission refused
                # not at all)
                self.stats.record_failure("OTHER", t1 - req.start_ns)
                if run.alone:
                    self.stats.record_failure("OTHER", t1 - req.start_ns)
            if stream is not None:
                stream.put(InferResponse(error=run.error), True)
                return InferResponse()
            return InferResponse(error=run.error)
        t2 = time.monotonic_ns()
        self.stats.record_execution(
            req.batch_size, 1, max(1, t_in - t0), t1 - t_in, max(1, t2 - t1)
        )
        self.stats.record_request(True, t1 - req.start_ns, t0 - req.start_ns)
        if stream is not None:
            stream.put(None, True)
            return InferResponse()
        return run.responses[0]

    async def _branch(
        self, run: _Run, tensors: dict[str, InputTensor], done: frozenset[int]
    ) -> None:
        """Start every step as soon as the tensors it reads are set, until none is left;
        then answer with this branch's tensors. A decoupled step starts once the steps
        running have finished, and continues the branch once per response."""
        running: dict[asyncio.Future[dict[str, InputTensor]], int] = {}
        started = set(done)
        try:
            while run.error is None:
                if run.req.cancelled:
                    run.error = CoreError("Request was cancelled", Code.CANCELLED)
                    break
                ready = [
                    i
                    for i in sorted(run.live - started)
                    if all(t in tensors or t in run.absent for t in self.steps[i].inputs.values())
                ]
                if len(ready) == 1 and not running:  # a chain: its one next step, awaited here
                    i = ready[0]
                    mv = self._model(run, i)
                    if mv is None:
                        break
                    if not mv.decoupled:
                        started.add(i)
                        tensors = {**tensors, **await self._step(run, i, mv, tensors)}
                        continue
                streaming: list[tuple[int, ModelVersion]] = []
                for i in ready:
                    mv = self._model(run, i)
                    if mv is None:
                        break
                    if mv.decoupled:
                        streaming.append((i, mv))  # (once the steps running now are done)
                        continue
                    running[asyncio.ensure_future(self._call(run, i, mv, tensors))] = i
                    started.add(i)
                if run.error is not None:
                    break
                if not running:
                    if streaming:
                        i, mv = streaming[0]
                        await self._fan_out(run, tensors, frozenset(started | {i}), i, mv)
                        return
                    break
                finished, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
                for task in finished:
                    del running[task]
                # (steps that finished together count as in flight for each other's error)
                others = bool(running) or len(finished) > 1
                for task in finished:
                    tensors = {**tensors, **self._result(run, task, others)}
        finally:
            if running:
                await asyncio.wait(running)
        if run.error is None:
            self._answer(run, tensors)

    def _result(
        self, run: _Run, task: asyncio.Future[dict[str, InputTensor]], others: bool
    ) -> dict[str, InputTensor]:
        """A finished step's outputs; a failed step's error becomes the ensemble's."""
        error = task.exception()
        if error is None:
            return task.result()
        if not isinstance(error, _StepFailed):
            raise error
        self._failed(run, error, others)
        return {}

    async def _step(
        self, run: _Run, i: int, mv: ModelVersion, tensors: dict[str, InputTensor]
    ) -> dict[str, InputTensor]:
        """Step ``i`` run in the caller's task: its outputs ({} when it failed)."""
        try:
            return await self._call(run, i, mv, tensors)
        except _StepFailed as e:
            self._failed(run, e, False)
            return {}

    def _failed(self, run: _Run, failure: _StepFailed, others: bool) -> None:
        """A step's error becomes the ensemble's (the first one to fail); ``others``:
        other steps finished with it, not yet taken."""
        if run.error is None:
            run.error = CoreError(
                f"in ensemble '{self.name}', {failure.error.message}", failure.error.code
            )
            run.alone = not run.active and not others

    def _model(self, run: _Run, i: int) -> ModelVersion | None:
        step = self.steps[i]
        mv = self._lookup(step.model, step.version)
        if mv is None and run.error is None:
            run.error = CoreError(
                f"in ensemble '{self.name}', Request for unknown model: '{step.model}' "
                "has no available versions",
                Code.UNAVAILABLE,
            )
        return mv

    def _inputs(
        self, run: _Run, i: int, mv: ModelVersion, tensors: dict[str, InputTensor]
    ) -> dict[str, InputTensor]:
        """The inputs of step ``i``, each fitted to the step's batching."""
        cfg = mv.config
        assert cfg is not None
        dims = {t.name: t.dims for t in cfg.input}
        out = {}
        for key, tensor in self.steps[i].inputs.items():
            t = tensors.get(tensor)
            if t is None:
                continue  # (an optional ensemble input the request left out)
            shape = _batch_fitted(
                list(t.shape), dims.get(key, []), cfg.max_batch_size > 0, run.batch.get(tensor, 0)
            )
            out[key] = _reshaped(key, t, shape)
        return out

    def _note_batch(self, run: _Run, i: int, mv: ModelVersion, sreq: InferRequest) -> None:
        """The batch size of the outputs of step ``i`` (none when the step does not batch)."""
        cfg = mv.config
        first = next(iter(sreq.inputs.values()), None)
        batch = first.shape[0] if cfg and cfg.max_batch_size and first and first.shape else 0
        for tensor in self.steps[i].outputs.values():
            run.batch[tensor] = batch

    def _outputs_of(self, run: _Run, i: int, response: InferResponse) -> dict[str, InputTensor]:
        """A step's outputs as ensemble tensors. One its response leaves out is set all
        the same, as absent: the steps reading it run without it, the ensemble's response
        goes without it (as in Triton)."""
        mapping = self.steps[i].outputs
        outputs = {
            mapping[o.name]: _as_input(mapping[o.name], o)
            for o in response.outputs
            if o.name in mapping
        }
        run.absent.update(t for t in mapping.values() if t not in outputs)
        return outputs

    def _step_request(
        self, run: _Run, i: int, mv: ModelVersion, tensors: dict[str, InputTensor]
    ) -> InferRequest:
        """The request for step ``i`` (traced as a child of the ensemble's request)."""
        sreq = step_request(run.req, self._inputs(run, i, mv, tensors), list(self.steps[i].outputs))
        sreq.gathered = run.gathered
        self._note_batch(run, i, mv, sreq)
        trace_child(run.req, sreq, mv.name, mv.version)
        return sreq

    async def _call(
        self, run: _Run, i: int, mv: ModelVersion, tensors: dict[str, InputTensor]
    ) -> dict[str, InputTensor]:
        """One request to a (non-decoupled) step; its outputs as ensemble tensors."""
        sreq = self._step_request(run, i, mv, tensors)
        try:
            mv.admit(sreq)
        except CoreError as e:
            trace_end(sreq)
            raise _StepFailed(e) from None
        pair = (mv, sreq)
        run.active.append(pair)
        try:
            response = await mv.infer(sreq)
        except CoreError as e:  # (refused by the step's scheduler)
            raise _StepFailed(e) from None
        finally:
            run.active.remove(pair)
            trace_end(sreq)
        if response.error is not None:
            raise _StepFailed(response.error)
        run.gathered = response.batched
        return self._outputs_of(run, i, response)

    async def _fan_out(
        self,
        run: _Run,
        tensors: dict[str, InputTensor],
        done: frozenset[int],
        i: int,
        mv: ModelVersion,
    ) -> None:
        """A decoupled step: each of its responses continues the branch."""
        from ._bridge import decoupled_responses  # (the bridge imports the repository)

        sreq = self._step_request(run, i, mv, tensors)
        try:
            mv.admit(sreq)
        except CoreError as e:
            trace_end(sreq)
            run.error = CoreError(f"in ensemble '{self.name}', {e.message}", e.code)
            return
        pair = (mv, sreq)
        run.active.append(pair)
        try:
            stream = cast(_Responses, decoupled_responses(mv, sreq))  # (an async generator)
            async with contextlib.aclosing(stream) as responses:
                async for response, final in responses:
                    if response is None:
                        continue
                    if response.error is not None:
                        message = response.error.message
                        run.error = CoreError(
                            f"in ensemble '{self.name}', {message}", response.error.code
                        )
                        # (an error response without FINAL leaves the step request in
                        # flight: Triton 2.51 then counts the failure once)
                        run.alone = final and len(run.active) == 1
                        return
                    outputs = self._outputs_of(run, i, response)
                    await self._branch(run, {**tensors, **outputs}, done)
                    if run.error is not None:
                        return
        finally:
            run.active.remove(pair)
            trace_end(sreq)

    def cancel(self, req: InferRequest) -> None:
        """The client went away: the request and the step requests it has in flight are
        cancelled, and no further step starts."""
        req.cancelled = True
        run = self._runs.get(id(req))
        if run is not None:
            for mv, sreq in list(run.active):
                mv.cancel(sreq)

    def _answer(self, run: _Run, tensors: dict[str, InputTensor]) -> None:
        """The branch ended: answer if every output asked for is set."""
        if any(name not in tensors and name not in run.absent for name in run.wanted):
            return  # (a request left without a response gets the deadlock error)
        outputs = []
        wanted = set(run.wanted)
        cfg = self.config
        assert cfg is not None
        # (Triton lists them in the reverse of the config's order)
        for spec in reversed(cfg.output):
            name = spec.name
            if name not in wanted or name not in tensors:
                continue
            shape = _batch_fitted(
                list(tensors[name].shape), spec.dims, cfg.max_batch_size > 0, run.batch.get(name, 0)
            )
            t = _reshaped(name, tensors[name], shape)
            assert t.array is not None
            outputs.append(OutputTensor(name, t.datatype, list(t.shape), t.array))
        # (the response parameters come with the outputs that steps made, once each: an
        # ensemble input that is also an output brings none, nor does an empty tensor)
        made = sum(1 for o in outputs if o.name not in run.req.inputs and o.array.size > 0)
        response = InferResponse(outputs, parameters=_sequence_parameters(run.req, made))
        run.responses.append(response)
        stream = run.req.response_stream
        if stream is not None:
            stream.put(response, False)
