"""``serve``: start the bundled server (``python -m tritonhttp.server``) with the same flags.

Every argument is passed through unchanged (tritonserver's flag names). On POSIX the
CLI process *becomes* the server (``exec``), so signals, the PID and the exit status are
the server's own; elsewhere the server runs as a child that Ctrl-C reaches directly and
whose exit status is returned.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

import click

from ._errors import CliError

__all__ = ["SERVER_MODULE", "serve", "server_command"]

SERVER_MODULE = "tritonhttp.server"


def server_command(args: tuple[str, ...] | list[str]) -> list[str]:
    """The command line that runs the bundled server with ``args``."""
    return [sys.executable, "-m", SERVER_MODULE, *args]


#: what the server needs beyond tritonhttp itself (the ``server`` extra)
SERVER_NEEDS = (SERVER_MODULE, "google.protobuf", "prometheus_client")


def _server_installed() -> bool:
    """Whether the server and the packages of the ``server`` extra can be imported."""
    import importlib.util

    try:
        return all(importlib.util.find_spec(name) is not None for name in SERVER_NEEDS)
    except ImportError:
        return False


@click.command(
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
    short_help="Run the bundled server with tritonserver's flags (see serve -- --help).",
)
@click.option("--dry-run", is_flag=True, help="Print the server command instead of running it.")
@click.argument("server_args", nargs=-1, type=click.UNPROCESSED, metavar="[SERVER FLAGS]...")
def serve(dry_run: bool, server_args: tuple[str, ...]) -> None:
    """Run the bundled server with tritonserver's flags, e.g.
    --model-repository DIR --http-port 8000.

    All flags go to `python -m tritonhttp.server` unchanged; see its flags with
    `triton-cli serve -- --help`.
    """
    command = server_command(server_args)
    if dry_run:
        click.echo(shlex.join(command))
        return
    if not _server_installed():
        raise CliError(
            f"the bundled server ({SERVER_MODULE}) is not installed: "
            "pip install 'tritonhttp[server]'"
        )
    sys.stdout.flush()
    sys.stderr.flush()
    if os.name == "posix":
        os.execv(sys.executable, command)  # does not return
    # Windows: no exec; Ctrl-C reaches the child through the console.
    process = subprocess.Popen(command)
    while True:
        try:
            raise SystemExit(process.wait())
        except KeyboardInterrupt:
            continue  # the child got it too; wait for it to finish shutting down
