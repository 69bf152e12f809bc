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
    """A rich console writing to stdout (or stderr). Text is printed as it is: tensors,
    names and messages may hold ``[...]`` or ``:name:``, never rich markup or emoji codes."""
    import sys

    stream = sys.stderr if stderr else settings.stdout
    return _plain_console(stream, output_width(_plain_console(stream, None)))


def _plain_console(stream: Any, width: int | None) -> Console:
    from rich.console import Console

    return Console(file=stream, highlight=False, markup=False, emoji=False, width=width)


def output_width(probe: Console) -> int | None:
    """The width to render for: ``$COLUMNS`` when set, else the terminal's (None), else
    240 for a file or pipe (tables whole)."""
    import os

    columns = os.environ.get("COLUMNS", "").strip()
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    return None if probe.is_terminal else 240


def new_table(
    *columns: str,
    title: str | None = None,
    numeric: Iterable[str] = (),
    names: Iterable[str] = (),
    compact: bool = False,
) -> Table:
    """A rich table with these column headers.

    ``numeric`` columns are right-aligned and never split (they keep the width of their
    widest number); ``names`` columns stay on one line, cut with an ellipsis when the
    table is too wide; other columns wrap. ``compact`` tables separate columns with
    spaces instead of rules (for many narrow columns).
    """
    from rich import box
    from rich.table import Table

    right = set(numeric)
    single = set(names)
    table = Table(
        title=title,
        title_justify="left",
        show_edge=False,
        pad_edge=False,
        box=box.SIMPLE_HEAD if compact else box.HEAVY_HEAD,
        padding=(0, 1, 0, 0) if compact else (0, 1),
        min_width=len(title) if title else None,
    )
    for column in columns:
        if column in right:
            table.add_column(column, justify="right", no_wrap=True)
        elif column in single:
            table.add_column(column, no_wrap=True, overflow="ellipsis")
        else:
            table.add_column(column, overflow="fold")
    return table


def _cell_widths(table: Table) -> list[int]:
    """The widest cell (header included) of each column, in terminal cells."""
    from rich.text import Text

    widths = []
    for column in table.columns:
        cells = [Text(c) if isinstance(c, str) else c for c in column.cells]
        lengths = [t.cell_len for t in cells if isinstance(t, Text)]
        widths.append(max([Text(str(column.header)).cell_len, *lengths]))
    return widths


def fit_table(table: Table, width: int) -> int:
    """Give each column of ``table`` its width for ``width`` terminal cells; returns the
    width the table needs (more than ``width`` only when its numbers alone do not fit).

    Numeric columns keep their widest number; the other columns share what is left,
    the narrow ones whole, the wide ones equally (names then get an ellipsis in the
    middle and text wraps), each at least 3 cells. Nothing changes when the table fits.
    """
    if table.min_width:  # (the title's length: the table may be narrower than that)
        table.min_width = min(table.min_width, width)
    natural = _cell_widths(table)
    pad = table.padding[1] + table.padding[3]  # (top, right, bottom, left)
    gaps = (len(natural) - 1) * (pad + (1 if table.box is not None else 0))
    fixed = [i for i, c in enumerate(table.columns) if c.justify == "right" and c.no_wrap]
    for i in fixed:
        table.columns[i].min_width = natural[i]
    if sum(natural) + gaps <= width:
        return sum(natural) + gaps
    flexible = sorted((i for i in range(len(natural)) if i not in fixed), key=natural.__getitem__)
    left = width - gaps - sum(natural[i] for i in fixed)
    for k, i in enumerate(flexible):
        share = max(left // (len(flexible) - k), 3)
        given = min(natural[i], share)
        column = table.columns[i]
        column.width = given
        if column.no_wrap and given < natural[i]:
            column._cells = [
                middle_ellipsis(c, given) if isinstance(c, str) else c for c in column._cells
            ]
        left -= given
    return sum(c.width or natural[i] for i, c in enumerate(table.columns)) + gaps


def middle_ellipsis(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters by an ellipsis in the middle (both ends of a
    name usually matter: ``nv_inference_…_duration_us``)."""
    if len(text) <= width:
        return text
    if width < 3:
        return text[:width]
    head = width // 2
    tail = width - 1 - head
    return text[:head] + "…" + (text[-tail:] if tail else "")


def print_table(settings: Settings, table: Table) -> None:
    """Print a table on stdout, fitted to the output's width (see :func:`fit_table`)."""
    out = console(settings)
    needed = fit_table(table, out.width)
    if needed > out.width:
        # numbers are never cut: a table whose numbers alone are too wide is printed whole
        out = _plain_console(out.file, needed)
    out.print(table)


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


#: BYTES elements longer than this many characters are shown elided
LONG_ELEMENT = 64


def _bytes_text(item: Any) -> str:
    """One BYTES element as shown in a table: JSON text (or a bytes repr when it is not
    UTF-8); a long one elided in the middle, with its full size."""
    if isinstance(item, (bytes, bytearray)):
        size = len(item)
        try:
            text = bytes(item).decode("utf-8")
        except UnicodeDecodeError:
            shown = repr(bytes(item))
            if len(shown) <= LONG_ELEMENT:
                return shown
            return f"{middle_ellipsis(shown, LONG_ELEMENT - 16)} ({size} bytes)"
    else:
        text = str(item)
        size = len(text.encode("utf-8"))
    if len(text) <= LONG_ELEMENT:
        return json.dumps(text, ensure_ascii=False)
    cut = middle_ellipsis(text, LONG_ELEMENT - 24)
    return f"{json.dumps(cut, ensure_ascii=False)} ({size} bytes)"


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
