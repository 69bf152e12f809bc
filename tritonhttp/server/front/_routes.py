"""What a route of the HTTP API is: :class:`Route` (which requests reach which handler),
built by :func:`endpoint`, and :class:`Frontend`, what every handler is given first.

The table of Triton's routes, in Triton's order, is ``_ROUTES`` in ``_app.py``; the
handlers of each endpoint family live in their own module (``_info_api.py``,
``_settings_api.py``, ``_repository_api.py``, ``_shm_api.py``; inference in ``_app.py``).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from ..core._core import ServerCore

__all__ = ["Frontend", "Route", "endpoint"]


class Frontend(Protocol):
    """The application a handler answers for (``handler(frontend, scope, receive, send,
    *captures)``): the handlers outside ``_app.py`` use only its core."""

    @property
    def core(self) -> ServerCore: ...


@dataclass(frozen=True, slots=True)
class Route:
    """One endpoint of Triton's HTTP API: which requests reach which handler.

    A request reaches the endpoint when its path equals ``path`` (``pattern`` None) or
    fully matches ``pattern`` (whose matches all start with ``path``). It is then answered
    403 if the API group ``api`` is restricted (``--http-restricted-api``) and the request
    lacks the group's header, else 405 if its method is not one of ``methods``, else by
    ``handler(frontend, scope, receive, send, *captures)``: the pattern's groups, with
    ``absent`` for an optional group that took no part in the match.
    """

    path: str
    pattern: re.Pattern[str] | None
    api: str
    methods: tuple[str, ...]
    handler: Callable[..., Awaitable[None]]
    absent: str | None = None
    #: Triton answers this endpoint's 405 as text/plain, Content-Length first (else JSON)
    text_405: bool = False


#: the start of a regular expression before its first special character
_LITERAL_START = re.compile(r"[^\\.^$*+?{}\[\]|()]*")


def endpoint(
    path: str,
    api: str,
    methods: tuple[str, ...],
    handler: Callable[..., Awaitable[None]],
    *,
    absent: str | None = None,
    text_405: bool = False,
) -> Route:
    """The :class:`Route` of ``path``: a regular expression (alternatives grouped, never
    ``a|b`` at its top level), or (without any of its special characters) a literal path.
    ``Route.path`` is the literal start that every match of the expression has."""
    literal = _LITERAL_START.match(path)
    assert literal is not None
    start = literal.group()
    if path[len(start) : len(start) + 1] in ("?", "*", "{"):  # (its last character optional)
        start = start[:-1]
    pattern = None if start == path else re.compile(path)
    return Route(start, pattern, api, methods, handler, absent, text_405)
