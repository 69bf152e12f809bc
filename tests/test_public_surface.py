"""The drop-in contract: names and signatures identical to the installed tritonclient.

Compares ``tritonhttp`` with ``tritonclient.http``, ``tritonhttp.utils`` with
``tritonclient.utils`` and ``tritonhttp.auth`` with ``tritonclient.http.auth``: exported
names, module attributes, classes, methods (kind, parameter names, order, kinds and
defaults). Any difference fails unless it is listed in ``DELIBERATE_DIFFERENCES`` with
its reason (each one is also described in docs/migration.md).
"""

from __future__ import annotations
import __future__

import inspect
import types
from typing import Any

import pytest
import tritonclient.http as ref_http
import tritonclient.http.auth as ref_auth
import tritonclient.utils as ref_utils

import tritonhttp
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
DELIBERATE_DIFFERENCES: dict[tuple[str, str], str] = {
    (
        "tritonhttp.InferenceServerException.__init__",
        f"{_OPTIONAL_MSG} != {_REQUIRED_MSG}",
    ): _MSG_REASON,
    (
        "tritonhttp.utils.InferenceServerException.__init__",
        f"{_OPTIONAL_MSG} != {_REQUIRED_MSG}",
    ): _MSG_REASON,
}
#: How docs/migration.md names each deliberate difference.
DOCUMENTED_AS = {"InferenceServerException.__init__": "InferenceServerException(msg=None"}

PAIRS = [
    (tritonhttp, ref_http),
    (tritonhttp.utils, ref_utils),
    (tritonhttp.auth, ref_auth),
]


def public_attributes(module: types.ModuleType) -> dict[str, Any]:
    """Public attributes, without subpackages and ``from __future__``/typing helpers."""
    out = {}
    for name, value in vars(module).items():
        # "@py_builtins"/"@pytest_ar": pytest's assertion rewriting, which covers every
        # package of a distribution registering a pytest plugin (ours: the model fixtures)
        if name.startswith(("_", "@")):
            continue
        if isinstance(value, __future__._Feature):
            continue
        if isinstance(value, types.ModuleType) and value.__name__.startswith(module.__name__ + "."):
            continue
        out[name] = value
    return out


def signature_of(obj: Any) -> list[tuple[str, Any, Any]]:
    """Parameter names, kinds and defaults (annotations are ours only and not compared)."""
    return [(p.name, p.kind, p.default) for p in inspect.signature(obj).parameters.values()]


def members(cls: type) -> dict[str, tuple[str, Any]]:
    """Public methods (plus the protocol dunders users call) with their kind."""
    wanted = {"__init__", "__enter__", "__exit__", "__call__", "__del__"}
    out = {}
    for name in dir(cls):
        if name.startswith("_") and name not in wanted:
            continue
        raw = inspect.getattr_static(cls, name)
        if name in wanted and raw is getattr(object, name, None):
            continue
        kind = type(raw).__name__
        if isinstance(raw, (staticmethod, classmethod)):
            target = getattr(cls, name)
        elif callable(raw):
            target = raw
        else:
            out[name] = (kind, None)
            continue
        try:
            out[name] = (kind, signature_of(target))
        except (TypeError, ValueError):
            out[name] = (kind, None)
    return out


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
                        found.append((f"{where}.{m}", f"{ours_members[m]} != {ref_members[m]}"))
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
