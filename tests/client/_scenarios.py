"""Inputs and scenarios that the tritonhttp and tritonhttp.aio differential suites share.

A scenario is ``scenario(module, client)``: it uses the API of ``module`` (tritonhttp,
tritonclient.http, or their aio flavours) and returns what the client call returns (a
coroutine for an aio client, which the aio pair awaits), so one scenario serves both.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator
from multiprocessing import shared_memory
from typing import Any

import ml_dtypes
import numpy as np

Scenario = Callable[[Any, Any], Any]

F32 = np.arange(4, dtype=np.float32)
DTYPES = {
    "BOOL": np.array([True, False, True]),
    "UINT8": np.array([0, 1, 255], np.uint8),
    "UINT16": np.array([0, 1, 65535], np.uint16),
    "UINT32": np.array([0, 1, 2**32 - 1], np.uint32),
    "UINT64": np.array([0, 1, 2**64 - 1], np.uint64),
    "INT8": np.array([-128, 0, 127], np.int8),
    "INT16": np.array([-(2**15), 0, 2**15 - 1], np.int16),
    "INT32": np.array([-(2**31), 0, 2**31 - 1], np.int32),
    "INT64": np.array([-(2**63), 0, 2**63 - 1], np.int64),
    "FP16": np.array([0.5, -1.25, 65504], np.float16),
    "FP32": np.array([0.1, -2.5, 3.4e38], np.float32),
    "FP64": np.array([0.1, -2.5, 1e300], np.float64),
    "BF16": np.array([0.5, -1.25, 3.0], ml_dtypes.bfloat16),
}


def add_sub_inputs(m: Any, binary: bool = True) -> list[Any]:
    return [
        m.InferInput("INPUT0", [4], "FP32").set_data_from_numpy(F32, binary_data=binary),
        m.InferInput("INPUT1", [4], "FP32").set_data_from_numpy(F32 * 2, binary_data=binary),
    ]


# -- health, metadata, configuration: the calls both suites make ---------------------------


def calls(method: str, *arg_lists: tuple[Any, ...]) -> list[Scenario]:
    """The scenarios ``client.<method>(*args)``, one per argument tuple."""
    return [lambda m, c, args=args: getattr(c, method)(*args) for args in arg_lists]


ENDPOINTS: list[Scenario] = [
    *calls("is_server_live", ()),
    *calls("is_server_ready", ()),
    *calls("is_model_ready", ("add_sub",), ("add_sub", "1"), ("add_sub", "7"), ("no_such_model",)),
    *calls("get_server_metadata", ()),
    *calls("get_model_metadata", ("add_sub",), ("add_sub", "1"), ("no_such_model",)),
    *calls("get_model_config", ("simple",), ("simple", 1), ("no such model",)),
    *calls("get_model_repository_index", ()),
    *calls("get_inference_statistics", ("no_such_model",)),
    *calls("get_trace_settings", (), ("add_sub",)),
    *calls("get_log_settings", ()),
    *calls("get_system_shared_memory_status", (), ("no_such_region",)),
    *calls("get_cuda_shared_memory_status", (), ("no_such_region",)),
    *calls("unregister_system_shared_memory", (), ("no_such_region",)),
    *calls("unregister_cuda_shared_memory", ()),
    *calls("register_cuda_shared_memory", ("r", b"AAAA", 0, 16)),
    *calls("load_model", ("add_sub",)),  # not explicit mode: refused
    lambda m, c: c.unload_model("add_sub", unload_dependents=True),
    lambda m, c: c.get_server_metadata(headers={"X-Custom": "1"}, query_params={"a": [1, 2]}),
]

#: the same calls with an integer version (tritonclient.http.aio fails on them with NameError)
INT_VERSIONS: list[Scenario] = [
    lambda m, c: c.is_model_ready("add_sub", 1),
    lambda m, c: c.get_model_metadata("add_sub", 1),
    lambda m, c: c.get_inference_statistics("add_sub", 1),
]

#: log settings updates (the settings are the same afterwards)
LOG_UPDATES: list[Scenario] = [
    lambda m, c: c.update_log_settings({"log_verbose_level": 0}),
    lambda m, c: c.update_log_settings({"not_a_setting": 1}),
]

TRACE_UPDATES: list[Scenario] = [
    lambda m, c: c.update_trace_settings(settings={"trace_rate": "1000"}),
    lambda m, c: c.update_trace_settings("add_sub", {"trace_rate": None}),
    lambda m, c: c.update_trace_settings("no_such_model", {"trace_rate": "5"}),
]


# -- inference ----------------------------------------------------------------------------


def add_sub(m: Any, c: Any) -> Any:
    return c.infer("add_sub", add_sub_inputs(m))


def add_sub_json(m: Any, c: Any) -> Any:
    """JSON inputs, one output asked as JSON and one as binary."""
    outputs = [
        m.InferRequestedOutput("OUTPUT0", binary_data=False),
        m.InferRequestedOutput("OUTPUT1"),
    ]
    return c.infer("add_sub", add_sub_inputs(m, binary=False), outputs=outputs)


def classification(m: Any, c: Any) -> Any:
    outputs = [m.InferRequestedOutput("OUTPUT0", class_count=3), m.InferRequestedOutput("OUTPUT1")]
    return c.infer("add_sub", add_sub_inputs(m), outputs=outputs)


def compressed(algorithm: str | None) -> Scenario:
    """add_sub with the request and the response compressed by ``algorithm``."""
    return lambda m, c: c.infer(
        "add_sub",
        add_sub_inputs(m),
        request_compression_algorithm=algorithm,
        response_compression_algorithm=algorithm,
    )


#: every per-request option of ``infer``, with values both servers accept
REQUEST_OPTIONS: dict[str, Any] = {
    "model_version": "1",
    "request_id": "req-\u00e9",
    "sequence_id": 7,
    "sequence_start": True,
    "sequence_end": True,
    "priority": 1,
    "timeout": 100000,
    "parameters": {"custom": "v", "n": 3, "f": 0.5, "b": True},
}


def every_request_option(m: Any, c: Any) -> Any:
    return c.infer("add_sub", add_sub_inputs(m), **REQUEST_OPTIONS)


def string_sequence_id(m: Any, c: Any) -> Any:
    return c.infer("add_sub", add_sub_inputs(m), sequence_id="corr-1")


def many_short_strings(m: Any, c: Any) -> Any:
    strings = np.array([f"item-{i}".encode() for i in range(5000)], dtype=object)
    return c.infer(
        "identity_bytes", [m.InferInput("INPUT0", [5000], "BYTES").set_data_from_numpy(strings)]
    )


def model_error(mode: int) -> Scenario:
    """error_model with MODE=``mode``."""
    data = np.array([mode], np.int32)
    return lambda m, c: c.infer(
        "error_model", [m.InferInput("MODE", [1], "INT32").set_data_from_numpy(data)]
    )


#: requests both clients must refuse, or the server must fail, the same way
BAD_REQUESTS: list[Scenario] = [
    lambda m, c: c.infer("add_sub", add_sub_inputs(m), parameters={"sequence_id": 1}),
    lambda m, c: c.infer("add_sub", add_sub_inputs(m), parameters={"triton_x": 1}),
    lambda m, c: c.infer("add_sub", add_sub_inputs(m), model_version="9"),
    lambda m, c: c.infer("no_such_model", add_sub_inputs(m)),
    lambda m, c: c.infer("add_sub", add_sub_inputs(m)[:1]),
    lambda m, c: c.infer("add_sub", [m.InferInput("INPUT0", [4], "FP32")] * 2),
    lambda m, c: c.infer("add_sub", add_sub_inputs(m), outputs=[m.InferRequestedOutput("NOPE")]),
    lambda m, c: c.infer("add_sub", add_sub_inputs(m), headers={"Transfer-Encoding": "x"}),
]


# -- system shared memory -----------------------------------------------------------------


@contextlib.contextmanager
def region(size: int) -> Iterator[tuple[str, shared_memory.SharedMemory]]:
    """A fresh POSIX shared-memory segment: (its key, the segment)."""
    key = f"tritonhttp_test_{uuid.uuid4().hex[:12]}"
    shm = shared_memory.SharedMemory(name=key, create=True, size=size)
    try:
        yield "/" + key, shm
    finally:
        shm.close()
        shm.unlink()


def shm_add_sub_io(m: Any, name: str) -> tuple[list[Any], list[Any]]:
    """add_sub's inputs from region ``name`` (bytes 0-31), OUTPUT0 into it (32-47), OUTPUT1
    as JSON."""
    inputs = [
        m.InferInput("INPUT0", [4], "FP32").set_shared_memory(name, 16),
        m.InferInput("INPUT1", [4], "FP32").set_shared_memory(name, 16, offset=16),
    ]
    out0 = m.InferRequestedOutput("OUTPUT0")
    out0.set_shared_memory(name, 16, offset=32)
    return inputs, [out0, m.InferRequestedOutput("OUTPUT1", binary_data=False)]


def shm_round_trip_answer(status: Any, result: Any, region: Any) -> tuple[Any, ...]:
    """What the round trip compares: the region's status (its name aside), the response,
    OUTPUT1 (JSON) and OUTPUT0 as add_sub wrote it into the region (FP32 values 8-11)."""
    return (
        [{k: v for k, v in s.items() if k != "name"} for s in status],
        result.get_response(),
        result.as_numpy("OUTPUT1").tolist(),
        region[8:12].tolist(),
    )


# -- plugins ------------------------------------------------------------------------------

#: calls a plugin adds headers to (each passes a fresh dict: the caller's is never modified)
PLUGGED_CALLS: list[Scenario] = [
    lambda m, c: c.infer("add_sub", add_sub_inputs(m), headers={"X-Trace": "1"}),
    lambda m, c: c.is_server_ready(headers={"X-Trace": "1"}),
]


def chunking_plugin(base: type) -> Any:
    """A plugin (a ``base`` subclass) that asks for a chunked body, which the client must
    refuse after the plugin ran."""

    class Chunking(base):  # type: ignore[valid-type, misc]
        def __call__(self, request: Any) -> None:
            request.headers["Transfer-Encoding"] = "chunked"

    return Chunking()
