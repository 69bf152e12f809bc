"""Reading load failures out of the server's log messages (Triton's wording).

The server logs each model's load as Triton does (``failed to load 'NAME' version V:
REASON``, ``Poll failed for model directory 'NAME': REASON``); the pytest fixtures and
``triton-cli model check`` turn those lines back into a reason per model.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
from collections.abc import Iterable, Iterator

__all__ = ["collecting", "load_failures", "message_of"]

_FAILURE = re.compile(
    r"(?:failed to load '(?P<name>[^']+)' version (?P<version>\d+): (?P<reason>.*)"
    r"|Poll failed for model directory '(?P<dir>[^']+)': (?P<poll>.*)"
    r"|failed to load '(?P<model>[^']+)': (?P<why>.*))$",
    re.S,  # (a reason may go on with the traceback of the model's code)
)
_HEAD = re.compile(r"^[IWEV]\d{4} \S+ \d+ \S+\] ")


def message_of(line: str) -> str:
    """A log line's message: the head taken off, a quoted message (Triton writes each as
    a JSON string) read back."""
    text = _HEAD.sub("", line.strip(), count=1)
    if text.startswith('"'):
        end = text.rfind('"')  # (a traceback may follow the message)
        with contextlib.suppress(ValueError):
            return str(json.loads(text[: end + 1])) + text[end + 1 :]
    return text


def load_failures(messages: Iterable[str]) -> dict[str, list[str]]:
    """Model name -> the reasons in these log messages (or whole log lines) why it
    failed to load (``version V: reason`` for a version's failure)."""
    failures: dict[str, list[str]] = {}
    for raw in messages:
        match = _FAILURE.match(message_of(raw))
        if match is None:
            continue
        if match["name"]:
            name, reason = match["name"], f"version {match['version']}: {match['reason']}"
        elif match["dir"]:
            name, reason = match["dir"], match["poll"]
        else:
            name, reason = match["model"], match["why"]
        failures.setdefault(name, []).append(reason)
    return failures


class _Collect(logging.Handler):
    """Keeps the messages of the records it sees."""

    def __init__(self, level: int) -> None:
        super().__init__(level)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        with contextlib.suppress(Exception):
            self.messages.append(record.getMessage())


@contextlib.contextmanager
def collecting(level: int = logging.ERROR, *, quiet: bool = False) -> Iterator[list[str]]:
    """The server's log messages at ``level`` and above while the block runs (``quiet``:
    and nothing else of the server's log is printed meanwhile)."""
    logger = logging.getLogger("tritonhttp.server")
    collect = _Collect(level)
    saved = (logger.handlers[:], logger.propagate, logger.level)
    if quiet:
        logger.handlers = []
        logger.propagate = False
    if logger.getEffectiveLevel() > level:
        logger.setLevel(level)
    logger.addHandler(collect)
    try:
        yield collect.messages
    finally:
        logger.handlers, logger.propagate = saved[0], saved[1]
        logger.setLevel(saved[2])
