"""The drop-in contract: names and signatures identical to the installed tritonclient.

Compares ``tritonhttp`` with ``tritonclient.http``, ``tritonhttp.utils`` with
``tritonclient.utils``, ``tritonhttp.auth`` with ``tritonclient.http.auth``,
``tritonhttp.aio`` with ``tritonclient.http.aio`` and ``tritonhttp.aio.auth`` with
``tritonclient.http.aio.auth``: exported names, module attributes, classes, methods
(kind, coroutine or not, parameter names, order, kinds and defaults). Any difference
fails unless it is listed in ``DELIBERATE_DIFFERENCES`` with its reason (each one is
also described in docs/migration.md).

One addition is checked on its own rather than method by method: every coroutine of
``tritonhttp.aio.InferenceServerClient`` ends with a keyword-only ``client_timeout``
(a per-call time limit), which calls written for tritonclient never pass.
"""

from __future__ import annotations
import __future__

import inspect
import types
from typing import Any

import pytest
import tritonclient.http as ref_http
import tritonclient.http.aio as ref_aio
import tritonclient.http.aio.auth as ref_aio_auth
import tritonclient.http.auth as ref_auth
import tritonclient.utils as ref_utils

import tritonhttp
import tritonhttp.aio
import tritonhttp.aio.auth
import tritonhttp.auth
import tritonhttp.utils

#: (module or qualified name, what) -> reason. Keep in sync with docs/migration.md.
_OPTIONAL_MSG = (
    "function",
    [
        ("self", inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.empty),
        ("msg", inspect.Parameter.POSITIONAL_OR_KEYWORD, None),
        ("status", inspect.Parameter.POSITIONAL_OR_KEYWORD, None),
        ("debug_details", inspect.Parameter.POSITIONAL_OR_KEYWORD, None),
    ],
)
_REQUIRED_MSG = (
    _OPTIONAL_MSG[0],
    [
        _OPTIONAL_MSG[1][0],
        (*_OPTIONAL_MSG[1][1][:2], inspect.Parameter.empty),
        *_OPTIONAL_MSG[1][2:],
    ],
)
_MSG_REASON = "msg may be omitted (it defaults to None); calls that pass it work unchanged"
_GENERATE = "new: Triton's generate extension (tritonclient has no generate endpoints)"
_PRODUCTION = "'load_balancing', 'server_backoff', 'retries', 'propagate_trace_context'"
_AIO_INIT_EXTRA = (
    "extra keyword-only parameters ['connect_timeout', 'read_timeout', 'pool_timeout', "
    f"'http_client', {_PRODUCTION}]"
)
_PRODUCTION_REASON = (
    "new, keyword-only: several servers (load_balancing, server_backoff), retries and "
    "OpenTelemetry trace context (docs/production.md)"
)
_CANCEL = "new: cancel() stops a request that was sent or is waiting to be"
_REF_ALL = (
    "'InferAsyncRequest', 'InferInput', 'InferRequestedOutput', 'InferResult', "
    "'InferenceServerClient', 'InferenceServerClientPlugin', 'InferenceServerException', "
    "'Request'"
)
DELIBERATE_DIFFERENCES: dict[tuple[str, str], str] = {
    ("tritonhttp", f"__all__ [{_REF_ALL}, 'Retry'] != [{_REF_ALL}]"): (
        "new: tritonhttp.Retry, the retry policy of both clients"
    ),
    ("tritonhttp", "extra attribute: Retry"): "new: the retry policy of both clients",
    ("tritonhttp.InferAsyncRequest", "extra member: cancel"): _CANCEL,
    ("tritonhttp.aio.InferAsyncRequest", "extra member: cancel"): _CANCEL,
    (
        "tritonhttp.InferenceServerClient.__init__",
        f"extra keyword-only parameters [{_PRODUCTION}]",
    ): _PRODUCTION_REASON,
    ("tritonhttp.InferenceServerClient", "extra member: generate"): _GENERATE,
    ("tritonhttp.InferenceServerClient", "extra member: generate_stream"): _GENERATE,
    ("tritonhttp.aio.InferenceServerClient", "extra member: generate"): _GENERATE,
    ("tritonhttp.aio.InferenceServerClient", "extra member: generate_stream"): _GENERATE,
    ("tritonhttp.aio.InferenceServerClient", "extra member: async_infer"): (
        "new: start an inference and get an asyncio.Task (tritonclient.http.aio has none)"
    ),
    ("tritonhttp.aio.InferenceServerClient.__init__", _AIO_INIT_EXTRA): (
        "new, keyword-only: separate connect/read/pool timeouts and a caller's httpx client; "
        "several servers, retries and trace context as in the sync client"
    ),
    ("tritonhttp.aio", "missing attribute: aiohttp"): (
        "tritonhttp.aio does not use aiohttp (an incidental import of tritonclient's module)"
    ),
    ("tritonhttp.aio", "extra attribute: Timeouts"): "new: the per-call time limits",
    (
        "tritonhttp.aio.InferenceServerException.__init__",
        f"{_OPTIONAL_MSG} != {_REQUIRED_MSG}",
    ): _MSG_REASON,
    ("tritonhttp.aio.InferenceServerClient", "extra member: __del__"): (
        "an unclosed client warns (ResourceWarning) and aborts its connections"
    ),
    (
        "tritonhttp.InferenceServerException.__init__",
        f"{_OPTIONAL_MSG} != {_REQUIRED_MSG}",
    ): _MSG_REASON,
    (
        "tritonhttp.utils.InferenceServerException.__init__",
        f"{_OPTIONAL_MSG} != {_REQUIRED_MSG}",
    ): _MSG_REASON,
}
#: How docs/migration.md names each deliberate difference (first matching suffix wins).
DOCUMENTED_AS = {
    "InferenceServerException.__init__": "InferenceServerException(msg=None",
    "aio.InferenceServerClient.__init__": "`connect_timeout`, `read_timeout`, `pool_timeout`",
    "InferenceServerClient.__init__": "`propagate_trace_context`",
    "InferAsyncRequest": "`InferAsyncRequest.cancel()`",
    "InferenceServerClient": "`generate` and `generate_stream`",
    "tritonhttp.aio": "### `tritonhttp.aio`",
    "tritonhttp": "`tritonhttp.Retry(",
}

PAIRS = [
    (tritonhttp, ref_http),
    (tritonhttp.utils, ref_utils),
    (tritonhttp.auth, ref_auth),
    (tritonhttp.aio, ref_aio),
    (tritonhttp.aio.auth, ref_aio_auth),
]
#: The keyword-only parameter every coroutine of the asyncio client adds.
PER_CALL = "client_timeout"


def public_attributes(module: types.ModuleType) -> dict[str, Any]:
    """Public attributes, without subpackages and ``from __future__``/typing helpers.

    A subpackage of the same distribution is left out wherever it hangs: tritonclient.http
    star-imports tritonclient.utils, so it has ``shared_memory`` only when
    tritonclient.utils.shared_memory happened to be imported first.
    """
    top = module.__name__.split(".")[0] + "."
    out = {}
    for name, value in vars(module).items():
        # "@py_builtins"/"@pytest_ar": pytest's assertion rewriting, which covers every
        # package of a distribution registering a pytest plugin (ours: the model fixtures)
        if name.startswith(("_", "@")):
            continue
        if isinstance(value, __future__._Feature):
            continue
        if isinstance(value, types.ModuleType) and value.__name__.startswith(top):
            continue
        out[name] = value
    return out


def signature_of(obj: Any) -> list[tuple[str, Any, Any]]:
    """Parameter names, kinds and defaults (annotations are ours only and not compared)."""
    return [(p.name, p.kind, p.default) for p in inspect.signature(obj).parameters.values()]


def members(cls: type) -> dict[str, tuple[str, Any]]:
    """Public methods (plus the protocol dunders users call) with their kind."""
    wanted = {"__init__", "__enter__", "__exit__", "__aenter__", "__aexit__", "__call__", "__del__"}
    out = {}
    for name in dir(cls):
        if name.startswith("_") and name not in wanted:
            continue
        raw = inspect.getattr_static(cls, name)
        if name in wanted and raw is getattr(object, name, None):
            continue
        kind = type(raw).__name__
        if inspect.iscoroutinefunction(raw):
            kind = "coroutine"
        if isinstance(raw, (staticmethod, classmethod)):
            target = getattr(cls, name)
        elif callable(raw):
            target = raw
        else:
            out[name] = (kind, None)
            continue
        try:
            signature = signature_of(target)
        except (TypeError, ValueError):
            out[name] = (kind, None)
            continue
        if (
            kind == "coroutine"
            and signature
            and signature[-1][:2]
            == (
                PER_CALL,
                inspect.Parameter.KEYWORD_ONLY,
            )
        ):
            signature = signature[:-1]  # checked by test_every_coroutine_takes_client_timeout
        out[name] = (kind, signature)
    return out


def extra_keyword_only(ours: tuple[str, Any], ref: tuple[str, Any]) -> list[str] | None:
    """Names of keyword-only parameters ``ours`` adds at the end of ``ref``, if that is all."""
    if ours[0] != ref[0] or ours[1] is None or ref[1] is None:
        return None
    n = len(ref[1])
    if ours[1][:n] != ref[1] or len(ours[1]) == n:
        return None
    extra = ours[1][n:]
    if any(kind != inspect.Parameter.KEYWORD_ONLY for _, kind, _ in extra):
        return None
    return [name for name, _, _ in extra]


def differences() -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for ours, ref in PAIRS:
        label = ours.__name__
        ours_all = getattr(ours, "__all__", None)
        ref_all = getattr(ref, "__all__", None)
        if ref_all is not None and sorted(ours_all or []) != sorted(ref_all):
            found.append((label, f"__all__ {sorted(ours_all or [])} != {sorted(ref_all)}"))
        ours_attrs, ref_attrs = public_attributes(ours), public_attributes(ref)
        for name in sorted(set(ref_attrs) - set(ours_attrs)):
            found.append((label, f"missing attribute: {name}"))
        for name in sorted(set(ours_attrs) - set(ref_attrs)):
            found.append((label, f"extra attribute: {name}"))
        for name in sorted(set(ours_attrs) & set(ref_attrs)):
            a, b = ours_attrs[name], ref_attrs[name]
            where = f"{label}.{name}"
            if isinstance(b, types.ModuleType):
                if a is not b:
                    found.append((where, "module attribute is a different module"))
            elif inspect.isclass(b):
                if not inspect.isclass(a):
                    found.append((where, "not a class"))
                    continue
                if issubclass(b, BaseException) != issubclass(a, BaseException):
                    found.append((where, "exception-ness differs"))
                if inspect.isabstract(b) != inspect.isabstract(a):
                    found.append((where, "abstractness differs"))
                ours_members, ref_members = members(a), members(b)
                for m in sorted(set(ref_members) - set(ours_members)):
                    found.append((where, f"missing member: {m}"))
                for m in sorted(set(ours_members) - set(ref_members)):
                    found.append((where, f"extra member: {m}"))
                for m in sorted(set(ours_members) & set(ref_members)):
                    if ours_members[m] != ref_members[m]:
                        extra = extra_keyword_only(ours_members[m], ref_members[m])
                        what = (
                            f"{ours_members[m]} != {ref_members[m]}"
                            if extra is None
                            else f"extra keyword-only parameters {extra}"
                        )
                        found.append((f"{where}.{m}", what))
            elif callable(b):
                if not callable(a):
                    found.append((where, "not callable"))
                elif signature_of(a) != signature_of(b):
                    found.append((where, f"signature {signature_of(a)} != {signature_of(b)}"))
            elif a != b:
                found.append((where, f"value {a!r} != {b!r}"))
    return found


def test_surface_matches_tritonclient() -> None:
    unexpected = [d for d in differences() if d not in DELIBERATE_DIFFERENCES]
    assert unexpected == []


def test_every_deliberate_difference_still_exists() -> None:
    """A listed difference that no longer exists must be removed from the table."""
    assert set(DELIBERATE_DIFFERENCES) <= set(differences())


def test_every_deliberate_difference_is_documented() -> None:
    from pathlib import Path

    text = (Path(__file__).parent.parent / "docs" / "migration.md").read_text()
    for where, _what in DELIBERATE_DIFFERENCES:
        key = next(k for k in DOCUMENTED_AS if where.endswith(k))
        assert DOCUMENTED_AS[key] in text, where


@pytest.mark.parametrize("name", sorted(ref_http.__all__))
def test_exported_names_are_the_public_classes(name: str) -> None:
    assert getattr(tritonhttp, name).__name__ == getattr(ref_http, name).__name__


def test_exception_is_the_same_class_everywhere() -> None:
    assert tritonhttp.InferenceServerException is tritonhttp.utils.InferenceServerException
    exc = tritonhttp.InferenceServerException("m", "400", "d")
    assert (str(exc), exc.message(), exc.status(), exc.debug_details()) == (
        "[400] m",
        "m",
        "400",
        "d",
    )


def test_every_coroutine_takes_client_timeout() -> None:
    from tritonhttp.aio._timeouts import DEFAULT

    client = tritonhttp.aio.InferenceServerClient
    names = [
        n
        for n in dir(client)
        if not n.startswith("_") and inspect.iscoroutinefunction(getattr(client, n))
    ]
    names += ["async_infer", "generate_stream"]
    assert len(names) >= 25
    for name in names:
        if name == "close":
            continue
        last = list(inspect.signature(getattr(client, name)).parameters.values())[-1]
        assert (last.name, last.kind, last.default) == (
            PER_CALL,
            inspect.Parameter.KEYWORD_ONLY,
            DEFAULT,
        ), name


def test_every_tritonclient_coroutine_is_a_coroutine_here() -> None:
    ours, ref = (
        members(tritonhttp.aio.InferenceServerClient),
        members(ref_aio.InferenceServerClient),
    )
    for name, (kind, _) in ref.items():
        assert ours[name][0] == kind, name


def test_aio_names_are_the_public_classes() -> None:
    assert tritonhttp.aio.InferResult is tritonhttp.InferResult
    assert tritonhttp.aio.InferenceServerException is tritonhttp.InferenceServerException
    assert tritonhttp.aio.auth.BasicAuth is tritonhttp.auth.BasicAuth
    assert issubclass(
        tritonhttp.aio.InferenceServerClient, tritonhttp.aio.InferenceServerClientBase
    )
    assert issubclass(tritonhttp.InferenceServerClient, tritonhttp.aio.InferenceServerClientBase)
