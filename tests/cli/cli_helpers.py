"""Helpers for the triton-cli tests: running the script and the click group."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result
from tritonhttp_cli import cli

TESTS = Path(__file__).resolve().parent.parent
MODELS = TESTS / "models"
GENERATE_REPO = TESTS / "repos" / "cli_generate"
GOLDEN = Path(__file__).resolve().parent / "golden"
#: The installed console script (next to the interpreter running the tests).
SCRIPT = Path(sys.executable).with_name("triton-cli")


@dataclass
class Run:
    """A finished ``triton-cli`` subprocess."""

    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)


def run_script(args: Sequence[str], timeout: float = 120, env: dict[str, str] | None = None) -> Run:
    """Run the triton-cli script with ``args``."""
    done = subprocess.run(
        [str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout, env=env
    )
    return Run(done.returncode, done.stdout, done.stderr)


def invoke_offline(*args: str, **kwargs: Any) -> Result:
    """The click group in-process (for parsing, rendering and usage errors)."""
    return CliRunner().invoke(cli, list(args), catch_exceptions=False, **kwargs)


def json_shape(value: Any) -> Any:
    """The shape of a JSON value: dicts keep their keys, lists merge their items,
    scalars become their type name ("string", "number", "bool", "null")."""
    if isinstance(value, dict):
        return {k: json_shape(v) for k, v in value.items()}
    if isinstance(value, list):
        merged: Any = None
        for item in value:
            merged = _merge(merged, json_shape(item))
        return [] if merged is None else [merged]
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if value is None:
        return "null"
    return "string"


def _merge(a: Any, b: Any) -> Any:
    if a is None:
        return b
    if isinstance(a, dict) and isinstance(b, dict):
        return {
            k: _merge(a.get(k), b.get(k)) if k in a and k in b else a.get(k, b.get(k))
            for k in sorted({*a, *b})
        }
    if isinstance(a, list) and isinstance(b, list):
        if not a or not b:
            return a or b
        return [_merge(a[0], b[0])]
    if a == b:
        return a
    return "|".join(sorted(set(str(a).split("|")) | set(str(b).split("|"))))
