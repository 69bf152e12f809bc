"""Starting a coroutine at once, in the caller, and letting a task go on with it.

``asyncio.create_task`` runs nothing of the coroutine until the loop's next turn, behind
every callback already waiting. Where the first steps should happen now (the HTTP server
runs an application up to its first wait; a scheduler sends a freed instance its next
request before anything else runs), the caller steps the coroutine itself with
``coro.send(None)`` and, if it is not finished, hands it to :func:`resume` in a task.
"""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["resume"]


class _Yield:
    """Awaiting it yields ``what`` to the task, as the awaited future itself would have."""

    __slots__ = ("what",)

    def __init__(self, what: Any) -> None:
        self.what = what

    def __await__(self) -> Any:
        yield self.what


async def resume(coro: Any, yielded: Any) -> None:
    """Go on running ``coro`` (whose last step yielded ``yielded``) as a Task would.

    What ``coro`` yields is handed on to the running task unchanged: the task wakes when
    the future is done (no extra hop through the loop) and cancels it when cancelled.
    """
    while True:
        error: BaseException | None = None
        if yielded is not None and not asyncio.isfuture(yielded):
            error = RuntimeError(f"coroutine yielded {yielded!r}, not a future")
        else:
            try:
                await _Yield(yielded)  # (None: a bare yield, the loop runs once)
            except BaseException as e:  # cancellation: on into the coroutine
                error = e
        try:
            yielded = coro.send(None) if error is None else coro.throw(error)
        except StopIteration:
            return
