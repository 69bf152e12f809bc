"""Triton's rate limiter (``--rate-limit=execution_count``).

An instance group's ``rate_limiter`` names the resources each of its instances needs to
execute (``global`` ones are shared by the whole server, the others by the instances on
one device: every CPU instance is on device 0) and a ``priority``. Under
``execution_count`` an instance executes only while it holds what it needs; each
resource has as many units as ``--rate-limit-resource`` gives it, else as many as the
largest need of any instance loaded. Once the flag names any resource, one it does not
name has none, and a model needing more than there is fails to load.

Among the idle instances of a model that could execute, the one with the lowest score,
its priority (at least 1) times its executions plus two, takes the next request (ties:
the one idle the longest). A scheduler whose instances wait for resources is woken,
after those that waited before it, when some are released.

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
        #: schedulers waiting for resources, oldest first (by id of their gate)
        self._waiters: dict[int, Callable[[], None]] = {}
        self._notifying = False
        self._released = False

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
        """Give the units back and wake the schedulers that wait for some."""
        for key, count in needs.resources:
            self._in_use[key] -= count
        if needs.resources:
            self._notify()

    def wait(self, gate: Gate, wake: Callable[[], None]) -> None:
        """Wake ``wake`` once resources are released (in the order schedulers waited)."""
        self._waiters.setdefault(id(gate), wake)

    def forget(self, gate: Gate) -> None:
        self._waiters.pop(id(gate), None)

    def _notify(self) -> None:
        if self._notifying:  # (a release while waking: another round follows)
            self._released = True
            return
        self._notifying = True
        try:
            while self._waiters:
                self._released = False
                waiters = list(self._waiters.values())
                self._waiters.clear()
                for wake in waiters:
                    wake()
                if not self._released:
                    break
        finally:
            self._notifying = False


class Gate:
    """One scheduler's instances under the rate limiter: their needs and executions.

    Made with the model's ``config`` and its ``instances``; raises CoreError (Triton's
    words) when the limiter cannot give an instance what it needs.
    """

    def __init__(
        self, limiter: RateLimiter, config: ModelConfig, instances: Sequence[ModelInstance]
    ) -> None:
        self._limiter = limiter
        self._wake: Callable[[], None] = _nothing
        self._needs: dict[int, Needs] = {}
        self._runs: collections.Counter[int] = collections.Counter()
        self.set_instances(instances, config)

    def attach(self, wake: Callable[[], None]) -> None:
        """``wake`` is called once resources the instances wait for are released."""
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

    def pick(self, idle: collections.deque[ModelInstance]) -> ModelInstance | None:
        """Take the idle instance that executes next (its resources acquired), or None
        (the scheduler is woken once resources are released)."""
        best = -1
        best_score = 0
        limiter = self._limiter
        for i, inst in enumerate(idle):
            needs = self._needs.get(id(inst))
            if needs is None:
                needs = self._needs[id(inst)] = Needs((), 1)
            score = needs.priority * (self._runs[id(inst)] + 2)
            if (best < 0 or score < best_score) and limiter.available(needs):
                best, best_score = i, score
        if best < 0:
            if idle:
                limiter.wait(self, self._wake)
            return None
        inst = idle[best]
        del idle[best]
        limiter.acquire(self._needs[id(inst)])
        self._runs[id(inst)] += 1
        return inst

    def release(self, inst: ModelInstance) -> None:
        """``inst`` finished an execution: its resources go back."""
        needs = self._needs.get(id(inst))
        if needs is not None:
            self._limiter.release(needs)

    def close(self) -> None:
        self._limiter.forget(self)


def _nothing() -> None:
    """A gate's wake-up before a scheduler attaches."""
