"""Output: JSON for machines (``--json``), rich tables for people.

rich and numpy are imported only when something is rendered with them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ._settings import Settings

if TYPE_CHECKING:
    import numpy as np
    from rich.console import Console
    from rich.table import Table

__all__ = [
    "array_json",
    "console",
    "emit_json",
    "format_array",
    "json_text",
    "jsonable",
    "key_value_table",
    "new_table",
    "print_table",
]


def jsonable(value: Any) -> Any:
    """``value`` with non-finite floats spelled ``"NaN"``, ``"Infinity"``, ``"-Infinity"``.

    (Strict JSON has no NaN; this is the spelling protobuf's JSON mapping uses.)
    """
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, Mapping):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value


def _dump(value: Any, indent: str, parts: list[str]) -> None:
    # Like json.dumps(indent=2), but lists of scalars stay on one line.
    if isinstance(value, dict) and value:
        inner = indent + "  "
        parts.append("{")
        for i, (key, item) in enumerate(value.items()):
            parts.append(("," if i else "") + "\n" + inner + json.dumps(str(key)) + ": ")
            _dump(item, inner, parts)
        parts.append("\n" + indent + "}")
    elif isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value):
        inner = indent + "  "
        parts.append("[")
        for i, item in enumerate(value):
            parts.append(("," if i else "") + "\n" + inner)
            _dump(item, inner, parts)
        parts.append("\n" + indent + "]")
    else:
        parts.append(json.dumps(value, ensure_ascii=False, allow_nan=False))


def json_text(value: Any) -> str:
    """``value`` as indented JSON text (lists of scalars on one line)."""
    parts: list[str] = []
    _dump(jsonable(value), "", parts)
    return "".join(parts)


def emit_json(settings: Settings, value: Any) -> None:
    """Write ``value`` as indented JSON (and a newline) on stdout."""
    settings.stdout.write(json_text(value) + "\n")
    settings.stdout.flush()


def console(settings: Settings, *, stderr: bool = False) -> Console:
    """A rich console writing to stdout (or stderr)."""
    import sys

    from rich.console import Console

    stream = sys.stderr if stderr else settings.stdout
    probe = Console(file=stream)
    # A terminal gets tables that fit it; a file or pipe gets them whole.
    width = None if probe.is_terminal else 240
    return Console(file=stream, highlight=False, width=width)


def new_table(*columns: str, title: str | None = None, numeric: Iterable[str] = ()) -> Table:
    """A rich table with these column headers (``numeric`` ones right-aligned)."""
    from rich.table import Table

    right = set(numeric)
    table = Table(
        title=title,
        title_justify="left",
        show_edge=False,
        pad_edge=False,
        min_width=len(title) if title else None,
    )
    for column in columns:
        table.add_column(column, justify="right" if column in right else "left", overflow="fold")
    return table


def print_table(settings: Settings, table: Table) -> None:
    """Print a table on stdout."""
    console(settings).print(table)


def key_value_table(mapping: Mapping[str, Any], title: str | None = None) -> Table:
    """A two-column table of a mapping (lists joined with commas)."""
    table = new_table("setting", "value", title=title)
    for key, value in mapping.items():
        if isinstance(value, (list, tuple)):
            text = ", ".join(str(v) for v in value)
        elif isinstance(value, bool):
            text = "true" if value else "false"
        else:
            text = "" if value is None else str(value)
        table.add_row(str(key), text)
    return table


def _bytes_text(item: Any) -> str:
    if isinstance(item, (bytes, bytearray)):
        try:
            return json.dumps(bytes(item).decode("utf-8"), ensure_ascii=False)
        except UnicodeDecodeError:
            return repr(bytes(item))
    return json.dumps(str(item), ensure_ascii=False)


def format_array(array: np.ndarray[Any, Any], *, threshold: int = 24, edgeitems: int = 3) -> str:
    """A numpy array as text; more than ``threshold`` elements are abbreviated with ``...``."""
    import numpy as np

    if array.dtype == np.object_:
        return np.array2string(
            array,
            threshold=threshold,
            edgeitems=edgeitems,
            separator=", ",
            formatter={"all": _bytes_text},
            max_line_width=100,
        )
    if array.dtype.kind not in "biufc":  # e.g. bfloat16: print through float32
        array = array.astype(np.float32)
    return np.array2string(
        array, threshold=threshold, edgeitems=edgeitems, separator=", ", max_line_width=100
    )


def array_json(array: np.ndarray[Any, Any]) -> tuple[list[Any], str | None]:
    """An array's elements as a flat JSON list, and for BYTES their encoding.

    BYTES elements are UTF-8 strings when they all decode (encoding ``"utf-8"``), else
    base64 strings (encoding ``"base64"``); other encodings are None.
    """
    import numpy as np

    flat = array.reshape(-1)
    if array.dtype == np.object_:
        items = [bytes(x) if isinstance(x, (bytes, bytearray)) else str(x).encode() for x in flat]
        try:
            return [x.decode("utf-8") for x in items], "utf-8"
        except UnicodeDecodeError:
            import base64

            return [base64.b64encode(x).decode("ascii") for x in items], "base64"
    if array.dtype.kind not in "biufc":  # bfloat16
        flat = flat.astype(np.float32)
    values: Sequence[Any] = flat.tolist()
    return list(values), None
