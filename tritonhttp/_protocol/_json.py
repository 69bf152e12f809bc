"""JSON exactly as tritonclient writes it: python-rapidjson with its defaults.

That means compact output, ASCII only (``\\uXXXX`` escapes with upper-case hex), ``NaN`` and
``Infinity`` as bare tokens, tuples as arrays and ``bytes`` as UTF-8 strings. One
deliberate extension: numpy scalars and arrays (e.g. ``np.int64`` dimensions in a shape)
are written as the equivalent Python numbers instead of raising ``TypeError``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import rapidjson

__all__ = ["JSONDecodeError", "dumps", "loads"]

JSONDecodeError = rapidjson.JSONDecodeError


def _numpy_default(obj: Any) -> Any:
    if isinstance(obj, (np.generic, np.ndarray)):
        return obj.tolist()
    raise TypeError(f"{obj!r} is not JSON serializable")


class _Encoder(rapidjson.Encoder):
    """rapidjson's defaults plus numpy values (a subclass costs nothing per call)."""

    def default(self, obj: Any) -> Any:
        return _numpy_default(obj)


_encode = _Encoder()


def dumps(obj: Any) -> str:
    """Serialize like ``rapidjson.dumps(obj)`` (numpy values accepted)."""
    text = _encode(obj)
    assert text is not None  # only None when writing to a stream
    return text


def loads(data: str | bytes | bytearray) -> Any:
    """Parse like ``rapidjson.loads`` (``NaN``/``Infinity`` accepted)."""
    return rapidjson.loads(data)
