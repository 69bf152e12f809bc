"""Command lists in ``--help`` with each command's summary as a whole sentence.

click cuts a command's summary at 45 characters (``Measure throughput and latency
of MODEL under load, like...``). Groups of this class list each command with its
``short_help``, or else the first sentence of its help text, whole.
"""

from __future__ import annotations

import re

import click

__all__ = ["SentenceGroup", "summary"]

#: a sentence ends with a period followed by whitespace (not "e.g." or "i.e.")
_END = re.compile(r"(?<!\be\.g)(?<!\bi\.e)\.(\s|$)")


def summary(command: click.Command) -> str:
    """The command's summary: its ``short_help``, else its help's first sentence."""
    if command.short_help:
        return " ".join(command.short_help.split())
    paragraph = (command.help or "").strip().split("\n\n", 1)[0]
    text = " ".join(paragraph.split())
    end = _END.search(text)
    return text[: end.start() + 1] if end else text


class SentenceGroup(click.Group):
    """A click group whose ``--help`` lists whole-sentence summaries."""

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is None or command.hidden:
                continue
            rows.append((name, summary(command)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)
