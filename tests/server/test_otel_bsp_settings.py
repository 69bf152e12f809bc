"""The OpenTelemetry batch span processor's settings (``--trace-config
opentelemetry,bsp_*=...``) read as tritonserver 2.51 reads them: a leading number
("5x" is 5, " 7" is 7), kept in 32 bits, shown so by ``GET /v2/trace/setting``; no
number stops the server with tritonserver's words, a negative one (tritonserver aborts)
with a clear message, never a traceback. A queue smaller than the export batch is taken,
as tritonserver takes it."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from _real import skip_without_real_triton

from tritonhttp.server import _launch
from tritonhttp.testing import _real_triton as rt

MODELS = Path(__file__).resolve().parent.parent / "models"


def _flags(value: str) -> list[str]:
    return [
        "--trace-config=mode=opentelemetry",
        "--trace-config=opentelemetry,url=127.0.0.1:1/v1/traces",
        f"--trace-config=opentelemetry,bsp_max_queue_size={value}",
        "--trace-config=rate=1",
        "--trace-config=level=TIMESTAMPS",
    ]


def _bsp(server: Any) -> dict[str, str]:
    with urllib.request.urlopen(f"http://{server.url}/v2/trace/setting", timeout=30) as r:
        settings = json.load(r)
    return {k: v for k, v in settings.items() if k.startswith("bsp_")}


@pytest.mark.real_triton
@pytest.mark.parametrize(("value", "read"), [("5x", "5"), (" 7", "7"), ("4294969344", "2048")])
def test_numbers_are_read_and_shown_as_tritonserver_does(value: str, read: str) -> None:
    skip_without_real_triton(rt.platform_problem())
    shown = []
    for start in (_launch.start, rt.start):
        server = start(MODELS, *_flags(value))
        try:
            shown.append(_bsp(server))
        finally:
            server.stop()
    assert shown[0] == shown[1]
    assert shown[0]["bsp_max_queue_size"] == read


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("abc", 'Bad option: "--trace-config opentelemetry,bsp_max_queue_size".'),
        ("-3", "opentelemetry,bsp_max_queue_size must be a positive integer, got '-3'"),
        ("0", "opentelemetry,bsp_max_queue_size must be a positive integer, got '0'"),
    ],
)
def test_a_value_that_is_no_positive_number_stops_the_server_clearly(
    value: str, words: str, tmp_path: Path
) -> None:
    log = tmp_path / "server.log"
    with pytest.raises(RuntimeError):
        _launch.start(MODELS, *_flags(value), log_path=log, timeout=30)
    text = log.read_text()
    assert words in text
    assert "Traceback" not in text
