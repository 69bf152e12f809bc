"""``model list|load|unload|config|metadata|stats|ready``: the model repository."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from ._complete import complete_model
from ._errors import CliError, InputError, describe
from ._help import SentenceGroup
from ._render import console, emit_json, json_text, new_table, print_table
from ._settings import Settings, json_flag
from ._values import parse_assignments

__all__ = ["model"]

_VERSION = click.option("--model-version", default="", metavar="VERSION", help="Model version.")


@click.group(cls=SentenceGroup)
def model() -> None:
    """Manage and inspect the models in the repository."""


@model.command("list")
@json_flag
@click.pass_obj
def list_models(settings: Settings) -> None:
    """List the models in the repository with their state and its reason."""
    with settings.client() as client:
        index = client.get_model_repository_index(headers=settings.request_headers)
    if settings.json_output:
        emit_json(settings, index)
        return
    table = new_table("model", "ver", "state", "reason", numeric=(), names=("model",))
    for entry in index:
        table.add_row(
            str(entry.get("name", "")),
            str(entry.get("version", "")),
            str(entry.get("state", "")),
            # (the part before the model code's traceback, which --json keeps)
            str(entry.get("reason", "")).split("\n\nAt:", 1)[0].strip(),
        )
    print_table(settings, table)


def _read_config(config: str | None) -> str | None:
    if config is None:
        return None
    if config.startswith("@"):
        path = Path(config[1:]).expanduser()
        try:
            config = path.read_text(encoding="utf-8")
        except OSError as e:
            raise InputError(f"--config: cannot read {path}: {e.strerror or e}") from None
    try:
        json.loads(config)
    except ValueError as e:
        raise InputError(f"--config is not valid JSON: {e}") from None
    return config


def _read_files(files: tuple[str, ...]) -> dict[str, bytes] | None:
    if not files:
        return None
    read: dict[str, bytes] = {}
    for target, source in parse_assignments(files, "--file"):
        if not source.startswith("@"):
            raise InputError(f"--file {target}: the content must be @LOCAL_PATH")
        path = Path(source[1:]).expanduser()
        try:
            content = path.read_bytes()
        except OSError as e:
            raise InputError(f"--file {target}: cannot read {path}: {e.strerror or e}") from None
        key = target if target.startswith("file:") else f"file:{target}"
        read[key] = content
    return read


@contextlib.contextmanager
def _explicit_hint() -> Iterator[None]:
    """Add how to fix it to the server's refusal of model control outside explicit mode."""
    import tritonhttp

    try:
        yield
    except tritonhttp.InferenceServerException as e:
        if "not allowed if polling is enabled" not in (e.message() or ""):
            raise
        raise CliError(
            f"{describe(e)}: the server is not in explicit model control mode; start it "
            "with --model-control-mode=explicit"
        ) from e


@model.command()
@click.argument("name", shell_complete=complete_model)
@click.option(
    "--config",
    metavar="JSON|@FILE",
    help="Model configuration (JSON) to load the model with, instead of config.pbtxt.",
)
@click.option(
    "--file",
    "files",
    multiple=True,
    metavar="PATH=@LOCAL",
    help="Model file to upload, e.g. 1/model.py=@./model.py (needs --config). Repeatable.",
)
@json_flag
@click.pass_obj
def load(settings: Settings, name: str, config: str | None, files: tuple[str, ...]) -> None:
    """Load (or reload) model NAME (explicit model control mode)."""
    config_text = _read_config(config)
    contents = _read_files(files)
    if contents and config_text is None:
        raise InputError("--file needs --config (the server requires both)")
    with settings.client() as client, _explicit_hint():
        client.load_model(
            name, headers=settings.request_headers, config=config_text, files=contents
        )
    if settings.json_output:
        emit_json(settings, {"model": name, "loaded": True})
    else:
        settings.stdout.write(f"loaded model '{name}'\n")


@model.command()
@click.argument("name", shell_complete=complete_model)
@click.option("--unload-dependents", is_flag=True, help="Also unload the models that depend on it.")
@json_flag
@click.pass_obj
def unload(settings: Settings, name: str, unload_dependents: bool) -> None:
    """Unload model NAME (explicit model control mode)."""
    with settings.client() as client, _explicit_hint():
        client.unload_model(
            name, headers=settings.request_headers, unload_dependents=unload_dependents
        )
    if settings.json_output:
        emit_json(settings, {"model": name, "unloaded": True})
    else:
        settings.stdout.write(f"unloaded model '{name}'\n")


@model.command()
@click.argument("name", shell_complete=complete_model)
@_VERSION
@json_flag
@click.pass_obj
def config(settings: Settings, name: str, model_version: str) -> None:
    """Show the configuration of model NAME (as JSON)."""
    with settings.client() as client:
        answer = client.get_model_config(name, model_version, headers=settings.request_headers)
    if settings.json_output:
        emit_json(settings, answer)
    else:
        from rich.syntax import Syntax

        console(settings).print(Syntax(json_text(answer), "json", background_color="default"))


def _shape(dims: list[Any]) -> str:
    return "[" + ",".join(str(d) for d in dims) + "]"


@model.command()
@click.argument("name", shell_complete=complete_model)
@_VERSION
@json_flag
@click.pass_obj
def metadata(settings: Settings, name: str, model_version: str) -> None:
    """Show the inputs, outputs, versions and platform of model NAME."""
    with settings.client() as client:
        answer = client.get_model_metadata(name, model_version, headers=settings.request_headers)
    if settings.json_output:
        emit_json(settings, answer)
        return
    versions = ", ".join(answer.get("versions", []))
    title = f"{answer.get('name')} ({answer.get('platform', '?')}; versions {versions or '-'})"
    table = new_table("tensor", "name", "datatype", "shape", title=title)
    for kind in ("inputs", "outputs"):
        for tensor in answer.get(kind, []):
            table.add_row(
                kind[:-1], tensor["name"], tensor["datatype"], _shape(tensor.get("shape", []))
            )
    print_table(settings, table)


@model.command("new")
@click.argument("name")
@click.option(
    "--repository",
    default="models",
    show_default=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Model repository to write the model into.",
)
@click.option(
    "--input",
    "inputs",
    multiple=True,
    metavar="NAME:DTYPE:DIMS",
    help="An input, e.g. INPUT0:FP32:4 or TEXT:BYTES:-1 (repeatable; default INPUT0:FP32:4).",
)
@click.option(
    "--output",
    "outputs",
    multiple=True,
    metavar="NAME:DTYPE:DIMS",
    help="An output, like --input (repeatable; default OUTPUT0 like the first input).",
)
@click.option(
    "--max-batch-size",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Batch requests up to this size with dynamic batching (0: no batching).",
)
@click.option("--decoupled", is_flag=True, help="A streaming model using the response sender.")
@click.option("--bls", is_flag=True, help="A model calling another model (see --calls).")
@click.option(
    "--calls",
    metavar="MODEL",
    help="With --bls: the model it calls (default NAME_inner, written too if missing).",
)
@click.option(
    "--tests-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where test_NAME.py goes (default: the folder holding the repository, or the "
    "current folder when it is inside the repository).",
)
@click.option("--force", is_flag=True, help="Overwrite files that exist.")
@json_flag
@click.pass_obj
def new(
    settings: Settings,
    name: str,
    repository: Path,
    inputs: tuple[str, ...],
    outputs: tuple[str, ...],
    max_batch_size: int,
    decoupled: bool,
    bls: bool,
    calls: str | None,
    tests_dir: Path | None,
    force: bool,
) -> None:
    """Write a new Python model NAME: config.pbtxt, 1/model.py and test_NAME.py.

    The test uses tritonhttp's pytest fixtures and passes as written; the files pass
    ruff and mypy. Existing files are never overwritten without --force.
    """
    from ._scaffold import build_scaffolds

    written = build_scaffolds(
        name, repository, inputs, outputs, max_batch_size, decoupled, bls, calls,
        tests_dir, force,
    )  # fmt: skip
    if settings.json_output:
        emit_json(settings, {"model": name, "files": [str(p) for p in written]})
        return
    for path in written:
        settings.stdout.write(f"wrote {_shown(path)}\n")
    load = f" --load {calls or name + '_inner'}" if bls else ""  # the model a BLS model calls
    settings.stdout.write(
        f"next: triton-cli model check {_shown(repository / name)}{load}; "
        f"pytest {_shown(written[-1])}\n"
    )


def _shown(path: Path) -> str:
    """``path`` relative to the current folder when it is below it, else absolute."""
    try:
        relative = os.path.relpath(path)
    except ValueError:  # another drive (Windows)
        return str(path)
    return str(path) if relative.startswith("..") else relative


@model.command("check")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--no-run", is_flag=True, help="Load only: send no inference request.")
@click.option(
    "--isolation",
    type=click.Choice(["process", "in-process"]),
    default="process",
    show_default=True,
    help="Where model code runs (as the server's --python-isolation).",
)
@click.option("--random", "random_data", is_flag=True, help="Random inputs instead of zeros.")
@click.option(
    "--load",
    "also",
    multiple=True,
    metavar="MODEL",
    help="Also load MODEL of the repository, e.g. the model a BLS model calls (repeatable).",
)
@json_flag
@click.pass_context
def check(
    ctx: click.Context,
    path: Path,
    no_run: bool,
    isolation: str,
    random_data: bool,
    also: tuple[str, ...],
) -> None:
    """Check the model at PATH (or every model of the repository PATH) without serving.

    Loads it with the server's own code: config parsing (with line and column) and
    validation, model.py import (with file and line), auto_complete_config and
    initialize; then, unless --no-run, sends one request of zero data of the
    configured shapes and compares the outputs with the configuration. Exit status
    0 clean, 1 problems found, 2 usage error.
    """
    from ._check import check_path

    settings: Settings = ctx.obj
    reports = check_path(
        path, run=not no_run, isolation=isolation, random_data=random_data, also=also
    )
    failed = any(r.problems for r in reports)
    if settings.json_output:
        emit_json(settings, {"ok": not failed, "models": [r.as_json() for r in reports]})
        ctx.exit(1 if failed else 0)
    for report in reports:
        shown = _shown(Path(report.path))
        if not report.problems:
            done = "loaded and answered a request" if report.ran else "loaded"
            notes = "".join(f"; {n}" for n in report.notes)
            settings.stdout.write(f"{shown}: ok ({done}{notes})\n")
            continue
        settings.stdout.write(f"{shown}: {len(report.problems)} problem(s)\n")
        for problem in report.problems:
            settings.stdout.write(f"  {problem.text()}\n")
    ctx.exit(1 if failed else 0)


def _avg_us(stats: dict[str, Any], key: str) -> str:
    entry = stats.get(key) or {}
    count = int(entry.get("count", 0))
    if not count:
        return "-"
    micros = int(entry.get("ns", 0)) / count / 1000
    return f"{micros:.1f}" if micros < 100 else f"{micros:.0f}"


@model.command()
@click.argument("name", required=False, shell_complete=complete_model)
@_VERSION
@json_flag
@click.pass_obj
def stats(settings: Settings, name: str | None, model_version: str) -> None:
    """Show the inference statistics of model NAME (default: all models).

    \b
    Columns: reqs (inferences), execs (executions; fewer when batched), ok and fail
    (requests), then the mean time per request in microseconds: queue, in (input
    handling), infer (the model's execute), out (output handling).
    """
    if model_version and not name:
        raise click.UsageError("--model-version needs a model NAME")
    with settings.client() as client:
        answer = client.get_inference_statistics(
            name or "", model_version, headers=settings.request_headers
        )
    if settings.json_output:
        emit_json(settings, answer)
        return
    columns = ("reqs", "execs", "ok", "fail", "queue", "in", "infer", "out")
    table = new_table(
        "model",
        "v",
        *columns,
        numeric=columns,
        names=("model",),
        title="Inference statistics (times: mean µs per request)",
        compact=True,
    )
    for entry in answer.get("model_stats", []):
        inference = entry.get("inference_stats", {})
        table.add_row(
            str(entry.get("name", "")),
            str(entry.get("version", "")),
            str(entry.get("inference_count", 0)),
            str(entry.get("execution_count", 0)),
            str((inference.get("success") or {}).get("count", 0)),
            str((inference.get("fail") or {}).get("count", 0)),
            _avg_us(inference, "queue"),
            _avg_us(inference, "compute_input"),
            _avg_us(inference, "compute_infer"),
            _avg_us(inference, "compute_output"),
        )
    print_table(settings, table)


@model.command()
@click.argument("name", shell_complete=complete_model)
@_VERSION
@json_flag
@click.pass_context
def ready(ctx: click.Context, name: str, model_version: str) -> None:
    """Check whether model NAME is ready (exit status 0 ready, 1 not)."""
    settings: Settings = ctx.obj
    with settings.client() as client:
        is_ready = client.is_model_ready(name, model_version, headers=settings.request_headers)
    if settings.json_output:
        emit_json(settings, {"model": name, "version": model_version, "ready": is_ready})
    else:
        settings.stdout.write(f"{name}: {'ready' if is_ready else 'not ready'}\n")
    ctx.exit(0 if is_ready else 1)
