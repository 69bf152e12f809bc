"""Triton's generate extension over plain HTTP (``/generate`` and ``/generate_stream``).

Standing in until the tritonhttp client has ``generate``/``generate_stream``: only
:func:`generate` and :func:`generate_stream` are used by the command, so swapping them
for the client's methods is a change in this one module.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote, urlsplit

from ._settings import Settings

__all__ = ["generate", "generate_stream"]


def _connect(settings: Settings) -> tuple[http.client.HTTPConnection, str]:
    parts = urlsplit(settings.base_url)
    host = parts.hostname or "localhost"
    connection: http.client.HTTPConnection
    if parts.scheme == "https":
        connection = http.client.HTTPSConnection(
            host, parts.port or 443, timeout=settings.timeout, context=settings.ssl_context()
        )
    else:
        connection = http.client.HTTPConnection(host, parts.port or 80, timeout=settings.timeout)
    return connection, parts.path.rstrip("/")


def _path(base: str, model: str, version: str, endpoint: str) -> str:
    path = f"{base}/v2/models/{quote(model)}"
    if version:
        path += f"/versions/{quote(version)}"
    return f"{path}/{endpoint}"


def _error(status: int | None, body: bytes) -> Exception:
    import tritonhttp

    text = body.strip()
    if text.startswith(b"data:"):  # an event stream that failed at once
        text = text[5:].strip()
    try:
        message = json.loads(text)["error"]
    except (ValueError, KeyError, TypeError):
        message = body.decode("utf-8", errors="replace").strip() or http.client.responses.get(
            status or 0, "error"
        )
    return tritonhttp.InferenceServerException(
        msg=str(message), status=None if status is None else str(status)
    )


def _post(
    settings: Settings, model: str, version: str, endpoint: str, request: dict[str, Any]
) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
    connection, base = _connect(settings)
    body = json.dumps(request).encode("utf-8")
    headers = {"Content-Type": "application/json", **settings.headers}
    try:
        connection.request("POST", _path(base, model, version, endpoint), body, headers)
        response = connection.getresponse()
    except OSError as e:
        connection.close()
        raise OSError(e.errno, f"failed to talk to {settings.base_url}: {e.strerror or e}") from e
    if response.status != 200:
        payload = response.read()
        connection.close()
        raise _error(response.status, payload)
    return connection, response


def generate(settings: Settings, model: str, version: str, request: dict[str, Any]) -> Any:
    """POST ``request`` to the model's ``generate`` endpoint; the response JSON."""
    connection, response = _post(settings, model, version, "generate", request)
    try:
        body = response.read()
    finally:
        connection.close()
    answer = json.loads(body)
    if isinstance(answer, dict) and set(answer) == {"error"}:
        # Triton answers some failures (e.g. a decoupled model) with 200 and an error.
        raise _error(None, body)
    return answer


def generate_stream(
    settings: Settings, model: str, version: str, request: dict[str, Any]
) -> Iterator[Any]:
    """POST ``request`` to ``generate_stream``; yields each server-sent event's JSON.

    An event carrying ``{"error": ...}`` raises ``InferenceServerException``.
    """
    connection, response = _post(settings, model, version, "generate_stream", request)
    try:
        data: list[str] = []
        while True:
            line = response.readline()
            if not line:
                break
            text = line.decode("utf-8").rstrip("\r\n")
            if text.startswith("data:"):
                data.append(text[5:].lstrip(" "))
                continue
            if text == "" and data:
                event = json.loads("\n".join(data))
                data = []
                if isinstance(event, dict) and "error" in event:
                    import tritonhttp

                    raise tritonhttp.InferenceServerException(msg=str(event["error"]))
                yield event
        if data:
            yield json.loads("\n".join(data))
    finally:
        connection.close()
