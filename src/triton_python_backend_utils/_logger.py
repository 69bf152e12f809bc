"""``Logger``: model log lines in the server log (Triton's format and level filter)."""

from __future__ import annotations

import enum
import os
import sys

from . import _runtime

__all__ = ["LogLevel", "Logger"]


class LogLevel(enum.Enum):
    """Levels of :class:`Logger` (``Logger.INFO`` and so on)."""

    INFO = 0
    WARNING = 1
    ERROR = 2
    VERBOSE = 3


LogLevel.__name__ = LogLevel.__qualname__ = "LogLevel"

_THIS_DIR = os.path.dirname(os.path.abspath(__file__))


def _caller() -> tuple[str, int]:
    frame = sys._getframe(1)
    while frame is not None and os.path.dirname(frame.f_code.co_filename) == _THIS_DIR:
        frame = frame.f_back  # type: ignore[assignment]
    if frame is None:
        return "model.py", 0
    return os.path.basename(frame.f_code.co_filename), frame.f_lineno


class Logger:
    """Writes into the server log: ``pb_utils.Logger.log_info("message")``.

    Lines carry the calling file's name and line, and follow the server's level
    settings (``log_verbose`` needs ``--log-verbose`` >= 1).
    """

    INFO = LogLevel.INFO
    WARNING = LogLevel.WARNING
    ERROR = LogLevel.ERROR
    VERBOSE = LogLevel.VERBOSE

    @staticmethod
    def log(message: str, level: LogLevel = LogLevel.INFO) -> None:
        """Log ``message`` at ``level`` (a ``Logger`` level, not an int)."""
        if not isinstance(level, LogLevel) or not isinstance(message, str):
            raise TypeError(
                "log(): incompatible function arguments. The following argument types are "
                "supported:\n    1. (message: str, level: c_python_backend_utils.LogLevel = "
                "<LogLevel.INFO: 0>) -> None\n"
            )
        file, line = _caller()
        _runtime.current().log(level.value, message, file, line)

    @staticmethod
    def log_info(message: str) -> None:
        """Log at INFO."""
        Logger.log(message, LogLevel.INFO)

    @staticmethod
    def log_warn(message: str) -> None:
        """Log at WARNING."""
        Logger.log(message, LogLevel.WARNING)

    @staticmethod
    def log_error(message: str) -> None:
        """Log at ERROR."""
        Logger.log(message, LogLevel.ERROR)

    @staticmethod
    def log_verbose(message: str) -> None:
        """Log at VERBOSE (shown with ``--log-verbose`` >= 1)."""
        Logger.log(message, LogLevel.VERBOSE)
