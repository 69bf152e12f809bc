"""The shared-memory endpoints: ``/v2/systemsharedmemory`` and ``/v2/cudasharedmemory``,
a region's (or every region's) ``status``, ``register`` and ``unregister``, with the
register bodies checked in Triton's order and with Triton's messages.

Plain functions: each handler takes the :class:`~._routes.Frontend` (for its core), the
ASGI triple and the route's captures (the region, else None, and the action).
"""

from __future__ import annotations

import base64
import binascii

from ..core._core import ServerCore
from ..core._errors import Code, CoreError
from ..support import _json
from ._http import Receive, Scope, Send, parse_body, read_body, send_response
from ._routes import Frontend

__all__ = ["cuda_shm", "system_shm"]


async def system_shm(
    front: Frontend, scope: Scope, receive: Receive, send: Send, region: str | None, action: str
) -> None:
    """System shared memory: the ``status`` of ``region`` (None: of every region), or
    its ``register`` or ``unregister`` (None: every region's)."""
    core = front.core
    if await _shm_query(core, receive, send, region, action, "system"):
        return
    if region is None:
        raise CoreError("'region name' is necessary to register system shared memory region")
    doc = parse_body(await read_body(receive))
    if not isinstance(doc, dict) or "key" not in doc:
        raise CoreError("Shared memory register request has no 'key' field")
    key = doc["key"]
    if not isinstance(key, str):
        raise CoreError("attempt to access JSON non-string as string", Code.INTERNAL)
    key = key.partition("\0")[0]  # Triton reads the key as a C string
    offset = _unsigned(doc.get("offset", 0))
    if "byte_size" not in doc:
        raise CoreError("Shared memory register request has no 'byte_size' field")
    core.shm.register(region, key, offset, _unsigned(doc["byte_size"]))
    await send_response(send, 200, b"")


async def cuda_shm(
    front: Frontend, scope: Scope, receive: Receive, send: Send, region: str | None, action: str
) -> None:
    """CUDA shared memory: the ``status`` of ``region`` (None: of every region), or its
    ``register`` or ``unregister`` (None: every region's)."""
    core = front.core
    if await _shm_query(core, receive, send, region, action, "cuda"):
        return
    if region is None:
        raise CoreError("'region name' is necessary to register cuda shared memory region")
    doc = parse_body(await read_body(receive))
    if not isinstance(doc, dict) or "raw_handle" not in doc:
        raise CoreError("Shared memory register request has no 'raw_handle' field")
    handle = doc["raw_handle"]
    if not isinstance(handle, dict) or "b64" not in handle:
        raise CoreError("attempt to access non-existing object member 'b64'", Code.INTERNAL)
    if not isinstance(handle["b64"], str):
        raise CoreError("attempt to access JSON non-string as string", Code.INTERNAL)
    values = {}
    for key in ("byte_size", "device_id"):  # (in Triton's order)
        if key not in doc:
            raise CoreError(f"attempt to access non-existing object member '{key}'", Code.INTERNAL)
        values[key] = _unsigned(doc[key])
    try:
        raw = base64.b64decode(handle["b64"], validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    # Without cuda-python or a GPU the handle cannot be opened: Triton's CPU-only answer.
    core.shm.register_cuda(region, raw, values["device_id"], values["byte_size"])
    await send_response(send, 200, b"")


async def _shm_query(
    core: ServerCore, receive: Receive, send: Send, region: str | None, action: str, kind: str
) -> bool:
    """Answer a ``status`` or ``unregister`` of ``kind`` shared memory: True; False for
    a ``register`` (the caller's)."""
    shm = core.shm
    if action == "status":
        await send_response(send, 200, _json.dumps(shm.status(region, kind)))
        return True
    if action == "unregister":
        await read_body(receive)
        shm.unregister(region, kind)
        await send_response(send, 200, b"")
        return True
    return False


def _unsigned(value: object) -> int:
    """``value`` of an unsigned 64-bit JSON field, or Triton's error for anything else."""
    if type(value) is not int or not 0 <= value < 2**64:
        raise CoreError(
            "attempt to access JSON non-unsigned-integer as unsigned-integer", Code.INTERNAL
        )
    return value
