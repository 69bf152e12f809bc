"""Triton's rate limiter (``--rate-limit=execution_count``).

An instance group's ``rate_limiter`` names the resources each of its instances needs to
execute (``global`` ones are shared by the whole server, the others by the instances on
one device: every CPU instance is on device 0) and a ``priority``. Under
``execution_count`` an instance executes only while it holds what it needs; each
resource has as many units as ``--rate-limit-resource`` gives it, else as many as the
largest need of any instance loaded. Once the flag names any resource, one it does not
name has none, and a model needing more than there is fails to load.

An instance's score is its priority (at least 1) times its executions plus two; the
lower, the sooner it executes. A scheduler with work *stages* its best idle instance
(lowest score; ties: the one idle the longest) in the limiter's heap of waiting
schedulers, which is ordered by score as a binary heap orders equal keys (C++'s
``std::priority_queue``: among ties the first staged goes first only while the heap is
small, as Triton 2.51 shows). Whenever resources are released (after the releasing
scheduler staged again) or a scheduler is staged, the heap's top ones whose resources
are free are granted them, one after the other.

The server has one :class:`RateLimiter`; each model version's scheduler sees it through a
:class:`Gate` of its own.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ._errors import Code, CoreError
from .model_config_pb2 import ModelConfig, ModelInstanceGroup

if TYPE_CHECKING:
    from ._backend_api import ModelInstance

__all__ = ["MODES", "Gate", "RateLimiter", "ResourceFlag"]

#: the values of ``--rate-limit``
MODES = ("off", "execution_count")

#: a ``--rate-limit-resource``: name, count and device (None: every device)
ResourceFlag = tuple[str, int, int | None]

#: a resource pool: (name, None) for a global resource, (name, device) for one device's
_Key = tuple[str, int | None]


@dataclass(frozen=True, slots=True)
class Needs:
    """What one instance needs to execute, and its priority (at least 1)."""

    resources: tuple[tuple[_Key, int], ...]
    priority: int


def _needs_of(group: ModelInstanceGroup) -> Needs:
    limits = group.rate_limiter
    device = group.gpus[0] if group.kind == ModelInstanceGroup.KIND_GPU and group.gpus else 0
    resources = tuple(
        ((r.name, None if getattr(r, "global") else device), r.count) for r in limits.resources
    )
    return Needs(resources, max(limits.priority, 1))


def _groups(config: ModelConfig) -> list[ModelInstanceGroup]:
    """The group of each instance, in the order a load creates the instances."""
    return [group for group in config.instance_group for _ in range(group.count)]


class _Heap:
    """A binary max-heap by "comes first", shaped as ``std::priority_queue`` shapes it
    (push: sift up past parents that come later; pop: the hole left by the top sinks to
    a leaf along the child that comes first, then the last element rises from there),
    so that entries of equal score leave in the order Triton's do."""

    def __init__(self) -> None:
        self.items: list[_Staged] = []

    def __len__(self) -> int:
        return len(self.items)

    @staticmethod
    def _later(a: _Staged, b: _Staged) -> bool:
        """Whether ``a`` comes after ``b``."""
        return a.score > b.score

    def push(self, entry: _Staged) -> None:
        h = self.items
        h.append(entry)
        self._rise(len(h) - 1, entry)

    def _rise(self, hole: int, entry: _Staged) -> None:
        h = self.items
        while hole > 0:
            parent = (hole - 1) // 2
            if not self._later(h[parent], entry):
                break
            h[hole] = h[parent]
            hole = parent
        h[hole] = entry

    def pop(self) -> _Staged:
        h = self.items
        top = h[0]
        last = h.pop()
        n = len(h)
        if n == 0:
            return top
        hole = 0
        child = 0
        while child < (n - 1) // 2:
            child = 2 * (child + 1)
            if self._later(h[child], h[child - 1]):
                child -= 1
            h[hole] = h[child]
            hole = child
        if n % 2 == 0 and child == (n - 2) // 2:
            child = 2 * (child + 1)
            h[hole] = h[child - 1]
            hole = child - 1
        self._rise(hole, last)
        return top


@dataclass(slots=True)
class _Staged:
    """A scheduler waiting in the heap, with the score of its best idle instance."""

    gate: Gate
    score: int
    live: bool = True


class RateLimiter:
    """The server's resource pools (``enabled`` only under ``execution_count``)."""

    def __init__(self, mode: str = "off", resources: Iterable[ResourceFlag] = ()) -> None:
        self.enabled = mode.lower() == "execution_count"
        #: the counts ``--rate-limit-resource`` gives, by (name, device or None)
        self._given: dict[_Key, int] = {}
        for name, count, device in resources:
            self._given[(name, device)] = count
        self._capacity: dict[_Key, int] = {}
        self._in_use: collections.Counter[_Key] = collections.Counter()
        #: the schedulers waiting to execute
        self._heap = _Heap()
        self._granting = False
        self._again = False

    def _given_count(self, key: _Key) -> int:
        """The count the flags give ``key`` (0: none): a global resource takes the count
        given for its name on any device."""
        name, device = key
        if device is None:
            counts = [c for (n, _), c in self._given.items() if n == name]
            return counts[-1] if counts else 0
        return self._given.get(key, self._given.get((name, None), 0))

    def admit(self, needs: Sequence[Needs]) -> None:
        """Take the needs of a model's instances into account; CoreError (Triton's
        words) when the flags give a resource fewer units than one instance needs."""
        for need in needs:
            for key, count in need.resources:
                if self._given:
                    limit = self._given_count(key)
                    if limit < count:
                        raise CoreError(
                            f'Resource count for "{key[0]}" is limited to {limit} which will '
                            "prevent scheduling of one or more model instances, the minimum "
                            f"required count is {count}",
                            Code.INVALID_ARG,
                        )
                    self._capacity[key] = limit
                else:
                    self._capacity[key] = max(self._capacity.get(key, 0), count)

    def available(self, needs: Needs) -> bool:
        """Whether every resource of ``needs`` has enough free units now."""
        return all(
            self._in_use[key] + count <= self._capacity.get(key, 0)
            for key, count in needs.resources
        )

    def acquire(self, needs: Needs) -> None:
        for key, count in needs.resources:
            self._in_use[key] += count

    def release(self, needs: Needs) -> None:
        """Give the units back (:meth:`grant` hands them on)."""
        for key, count in needs.resources:
            self._in_use[key] -= count

    def stage(self, entry: _Staged) -> None:
        self._heap.push(entry)

    def grant(self, caller: Gate | None = None) -> None:
        """Hand free resources to the waiting schedulers in heap order, as long as the
        top one's can be had (one that cannot waits on top). Each one granted is woken,
        except ``caller``, which takes its grant itself; a grant a woken scheduler does
        not take goes back."""
        if self._granting:  # (staged or released while waking: another round follows)
            self._again = True
            return
        self._granting = True
        try:
            self._again = True
            while self._again:
                self._again = False
                woken: list[Gate] = []
                heap = self._heap
                while heap:
                    top = heap.items[0]
                    gate = top.gate
                    if top.live and gate.idle and not gate.can_take():
                        break
                    heap.pop()
                    if top.live and gate.take_grant() and gate is not caller:
                        woken.append(gate)
                for gate in woken:
                    gate.wake()
        finally:
            self._granting = False


class Gate:
    """One scheduler's instances under the rate limiter: their needs and executions.

    Made with the model's ``config`` and its ``instances``; raises CoreError (Triton's
    words) when the limiter cannot give an instance what it needs. :meth:`lane` makes
    the gate of one of them alone (a sequence batcher's lane).
    """

    def __init__(
        self,
        limiter: RateLimiter,
        config: ModelConfig | None,
        instances: Sequence[ModelInstance],
        runs: collections.Counter[int] | None = None,
    ) -> None:
        self._limiter = limiter
        self._wake: Callable[[], None] = _nothing
        self._needs: dict[int, Needs] = {}
        #: executions by instance (shared with the gates of its lanes)
        self._runs: collections.Counter[int] = collections.Counter() if runs is None else runs
        #: the scheduler's idle instances, as last seen by :meth:`pick`
        self._idle: collections.deque[ModelInstance] = collections.deque()
        #: this gate's place in the heap (None: not waiting)
        self._staged: _Staged | None = None
        #: the instance granted its resources, not taken yet
        self._granted: ModelInstance | None = None
        if config is not None:
            self.set_instances(instances, config)

    def lane(self, inst: ModelInstance) -> Gate:
        """A gate of ``inst`` alone, sharing its needs and executions."""
        gate = Gate(self._limiter, None, [inst], self._runs)
        gate._needs = {id(inst): self._need(inst)}
        return gate

    def attach(self, wake: Callable[[], None]) -> None:
        """``wake`` is called once the instances are granted what they wait for."""
        self._wake = wake

    def set_instances(
        self, instances: Sequence[ModelInstance], config: ModelConfig, check: bool = True
    ) -> None:
        """Serve ``instances``, those of ``config``'s groups in load order (``check``:
        raise CoreError when the limiter cannot satisfy one)."""
        groups = _groups(config)
        needs = [_needs_of(g) for g in groups[: len(instances)]]
        try:
            self._limiter.admit(needs)
        except CoreError:
            if check:
                raise  # (an instance update keeps serving)
        self._needs = {id(inst): n for inst, n in zip(instances, needs, strict=False)}

    def _need(self, inst: ModelInstance) -> Needs:
        needs = self._needs.get(id(inst))
        if needs is None:
            needs = self._needs[id(inst)] = Needs((), 1)
        return needs

    def _score(self, inst: ModelInstance) -> int:
        return self._need(inst).priority * (self._runs[id(inst)] + 2)

    def _best(self, available: bool) -> int:
        """The position in the idle instances of the one with the lowest score (ties: the
        one idle the longest), among those whose resources are free if ``available``;
        -1 when none."""
        best = -1
        best_score = 0
        limiter = self._limiter
        for i, inst in enumerate(self._idle):
            score = self._score(inst)
            if (best < 0 or score < best_score) and (
                not available or limiter.available(self._need(inst))
            ):
                best, best_score = i, score
        return best

    def can_take(self) -> bool:
        """Whether an idle instance's resources are free now."""
        return self._best(True) >= 0

    @property
    def idle(self) -> bool:
        """Whether the scheduler had an idle instance when it last looked."""
        return bool(self._idle)

    def take_grant(self) -> bool:
        """(limiter) The best idle instance whose resources are free gets them (False:
        none could, or one has them already); the gate waits no more."""
        self._staged = None
        best = self._best(True)
        if best < 0 or self._granted is not None:
            return False
        inst = self._idle[best]
        self._limiter.acquire(self._need(inst))
        self._runs[id(inst)] += 1
        self._granted = inst
        return True

    def wake(self) -> None:
        """(limiter) Let the scheduler take its grant; one it leaves goes back."""
        self._wake()
        self._give_back()

    def _give_back(self) -> None:
        inst = self._granted
        if inst is not None:
            self._granted = None
            self._runs[id(inst)] -= 1
            self._limiter.release(self._need(inst))
            self._limiter.grant()

    def pick(self, idle: collections.deque[ModelInstance]) -> ModelInstance | None:
        """Take the idle instance that executes next (its resources acquired), or None
        (the scheduler is staged and woken once it is granted resources)."""
        self._idle = idle
        if self._granted is None and idle and self._staged is None:
            self._staged = _Staged(self, self._score(idle[self._best(False)]))
            self._limiter.stage(self._staged)
            self._limiter.grant(self)
        inst = self._granted
        if inst is None:
            return None
        self._granted = None
        try:
            idle.remove(inst)
        except ValueError:  # (it left service meanwhile)
            self._granted = inst
            self._give_back()
            return None
        return inst

    def release(self, inst: ModelInstance) -> None:
        """``inst`` finished an execution: its resources go back. The scheduler has it
        idle again (or out of service) and, woken first, stages itself if it has work;
        then the waiting schedulers are granted what is free."""
        needs = self._needs.get(id(inst))
        if needs is not None:
            self._limiter.release(needs)
        self._wake()
        self._limiter.grant()

    def close(self) -> None:
        if self._staged is not None:
            self._staged.live = False
            self._staged = None
        self._give_back()


def _nothing() -> None:
    """A gate's wake-up before a scheduler attaches."""
