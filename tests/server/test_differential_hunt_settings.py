"""The settings endpoints side by side with real Triton 2.51: trace settings that could not
trace (a zero rate, a zero count) refused when they would trace, a global update whose
model settings would then be invalid, and the numbers ``--trace-config`` takes."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest

from ._wire import exchange, step_differences

pytestmark = pytest.mark.real_triton

MODELS = Path(__file__).parent.parent / "models"
TRACE_FILE = str(Path(tempfile.gettempdir()) / "tritonhttp-hunt-settings-trace.log")
FILE = f"--trace-config=triton,file={TRACE_FILE}"
CLEAR = '{"trace_level":null,"trace_rate":null,"trace_count":null,"log_frequency":null}'

Step = tuple[str, str, str]


def get(model: str | None = None) -> Step:
    return ("GET", f"/v2/models/{model}/trace/setting" if model else "/v2/trace/setting", "")


def post(body: str, model: str | None = None) -> Step:
    return ("POST", f"/v2/models/{model}/trace/setting" if model else "/v2/trace/setting", body)


#: each group leaves the settings as the server started
INVALID_STEPS = [
    # a zero rate or count is taken while the level is OFF, refused once it would trace
    post('{"trace_level":["OFF"],"trace_count":"0"}'), get(),
    post('{"trace_level":["TIMESTAMPS"]}'), get(), post(CLEAR),
    post('{"trace_level":["OFF"],"trace_rate":"0"}'), get(),
    post('{"trace_level":["TIMESTAMPS"]}'), get(), post(CLEAR),
    # both: the rate is named
    post('{"trace_level":["TIMESTAMPS"],"trace_rate":"0","trace_count":"0"}'), get(),
    # a model's own: refused against the global level (TENSORS), taken under its own OFF
    post('{"trace_count":"0"}', "add_sub"), get("add_sub"),
    post('{"trace_rate":"0"}', "simple"), get("simple"),
    post('{"trace_level":["OFF"],"trace_rate":"0"}', "simple"), get("simple"),
    post('{"trace_level":null}', "simple"), get("simple"),
    post(CLEAR, "simple"), get("simple"),
]  # fmt: skip


OTEL = ("--trace-config=mode=opentelemetry", "--trace-config=opentelemetry,url=127.0.0.1:1")


@pytest.mark.parametrize(
    "args",
    [(FILE, "--trace-config=level=TENSORS"), (*OTEL, "--trace-config=level=TENSORS")],
    ids=["triton", "opentelemetry"],
)
def test_setting_that_cannot_trace_is_refused(
    args: tuple[str, ...], real_triton_factory: Any, bundled_server_factory: Any
) -> None:
    """A setting that traces needs a non-zero rate ('sample rate must be non-zero') and
    a count other than 0 (refused with no reason); the setting stays as it was."""
    args = (*args, "--exit-timeout-secs=7")
    real, ours = real_triton_factory(MODELS, *args), bundled_server_factory(MODELS, *args)
    assert step_differences(real, ours, INVALID_STEPS) == []
    refused = exchange(ours.url, *post('{"trace_level":["TIMESTAMPS"],"trace_count":"0"}'))
    assert refused.status == 400
    assert refused.json() == {"error": "Attempting to set invalid trace setting :"}
    assert b'"trace_count":"-1"' in exchange(ours.url, *get()).body


def test_rate_named_before_the_missing_file(
    real_triton_factory: Any, bundled_server_factory: Any
) -> None:
    """No trace file, a zero rate: the rate is the reason given."""
    args = ("--exit-timeout-secs=7",)
    real, ours = real_triton_factory(MODELS, *args), bundled_server_factory(MODELS, *args)
    steps = [
        post('{"trace_level":["TIMESTAMPS"],"trace_rate":"0"}'),
        post('{"trace_level":["TIMESTAMPS"],"trace_rate":"0"}', "add_sub"),
        post('{"trace_level":["TIMESTAMPS"],"trace_count":"0"}'),
        get(),
        get("add_sub"),
    ]
    assert step_differences(real, ours, steps) == []
    reply = exchange(ours.url, *steps[0])
    assert b"sample rate must be non-zero" in reply.body


MODELS_IN_ORDER = ["add_sub", "identity_all", "identity_bytes", "simple", "slow_model"]


def test_global_update_stops_at_an_invalid_model(
    real_triton_factory: Any, bundled_server_factory: Any
) -> None:
    """A global update that is valid is kept, then the models with settings of their own
    take it in name order up to the first that would be invalid: the update is refused,
    and that model and the ones after it keep showing the global values they had. A model
    whose settings were all cleared follows the global ones again; a model update is
    checked against the global values in force."""
    args = (FILE, "--exit-timeout-secs=8")
    real, ours = real_triton_factory(MODELS, *args), bundled_server_factory(MODELS, *args)
    steps = [
        post('{"trace_rate":"7"}', "add_sub"),
        post('{"trace_rate":"8"}', "identity_all"),
        post('{"trace_count":"0"}', "identity_bytes"),
        post('{"trace_rate":"9"}', "simple"),
        post('{"trace_rate":"5"}', "slow_model"),
        post('{"trace_rate":null}', "slow_model"),
        post('{"trace_level":["TIMESTAMPS"]}'),
        get(),
        *[get(m) for m in MODELS_IN_ORDER],
        post('{"trace_rate":"3"}', "identity_bytes"),
        post('{"trace_count":null}', "identity_bytes"),
        *[get(m) for m in MODELS_IN_ORDER],
    ]
    assert step_differences(real, ours, steps) == []
    assert b'"trace_level":["OFF"],"trace_rate":"9"' in exchange(ours.url, *get("simple")).body
    clear = [*[post(CLEAR, m) for m in MODELS_IN_ORDER], post(CLEAR)]
    assert step_differences(real, ours, [*clear, *[get(m) for m in MODELS_IN_ORDER]]) == []


@pytest.mark.parametrize(
    "flag",
    ["rate=-1", "triton,log-frequency=-1", "rate=5x", "rate=1_0", "count=-1x"],
)
def test_trace_config_numbers(
    flag: str, real_triton_factory: Any, bundled_server_factory: Any
) -> None:
    """tritonserver reads a ``--trace-config`` number as a C int from its leading digits
    and keeps the rate and the log frequency unsigned."""
    args = (FILE, f"--trace-config={flag}")
    real, ours = real_triton_factory(MODELS, *args), bundled_server_factory(MODELS, *args)
    assert step_differences(real, ours, [get()]) == []


@pytest.mark.parametrize("flag", ["rate=4294967296", "count=2147483648", "rate=-4294967297"])
def test_trace_config_number_out_of_bound(
    flag: str, real_triton_factory: Any, bundled_server_factory: Any
) -> None:
    """Past a C int, tritonserver refuses to start ('Provided option value is out of
    bound'); so does ours."""
    for factory in (real_triton_factory, bundled_server_factory):
        with pytest.raises(RuntimeError, match="out of bound"):
            factory(MODELS, FILE, f"--trace-config={flag}")


@pytest.mark.parametrize("value", ["-7", "5x", "1.5"])
def test_log_verbose_flag(
    value: str, real_triton_factory: Any, bundled_server_factory: Any
) -> None:
    """tritonserver reads ``--log-verbose`` as a C int from its leading digits and takes
    a negative level as 0 (``/v2/logging`` shows it)."""
    args = (f"--log-verbose={value}",)
    real, ours = real_triton_factory(MODELS, *args), bundled_server_factory(MODELS, *args)
    r = exchange(real.url, "GET", "/v2/logging")
    o = exchange(ours.url, "GET", "/v2/logging")
    assert (o.status, o.body) == (r.status, r.body)
    assert o.json()["log_verbose_level"] == max(int(float(value.rstrip("x"))), 0)


def test_log_verbose_flag_out_of_bound(
    real_triton_factory: Any, bundled_server_factory: Any
) -> None:
    """Past a C int, neither server starts."""
    for factory in (real_triton_factory, bundled_server_factory):
        with pytest.raises(RuntimeError, match="out of bound"):
            factory(MODELS, "--log-verbose=4294967297")


@pytest.mark.parametrize("mode", ["OpenTelemetry", "TRITON"])
def test_trace_mode_in_any_case(
    mode: str, real_triton_factory: Any, bundled_server_factory: Any
) -> None:
    """``--trace-config mode=`` is taken in any case."""
    args = (f"--trace-config=mode={mode}",)
    real, ours = real_triton_factory(MODELS, *args), bundled_server_factory(MODELS, *args)
    assert step_differences(real, ours, [get()]) == []
    assert exchange(ours.url, *get()).json()["trace_mode"] == mode.lower()


@pytest.mark.parametrize("flag", ["triton,file=", "foo=", "opentelemetry,url="])
def test_trace_config_empty_value(
    flag: str, real_triton_factory: Any, bundled_server_factory: Any
) -> None:
    """A ``--trace-config`` setting with an empty value stops either server at start-up."""
    for factory in (real_triton_factory, bundled_server_factory):
        with pytest.raises(RuntimeError, match=r"--trace-config.*'?<.*>,.*<value>"):
            factory(MODELS, f"--trace-config={flag}")
