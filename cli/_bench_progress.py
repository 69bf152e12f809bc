"""``bench`` progress: a live bar on a terminal, plain periodic lines elsewhere (CI logs)."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._settings import Settings

__all__ = ["progress_bar"]

Report = Callable[[float, int], None]


class _Lines:
    """Writes ``bench: NAME: S s, N requests, R/s, P% done`` every ``interval`` seconds
    (P: of the windows tried at most, or of the requests or seconds asked for)."""

    def __init__(self, name: str, interval: float) -> None:
        self._name = name
        self._interval = interval
        self._started = time.perf_counter()
        self._last = self._started

    def __call__(self, done: float, completed: int) -> None:
        now = time.perf_counter()
        if now - self._last < self._interval:
            return
        self._last = now
        elapsed = now - self._started
        print(
            f"bench: {self._name}: {elapsed:.0f} s, {completed} requests, "
            f"{completed / elapsed:.1f}/s, {done * 100:.0f}% done",
            file=sys.stderr,
            flush=True,
        )


class _Bar:
    def __init__(self, progress: Any, task: Any) -> None:
        self._progress = progress
        self._task = task
        self._started = time.perf_counter()

    def __call__(self, done: float, completed: int) -> None:
        rate = completed / max(time.perf_counter() - self._started, 1e-9)
        self._progress.update(self._task, completed=done, status=f"{completed} req, {rate:.0f}/s")


@contextlib.contextmanager
def progress_bar(settings: Settings, interval: float) -> Iterator[Callable[[str], Report]]:
    """A factory of per-level progress callbacks (``start(name)`` -> callback)."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from ._render import console

    err = console(settings, stderr=True)
    if not err.is_terminal:
        yield lambda name: _Lines(name, interval)
        return
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.fields[status]}"),
        TimeElapsedColumn(),
        console=err,
        transient=False,
    ) as progress:

        def start(name: str) -> Report:
            return _Bar(progress, progress.add_task(name, total=1.0, status=""))

        yield start
