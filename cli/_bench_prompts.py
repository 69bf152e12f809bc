"""``bench --streaming`` inputs: prompts (synthetic or ``--input-file``), the tokens
asked for, extra request parameters, the token counter and ``--goodput`` targets."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._errors import InputError

__all__ = [
    "GOODPUT_METRICS",
    "Prompt",
    "make_prompts",
    "parse_extra_inputs",
    "parse_goodput",
    "token_counter",
]

#: Metrics ``--goodput`` may name, and whether a larger value is better.
GOODPUT_METRICS = {
    "time_to_first_token": False,
    "time_to_second_token": False,
    "inter_token_latency": False,
    "request_latency": False,
    "output_token_throughput_per_user": True,
}

#: The words synthetic prompts are made of (one token each when tokens are words).
_WORDS = (
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "a",
    "lazy",
    "dog",
    "while",
    "seven",
    "wizards",
    "quietly",
    "judge",
    "boxing",
    "matches",
    "under",
    "pale",
    "moonlight",
    "near",
    "old",
    "stone",
    "bridges",
)


@dataclass(frozen=True)
class Prompt:
    """One request's text and the output tokens to ask for (None: the model decides)."""

    text: str
    output_tokens: int | None


def _lengths(mean: float, stddev: float, count: int, rng: random.Random) -> list[int]:
    return [max(1, round(rng.gauss(mean, stddev) if stddev else mean)) for _ in range(count)]


def make_prompts(options: dict[str, Any]) -> list[Prompt]:
    """The prompts: every line of ``--input-file``, or ``--num-prompts`` synthetic ones."""
    rng = random.Random(0)
    if options["input_file"]:
        texts = _read_jsonl(options["input_file"])
    else:
        sizes = _lengths(
            options["synthetic_input_tokens_mean"],
            options["synthetic_input_tokens_stddev"],
            options["num_prompts"],
            rng,
        )
        texts = [" ".join(rng.choice(_WORDS) for _ in range(n)) for n in sizes]
    wanted: list[int | None] = [None] * len(texts)
    if options["output_tokens_mean"] is not None:
        wanted = list(
            _lengths(
                options["output_tokens_mean"], options["output_tokens_stddev"], len(texts), rng
            )
        )
    return [Prompt(t, n) for t, n in zip(texts, wanted, strict=True)]


def _read_jsonl(path: str) -> list[str]:
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise InputError(f"--input-file {path}: {e.strerror or e}") from None
    texts = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError as e:
            raise InputError(f"--input-file {path}:{number}: not JSON: {e}") from None
        text = None
        if isinstance(entry, dict):
            text = next((entry[k] for k in ("text", "text_input", "prompt") if k in entry), None)
        if not isinstance(text, str):
            raise InputError(f'--input-file {path}:{number}: expected {{"text": "..."}}')
        texts.append(text)
    if not texts:
        raise InputError(f"--input-file {path}: no prompts")
    return texts


def parse_extra_inputs(values: tuple[str, ...]) -> dict[str, Any]:
    """``--extra-inputs NAME:VALUE`` (VALUE parsed as JSON when it is JSON)."""
    extra: dict[str, Any] = {}
    for text in values:
        name, sep, raw = text.partition(":")
        if not sep or not name.strip():
            raise InputError(f"--extra-inputs: expected NAME:VALUE, got {text!r}")
        try:
            extra[name.strip()] = json.loads(raw)
        except ValueError:
            extra[name.strip()] = raw
    return extra


def parse_goodput(text: str | None) -> dict[str, float]:
    """``"time_to_first_token:75 inter_token_latency:20"`` -> targets (ms, or tokens/s)."""
    if not text:
        return {}
    targets: dict[str, float] = {}
    for part in text.replace(",", " ").split():
        name, sep, raw = part.partition(":")
        if name not in GOODPUT_METRICS:
            known = ", ".join(GOODPUT_METRICS)
            raise InputError(f"--goodput: unknown metric {name!r} (known: {known})")
        try:
            value = float(raw)
        except ValueError:
            value = -1.0
        if not sep or value <= 0:
            raise InputError(f"--goodput: expected {name}:VALUE with a positive VALUE")
        targets[name] = value
    return targets


def token_counter(name: str | None) -> Callable[[str], int] | None:
    """Counts the tokens of a text with a Hugging Face tokenizer (None: no tokenizer, a
    token is one streamed response)."""
    if not name:
        return None
    try:
        from transformers import AutoTokenizer  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        raise InputError(
            "--tokenizer needs the transformers package: pip install 'tritonhttp[tokenizer]'"
        ) from None
    try:
        tokenizer = AutoTokenizer.from_pretrained(name)
    except Exception as e:
        raise InputError(f"--tokenizer {name}: cannot load it: {e}") from None

    def count(text: str) -> int:
        return len(tokenizer.encode(text, add_special_tokens=False))

    return count
