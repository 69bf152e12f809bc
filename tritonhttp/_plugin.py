"""The plugin hook: a callable that edits each request's headers before it is sent."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

__all__ = ["InferenceServerClientPlugin", "Request"]


class Request:
    """The request handed to a plugin; ``headers`` is the dict the plugin may edit.

    ``Request(None)`` starts with an empty dict; a given dict is used as is (no copy).
    The client always passes its own per-call copy, never the caller's dict.
    """

    def __init__(self, headers: dict[str, Any] | None) -> None:
        self.headers: dict[str, Any] = headers if headers is not None else {}


class InferenceServerClientPlugin(ABC):
    """Base class of client plugins: implement ``__call__(request)``.

    The plugin runs for every request (health, metadata, inference, ...) and must
    modify ``request.headers`` in place; its return value is ignored.
    """

    @abstractmethod
    def __call__(self, request: Request) -> None:
        """Edit ``request.headers`` in place."""
