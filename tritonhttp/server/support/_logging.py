"""Server log lines in tritonserver's layout (``I1129 09:34:41.557384 2480 file.py:12] msg``)."""

from __future__ import annotations

import json
import logging
import os
import sys
import time

__all__ = ["VERBOSE", "TritonFormatter", "configure_logging"]

VERBOSE = 5
_LETTER = {
    VERBOSE: "V",
    logging.DEBUG: "V",
    logging.INFO: "I",
    logging.WARNING: "W",
    logging.ERROR: "E",
    logging.CRITICAL: "E",
}


class TritonFormatter(logging.Formatter):
    """``default``: ``I1129 09:34:41.557384 <pid> <file>:<line>] "<msg>"``; or ISO8601.

    As tritonserver 2.51 writes them, a message is a JSON string (quoted, its quotes,
    backslashes and control characters escaped), except a table, which starts on the
    next line and is written as it is."""

    def __init__(self, iso8601: bool = False) -> None:
        super().__init__()
        self.iso8601 = iso8601

    def format(self, record: logging.LogRecord) -> str:
        where = getattr(record, "triton_where", None)
        file, line = where if where else (os.path.basename(record.pathname), record.lineno)
        letter = _LETTER.get(record.levelno, "I")
        t = record.created
        if self.iso8601:
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))
            head = f"{stamp} {letter} {record.process} {file}:{line}]"
        else:
            lt = time.localtime(t)
            micros = int((t % 1) * 1_000_000)
            stamp = time.strftime("%m%d %H:%M:%S", lt)
            head = f"{letter}{stamp}.{micros:06d} {record.process} {file}:{line}]"
        text = record.getMessage()
        if not text.startswith("\n"):
            text = json.dumps(text, ensure_ascii=False)
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return f"{head} {text}"


def configure_logging(
    verbose: int = 0,
    info: bool = True,
    warning: bool = True,
    error: bool = True,
    log_format: str = "default",
    log_file: str = "",
) -> None:
    """Route the server's loggers to stderr (or ``log_file``) in Triton's format."""
    logging.addLevelName(VERBOSE, "VERBOSE")
    root = logging.getLogger("tritonhttp.server")
    for h in list(root.handlers):
        root.removeHandler(h)
        h.close()
    handler: logging.Handler = (
        logging.FileHandler(log_file, encoding="utf-8")
        if log_file
        else logging.StreamHandler(sys.stderr)
    )
    handler.setFormatter(TritonFormatter(log_format == "ISO8601"))
    root.addHandler(handler)
    root.propagate = False
    if verbose > 0:
        root.setLevel(VERBOSE)
    elif info:
        root.setLevel(logging.INFO)
    elif warning:
        root.setLevel(logging.WARNING)
    elif error:
        root.setLevel(logging.ERROR)
    else:
        root.setLevel(logging.CRITICAL + 1)
