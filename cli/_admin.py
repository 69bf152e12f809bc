"""``server metadata``, ``log get|set``, ``trace get|set``, ``shm status|register|unregister``."""

from __future__ import annotations

import base64
from typing import Any

import click

from ._complete import complete_model
from ._errors import InputError
from ._help import SentenceGroup
from ._render import emit_json, key_value_table, new_table, print_table
from ._settings import Settings, json_flag
from ._values import parse_assignments

__all__ = ["log", "server", "shm", "trace"]


def _show_settings(settings: Settings, answer: Any, title: str) -> None:
    if settings.json_output:
        emit_json(settings, answer)
    else:
        print_table(settings, key_value_table(answer, title=title))


# -- server ----------------------------------------------------------------------------


@click.group(cls=SentenceGroup)
def server() -> None:
    """Show what the server says about itself."""


@server.command("metadata")
@json_flag
@click.pass_obj
def server_metadata(settings: Settings) -> None:
    """Show the server's name, version and protocol extensions."""
    with settings.client() as client:
        answer = client.get_server_metadata(headers=settings.request_headers)
    if settings.json_output:
        emit_json(settings, answer)
        return
    shown = {
        "name": answer.get("name", ""),
        "version": answer.get("version", ""),
        "extensions": answer.get("extensions", []),
    }
    print_table(settings, key_value_table(shown))


# -- log -------------------------------------------------------------------------------

_LOG_BOOLS = {"log_info", "log_warning", "log_error"}
_LOG_INTS = {"log_verbose_level"}
_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


#: every key of the log settings, in the order the server lists them
LOG_KEYS = ("log_file", "log_info", "log_warning", "log_error", "log_verbose_level", "log_format")


def _log_value(key: str, text: str) -> Any:
    if key not in LOG_KEYS:
        raise InputError(f"unknown log setting {key!r} (valid keys: {', '.join(LOG_KEYS)})")
    if key in _LOG_BOOLS:
        lowered = text.strip().lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
        raise InputError(f"log setting {key} takes true or false, not {text!r}")
    if key in _LOG_INTS:
        try:
            return int(text)
        except ValueError:
            raise InputError(f"log setting {key} takes an integer, not {text!r}") from None
    return text  # log_file, log_format


@click.group(cls=SentenceGroup)
def log() -> None:
    """Show or change the server's log settings."""


@log.command("get")
@json_flag
@click.pass_obj
def log_get(settings: Settings) -> None:
    """Show the log settings."""
    with settings.client() as client:
        answer = client.get_log_settings(headers=settings.request_headers)
    _show_settings(settings, answer, "Log settings")


@log.command("set")
@click.argument("assignments", nargs=-1, required=True, metavar="K=V...")
@json_flag
@click.pass_obj
def log_set(settings: Settings, assignments: tuple[str, ...]) -> None:
    """Change log settings, e.g. log_verbose_level=1 log_info=false; shows the result.

    Keys: log_file, log_info, log_warning, log_error, log_verbose_level, log_format.
    """
    changes = {k: _log_value(k, v) for k, v in parse_assignments(assignments, "K=V")}
    with settings.client() as client:
        answer = client.update_log_settings(changes, headers=settings.request_headers)
    _show_settings(settings, answer, "Log settings")


# -- trace -----------------------------------------------------------------------------

_MODEL = click.option(
    "--model",
    "-m",
    metavar="NAME",
    shell_complete=complete_model,
    help="A model's trace settings (default: the global ones).",
)


def _trace_value(key: str, text: str) -> Any:
    if text == "":
        return None  # clear: a model falls back to the global setting
    if key == "trace_level":
        return [level.strip() for level in text.split(",") if level.strip()]
    return text


@click.group(cls=SentenceGroup)
def trace() -> None:
    """Show or change the trace settings (global or per model)."""


@trace.command("get")
@_MODEL
@json_flag
@click.pass_obj
def trace_get(settings: Settings, model: str | None) -> None:
    """Show the trace settings."""
    with settings.client() as client:
        answer = client.get_trace_settings(model, headers=settings.request_headers)
    _show_settings(settings, answer, f"Trace settings ({model or 'global'})")


@trace.command("set")
@click.argument("assignments", nargs=-1, required=True, metavar="K=V...")
@_MODEL
@json_flag
@click.pass_obj
def trace_set(settings: Settings, assignments: tuple[str, ...], model: str | None) -> None:
    """Change trace settings, e.g. trace_level=TIMESTAMPS,TENSORS trace_rate=100.

    Keys: trace_file, trace_level (comma list), trace_rate, trace_count, log_frequency,
    trace_mode. An empty value (trace_rate=) clears a model's setting.
    """
    changes = {k: _trace_value(k, v) for k, v in parse_assignments(assignments, "K=V")}
    with settings.client() as client:
        answer = client.update_trace_settings(model, changes, headers=settings.request_headers)
    _show_settings(settings, answer, f"Trace settings ({model or 'global'})")


# -- shared memory ---------------------------------------------------------------------

_KIND = click.option(
    "--kind",
    type=click.Choice(["system", "cuda", "all"]),
    default="all",
    show_default=True,
    help="Which regions.",
)


@click.group(cls=SentenceGroup)
def shm() -> None:
    """Register, list and unregister shared-memory regions (system and CUDA)."""


@shm.command("status")
@click.option("--region", default="", metavar="NAME", help="Only this region.")
@_KIND
@json_flag
@click.pass_obj
def shm_status(settings: Settings, region: str, kind: str) -> None:
    """List the registered shared-memory regions."""
    headers = settings.request_headers
    answer: dict[str, Any] = {}
    with settings.client() as client:
        if kind in ("system", "all"):
            answer["system"] = client.get_system_shared_memory_status(region, headers=headers)
        if kind in ("cuda", "all"):
            answer["cuda"] = client.get_cuda_shared_memory_status(region, headers=headers)
    if settings.json_output:
        emit_json(settings, answer)
        return
    numeric = ("offset", "byte size")
    table = new_table("kind", "name", "key / device", *numeric, numeric=numeric)
    for region_kind, regions in answer.items():
        for entry in regions:
            where = entry.get("key") if region_kind == "system" else entry.get("device_id")
            table.add_row(
                region_kind,
                str(entry.get("name", "")),
                str(where if where is not None else ""),
                str(entry.get("offset", "")) if region_kind == "system" else "",
                str(entry.get("byte_size", "")),
            )
    print_table(settings, table)


@shm.command("register")
@click.argument("name")
@click.option("--key", metavar="KEY", help="System region: its shared-memory key (/name).")
@click.option(
    "--raw-handle",
    metavar="BASE64",
    help="CUDA region: its IPC handle, base64 (as from get_raw_handle).",
)
@click.option("--device-id", type=int, default=0, show_default=True, help="CUDA region: GPU.")
@click.option("--byte-size", type=click.IntRange(min=1), required=True, help="Region size.")
@click.option(
    "--offset", type=click.IntRange(min=0), default=0, show_default=True, help="System region."
)
@json_flag
@click.pass_obj
def shm_register(
    settings: Settings,
    name: str,
    key: str | None,
    raw_handle: str | None,
    device_id: int,
    byte_size: int,
    offset: int,
) -> None:
    """Register region NAME: a system one (--key) or a CUDA one (--raw-handle)."""
    if (key is None) == (raw_handle is None):
        raise click.UsageError("give exactly one of --key (system) or --raw-handle (CUDA)")
    headers = settings.request_headers
    with settings.client() as client:
        if key is not None:
            client.register_system_shared_memory(name, key, byte_size, offset, headers=headers)
            kind = "system"
        else:
            assert raw_handle is not None
            try:
                base64.b64decode(raw_handle, validate=True)
            except ValueError:
                raise InputError("--raw-handle is not valid base64") from None
            client.register_cuda_shared_memory(
                name, raw_handle.encode("ascii"), device_id, byte_size, headers=headers
            )
            kind = "cuda"
    if settings.json_output:
        emit_json(settings, {"region": name, "kind": kind, "registered": True})
    else:
        settings.stdout.write(f"registered {kind} shared memory region '{name}'\n")


@shm.command("unregister")
@click.argument("name", required=False)
@click.option("--all", "everything", is_flag=True, help="Unregister every region of --kind.")
@_KIND
@json_flag
@click.pass_obj
def shm_unregister(settings: Settings, name: str | None, everything: bool, kind: str) -> None:
    """Unregister region NAME (or, with --all, every region of --kind)."""
    if (name is None) != everything:
        raise click.UsageError("give a region NAME or --all (not both)")
    headers = settings.request_headers
    with settings.client() as client:
        if kind in ("system", "all"):
            client.unregister_system_shared_memory(name or "", headers=headers)
        if kind in ("cuda", "all"):
            client.unregister_cuda_shared_memory(name or "", headers=headers)
    if settings.json_output:
        emit_json(settings, {"region": name, "kind": kind, "unregistered": True})
    else:
        what = f"region '{name}'" if name else "all regions"
        settings.stdout.write(f"unregistered {what} ({kind})\n")
