"""``--help`` lists every command with a whole sentence, never a summary cut short."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner
from tritonhttp_cli import cli

GROUPS = [[], ["model"], ["health"], ["log"], ["server"], ["shm"], ["trace"]]


def summaries(args: list[str]) -> dict[str, str]:
    """Command -> its summary, read from the rendered help (wrapped lines joined)."""
    result = CliRunner().invoke(cli, [*args, "--help"], terminal_width=80)
    assert result.exit_code == 0, result.output
    listed: dict[str, str] = {}
    name = ""
    for line in result.output.split("Commands:\n", 1)[1].splitlines():
        if line.startswith("  ") and not line.startswith("   "):
            name, _, text = line.strip().partition(" ")
            listed[name] = text.strip()
        elif line.strip():
            listed[name] += " " + line.strip()
    return listed


@pytest.mark.parametrize("args", GROUPS, ids=lambda a: " ".join(a) or "triton-cli")
def test_summaries_are_whole_sentences(args: list[str]) -> None:
    listed = summaries(args)
    group = cli
    for name in args:
        found = group.get_command(click.Context(group), name)
        assert isinstance(found, click.Group)
        group = found
    assert set(listed) == set(group.list_commands(click.Context(group)))
    for name, text in listed.items():
        assert not text.endswith("..."), (name, text)
        assert text[0].isupper() and text.endswith("."), (name, text)
