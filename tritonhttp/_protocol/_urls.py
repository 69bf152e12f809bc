"""Server addresses, request paths and query strings, encoded as tritonclient does."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, quote_plus, urlsplit

from .._errors import InferenceServerException, _InvalidArgument

__all__ = ["ServerAddress", "parse_server_url", "query_string", "quote_name", "request_target"]


@dataclass(frozen=True)
class ServerAddress:
    """Where a client sends its requests."""

    scheme: str  # "http" or "https"
    host: str  # lower-cased, IPv6 without brackets
    port: int
    base_path: str  # "" or "/prefix" (no trailing slash)

    @property
    def host_header(self) -> str:
        """The ``Host`` header value (port omitted when it is 80 or 443)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port in (80, 443) else f"{host}:{self.port}"

    @property
    def url(self) -> str:
        """``scheme://host:port/base`` — used in error messages."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}{self.base_path}"


def parse_server_url(url: str, ssl: bool) -> ServerAddress:
    """Parse tritonclient's scheme-less ``host[:port][/base]`` form.

    Raises ``InferenceServerException`` when the URL carries a scheme (as tritonclient
    does); one that is also a ``ValueError`` for an invalid port (tritonclient's
    ``ValueError`` text), no host, or blanks in the host or the path; what tritonclient
    raised for a ``url`` that is not a ``str`` (``AttributeError``/``TypeError`` of
    ``startswith``).
    """
    # two calls, as tritonclient: the same error for a url that is not a str
    if url.startswith("http://") or url.startswith("https://"):  # noqa: PIE810
        raise InferenceServerException(msg="url should not include the scheme")
    scheme = "https" if ssl else "http"
    try:
        parts = urlsplit(f"{scheme}://{url}")
        port = parts.port
    except ValueError as e:
        raise _InvalidArgument(msg=str(e)) from None
    host = parts.hostname
    if not host:
        raise _InvalidArgument(msg=f"invalid url {url!r}: no host")
    if _has_blanks(host):
        raise _InvalidArgument(msg=f"invalid url {url!r}: the host has blanks")
    base = parts.path + (f"?{parts.query}" if parts.query else "")
    if _has_blanks(base):
        raise _InvalidArgument(msg=f"invalid url {url!r}: the path has blanks")
    return ServerAddress(
        scheme=scheme,
        host=host,
        port=port if port is not None else (443 if ssl else 80),
        base_path=base.rstrip("/"),
    )


def _has_blanks(text: str) -> bool:
    """Whitespace or control characters (never part of a host or a request target)."""
    return any(c <= " " or c == "\x7f" for c in text)


@functools.lru_cache(maxsize=1024)
def quote_name(name: str) -> str:
    """Quote a model or region name for a path (``/`` kept, space -> ``%20``)."""
    return quote(name)


def query_string(query_params: Mapping[str, Any]) -> str:
    """``key=value`` pairs joined by ``&``; list values repeat the key; quote_plus'ed."""
    pairs: list[str] = []
    for key, value in query_params.items():
        k = quote_plus(key)
        if isinstance(value, list):
            pairs.extend(f"{k}={quote_plus(str(item))}" for item in value)
        else:
            pairs.append(f"{k}={quote_plus(str(value))}")
    return "&".join(pairs)


def request_target(base_path: str, path: str, query_params: Mapping[str, Any] | None) -> str:
    """The request target: base path + ``/`` + relative path [+ ``?`` + query]."""
    target = f"{base_path}/{path}"
    if query_params is not None:
        target = f"{target}?{query_string(query_params)}"
    return target
