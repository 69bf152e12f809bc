"""The ``triton-cli`` entry point: the click group holding the global options.

Subcommands live in their own modules and are imported only when invoked, so that a
probe such as ``triton-cli health ready`` pays for nothing it does not use.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from typing import Any

import click

from ._errors import run_guarded
from ._help import SentenceGroup
from ._settings import Settings, parse_header
from ._types import FiniteFloatRange

__all__ = ["cli", "main"]

#: command name -> (module, attribute); imported on first use.
_COMMANDS: dict[str, tuple[str, str]] = {
    "bench": ("._bench", "bench"),
    "generate": ("._generate", "generate"),
    "health": ("._health", "health"),
    "infer": ("._infer", "infer"),
    "log": ("._admin", "log"),
    "metrics": ("._metrics", "metrics"),
    "model": ("._model", "model"),
    "serve": ("._serve", "serve"),
    "server": ("._admin", "server"),
    "shm": ("._admin", "shm"),
    "trace": ("._admin", "trace"),
}


class _LazyGroup(SentenceGroup):
    """A group whose subcommands are imported when they are looked up."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*_COMMANDS, *self.commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = _COMMANDS.get(cmd_name)
        if target is None:
            return super().get_command(ctx, cmd_name)
        module = importlib.import_module(target[0], __package__)
        command: click.Command = getattr(module, target[1])
        return command

    def invoke(self, ctx: click.Context) -> Any:
        def verbose() -> bool:
            settings = ctx.find_object(Settings)
            return settings is not None and settings.verbose

        return run_guarded(lambda: super(_LazyGroup, self).invoke(ctx), verbose)


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--url",
    envvar="TRITON_URL",
    default="localhost:8000",
    show_default=True,
    show_envvar=True,
    help="Server address host:port[/base]; an https:// prefix implies --ssl.",
)
@click.option("--ssl", is_flag=True, help="Use HTTPS.")
@click.option(
    "--insecure",
    is_flag=True,
    help="With HTTPS: do not verify the server's certificate or host name.",
)
@click.option(
    "--ca-certs",
    type=click.Path(exists=True, dir_okay=False),
    help="With HTTPS: CA bundle to verify the server with.",
)
@click.option(
    "--header",
    "-H",
    "headers",
    multiple=True,
    metavar="K:V",
    help="Extra HTTP header on every request (repeatable).",
)
@click.option(
    "--timeout",
    type=FiniteFloatRange(min=0, min_open=True),
    default=60.0,
    show_default=True,
    help="Seconds to connect, and for each network read or write.",
)
@click.option("--json", "json_output", is_flag=True, help="Machine-readable JSON on stdout.")
@click.option(
    "--verbose",
    "-v",
    is_flag=True,
    help="Show HTTP traffic (on stderr) and tracebacks on errors.",
)
@click.version_option(package_name="tritonhttp", prog_name="triton-cli")
@click.pass_context
def cli(
    ctx: click.Context,
    url: str,
    ssl: bool,
    insecure: bool,
    ca_certs: str | None,
    headers: tuple[str, ...],
    timeout: float,
    json_output: bool,
    verbose: bool,
) -> None:
    """Talk to a Triton Inference Server over HTTP: infer, manage models, probe health,
    read metrics, serve and benchmark.

    Every command accepts --json for machine-readable output. Exit status: 0 success,
    1 failure (or "not healthy"), 2 usage error.
    """
    parsed: dict[str, str] = {}
    for raw in headers:
        key, value = parse_header(raw)
        parsed[key] = value
    settings = Settings.from_options(
        url=url,
        ssl=ssl,
        insecure=insecure,
        ca_certs=ca_certs,
        headers=parsed,
        timeout=timeout,
        json_output=json_output,
        verbose=verbose,
        stdout=sys.stdout,
    )
    ctx.obj = settings
    if verbose:
        # The client prints its traffic on stdout; keep stdout for the command's output.
        ctx.with_resource(contextlib.redirect_stdout(sys.stderr))


def main(argv: list[str] | None = None) -> None:
    """Run triton-cli (``argv`` defaults to ``sys.argv[1:]``); exits the process."""
    cli.main(args=argv, prog_name="triton-cli", auto_envvar_prefix=None)


if __name__ == "__main__":  # pragma: no cover - python -m tritonhttp_cli.main
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main(sys.argv[1:])
