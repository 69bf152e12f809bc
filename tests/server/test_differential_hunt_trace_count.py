"""The trace count after traffic, side by side with real Triton 2.51.

Triton's count counts down: each traced request takes one from a positive count, GET
shows the count left (globally, and for a model that follows the global setting or has
one of its own), a count of 0 stops tracing, and -1 never runs out. An update keeps the
count left where the count was given through the API before (so a setting whose count
ran out refuses to trace again until it is given a count); where it was not, the
update takes the fallback's count: the startup count for the global setting, the global
count left for a model's.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tritonhttp.server.core._errors import CoreError
from tritonhttp.server.core._settings import TraceSettings, c_int

from ._wire import exchange, infer_body

pytestmark = pytest.mark.real_triton

Step = tuple[str, str, str]

BODY = infer_body(("INPUT0", "FP32", [4], [1, 2, 3, 4]), ("INPUT1", "FP32", [4], [4, 3, 2, 1]))


def get(model: str | None = None) -> Step:
    return ("GET", f"/v2/models/{model}/trace/setting" if model else "/v2/trace/setting", "")


def post(body: str, model: str | None = None) -> Step:
    return ("POST", f"/v2/models/{model}/trace/setting" if model else "/v2/trace/setting", body)


def infer(model: str = "one", n: int = 1) -> list[Step]:
    return [("POST", f"/v2/models/{model}/infer", BODY)] * n


def views() -> list[Step]:
    return [get(), get("one"), get("two")]


GLOBAL_STEPS = [
    *views(),
    # two traced requests: 3 left, shown for the global setting and every model
    *infer(n=2), *views(),
    # an update without a count takes the startup count again
    post('{"trace_rate":"2"}'), *views(),
    # rate 2: two requests, one trace
    *infer(n=2), *views(),
    # a count given counts down to 0 and stays there
    post('{"trace_count":"3"}'), *infer(n=7), *views(),
    # the count left (0) is kept: an update that would trace is refused
    post('{"trace_rate":"1"}'), get(),
    post('{"trace_level":["TIMESTAMPS"]}'), get(),
    post('{"trace_level":["OFF"]}'), get(), *infer(n=2), get(),
    # cleared: the startup count
    post('{"trace_count":null}'), *views(),
    post('{"trace_level":null}'), *infer(n=1), *views(),
]  # fmt: skip

MODEL_STEPS = [
    *infer(n=1), *views(),
    # a model's own setting starts from the global count left, then counts on its own
    post('{"trace_rate":"1"}', "one"), *views(),
    *infer(n=2), *views(),
    *infer("two", 1), *views(),
    # a global update rebuilds the model's setting with the new global count
    post('{"trace_rate":"1"}'), *views(),
    *infer(n=1), *views(),
    # the model's own count runs out: its updates, and global ones, are refused
    post('{"trace_count":"2"}', "one"), *infer(n=3), *views(),
    post('{"trace_rate":"1"}', "one"), get("one"),
    post('{"trace_rate":"1"}'), *views(),
    post('{"trace_count":"7"}'), *views(),
    # cleared: the model takes the global count left
    post('{"trace_count":null}', "one"), *views(),
    # -1 never runs out
    post('{"trace_count":"-1"}'), *views(),
    *infer(n=3), *infer("two", 2), *views(),
    # the log frequency writes files; it does not change the count
    post('{"trace_count":"4","log_frequency":"2"}'), *views(),
    *infer("two", 5), *views(),
    post('{"log_frequency":"3"}'), *views(),
    post('{"log_frequency":"3"}', "one"), *views(),
    post('{"trace_level":null,"trace_rate":null,"trace_count":null,"log_frequency":null}', "one"),
    *views(),
]  # fmt: skip


def _pair(
    tmp_path: Path, repo: Path, real_factory: Callable[..., Any], ours_factory: Callable[..., Any]
) -> tuple[Any, Any, Path, Path]:
    dirs = []
    servers = []
    for side, factory in (("real", real_factory), ("ours", ours_factory)):
        folder = tmp_path / side
        folder.mkdir()
        dirs.append(folder)
        args = (
            "--trace-config=mode=triton",
            f"--trace-config=triton,file={folder / 't.json'}",
            "--trace-config=rate=1",
            "--trace-config=count=5",
            "--trace-config=level=TIMESTAMPS",
        )
        servers.append(factory(repo, *args))
    return servers[0], servers[1], dirs[0], dirs[1]


def _differences(real: Any, ours: Any, dirs: tuple[Path, Path], steps: list[Step]) -> list[str]:
    """Each step sent to both servers in turn; a line per answer that differs (status,
    content type or body, each server's trace folder read as ``DIR``)."""
    problems = []
    for method, path, body in steps:
        answers = []
        for server, folder in zip((real, ours), dirs, strict=True):
            r = exchange(server.url, method, path, body)
            answers.append((r.status, r.content_type, r.body.replace(bytes(folder), b"DIR")))
        if answers[0] != answers[1]:
            problems.append(f"{method} {path} {body}\n  ours {answers[1]}\n  real {answers[0]}")
    return problems


def _files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def _same_files(real_dir: Path, ours_dir: Path) -> tuple[list[str], list[str]]:
    """The trace files of both servers, once they agree (traces go out when they end)."""
    deadline = time.monotonic() + 5
    while _files(real_dir) != _files(ours_dir) and time.monotonic() < deadline:
        time.sleep(0.05)
    return _files(real_dir), _files(ours_dir)


@pytest.mark.parametrize(("steps", "files"), [
    (GLOBAL_STEPS, ["t.json"]),
    (MODEL_STEPS, ["t.json", "t.json.0", "t.json.1", "t.json.2"]),
], ids=["global", "model"])  # fmt: skip
def test_trace_count_counts_down(
    steps: list[Step],
    files: list[str],
    tmp_path: Path,
    model_repo: Callable[[str], Path],
    real_triton_factory: Any,
    bundled_server_factory: Any,
) -> None:
    """GET shows the count left after traced requests, and updates take it as Triton's
    do; the trace files written along the way are the same."""
    real, ours, real_dir, ours_dir = _pair(
        tmp_path, model_repo("hunt_trace_count"), real_triton_factory, bundled_server_factory
    )
    problems = _differences(real, ours, (real_dir, ours_dir), steps)
    assert problems == [], "\n".join(problems)
    real_files, ours_files = _same_files(real_dir, ours_dir)
    assert ours_files == real_files == files


def test_count_left_is_shown(
    tmp_path: Path, model_repo: Callable[[str], Path], bundled_server_factory: Any
) -> None:
    """Ours on its own: two traced requests leave 3 of 5; a model's own count runs out
    and stays at 0, and its setting then refuses to trace."""
    folder = tmp_path / "t"
    folder.mkdir()
    ours = bundled_server_factory(
        model_repo("hunt_trace_count"),
        f"--trace-config=triton,file={folder / 't.json'}",
        "--trace-config=rate=1",
        "--trace-config=count=5",
        "--trace-config=level=TIMESTAMPS",
    )
    for step in infer(n=2):
        assert exchange(ours.url, *step).status == 200
    assert exchange(ours.url, *get()).json()["trace_count"] == "3"
    assert exchange(ours.url, *get("two")).json()["trace_count"] == "3"
    assert exchange(ours.url, *post('{"trace_count":"1"}', "one")).status == 200
    for step in infer(n=2):
        assert exchange(ours.url, *step).status == 200
    assert exchange(ours.url, *get("one")).json()["trace_count"] == "0"
    assert exchange(ours.url, *get()).json()["trace_count"] == "3"
    refused = exchange(ours.url, *post('{"trace_rate":"1"}', "one"))
    assert refused.status == 400


# ----------------------------------------------------------------------------- numbers

BAD_NUMBERS = [
    ("--log-verbose=abc", "Invalid option value. Got abc"),
    ("--log-verbose=99999999999", "Provided option value is out of bound. Got 99999999999"),
    ("--trace-config=rate=x5", "Invalid option value. Got x5"),
    ("--trace-config=count=-2147483649", "Provided option value is out of bound. Got -2147483649"),
]


@pytest.mark.parametrize(("flag", "words"), BAD_NUMBERS, ids=[f for f, _ in BAD_NUMBERS])
def test_flag_numbers_refused_in_tritonservers_words(
    flag: str, words: str, real_triton_factory: Any, bundled_server_factory: Any
) -> None:
    """A flag's number that is no C int stops either server with tritonserver's words."""
    for factory in (real_triton_factory, bundled_server_factory):
        with pytest.raises(RuntimeError, match=re.escape(words)):
            factory(Path(__file__).parent.parent / "models", flag)


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ('{"trace_rate":"abc"}', "Unable to parse 'trace_rate', got: abc"),
        (
            '{"trace_rate":"99999999999"}',
            "Unable to parse 'trace_rate', value is out of range [ 0, 4294967295 ], got: "
            "99999999999",
        ),
        (
            '{"trace_count":"2147483648"}',
            "Unable to parse 'trace_count', value is out of range [ -1, 2147483647 ], got: "
            "2147483648",
        ),
        (
            '{"trace_count":"-99999999999"}',
            "Unable to parse 'trace_count'. Expecting value >= -1, got:-99999999999",
        ),
    ],
)
def test_api_numbers_refused_in_the_apis_words(body: str, words: str) -> None:
    """The same reading of numbers behind the trace API answers with the API's words."""
    settings = TraceSettings()
    with pytest.raises(CoreError) as info:
        settings.update(json.loads(body))
    assert str(info.value) == words


@pytest.mark.parametrize(
    ("text", "number"), [(" 5x", 5), ("-7", -7), ("1.5", 1), ("+1e3", 1), ("2147483647", 2**31 - 1)]
)
def test_c_int_reads_the_leading_digits(text: str, number: int) -> None:
    assert c_int(text) == number
