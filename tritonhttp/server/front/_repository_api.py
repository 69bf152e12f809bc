"""The model repository API: the index (``/v2/repository/index``) and a model's load or
unload (``/v2/repository/models/<name>/load|unload``), with the parsing of their request
bodies as Triton reads them.

Plain functions: each handler takes the :class:`~._routes.Frontend` (for its core), the
ASGI triple and the route's captures.
"""

from __future__ import annotations

from ..core._errors import Code, CoreError
from ..support import _json
from ._http import Receive, Scope, Send, parse_body, read_body, send_response
from ._routes import Frontend

__all__ = ["repository_index", "repository_model"]


async def repository_index(front: Frontend, scope: Scope, receive: Receive, send: Send) -> None:
    """The repository index: every model, or only the ready ones (``{"ready": true}``)."""
    body = await read_body(receive)
    ready = False
    if body:
        doc = parse_body(body)
        if isinstance(doc, dict) and "ready" in doc:
            if not isinstance(doc["ready"], bool):
                raise CoreError("attempt to access JSON non-boolean as boolean", Code.INTERNAL)
            ready = doc["ready"]
    await send_response(send, 200, _json.dumps(front.core.repository.index(ready)))


async def repository_model(
    front: Frontend,
    scope: Scope,
    receive: Receive,
    send: Send,
    repo_name: str | None,
    name: str,
    action: str,
) -> None:
    """Load or unload (``action``) model ``name`` (explicit model control only)."""
    repo = front.core.repository
    body = await read_body(receive)
    if repo_name is not None:
        raise CoreError("'repository_name' specification is not supported", Code.UNSUPPORTED)
    if repo.mode != "explicit":
        raise CoreError(
            "explicit model load / unload is not allowed if polling is enabled",
            Code.UNAVAILABLE,
        )
    if action == "unload":
        await repo.unload(name, _unload_dependents(body))
    else:
        config, files = _load_parameters(body)
        await repo.load(name, config, files or None)
    await send_response(send, 200, b"")


def _unload_dependents(body: bytearray | memoryview) -> bool:
    """An unload request's ``parameters.unload_dependents`` (False where the body is empty,
    malformed, or says nothing boolean: Triton ignores such a body)."""
    if not body:
        return False
    try:
        doc = parse_body(body)
    except CoreError:
        return False
    params = doc.get("parameters") if isinstance(doc, dict) else None
    if isinstance(params, dict) and isinstance(params.get("unload_dependents"), bool):
        return bool(params["unload_dependents"])
    return False


def _load_parameters(body: bytearray | memoryview) -> tuple[str | None, dict[str, str]]:
    """A load request's parameters: the ``config`` override (or None) and the
    ``file:<path>`` contents by path."""
    config: str | None = None
    files: dict[str, str] = {}
    if not body:
        return config, files
    doc = parse_body(body)
    if not isinstance(doc, dict) or "parameters" not in doc:
        return config, files
    params = doc["parameters"]
    if not isinstance(params, dict):
        raise CoreError("attempt to get members for non-object", Code.INTERNAL)
    for key, value in params.items():
        if not isinstance(value, str):
            raise CoreError("attempt to access JSON non-string as string", Code.INTERNAL)
        if key == "config":
            config = value
        elif key.startswith("file:"):
            files[key[5:]] = value
        else:
            raise CoreError("unexpected error on creating Triton parameter", Code.INTERNAL)
    return config, files
