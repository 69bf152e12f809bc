"""Ensembles in-process, over scripted step models: no sockets, no timing.

Which task runs each step: a chain's next step is awaited in the ensemble request's own
task (no task and no ``asyncio.wait`` per hand-over), while steps that can run at the
same time still run side by side, each in a task of its own.
"""

from __future__ import annotations

import asyncio
from typing import Any

from google.protobuf import text_format

from tritonhttp.server.core._config import normalize
from tritonhttp.server.core._ensemble import EnsembleVersion
from tritonhttp.server.core._model import ModelVersion
from tritonhttp.server.core._types import InferRequest, InferResponse
from tritonhttp.server.core.model_config_pb2 import ModelConfig

from .test_core import make_model, request, run


def _step(model: str, source: str, target: str) -> str:
    return (
        f'{{ model_name: "{model}" model_version: -1 input_map {{ key: "IN" value: "{source}" }} '
        f'output_map {{ key: "OUT" value: "{target}" }} }}'
    )


def _ensemble(steps: list[str], outputs: list[str]) -> ModelConfig:
    cfg = ModelConfig()
    outs = ", ".join(f'{{ name: "{o}" data_type: TYPE_INT32 dims: [ -1 ] }}' for o in outputs)
    text_format.Parse(
        'name: "e" platform: "ensemble" max_batch_size: 8\n'
        'input [ { name: "IN" data_type: TYPE_INT32 dims: [ -1 ] } ]\n'
        f"output [ {outs} ]\n"
        f"ensemble_scheduling {{ step [ {', '.join(steps)} ] }}",
        cfg,
    )
    normalize(cfg, "e", [])
    return cfg


class TaskLog:
    """Step models whose ``infer`` notes the task it runs in."""

    def __init__(self, names: list[str]) -> None:
        self.models: dict[str, ModelVersion] = {}
        self.tasks: dict[str, asyncio.Task[Any] | None] = {}
        self.holds: dict[str, asyncio.Event] = {}
        for name in names:
            mv, _ = make_model("max_batch_size: 8")
            mv.name = name
            self.models[name] = mv
            self._watch(name, mv)

    def _watch(self, name: str, mv: ModelVersion) -> None:
        infer = mv.infer

        async def noted(req: InferRequest) -> InferResponse:
            self.tasks[name] = asyncio.current_task()
            hold = self.holds.get(name)
            if hold is not None:
                await hold.wait()
            return await infer(req)

        mv.infer = noted  # type: ignore[method-assign]

    def ensemble(self, cfg: ModelConfig) -> EnsembleVersion:
        ens = EnsembleVersion("e", 1, lambda name, version: self.models.get(name))
        ens.activate_ensemble(cfg, False)
        return ens

    async def started(self, ens: EnsembleVersion, value: int, step: str) -> asyncio.Task[Any]:
        """A request of ``value`` sent to ``ens`` in a task of its own, once ``step`` began
        (or after 20 turns of the loop)."""
        req = request("r", value=value)
        ens.admit(req)
        task = asyncio.ensure_future(ens.infer(req))
        for _ in range(20):
            await asyncio.sleep(0)
            if step in self.tasks:
                break
        return task


def test_a_chains_steps_run_in_the_requests_own_task() -> None:
    log = TaskLog(["a", "b", "c"])
    cfg = _ensemble([_step("a", "IN", "x"), _step("b", "x", "y"), _step("c", "y", "OUT")], ["OUT"])

    async def main() -> tuple[InferResponse, asyncio.Task[Any] | None]:
        ens = log.ensemble(cfg)
        req = request("r", value=7)
        ens.admit(req)
        response = await ens.infer(req)
        return response, asyncio.current_task()

    response, task = run(main)
    assert response.error is None
    assert response.outputs[0].array.tolist() == [[7]]
    assert log.tasks == {"a": task, "b": task, "c": task}


def test_steps_that_can_run_together_still_do() -> None:
    """``a`` and ``b`` both read ``IN``: each runs in a task of its own, and ``b`` starts
    while ``a`` is held (awaiting ``a`` in the request's task would serialize them)."""
    log = TaskLog(["a", "b"])
    cfg = _ensemble([_step("a", "IN", "OUT_A"), _step("b", "IN", "OUT_B")], ["OUT_A", "OUT_B"])

    async def main() -> tuple[InferResponse, asyncio.Task[Any] | None]:
        ens = log.ensemble(cfg)
        log.holds["a"] = asyncio.Event()
        task = await log.started(ens, 3, "b")
        assert "b" in log.tasks, "b waited for a"
        log.holds["a"].set()
        return await task, task

    response, task = run(main)
    assert response.error is None
    assert sorted(o.name for o in response.outputs) == ["OUT_A", "OUT_B"]
    assert log.tasks["a"] is not task and log.tasks["b"] is not task
    assert log.tasks["a"] is not log.tasks["b"]


def test_a_failing_step_of_a_chain_fails_the_ensemble_and_stops_it() -> None:
    log = TaskLog(["a", "b"])
    cfg = _ensemble([_step("a", "IN", "x"), _step("b", "x", "OUT")], ["OUT"])

    async def main() -> InferResponse:
        ens = log.ensemble(cfg)
        req = request("r", value=1)
        req.inputs["IN"].shape = [1, 1, 1]  # a's admission refuses the rank
        req.inputs["IN"].array = req.inputs["IN"].array.reshape(1, 1, 1)
        return await ens.infer(req)

    response = run(main)
    assert response.error is not None
    assert response.error.message.startswith("in ensemble 'e', ")
    assert "b" not in log.tasks


def test_cancelling_the_requests_task_mid_chain_leaves_nothing_behind() -> None:
    """The task of a request is cancelled (server shutdown) while its second step waits:
    the step it awaits is cancelled with it, and the ensemble forgets the request."""
    log = TaskLog(["a", "b", "c"])
    cfg = _ensemble([_step("a", "IN", "x"), _step("b", "x", "y"), _step("c", "y", "OUT")], ["OUT"])

    async def main() -> tuple[EnsembleVersion, bool]:
        ens = log.ensemble(cfg)
        log.holds["b"] = asyncio.Event()
        task = await log.started(ens, 5, "b")
        assert "b" in log.tasks
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            return ens, True
        return ens, False

    ens, cancelled = run(main)
    assert cancelled
    assert "c" not in log.tasks
    assert ens.in_flight == 0 and not ens._runs


def _batched_steps(first: str) -> tuple[dict[str, ModelVersion], dict[str, Any]]:
    """Steps ``a`` (batching as ``first`` says) and ``b`` (dynamic batching, no queue
    delay), each on one scripted instance."""
    models: dict[str, ModelVersion] = {}
    instances: dict[str, Any] = {}
    for name, batching in (("a", first), ("b", "dynamic_batching { }")):
        mv, (inst,) = make_model(f"max_batch_size: 8 {batching}")
        mv.name = name
        models[name] = mv
        instances[name] = inst
    return models, instances


def _four_through(first: str) -> tuple[list[list[str]], list[list[str]]]:
    """The batches ``a`` and then ``b`` executed for four requests sent together to the
    ensemble ``a`` -> ``b``."""
    models, instances = _batched_steps(first)
    cfg = _ensemble([_step("a", "IN", "x"), _step("b", "x", "OUT")], ["OUT"])

    async def main() -> None:
        ens = EnsembleVersion("e", 1, lambda name, version: models.get(name))
        ens.activate_ensemble(cfg, False)
        reqs = [request(rid, value=n) for n, rid in enumerate("pqrs")]
        for req in reqs:
            ens.admit(req)
        responses = await asyncio.gather(*(ens.infer(req) for req in reqs))
        for n, response in enumerate(responses):
            assert response.error is None
            assert response.outputs[0].array.tolist() == [[n]]

    run(main)
    return instances["a"].batches, instances["b"].batches


def test_a_batch_of_one_step_reaches_the_next_as_one_batch() -> None:
    """The four requests ``a`` ran as one batch come back together; ``b``, idle, takes
    them as one batch of four, as Triton's batcher (whose thread wakes once they are
    queued), not the first alone on the idle instance and the other three after it."""
    first, second = _four_through(
        "dynamic_batching { preferred_batch_size: [4] max_queue_delay_microseconds: 5000000 }"
    )
    assert first == [["p", "q", "r", "s"]]
    assert [sorted(batch) for batch in second] == [["p", "q", "r", "s"]]


def test_requests_a_step_ran_one_by_one_go_on_one_by_one() -> None:
    """Without a batch behind them, step requests keep the idle fast path: ``a`` (no
    dynamic batching) runs each alone and ``b`` starts each as it comes."""
    first, second = _four_through("")
    assert first == [["p"], ["q"], ["r"], ["s"]]
    assert second == [["p"], ["q"], ["r"], ["s"]]
