"""The plugin hook: a callable that edits each request's headers before it is sent."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from ._errors import raise_error

__all__ = ["InferenceServerClientBase", "InferenceServerClientPlugin", "Request"]


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


class InferenceServerClientBase:
    """What every client shares: the plugin registry (one plugin at a time)."""

    def __init__(self) -> None:
        self._plugin: Any = None

    def _call_plugin(self, request: Request) -> None:
        """Run the registered plugin, if any, on ``request``."""
        if self._plugin is not None:
            self._plugin(request)

    def register_plugin(self, plugin: Any) -> None:
        """Register a plugin (called with a :class:`Request` before every request).

        Raises:
            InferenceServerException: a plugin is already registered.
        """
        if self._plugin is not None:
            raise_error(
                "A plugin is already registered. Please unregister the previous plugin "
                "first before registering a new plugin."
            )
        self._plugin = plugin

    def plugin(self) -> Any:
        """The registered plugin, or None."""
        return self._plugin

    def unregister_plugin(self) -> None:
        """Remove the registered plugin.

        Raises:
            InferenceServerException: no plugin is registered.
        """
        if self._plugin is None:
            raise_error("No plugin has been registered.")
        self._plugin = None
