"""Turning failures into one clear line on stderr and an exit status.

``CliError`` is what commands raise for an expected failure. Any other exception that
escapes a command -- a tritonhttp error (server answered with an error, server down),
an ``OSError`` -- is turned into a ``CliError`` too; ``--verbose`` adds the traceback.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable
from typing import IO, Any

import click

__all__ = ["CliError", "InputError", "describe", "run_guarded"]


class CliError(click.ClickException):
    """A failure reported as ``Error: <message>`` on stderr, with exit status ``code``."""

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"Error: {self.format_message()}", file=file or sys.stderr)


class InputError(CliError):
    """The command line asks for something impossible (bad value syntax, unknown input,
    shape mismatch): exit status 2, like a usage error."""

    exit_code = 2


def describe(exc: BaseException) -> str:
    """A one-line description of an exception from tritonhttp, the OS or elsewhere."""
    import tritonhttp

    if isinstance(exc, tritonhttp.InferenceServerException):
        message = exc.message() or type(exc).__name__
        status = exc.status()
        text = f"{message} (HTTP {status})" if status else message
    elif isinstance(exc, OSError) and exc.strerror:
        where = f": {exc.filename}" if exc.filename else ""
        text = f"{exc.strerror}{where}"
    else:
        text = str(exc) or type(exc).__name__
    return " ".join(text.split())  # one line


def run_guarded(call: Callable[[], Any], verbose: Callable[[], bool]) -> Any:
    """Run ``call``; report unexpected exceptions as a :class:`CliError`."""
    try:
        return call()
    except (click.ClickException, click.exceptions.Exit, click.Abort):
        raise
    except KeyboardInterrupt:
        click.echo("Error: interrupted", file=sys.stderr)
        raise click.exceptions.Exit(130) from None
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): stop quietly, without a second error
        # when the interpreter flushes stdout at exit.
        sys.stdout = None
        raise click.exceptions.Exit(1) from None
    except Exception as e:
        if verbose():
            traceback.print_exc(file=sys.stderr)
        raise CliError(describe(e)) from e
