"""Trace and log settings as the trace and logging extensions expose them."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ._errors import Code, CoreError

__all__ = ["CIntError", "LogSettings", "TraceSettings", "c_int"]

_JSON_NOT_BOOL = "attempt to access JSON non-boolean as boolean"
_JSON_NOT_UINT = "attempt to access JSON non-unsigned-integer as unsigned-integer"
_JSON_NOT_STR = "attempt to access JSON non-string as string"
_JSON_NOT_ARRAY = "attempt to access JSON non-array as array"

_LEADING_INT = re.compile(r"[ \t\n\v\f\r]*([+-]?[0-9]+)")
_C_INT_MIN, _C_INT_MAX = -(2**31), 2**31 - 1


class CIntError(ValueError):
    """A text that is no C ``int`` (:func:`leading_int` tells the number it starts with,
    of any size)."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


def leading_int(text: str) -> int | None:
    """The number :func:`c_int` reads in ``text``, of any size; None when it starts with
    none."""
    m = _LEADING_INT.match(text)
    return int(m.group(1)) if m is not None else None


def c_int(text: str, flag: bool = False) -> int:
    """``text`` read as tritonserver reads a number (``std::stoi``): leading white space,
    a sign and digits, what follows ignored ("5x" is 5, "1.5" is 1, "1e3" is 1); a C
    ``int``. Else :class:`CIntError`, whose message is tritonserver's for a flag when
    ``flag`` (``Invalid option value. Got TEXT``, ``Provided option value is out of
    bound. Got TEXT``); callers of the API give their own."""
    number = leading_int(text)
    if number is not None and _C_INT_MIN <= number <= _C_INT_MAX:
        return number
    words = "Invalid option value" if number is None else "Provided option value is out of bound"
    raise CIntError(f"{words}. Got {text}" if flag else text)


_TRACE_KEYS = ("trace_level", "trace_rate", "trace_count", "log_frequency", "trace_file")


#: the OpenTelemetry batch span processor's settings and their defaults, in the order
#: Triton lists the defaults
OTEL_DEFAULTS = {
    "bsp_max_export_batch_size": "512",
    "bsp_schedule_delay": "5000",
    "bsp_max_queue_size": "2048",
}


@dataclass
class TraceSettings:
    """Global trace settings plus per-model overrides (values kept as Triton shows them).

    ``extra`` holds the settings of the trace mode in force other than the file and
    the log frequency (the OpenTelemetry exporter's ``url``, ``resource``, ``bsp_*``...),
    shown after ``trace_mode``. ``on_change(names)`` is called after each update
    with the settings it changed (a model's name; None: the global settings).

    A count counts down as requests are traced: ``remaining(name)`` (set by the
    tracer) tells the count left to the setting in force for a model (None: the global
    one), which GET shows and which an update keeps where Triton keeps the current
    setting's count (a count given through the API and not cleared since).
    """

    level: list[str] = field(default_factory=lambda: ["OFF"])
    rate: int = 1000
    count: int = -1
    log_frequency: int = 0
    file: str = ""
    mode: str = "triton"
    model: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: per model with settings of its own: the global values it took last
    fallback: dict[str, dict[str, Any]] = field(default_factory=dict)
    startup: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, str] = field(default_factory=dict)
    #: every ``resource=KEY=VALUE`` given for OpenTelemetry, in order
    resources: list[str] = field(default_factory=list)
    on_change: Callable[[list[str | None]], None] | None = None
    remaining: Callable[[str | None], int] | None = None
    #: whether the global count was given through the API (and not cleared since)
    count_given: bool = False

    def __post_init__(self) -> None:
        self.startup = self._global()

    @classmethod
    def from_config(cls, config: dict[str, dict[str, str]]) -> TraceSettings:
        """The settings ``--trace-config`` gives (``config``: mode -> key -> value, ""
        for the global keys), read as Triton reads them: ``level``, ``rate``, ``count``
        and ``mode`` are global; ``file`` and ``log-frequency`` belong to the triton
        mode; every other key of the mode in force is shown as it was given. A key given
        more than once (``level``, ``resource``) holds its values joined by newlines."""
        glob = config.get("", {})
        mode = glob.get("mode", "triton").lower()  # (tritonserver takes it in any case)
        if mode not in ("triton", "opentelemetry"):
            raise ValueError(f"Unknown trace mode '{mode}'")
        own = dict(config.get(mode, {}))
        levels: list[str] = []
        for text in glob.get("level", "OFF").replace("\n", ",").split(","):
            name = text.strip().upper()
            if name not in ("OFF", "TIMESTAMPS", "TENSORS"):
                raise ValueError(f"invalid value for trace level: '{text}'")
            if name != "OFF" and name not in levels:
                levels.append(name)
        order = {"TIMESTAMPS": 0, "TENSORS": 1}
        settings = cls(
            level=sorted(levels, key=order.__getitem__) or ["OFF"],
            rate=_config_int(glob, "rate", 1000),
            count=_config_int(glob, "count", -1),
            log_frequency=_config_int(own, "log-frequency", 0) if mode == "triton" else 0,
            file=own.get("file", "") if mode == "triton" else "",
            mode=mode,
        )
        if mode == "triton":
            own.pop("file", None)
            own.pop("log-frequency", None)
        else:
            for key, value in OTEL_DEFAULTS.items():
                own[key] = _bsp_number(key, own.get(key, value))
        if "resource" in own:
            settings.resources = own["resource"].split("\n")
            own["resource"] = settings.resources[-1]
        settings.extra = own
        return settings

    def values(self, model: str | None = None) -> dict[str, Any]:
        """The settings in force for ``model`` (None: the global ones), as numbers."""
        values = self._global()
        if model is not None:
            values.update(self.fallback.get(model, {}))
            values.update(self.model.get(model, {}))
        return values

    def _global(self) -> dict[str, Any]:
        return {
            "trace_level": list(self.level),
            "trace_rate": self.rate,
            "trace_count": self.count,
            "log_frequency": self.log_frequency,
            "trace_file": self.file,
        }

    def _left(self, model: str | None) -> int:
        """The count left to the setting in force for ``model`` (None: the global one)."""
        if model is not None and model not in self.model:
            model = None
        if self.remaining is not None:
            return self.remaining(model)
        return int(self.values(model)["trace_count"])

    def _current(self) -> dict[str, Any]:
        """The global values with the count left to them (what a model's setting that
        does not give its own takes)."""
        return {**self._global(), "trace_count": self._left(None)}

    def _take_counts_left(self) -> None:
        """Keep the counts left of the settings whose count was given (the ones an
        update keeps)."""
        if self.count_given:
            self.count = self._left(None)
        for name, own in self.model.items():
            if "trace_count" in own:
                own["trace_count"] = self._left(name)

    def view(self, model: str | None = None) -> dict[str, Any]:
        values = self.values(model)
        out: dict[str, Any] = {
            "trace_level": values["trace_level"],
            "trace_rate": str(values["trace_rate"]),
            "trace_count": str(self._left(model)),
        }
        if self.mode == "triton":
            out["log_frequency"] = str(values["log_frequency"])
            out["trace_file"] = values["trace_file"]
        out["trace_mode"] = self.mode
        out.update(self.extra)
        return out

    def update(self, body: Any, model: str | None = None) -> None:
        """Apply an update of the trace extension (``model`` None: the global settings).

        As Triton 2.51: a setting that traces (level not OFF) must have a non-zero rate,
        a file in the triton mode and a count other than 0. A global update that stands
        on its own is kept; then each model with settings of its own (in name order) takes
        the new global values for the rest, up to the first that would be invalid: the
        update is answered with that error, and that model and those after it keep the
        global values they had (their GET shows those).

        A count not given takes, as Triton's does, the count left where the setting's
        count was given before, else the fallback's: the startup count for the global
        setting, the global count left for a model's."""
        new, cleared = _parse_update(body)
        self._take_counts_left()
        if model is not None:
            candidate = self._current()
            overrides = {k: v for k, v in self.model.get(model, {}).items() if k not in cleared}
            overrides.update(new)
            candidate.update(overrides)
            if overrides:  # (none left: the model follows the global setting as it is)
                self._check(candidate)
                self.model[model] = overrides
                self.fallback[model] = self._current()
            else:
                self.model.pop(model, None)
                self.fallback.pop(model, None)
            self._changed([model])
            return
        candidate = self._global()
        for key in cleared:
            candidate[key] = self.startup[key]
        candidate.update(new)
        self._check(candidate)
        for key, value in candidate.items():
            setattr(self, _ATTR[key], value)
        self.count_given = "trace_count" in new or (
            self.count_given and "trace_count" not in cleared
        )
        changed: list[str | None] = [None]
        try:
            for name in sorted(self.model):
                self._check({**candidate, **self.model[name]})
                self.fallback[name] = self._global()
                changed.append(name)
        finally:
            self._changed(changed)

    def _check(self, values: dict[str, Any]) -> None:
        """Refuse a setting that traces but cannot, with Triton's reason."""
        if values["trace_level"] == ["OFF"]:
            return
        reason = None
        if values["trace_rate"] == 0:
            reason = "sample rate must be non-zero"
        elif self.mode == "triton" and not self.file:
            reason = "trace file name is not given"
        elif values["trace_count"] == 0:
            reason = ""  # (Triton gives no reason for this one)
        if reason is not None:
            raise CoreError(f"Attempting to set invalid trace setting :{reason}")

    def _changed(self, names: list[str | None]) -> None:
        if self.on_change is not None:
            self.on_change(names)


def _parse_update(body: Any) -> tuple[dict[str, Any], list[str]]:
    """The settings an update gives (as numbers) and those it clears (given null)."""
    if not isinstance(body, dict):
        body = {}  # Triton looks up each key and finds none in a non-object
    if "trace_file" in body:
        raise CoreError(
            "trace file location can not be updated through network protocol",
            Code.UNSUPPORTED,
        )
    new: dict[str, Any] = {}
    cleared: list[str] = []
    if "trace_level" in body:
        value = body["trace_level"]
        if value is None:
            cleared.append("trace_level")
        else:
            levels = _parse_levels(value)
            if levels:
                new["trace_level"] = levels
    for key in ("trace_rate", "trace_count", "log_frequency"):
        if key not in body:
            continue
        if body[key] is None:
            cleared.append(key)
        else:
            new[key] = _parse_number(key, body[key])
    return new, cleared


def _parse_levels(value: Any) -> list[str]:
    if not isinstance(value, list):
        raise CoreError(_JSON_NOT_ARRAY, Code.INTERNAL)
    levels: list[str] = []
    for item in value:
        if not isinstance(item, str):
            raise CoreError(_JSON_NOT_STR, Code.INTERNAL)
        if item == "OFF":
            if len(value) != 1:
                raise CoreError("Expect only one trace level 'OFF' is specified")
            levels = ["OFF"]
        elif item in ("TIMESTAMPS", "TENSORS") and item not in levels:
            levels.append(item)
    order = {"TIMESTAMPS": 0, "TENSORS": 1, "OFF": 2}
    return sorted(levels, key=order.__getitem__)


def _parse_number(key: str, value: Any) -> int:
    if not isinstance(value, str):
        raise CoreError(_JSON_NOT_STR, Code.INTERNAL)
    value = value.partition("\0")[0]  # (read as a C string)
    number = leading_int(value)
    if number is None:
        raise CoreError(f"Unable to parse '{key}', got: {value}")
    if key == "trace_count":
        if number < -1:
            raise CoreError(f"Unable to parse 'trace_count'. Expecting value >= -1, got:{value}")
        if number > _C_INT_MAX:
            raise CoreError(
                f"Unable to parse '{key}', value is out of range [ -1, 2147483647 ], got: {value}"
            )
        return number
    if not _C_INT_MIN <= number <= _C_INT_MAX:  # (the message names the unsigned range)
        raise CoreError(
            f"Unable to parse '{key}', value is out of range [ 0, 4294967295 ], got: {value}"
        )
    # Triton reads a 32-bit signed value and keeps it unsigned (-1 is 4294967295)
    return number % 2**32


def _bsp_number(key: str, text: str) -> str:
    """A batch span processor setting of ``--trace-config opentelemetry,...`` as
    tritonserver reads and then shows it: leading white space, a sign and digits, what
    follows ignored ("5x" is 5; :func:`leading_int`), kept in 32 bits; no
    number is refused in its words. A value that is not positive then is refused too
    (tritonserver aborts on it)."""
    number = leading_int(text)
    if number is None:
        raise ValueError(f'Bad option: "--trace-config opentelemetry,{key}".')
    if number < 0 or number % 2**32 == 0:
        raise ValueError(f"opentelemetry,{key} must be a positive integer, got '{text}'")
    return str(number % 2**32)


def _config_int(values: dict[str, str], key: str, default: int) -> int:
    """A number of ``--trace-config`` as tritonserver reads it (:func:`c_int`, refused
    with its words for a flag); the rate and the log frequency are then kept unsigned
    (-1 is 4294967295)."""
    text = values.get(key)
    if text is None:
        return default
    number = c_int(text, flag=True)
    return number if key == "count" else number % 2**32


_ATTR = {
    "trace_level": "level",
    "trace_rate": "rate",
    "trace_count": "count",
    "log_frequency": "log_frequency",
    "trace_file": "file",
}


@dataclass
class LogSettings:
    """What ``/v2/logging`` shows and changes; applied to the server's loggers."""

    log_file: str = ""
    log_info: bool = True
    log_warning: bool = True
    log_error: bool = True
    log_verbose_level: int = 0
    log_format: str = "default"

    def __post_init__(self) -> None:
        # Triton takes a negative --log-verbose as 0
        self.log_verbose_level = max(self.log_verbose_level, 0)

    def view(self) -> dict[str, Any]:
        return {
            "log_file": self.log_file,
            "log_info": self.log_info,
            "log_warning": self.log_warning,
            "log_error": self.log_error,
            "log_verbose_level": self.log_verbose_level,
            "log_format": self.log_format,
        }

    def update(self, body: Any) -> None:
        if not isinstance(body, dict):
            return  # Triton looks up each key and finds none in a non-object
        try:
            if body.get("log_file") is not None:
                raise CoreError(
                    "log file location can not be updated through network protocol",
                    Code.UNSUPPORTED,
                )
            for key in ("log_info", "log_warning", "log_error"):
                value = body.get(key)
                if value is None:
                    continue
                if not isinstance(value, bool):
                    raise CoreError(_JSON_NOT_BOOL, Code.INTERNAL)
                setattr(self, key, value)
            value = body.get("log_verbose_level")
            if value is not None:
                if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**64:
                    raise CoreError(_JSON_NOT_UINT, Code.INTERNAL)
                # Triton keeps the level as a 32-bit int: the low 32 bits count, and a
                # level that is then negative is 0
                value %= 2**32
                self.log_verbose_level = value if value < 2**31 else 0
            value = body.get("log_format")
            if value is not None:
                if not isinstance(value, str):
                    raise CoreError(_JSON_NOT_STR, Code.INTERNAL)
                if value not in ("default", "ISO8601"):
                    raise CoreError(
                        f"invalid argument for --log_format, got: {value}", Code.UNAVAILABLE
                    )
                self.log_format = value
        finally:
            self.apply()

    def apply(self) -> None:
        """Set the server loggers' levels from the flags."""
        logger = logging.getLogger("tritonhttp.server")
        if self.log_verbose_level > 0:
            level = 5
        elif self.log_info:
            level = logging.INFO
        elif self.log_warning:
            level = logging.WARNING
        elif self.log_error:
            level = logging.ERROR
        else:
            level = logging.CRITICAL + 1
        logger.setLevel(level)
