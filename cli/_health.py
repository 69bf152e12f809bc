"""``health live|ready``: probes for scripts and container checks.

Quiet by default; the exit status is the answer: 0 healthy, 1 not (also when the
server cannot be reached), 2 usage error. ``--wait`` polls until healthy or the deadline.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import click

from ._render import emit_json
from ._settings import Settings, json_flag

if TYPE_CHECKING:
    import tritonhttp

__all__ = ["health"]

_WAIT = click.option(
    "--wait",
    type=click.FloatRange(min=0),
    default=0.0,
    metavar="SECONDS",
    help="Keep polling until healthy or SECONDS have passed.",
)
_INTERVAL = click.option(
    "--interval",
    type=click.FloatRange(min=0.01),
    default=0.2,
    show_default=True,
    metavar="SECONDS",
    help="Pause between polls with --wait.",
)


def _poll(
    settings: Settings,
    wait: float,
    interval: float,
    check: str,
    model: str | None,
    version: str,
) -> bool:
    deadline = time.monotonic() + wait
    # A probe never waits longer than what is left of --wait (or --timeout).
    first = min(settings.timeout, wait) if wait > 0 else settings.timeout
    client = settings.client(timeout=max(first, 0.05))
    try:
        while True:
            if _probe_once(client, settings, check, model, version):
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(interval, left))
    finally:
        client.close()


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
    ctx: click.Context, settings: Settings, check: str, healthy: bool, model: str | None
) -> None:
    if settings.json_output:
        emit_json(settings, {"check": check, "model": model, "healthy": healthy})
    ctx.exit(0 if healthy else 1)


@click.group()
def health() -> None:
    """Probe the server (exit status 0 healthy, 1 not, 2 usage error)."""


@health.command()
@_WAIT
@_INTERVAL
@json_flag
@click.pass_context
def live(ctx: click.Context, wait: float, interval: float) -> None:
    """Is the server live?"""
    settings: Settings = ctx.obj
    healthy = _poll(settings, wait, interval, "live", None, "")
    _finish(ctx, settings, "live", healthy, None)


@health.command()
@click.option("--model", "-m", metavar="NAME", help="Probe this model instead of the server.")
@click.option("--model-version", default="", metavar="VERSION", help="With --model.")
@_WAIT
@_INTERVAL
@json_flag
@click.pass_context
def ready(
    ctx: click.Context,
    model: str | None,
    model_version: str,
    wait: float,
    interval: float,
) -> None:
    """Is the server (or --model) ready for inference?"""
    settings: Settings = ctx.obj
    if model_version and model is None:
        raise click.UsageError("--model-version needs --model")
    healthy = _poll(settings, wait, interval, "ready", model, model_version)
    _finish(ctx, settings, "ready", healthy, model)
