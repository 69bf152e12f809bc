"""Servers started once per (repository, flags), started again if they died, stopped together."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Generic, TypeVar

from tritonhttp.testing._process import ServerProcess

__all__ = ["ServerPool"]

Server = TypeVar("Server", bound=ServerProcess)


class ServerPool(Generic[Server]):
    """``pool(repo, *flags)``: the server ``start(repo, *flags)`` gave, while it runs."""

    def __init__(self, start: Callable[..., Server], default_repo: Path | None = None) -> None:
        self._start = start
        self._default_repo = default_repo
        self._running: dict[tuple[str, tuple[str, ...]], Server] = {}

    def __call__(self, repo: Path | str | None = None, *flags: str) -> Server:
        repo = repo if repo is not None else self._default_repo
        if repo is None:
            raise TypeError("a repository is needed: this pool has no default")
        key = (str(Path(repo).resolve()), flags)
        server = self._running.get(key)
        if server is None or server.process.poll() is not None:
            server = self._running[key] = self._start(repo, *flags)
        return server

    def stop(self) -> None:
        for server in self._running.values():
            server.stop()
