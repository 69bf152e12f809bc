"""``health live|ready``: probes for scripts and container checks.

The exit status is the answer: 0 healthy, 1 not (also when the server cannot be
reached), 2 usage error. Nothing is printed when healthy; when not, one line on stderr
says why (unreachable, not live, not ready and which models failed, model not ready),
unless ``-q``. ``--wait`` polls until healthy or the deadline.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import click

from ._help import SentenceGroup
from ._render import emit_json
from ._settings import Settings, json_flag
from ._types import FiniteFloatRange

if TYPE_CHECKING:
    import tritonhttp

__all__ = ["health"]

_WAIT = click.option(
    "--wait",
    type=FiniteFloatRange(min=0),
    default=0.0,
    metavar="SECONDS",
    help="Keep polling until healthy or SECONDS have passed.",
)
_INTERVAL = click.option(
    "--interval",
    type=FiniteFloatRange(min=0.01),
    default=0.2,
    show_default=True,
    metavar="SECONDS",
    help="Pause between polls with --wait.",
)


_QUIET = click.option("--quiet", "-q", is_flag=True, help="Print nothing; only the exit status.")


def _poll(
    settings: Settings,
    wait: float,
    interval: float,
    check: str,
    model: str | None,
    version: str,
) -> str | None:
    """Probe until healthy or past ``wait``; None when healthy, else why not."""
    deadline = time.monotonic() + wait
    # A probe never waits longer than what is left of --wait (or --timeout).
    first = min(settings.timeout, wait) if wait > 0 else settings.timeout
    client = settings.client(timeout=max(first, 0.05))
    try:
        while True:
            if _probe_once(client, settings, check, model, version):
                return None
            left = deadline - time.monotonic()
            if left <= 0:
                why = _why(client, settings, check, model, version)
                return f"{why} (still after waiting {wait:g} s)" if wait > 0 else why
            time.sleep(min(interval, left))
    finally:
        client.close()


def _why(
    client: tritonhttp.InferenceServerClient,
    settings: Settings,
    check: str,
    model: str | None,
    version: str,
) -> str:
    """Why the server (or model) is not healthy, in one line."""
    from ._errors import describe

    headers = settings.request_headers
    where = f"the server at {settings.url}"
    try:
        if check == "live" and model is None:
            client.get_server_metadata(headers=headers)
            return f"{where} is not live"
        index = client.get_model_repository_index(headers=headers)
    except Exception as e:  # unreachable, timed out, or the index is not available
        text = describe(e)
        if "connect" in text.lower() or "timed out" in text.lower() or "timeout" in text.lower():
            return f"{where} is not reachable: {text}"
        subject = f"model '{model}'" if model is not None else where
        return f"{subject} is not ready"
    failed = [e for e in index if e.get("state") == "UNAVAILABLE" and e.get("reason")]
    if model is not None:
        mine = [e for e in index if e.get("name") == model]
        if not mine:
            return f"model '{model}' is not in the repository of {where}"
        versions = [str(e["version"]) for e in mine if e.get("version")]
        if version and versions and version not in versions:
            return (
                f"model '{model}' has no version {version} in the repository of {where} "
                f"(versions: {', '.join(versions)})"
            )
        mine = [e for e in mine if not version or e.get("version") == version] or mine
        state = mine[-1].get("state") or "not loaded"
        reason = mine[-1].get("reason")
        first = str(reason).splitlines()[0] if reason else ""
        return f"model '{model}' is not ready: {state}" + (f": {first}" if first else "")
    if failed:
        names = ", ".join(f"{e['name']} ({str(e['reason']).splitlines()[0]})" for e in failed)
        return f"{where} is not ready: models failed to load: {names}"
    return f"{where} is not ready"


def _probe_once(
    client: tritonhttp.InferenceServerClient,
    settings: Settings,
    check: str,
    model: str | None,
    version: str,
) -> bool:
    headers = settings.request_headers
    if model is not None:
        return client.is_model_ready(model, version, headers=headers)
    if check == "live":
        return client.is_server_live(headers=headers)
    return client.is_server_ready(headers=headers)


def _finish(
    ctx: click.Context,
    settings: Settings,
    check: str,
    why: str | None,
    model: str | None,
    quiet: bool,
) -> None:
    healthy = why is None
    if settings.json_output:
        emit_json(settings, {"check": check, "model": model, "healthy": healthy, "reason": why})
    if why is not None and not quiet:
        click.echo(f"not healthy: {why}", err=True)
    ctx.exit(0 if healthy else 1)


@click.group(cls=SentenceGroup)
def health() -> None:
    """Probe the server's health (exit status 0 healthy, 1 not, 2 usage error)."""


@health.command()
@_WAIT
@_INTERVAL
@_QUIET
@json_flag
@click.pass_context
def live(ctx: click.Context, wait: float, interval: float, quiet: bool) -> None:
    """Check whether the server is live."""
    settings: Settings = ctx.obj
    why = _poll(settings, wait, interval, "live", None, "")
    _finish(ctx, settings, "live", why, None, quiet)


@health.command()
@click.option("--model", "-m", metavar="NAME", help="Probe this model instead of the server.")
@click.option("--model-version", default="", metavar="VERSION", help="With --model.")
@_WAIT
@_INTERVAL
@_QUIET
@json_flag
@click.pass_context
def ready(
    ctx: click.Context,
    model: str | None,
    model_version: str,
    wait: float,
    interval: float,
    quiet: bool,
) -> None:
    """Check whether the server (or --model) is ready for inference."""
    settings: Settings = ctx.obj
    if model_version and model is None:
        raise click.UsageError("--model-version needs --model")
    why = _poll(settings, wait, interval, "ready", model, model_version)
    _finish(ctx, settings, "ready", why, model, quiet)
