"""The read-only endpoints of the server and its models: health (``/v2/health/live``,
``/v2/health/ready``, a model's ``/ready``), metadata (``/v2``, a model's), a model's
configuration (``/config``) and statistics (``/v2/models/stats``, a model's ``/stats``).

Plain functions: each handler takes the :class:`~._routes.Frontend` (for its core), the
ASGI triple and the route's captures; ``server_health`` is also the bundled HTTP server's
immediate answer (``HttpFrontend.immediate_answer``).
"""

from __future__ import annotations

from ..core._bridge import instances_ready
from ..core._core import EXTENSIONS, VERSION, ServerCore
from ..core._errors import CoreError
from ..core._repo_files import parse_version
from ..http._extensions import Answer
from ..support import _json
from ._http import TEXT, Receive, Scope, Send, error_body, response_headers, send_response
from ._routes import Frontend

__all__ = [
    "health",
    "model_config",
    "model_metadata",
    "model_ready",
    "server_health",
    "server_metadata",
    "statistics",
]

#: the answers of /v2/health/live and /v2/health/ready (as ``health`` sends them)
_HEALTHY: Answer = (200, tuple(response_headers(0, TEXT, length_first=True)), b"")
_UNHEALTHY: Answer = (400, tuple(response_headers(0, TEXT, length_first=True)), b"")


def server_health(core: ServerCore, which: str) -> Answer:
    """The answer to server liveness (``which`` ``live``) or readiness (``ready``)."""
    repo = core.repository
    ok = repo.live if which == "live" else repo.server_ready()
    return _HEALTHY if ok else _UNHEALTHY


async def health(front: Frontend, scope: Scope, receive: Receive, send: Send, which: str) -> None:
    """``/v2/health/live`` or ``/v2/health/ready`` (``which``)."""
    status, headers, body = server_health(front.core, which)
    await send({"type": "http.response.start", "status": status, "headers": list(headers)})
    await send({"type": "http.response.body", "body": body})


async def model_ready(
    front: Frontend, scope: Scope, receive: Receive, send: Send, name: str, version: str
) -> None:
    """Whether model ``name`` (its ``version``, else its latest) is ready: 200 or 400."""
    try:
        if version:  # (a version that does not parse: its own message)
            parse_version(version)
    except CoreError as e:
        await send_response(send, 400, error_body(e.message), TEXT, length_first=True)
        return
    try:
        ready = front.core.repository.is_ready(name, version)
        if ready:  # the model's own is_ready(), where it has one
            ready = await instances_ready(front.core.repository.get(name, version))
    except CoreError:
        ready = False
    if ready:
        await send_response(send, 200, b"", TEXT, length_first=True)
    else:
        await send_response(
            send, 400, error_body("Model version not ready"), TEXT, length_first=True
        )


async def server_metadata(front: Frontend, scope: Scope, receive: Receive, send: Send) -> None:
    """The server's name, version and extensions."""
    body = _json.dumps({"name": front.core.server_id, "version": VERSION, "extensions": EXTENSIONS})
    await send_response(send, 200, body)


async def model_metadata(
    front: Frontend, scope: Scope, receive: Receive, send: Send, name: str, version: str
) -> None:
    """Model ``name``'s metadata (of its ``version``, where given)."""
    if version:  # (parsed before the model is looked up)
        parse_version(version)
    await send_response(send, 200, front.core.repository.metadata_json(name, version))


async def model_config(
    front: Frontend, scope: Scope, receive: Receive, send: Send, name: str, version: str
) -> None:
    """Model ``name``'s configuration (of its ``version``, where given)."""
    if version:
        parse_version(version)
    mv = front.core.repository.get(name, version)
    await send_response(send, 200, mv.config_json)


async def statistics(
    front: Frontend,
    scope: Scope,
    receive: Receive,
    send: Send,
    name: str | None = None,
    version: str = "",
) -> None:
    """The statistics of model ``name`` (of its ``version``), or of every model."""
    repo = front.core.repository
    if name is None:
        versions = repo.loaded_versions()
    else:
        v = parse_version(version) if version else None
        entry = repo.models.get(name)
        ready = entry.ready_versions() if entry is not None else []
        if not ready:
            raise CoreError(f"requested model '{name}' is not available")
        if v is not None:
            ready = [mv for mv in ready if mv.version == v]
            if not ready:
                raise CoreError(f"requested model version is not available for model '{name}'")
    else_versions = versions if name is None else ready
    body = _json.dumps(
        {"model_stats": [mv.stats.as_json(mv.name, mv.version) for mv in else_versions]}
    )
    await send_response(send, 200, body)
