"""Client-side time limits of the asyncio client."""

from __future__ import annotations

from typing import Any, Final

from .._errors import _InvalidArgument, _InvalidType

__all__ = ["DEFAULT", "Timeouts"]


class _Default:
    """Marks an argument that was not given (``None`` means "no limit")."""

    _instance: _Default | None = None

    def __new__(cls) -> _Default:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "DEFAULT"

    def __reduce__(self) -> str:
        return "DEFAULT"


#: "Not given": keep the client's setting.
DEFAULT: Final = _Default()


def _seconds(name: str, value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _InvalidType(f"{name} must be a number of seconds or None, got {value!r}")
    if not value > 0:
        raise _InvalidArgument(f"{name} must be positive (or None for no limit), got {value!r}")
    return float(value)


class Timeouts:
    """Client-side time limits in seconds; ``None`` means no limit.

    Args:
        total: the whole call, from waiting for a connection to the last byte of the
            answer (for ``generate_stream``: until the answer starts).
        connect: opening a connection (TCP and TLS).
        read: the longest silence while an answer is awaited or read (between the
            events of a stream, too).
        pool: waiting for a free connection when ``conn_limit`` are busy.

    A field left out keeps the client's setting when passed as ``client_timeout``.
    """

    __slots__ = ("connect", "pool", "read", "total")

    total: float | _Default | None
    connect: float | _Default | None
    read: float | _Default | None
    pool: float | _Default | None

    def __init__(
        self,
        total: float | _Default | None = DEFAULT,
        *,
        connect: float | _Default | None = DEFAULT,
        read: float | _Default | None = DEFAULT,
        pool: float | _Default | None = DEFAULT,
    ) -> None:
        for name, value in (("total", total), ("connect", connect), ("read", read), ("pool", pool)):
            object.__setattr__(
                self, name, value if value is DEFAULT else _seconds(f"{name} timeout", value)
            )

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Timeouts is immutable")

    def __repr__(self) -> str:
        given = [
            f"{name}={getattr(self, name)!r}"
            for name in ("total", "connect", "read", "pool")
            if getattr(self, name) is not DEFAULT
        ]
        return f"Timeouts({', '.join(given)})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Timeouts):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in self.__slots__)

    def __hash__(self) -> int:
        return hash(tuple(getattr(self, n) for n in self.__slots__))


class Limits:
    """Resolved limits of one call (no DEFAULT left)."""

    __slots__ = ("connect", "pool", "read", "total")

    def __init__(
        self, total: float | None, connect: float | None, read: float | None, pool: float | None
    ) -> None:
        self.total = total
        self.connect = connect
        self.read = read
        self.pool = pool

    def override(self, client_timeout: Any) -> Limits:
        """These limits changed by a call's ``client_timeout`` (seconds, None or Timeouts)."""
        if client_timeout is DEFAULT:
            return self
        if not isinstance(client_timeout, Timeouts):
            return Limits(
                _seconds("client_timeout", client_timeout), self.connect, self.read, self.pool
            )
        values = []
        for name in ("total", "connect", "read", "pool"):
            value = getattr(client_timeout, name)
            values.append(getattr(self, name) if value is DEFAULT else value)
        return Limits(*values)
