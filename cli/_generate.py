"""``generate MODEL``: Triton's generate extension (text in, text out, optionally streamed)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import click

from ._complete import complete_model
from ._render import emit_json, json_text
from ._settings import Settings, json_flag
from ._values import parse_assignments, parse_json_or_text

__all__ = ["generate"]

_META = ("model_name", "model_version", "id")


def _text_of(event: dict[str, Any], field: str) -> str | None:
    value = event.get(field)
    if value is None:
        return None
    if isinstance(value, list):
        return "".join(str(v) for v in value)
    return str(value)


@click.command()
@click.argument("model", shell_complete=complete_model)
@click.option("--text-input", "-t", metavar="TEXT", help="The prompt (the text_input field).")
@click.option(
    "--input",
    "-i",
    "fields",
    multiple=True,
    metavar="NAME=VALUE",
    help="Another request field (VALUE as JSON if it parses, else text). Repeatable.",
)
@click.option(
    "--parameter",
    "-p",
    "parameters",
    multiple=True,
    metavar="K=V",
    help="Request parameter (V as JSON if it parses). Repeatable.",
)
@click.option("--model-version", default="", metavar="VERSION", help="Model version.")
@click.option("--stream", is_flag=True, help="Use generate_stream and print events as they come.")
@click.option(
    "--output-field",
    default="text_output",
    show_default=True,
    help="The response field printed as text.",
)
@json_flag
@click.pass_obj
def generate(
    settings: Settings,
    model: str,
    text_input: str | None,
    fields: tuple[str, ...],
    parameters: tuple[str, ...],
    model_version: str,
    stream: bool,
    output_field: str,
) -> None:
    """Send a generate request to MODEL and print the answer.

    With --stream the answer is printed piece by piece as the server sends it
    (with --json: one JSON object per line, per event).

    \b
    Example:
      triton-cli generate my_llm -t "What is Triton?" -p max_tokens=64 --stream
    """
    inputs: dict[str, Any] = {}
    if text_input is not None:
        inputs["text_input"] = text_input
    for name, value in parse_assignments(fields, "--input"):
        inputs[name] = parse_json_or_text(value)
    params = {k: parse_json_or_text(v) for k, v in parse_assignments(parameters, "--parameter")}
    if isinstance(inputs.get("parameters"), dict):  # -i parameters={...}: merged, -p wins
        params = {**inputs.pop("parameters"), **params}
    if not inputs and not params:
        raise click.UsageError("nothing to send: give --text-input or --input NAME=VALUE")
    out = settings.stdout
    with settings.client() as client:
        if not stream:
            answer = client.generate(
                model, inputs, model_version, params or None, settings.request_headers
            )
            if settings.json_output:
                emit_json(settings, answer)
                return
            text = _text_of(answer, output_field)
            if text is not None:
                out.write(text + "\n")
            else:
                shown = {k: v for k, v in answer.items() if k not in _META}
                out.write(json_text(shown) + "\n")
            return
        with client.generate_stream(
            model, inputs, model_version, params or None, settings.request_headers
        ) as events:
            _print_events(settings, events, output_field)


def _print_events(settings: Settings, events: Iterable[Any], output_field: str) -> None:
    out = settings.stdout
    printed_text = False
    for event in events:
        if settings.json_output:
            out.write(json.dumps(event, ensure_ascii=False) + "\n")
        else:
            text = _text_of(event, output_field)
            if text is not None:
                out.write(text)
                printed_text = True
            else:
                shown = {k: v for k, v in event.items() if k not in _META}
                out.write(json.dumps(shown, ensure_ascii=False) + "\n")
        out.flush()
    if printed_text:
        out.write("\n")
