"""JSON codecs on the inference header: speed, and whether the bytes match tritonclient's.

tritonclient writes JSON with python-rapidjson; a replacement must produce the same
bytes. This measures encoding the add_sub request header and parsing its response
header with each codec that is installed (python-rapidjson, stdlib json, orjson,
msgspec), and checks byte identity with rapidjson on a header with non-ASCII text, NaN
and FP32 values.

Usage: ``python benchmarks/json_bench.py``
"""

from __future__ import annotations

import importlib
import json
import timeit
from collections.abc import Callable
from typing import Any

import rapidjson

REQUEST = {
    "inputs": [
        {
            "name": "INPUT0",
            "shape": [4],
            "datatype": "FP32",
            "parameters": {"binary_data_size": 16},
        },
        {
            "name": "INPUT1",
            "shape": [4],
            "datatype": "FP32",
            "parameters": {"binary_data_size": 16},
        },
    ],
    "parameters": {"binary_data_output": True},
}
RESPONSE = rapidjson.dumps(
    {
        "model_name": "add_sub",
        "model_version": "1",
        "outputs": [
            {"name": n, "datatype": "FP32", "shape": [4], "parameters": {"binary_data_size": 16}}
            for n in ("OUTPUT0", "OUTPUT1")
        ],
    }
).encode()
TRICKY = {"id": "r\u00e9q", "data": [float("nan"), 0.10000000149011612, 1e100], "s": "\u2028"}


def codecs() -> dict[str, tuple[Callable[[Any], bytes], Callable[[bytes], Any]]]:
    found: dict[str, tuple[Callable[[Any], bytes], Callable[[bytes], Any]]] = {
        "python-rapidjson": (lambda o: rapidjson.dumps(o).encode(), rapidjson.loads),
        "json (stdlib)": (
            lambda o: json.dumps(o, separators=(",", ":")).encode(),
            json.loads,
        ),
    }
    for name in ("orjson", "msgspec"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if name == "orjson":
            found[name] = (module.dumps, module.loads)
        else:
            found[name] = (module.json.encode, module.json.decode)
    return found


def main() -> None:
    reference = rapidjson.dumps(TRICKY).encode()
    print(f"{'codec':<18} {'encode us':>10} {'decode us':>10}  bytes identical to tritonclient")
    for name, (encode, decode) in codecs().items():
        enc = timeit.timeit(lambda e=encode: e(REQUEST), number=100_000) * 10
        dec = timeit.timeit(lambda d=decode: d(RESPONSE), number=100_000) * 10
        try:
            same = encode(TRICKY) == reference
        except Exception:
            same = False
        print(f"{name:<18} {enc:>10.2f} {dec:>10.2f}  {same}")


if __name__ == "__main__":
    main()
