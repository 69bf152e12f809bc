"""Tables fit the output's width (``COLUMNS``; 80 and 60 here): numbers are never split,
long names end with an ellipsis in the middle, long BYTES elements are elided."""

from __future__ import annotations

import io
import re

import numpy as np
import pytest
from conftest import RunCli, Server
from rich.console import Console
from tritonhttp_cli._render import fit_table, format_array, middle_ellipsis, new_table

WIDTHS = (80, 60)


def render(table: object, width: int) -> list[str]:
    out = io.StringIO()
    needed = fit_table(table, width)  # type: ignore[arg-type]
    Console(file=out, width=max(needed, width), highlight=False).print(table)
    return out.getvalue().splitlines()


@pytest.mark.parametrize("width", WIDTHS)
def test_many_numeric_columns_fit_and_numbers_stay_whole(width: int) -> None:
    columns = ("reqs", "execs", "ok", "fail", "queue", "in", "infer", "out")
    table = new_table("model", "v", *columns, numeric=columns, names=("model",), compact=True)
    name = "a_model_with_a_rather_long_name_for_a_table_row"
    numbers = ["12345", "12345", "9999", "0", "3833.7", "1433", "361", "7.7"]
    table.add_row(name, "1", *numbers)
    table.add_row("short", "12", *numbers)
    lines = render(table, width)
    assert all(len(line) <= width for line in lines), lines
    for line in lines[2:]:
        assert line.split()[-8:] == numbers, line  # each number whole, on one line
    assert lines[2].startswith(middle_ellipsis(name, len(lines[2].split()[0])))
    assert "…" in lines[2].split()[0] and lines[2].split()[0][-1] == name[-1]
    assert len(lines) == 4  # title-less: header, rule, two rows (nothing wrapped)


def test_numbers_too_wide_for_the_width_are_still_whole() -> None:
    columns = tuple(f"c{i}" for i in range(8))
    table = new_table("model", *columns, numeric=columns, names=("model",))
    numbers = [str(10**12 + i) for i in range(8)]
    table.add_row("model", *numbers)
    lines = render(table, 60)
    assert [cell.strip() for cell in lines[2].split("│")[1:]] == numbers


@pytest.mark.parametrize("width", WIDTHS)
def test_wrapping_text_shares_the_width_with_names(width: int) -> None:
    table = new_table("model", "ver", "state", "reason", names=("model",))
    reason = "Internal: SyntaxError: invalid syntax (model.py, line 2) " * 2
    table.add_row("m" * 50, "1", "UNAVAILABLE", reason.strip())
    lines = render(table, width)
    assert all(len(line) <= width for line in lines), lines
    joined = " ".join(line.split("│")[-1].strip() for line in lines[2:])
    assert "SyntaxError" in joined  # the reason wraps, it is not cut


def test_middle_ellipsis() -> None:
    assert middle_ellipsis("nv_inference_compute_infer_duration_us", 21) == (
        "nv_inferen…uration_us"
    )
    assert middle_ellipsis("short", 10) == "short"
    assert len(middle_ellipsis("x" * 100, 9)) == 9


def test_long_bytes_elements_are_elided() -> None:
    text = format_array(np.array([b"x" * 5000, b"short"], dtype=np.object_))
    assert len(text) < 120, text
    assert "(5000 bytes)" in text and "…" in text and '"short"' in text
    binary = format_array(np.array([bytes(range(256)) * 4], dtype=np.object_))
    assert "(1024 bytes)" in binary and len(binary) < 120


def _numbers_width(run_cli: RunCli) -> int:
    """The width ``model stats`` needs for its numbers alone (whole, never cut: after
    many requests on the shared server they can be wider than a narrow terminal): each
    number column's widest cell, "v", a 3-cell name, two cells between columns."""
    rows = run_cli("model", "stats", "--json").json()["model_stats"]
    heads = ("reqs", "execs", "ok", "fail", "queue", "in", "infer", "out")
    widest = [len(h) for h in heads]
    for entry in rows:
        counts = (entry["inference_count"], entry["execution_count"])
        stats = entry["inference_stats"]
        counts += (stats["success"]["count"], stats["fail"]["count"])
        for k, n in enumerate(counts):
            widest[k] = max(widest[k], len(str(n)))
    widest[4:] = [w + 3 for w in widest[4:]]  # (mean times: a few digits more, at most)
    return sum(widest) + 1 + 3 + 2 * (len(heads) + 1)


@pytest.mark.parametrize("width", WIDTHS)
def test_server_tables_fit(
    run_cli: RunCli, triton: Server, monkeypatch: pytest.MonkeyPatch, width: int
) -> None:
    monkeypatch.setenv("COLUMNS", str(width))
    assert run_cli("infer", "add_sub", "-i", "INPUT0=1,2,3,4", "-i", "INPUT1=1,1,1,1").code == 0
    metrics = ("metrics", "--metrics-url", triton.metrics_url)
    for args in (("model", "stats"), ("model", "list"), metrics):
        done = run_cli(*args)
        assert done.code == 0, done.stderr
        lines = done.stdout.splitlines()
        room = max(width, _numbers_width(run_cli) if args[1:] == ("stats",) else 0)
        assert all(len(line.rstrip()) <= room for line in lines), (args, room, lines)
    stats = run_cli("model", "stats", "add_sub", "--json").json()["model_stats"][0]
    table = run_cli("model", "stats", "add_sub").stdout.splitlines()
    (row,) = [line.split() for line in table if line.split()[1:2] == ["1"]]  # version 1
    # (the name gives way to whole numbers: after many requests it may be cut)
    assert row[0] == middle_ellipsis("add_sub", len(row[0])), table
    assert row[2] == str(stats["inference_count"]), table
    counts = run_cli(*metrics, "--filter", "nv_inference_count").stdout
    for value in re.findall(r"(\S+)\s*$", counts, re.M)[2:]:
        assert re.fullmatch(r"-?[\d.e+]+", value), counts
