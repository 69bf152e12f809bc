"""Several servers and retries: the decisions both clients share, without I/O.

* :class:`ServerSet` says which servers a call may try, in which order: round robin or
  failover over the healthy ones; a server that refused a connection or timed out
  connecting is set aside for a back-off period (doubling up to a maximum), then one
  call probes it again. Thread-safe (one lock, no thread of its own).
* :class:`Retry` says whether a failed call is sent again and how long to wait first.
* :func:`unsent` tells a failure that happened before any byte of the request was
  written (the call may go to another server, whatever it is) from one after.
"""

from __future__ import annotations

import datetime
import email.utils
import math
import threading
import time
from collections.abc import Collection, Iterable
from typing import Any

from ._errors import ConnectError, ConnectTimeout, InferenceServerException
from ._protocol import GENERATE, RESULT, STREAM, Call

__all__ = [
    "FAILOVER",
    "ROUND_ROBIN",
    "SAFE_METHODS",
    "Retry",
    "ServerSet",
    "method_name",
    "resolve_retry",
    "retry_after",
    "unsent",
]

ROUND_ROBIN = "round_robin"
FAILOVER = "failover"

#: The client methods that only read, and so are safe to send again.
SAFE_METHODS: frozenset[str] = frozenset(
    {
        "is_server_live",
        "is_server_ready",
        "is_model_ready",
        "get_server_metadata",
        "get_model_metadata",
        "get_model_config",
        "get_model_repository_index",
        "get_inference_statistics",
        "get_trace_settings",
        "get_log_settings",
        "get_system_shared_memory_status",
        "get_cuda_shared_memory_status",
    }
)

_ALL_METHODS = SAFE_METHODS | {
    "load_model",
    "unload_model",
    "update_trace_settings",
    "update_log_settings",
    "register_system_shared_memory",
    "unregister_system_shared_memory",
    "register_cuda_shared_memory",
    "unregister_cuda_shared_memory",
    "infer",
    "async_infer",
    "generate",
    "generate_stream",
}


def _get_name(path: str) -> str:
    if path == "v2":
        return "get_server_metadata"
    if path == "v2/health/live":
        return "is_server_live"
    if path == "v2/health/ready":
        return "is_server_ready"
    if path == "v2/logging":
        return "get_log_settings"
    if path.startswith("v2/systemsharedmemory"):
        return "get_system_shared_memory_status"
    if path.startswith("v2/cudasharedmemory"):
        return "get_cuda_shared_memory_status"
    if path.endswith("/trace/setting") or path == "v2/trace/setting":
        return "get_trace_settings"
    if path.endswith("/stats"):
        return "get_inference_statistics"
    if path.endswith("/ready"):
        return "is_model_ready"
    if path.endswith("/config"):
        return "get_model_config"
    return "get_model_metadata"


def _post_name(path: str) -> str:
    if path == "v2/repository/index":
        return "get_model_repository_index"
    if path.endswith("/load"):
        return "load_model"
    if path.endswith("/unload"):
        return "unload_model"
    if path.endswith("trace/setting"):
        return "update_trace_settings"
    if path == "v2/logging":
        return "update_log_settings"
    kind = "system" if path.startswith("v2/system") else "cuda"
    verb = "unregister" if "/unregister" in path else "register"
    return f"{verb}_{kind}_shared_memory"


def method_name(call: Call) -> str:
    """The client method that made ``call`` (``"infer"`` also for ``async_infer``)."""
    if call.kind == RESULT:
        return "infer"
    if call.kind == GENERATE:
        return "generate"
    if call.kind == STREAM:
        return "generate_stream"
    return _get_name(call.path) if call.method == "GET" else _post_name(call.path)


def unsent(error: BaseException) -> bool:
    """Whether ``error`` ended the call before any byte of the request was written
    (no connection could be opened): the call may then go to another server."""
    return isinstance(error, (ConnectError, ConnectTimeout))


def retry_after(value: str | None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (seconds or an HTTP date), or None."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():  # str.isdigit also holds for '²' or '٣': float() decides
        try:
            return float(value)
        except ValueError:
            return None
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:  # '-0000' or no zone: an HTTP date is GMT, not local time
        when = when.replace(tzinfo=datetime.timezone.utc)
    return max(0.0, when.timestamp() - time.time())


class Retry:
    """When a failed call is sent again, and how long the client waits before it does.

    Args:
        total: how many times a call may be sent again (0: never).
        backoff_factor: the wait before the n-th retry is ``backoff_factor * 2**(n-1)``
            seconds (0: no wait).
        backoff_max: the longest wait, also for a server's ``Retry-After``.
        statuses: HTTP statuses after which a call is sent again.
        methods: the client methods sent again after one of ``statuses`` or after a
            broken exchange (default: those that only read, :data:`SAFE_METHODS`;
            add ``"infer"`` to retry inferences too). A call that failed before any
            byte of it was written is sent again whatever its method.

    A call whose answer carries ``Retry-After`` waits what it says (up to
    ``backoff_max``) if that is longer than the back-off.
    """

    __slots__ = ("backoff_factor", "backoff_max", "methods", "statuses", "total")

    DEFAULT_STATUSES: tuple[int, ...] = (502, 503, 504)
    SAFE_METHODS: frozenset[str] = SAFE_METHODS

    def __init__(
        self,
        total: int = 3,
        backoff_factor: float = 0.1,
        backoff_max: float = 10.0,
        statuses: Iterable[int] = DEFAULT_STATUSES,
        methods: Iterable[str] = SAFE_METHODS,
    ) -> None:
        if isinstance(total, bool) or not isinstance(total, int) or total < 0:
            raise InferenceServerException(msg=f"Retry total must be an int >= 0, got {total!r}")
        for name, value in (("backoff_factor", backoff_factor), ("backoff_max", backoff_max)):
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not 0 <= value < math.inf  # also rules out NaN
            ):
                raise InferenceServerException(
                    msg=f"Retry {name} must be a finite number >= 0, got {value!r}"
                )
        self.total = total
        self.backoff_factor = float(backoff_factor)
        self.backoff_max = float(backoff_max)
        self.statuses: frozenset[int] = _statuses(statuses)
        self.methods: frozenset[str] = _methods(methods)

    def __repr__(self) -> str:
        return (
            f"Retry(total={self.total}, backoff_factor={self.backoff_factor}, "
            f"backoff_max={self.backoff_max}, statuses={tuple(sorted(self.statuses))}, "
            f"methods={tuple(sorted(self.methods))})"
        )

    def backoff(self, retry: int, server_says: float | None = None) -> float:
        """Seconds to wait before retry number ``retry`` (1 for the first)."""
        # the exponent capped: 2.0**1024 overflows, and 2**-1 x 2**61 s is long enough
        wait = self.backoff_factor * 2.0 ** min(retry - 1, 62) if self.backoff_factor else 0.0
        if server_says is not None and server_says > wait:
            wait = server_says
        return min(wait, self.backoff_max)

    def on_status(self, call: Call, status: int) -> bool:
        """Whether an answer with ``status`` sends ``call`` again (retries left aside)."""
        return status in self.statuses and method_name(call) in self.methods

    def on_error(self, call: Call, error: BaseException) -> bool:
        """Whether ``error`` (a transport failure) sends ``call`` again."""
        return unsent(error) or method_name(call) in self.methods


def _statuses(statuses: Iterable[int]) -> frozenset[int]:
    try:
        chosen = frozenset(statuses)
    except TypeError:
        raise InferenceServerException(
            msg=f"Retry statuses must be a collection of HTTP status codes, got {statuses!r}"
        ) from None
    bad = [
        s for s in chosen if isinstance(s, bool) or not isinstance(s, int) or not 100 <= s <= 599
    ]
    if bad:
        raise InferenceServerException(
            msg="Retry statuses must be HTTP status codes (ints 100-599), "
            f"got {sorted(bad, key=repr)}"
        )
    return chosen


def _methods(methods: Iterable[str]) -> frozenset[str]:
    if isinstance(methods, str):
        methods = (methods,)
    try:
        chosen = frozenset(methods)
    except TypeError:
        raise InferenceServerException(
            msg=f"Retry methods must be a collection of client method names, got {methods!r}"
        ) from None
    unknown = sorted(chosen - _ALL_METHODS, key=repr)
    if unknown:
        raise InferenceServerException(msg=f"Retry methods: unknown client methods {unknown}")
    if "async_infer" in chosen or "infer" in chosen:
        chosen |= {"infer", "async_infer"}
    return chosen


_NO_RETRY = Retry(0)


def resolve_retry(retries: int | Retry | None) -> Retry:
    """The :class:`Retry` for a client's ``retries=`` argument (an int is ``Retry(n)``)."""
    if retries is None:
        return _NO_RETRY
    if isinstance(retries, Retry):
        return retries
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise InferenceServerException(
            msg=f"retries must be an int >= 0 or a tritonhttp.Retry, got {retries!r}"
        )
    return Retry(retries) if retries else _NO_RETRY


class _State:
    __slots__ = ("failures", "probing", "until")

    def __init__(self) -> None:
        self.until = 0.0  # 0: healthy; else set aside until this time.monotonic()
        self.failures = 0
        self.probing = False


class ServerSet:
    """Which of ``count`` servers a call tries, in which order, and their health.

    ``policy``: :data:`ROUND_ROBIN` (each call starts at the next healthy server) or
    :data:`FAILOVER` (the first healthy server in the list). A server that failed to
    connect is set aside for ``backoff`` seconds, doubled at each further failure up
    to ``backoff_max``; once that time has passed, one call tries it first (a probe)
    and its success brings it back. Servers set aside are tried only after every
    healthy one failed in the same call.
    """

    def __init__(
        self, count: int, policy: str, backoff: float = 1.0, backoff_max: float = 30.0
    ) -> None:
        if policy not in (ROUND_ROBIN, FAILOVER):
            raise InferenceServerException(
                msg=f"load_balancing must be 'round_robin' or 'failover', got {policy!r}"
            )
        if backoff <= 0 or backoff_max < backoff:
            raise InferenceServerException(
                msg=f"server_backoff must be (initial > 0, maximum >= initial), "
                f"got ({backoff!r}, {backoff_max!r})"
            )
        self._states = [_State() for _ in range(count)]
        self._count = count
        self._policy = policy
        self._backoff = backoff
        self._backoff_max = backoff_max
        self._next = 0
        self._lock = threading.Lock()

    def order(self) -> list[int]:
        """The servers to try for one call, in order (every server once)."""
        with self._lock:
            count = self._count
            start = 0
            if self._policy == ROUND_ROBIN:
                start = self._next
                self._next = (start + 1) % count
            states = self._states
            now = time.monotonic()
            healthy: list[int] = []
            probe: list[int] = []
            aside: list[int] = []
            for k in range(count):
                i = (start + k) % count
                state = states[i]
                if not state.until:
                    healthy.append(i)
                elif not probe and not state.probing and now >= state.until:
                    state.probing = True
                    probe.append(i)
                else:
                    aside.append(i)
            aside.sort(key=lambda i: states[i].until)
            return probe + healthy + aside

    def succeeded(self, index: int) -> None:
        """The server answered: it is healthy."""
        state = self._states[index]
        if state.until or state.probing:
            with self._lock:
                state.until = 0.0
                state.failures = 0
                state.probing = False

    def failed(self, index: int) -> None:
        """The server refused a connection or timed out connecting: set it aside."""
        with self._lock:
            state = self._states[index]
            state.failures += 1
            # the exponent capped: a server down for a long time fails more than 1024 times
            # (2.0**1024 overflows); the maximum is reached long before 2**62
            wait = min(self._backoff * 2.0 ** min(state.failures - 1, 62), self._backoff_max)
            state.until = time.monotonic() + wait
            state.probing = False

    def released(self, index: int) -> None:
        """A probe ended without telling anything about connecting (e.g. cancelled)."""
        state = self._states[index]
        if state.probing:
            with self._lock:
                state.probing = False

    def set_aside(self) -> list[int]:
        """The servers set aside now (for ``repr`` and tests)."""
        with self._lock:
            return [i for i, s in enumerate(self._states) if s.until]


def server_urls(url: Any) -> list[str]:
    """The ``url`` argument as a list of server URLs: a list or tuple of strings names
    several servers; anything else is one (checked, as before, by the URL parser:
    tritonclient's errors for a ``url`` that is not a str, a generator included)."""
    if not isinstance(url, (list, tuple)):
        return [url]
    urls = list(url)
    if not urls:
        raise InferenceServerException(msg="url: the list of servers is empty")
    for i, u in enumerate(urls):
        if not isinstance(u, str):
            raise InferenceServerException(
                msg=f"url: every server must be a 'host:port' string, got {u!r} at index {i}"
            )
    return urls


def check_policy(load_balancing: str, backoff: Collection[float]) -> tuple[float, float]:
    """Validate ``load_balancing`` and ``server_backoff``; the back-off pair."""
    if load_balancing not in (ROUND_ROBIN, FAILOVER):
        raise InferenceServerException(
            msg=f"load_balancing must be 'round_robin' or 'failover', got {load_balancing!r}"
        )
    try:
        if isinstance(backoff, (str, bytes)):
            raise TypeError
        initial, maximum = (float(x) for x in backoff)
    except (TypeError, ValueError):
        raise InferenceServerException(
            msg=f"server_backoff must be (initial, maximum) seconds, got {backoff!r}"
        ) from None
    if not (0 < initial <= maximum < math.inf):  # also rules out NaN
        raise InferenceServerException(
            msg=f"server_backoff must be (initial > 0, maximum >= initial), finite seconds, "
            f"got {backoff!r}"
        )
    return initial, maximum
