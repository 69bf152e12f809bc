"""Triton's JSON numbers: RapidJSON's Grisu2 digits and layout, exactly."""

from __future__ import annotations

import json
import math
import struct
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tritonhttp.server.support._json import dumps, escape_bytes, format_double, format_doubles

from ._wire import exchange

KNOWN = [
    (float(np.float32(0.1)), "0.10000000149011612"),
    (float(np.float32(0.3)), "0.30000001192092898"),
    (18446744073709551615.0, "18446744073709553000.0"),
    (3.0, "3.0"),
    (100.0, "100.0"),
    (1e20, "100000000000000000000.0"),
    (1e21, "1e21"),
    (1234567.125, "1234567.125"),
    (-2.5, "-2.5"),
    (0.5, "0.5"),
    (0.000001, "0.000001"),
    (0.0000123, "0.0000123"),
    (1e-7, "1e-7"),
    (1.5e-7, "1.5e-7"),
    (1.2345678901234569e23, "1.2345678901234569e23"),
    (1e300, "1e300"),
    (5e-324, "5e-324"),
    (float(np.float32(1e30)), "1.0000000150474662e30"),
    (-0.0, "-0.0"),
    (0.0, "0.0"),
    (math.nan, "NaN"),
    (math.inf, "Infinity"),
    (-math.inf, "-Infinity"),
]


@pytest.mark.parametrize(("value", "text"), KNOWN)
def test_known_values(value: float, text: str) -> None:
    assert format_double(value) == text
    assert format_doubles(np.array([value])) == text


@given(st.floats(allow_nan=False, allow_infinity=False))
@settings(max_examples=3000)
def test_round_trips_and_layout(x: float) -> None:
    text = format_double(x)
    assert float(text) == x
    assert math.copysign(1, float(text)) == math.copysign(1, x)
    assert "+" not in text and " " not in text
    mantissa = text.split("e")[0]
    assert "." in mantissa or "e" in text


@given(st.lists(st.floats(width=32), max_size=40))
def test_array_form_matches_scalar_form(values: list[float]) -> None:
    arr = np.array(values, dtype=np.float32)
    assert format_doubles(arr) == ",".join(format_double(float(v)) for v in arr.astype(np.float64))


@given(
    st.lists(st.floats(), min_size=64, max_size=300)
    | st.lists(st.floats(width=32), min_size=64, max_size=300)
    | st.lists(st.integers(-(10**6), 10**6).map(float), min_size=64, max_size=100)
)
@settings(max_examples=300)
def test_vectorised_arrays_match_the_scalar_path(values: list[float]) -> None:
    arr = np.array(values, dtype=np.float64)
    assert format_doubles(arr) == ",".join(format_double(v) for v in values)


def test_vectorised_specials_and_extremes() -> None:
    values = [0.0, -0.0, math.nan, math.inf, -math.inf, 5e-324, 1.7976931348623157e308,
              1e21, 1e20, 1e-7, 1e-6, -2.5, 18446744073709551615.0] * 6  # fmt: skip
    assert format_doubles(np.array(values)) == ",".join(format_double(v) for v in values)


def test_memo_keeps_signed_zero_apart() -> None:
    assert format_doubles(np.array([0.0, -0.0, 0.0])) == "0.0,-0.0,0.0"


def test_strings_are_raw_utf8_with_rapidjson_escapes() -> None:
    assert escape_bytes(b'a"b\\c\n\x01/\xff') == b'"a\\"b\\\\c\\n\\u0001/\xff"'
    assert (
        dumps({"k": "h\u00e9", "n": [1, 2.0, None, True]})
        == '{"k":"hé","n":[1,2.0,null,true]}'.encode()
    )


@pytest.mark.real_triton
def test_thousands_of_doubles_print_like_real_triton(real_triton: Any, bundled_server: Any) -> None:
    rng = np.random.default_rng(7)
    values = np.concatenate([
        rng.standard_normal(1500),
        rng.random(1500) * 10.0 ** rng.integers(-30, 30, 1500),
        rng.standard_normal(1500).astype(np.float32).astype(np.float64),
        np.frombuffer(rng.integers(0, 2**63, 1500, dtype=np.uint64).tobytes(), dtype=np.float64),
        2.0 ** rng.integers(-1070, 1023, 300),
    ])  # fmt: skip
    values = values[np.isfinite(values)]
    blob = values.astype("<f8").tobytes()
    head = json.dumps({
        "inputs": [{"name": "IN_FP64", "datatype": "FP64", "shape": [len(values)],
                    "parameters": {"binary_data_size": len(blob)}}],
    }).encode()  # fmt: skip
    headers = {"Inference-Header-Content-Length": str(len(head))}
    real = exchange(real_triton.url, "POST", "/v2/models/identity_all/infer", head + blob, headers)
    ours = exchange(
        bundled_server.url, "POST", "/v2/models/identity_all/infer", head + blob, headers
    )
    assert real.status == 200
    assert ours.body == real.body


def test_bits_helper_is_consistent() -> None:
    # guard for the DiyFp decomposition: the smallest normal and the largest subnormal
    for bits in (0x0010000000000000, 0x000FFFFFFFFFFFFF, 0x7FEFFFFFFFFFFFFF):
        x = struct.unpack("<d", struct.pack("<Q", bits))[0]
        assert float(format_double(x)) == x
