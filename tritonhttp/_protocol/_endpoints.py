"""Every endpoint of tritonclient.http as a description: verb, path, body, result kind.

The sync and asyncio clients turn a :class:`Call` into bytes on the wire and interpret
the answer by its :attr:`Call.kind`; nothing here does I/O. Paths are relative (the
client prefixes its base path); names are quoted like tritonclient does.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping, Sequence
from typing import Any

from .._errors import InferenceServerException, _InvalidArgument
from ._generate import generate_body
from ._infer import Buffer, InferBody, InputLike, OutputLike, build_infer_body, compress_body
from ._json import dumps
from ._urls import quote_name

__all__ = ["GENERATE", "JSON", "NONE", "PROBE", "RESULT", "STREAM", "Call", "Endpoints"]

#: Result kinds.
PROBE = 0  # bool: status == 200, never raises for an HTTP status
JSON = 1  # parsed JSON body (after the error check)
NONE = 2  # None (after the error check); ``done_message`` printed when verbose
RESULT = 3  # an inference result
GENERATE = 4  # the parsed JSON answer of /generate (an error object is raised)
STREAM = 5  # /generate_stream: the answer is read as it arrives, event by event

_EMPTY: list[Buffer] = []
# Versions go into the path verbatim (as in tritonclient); these would break the request line.
_UNSAFE_VERSION = re.compile(r"[\x00-\x20\x7f?#]")


class Call:
    """One request to make, independent of how it is sent."""

    __slots__ = ("body", "done_message", "headers", "kind", "method", "path", "printable", "size")

    def __init__(
        self,
        method: str,
        path: str,
        kind: int,
        body: list[Buffer] = _EMPTY,
        size: int = 0,
        *,
        headers: dict[str, Any] | None = None,
        printable: object = "",
        done_message: str | None = None,
    ) -> None:
        self.method = method
        self.path = path
        self.kind = kind
        self.body = body
        self.size = size
        self.headers = headers  # library headers, added on top of the caller's
        self.printable = printable  # what verbose mode prints as the body
        self.done_message = done_message


def _json_call(path: str, obj: Any, kind: int, done_message: str | None = None) -> Call:
    text = dumps(obj)
    data = text.encode()
    return Call("POST", path, kind, [data], len(data), printable=text, done_message=done_message)


def _check_version(model_version: Any) -> None:
    if type(model_version) is not str:
        raise InferenceServerException(msg="model version must be a string")


def _model_path(model_name: str, model_version: Any, suffix: str = "") -> str:
    path = f"v2/models/{quote_name(model_name)}"
    if model_version != "":
        version = str(model_version)
        if _UNSAFE_VERSION.search(version):
            raise _InvalidArgument(f"invalid model version {version!r}")
        path = f"{path}/versions/{version}"
    return path + suffix


class Endpoints:
    """Builders for every request of the KServe v2 / Triton HTTP API (static methods)."""

    @staticmethod
    def server_live() -> Call:
        return Call("GET", "v2/health/live", PROBE)

    @staticmethod
    def server_ready() -> Call:
        return Call("GET", "v2/health/ready", PROBE)

    @staticmethod
    def model_ready(model_name: str, model_version: str = "") -> Call:
        _check_version(model_version)
        return Call("GET", _model_path(model_name, model_version, "/ready"), PROBE)

    @staticmethod
    def server_metadata() -> Call:
        return Call("GET", "v2", JSON)

    @staticmethod
    def model_metadata(model_name: str, model_version: str = "") -> Call:
        _check_version(model_version)
        return Call("GET", _model_path(model_name, model_version), JSON)

    @staticmethod
    def model_config(model_name: str, model_version: Any = "") -> Call:
        # tritonclient skips the version type check here (an int version is accepted).
        return Call("GET", _model_path(model_name, model_version, "/config"), JSON)

    @staticmethod
    def repository_index() -> Call:
        return Call("POST", "v2/repository/index", JSON, [b""], 0)

    @staticmethod
    def load_model(
        model_name: str, config: str | None = None, files: Mapping[str, bytes] | None = None
    ) -> Call:
        request: dict[str, Any] = {}
        if config is not None:
            request.setdefault("parameters", {})["config"] = config
        if files is not None:
            for path, content in files.items():
                request.setdefault("parameters", {})[path] = base64.b64encode(content)
        return _json_call(
            f"v2/repository/models/{quote_name(model_name)}/load",
            request,
            NONE,
            f"Loaded model '{model_name}'",
        )

    @staticmethod
    def unload_model(model_name: str, unload_dependents: bool = False) -> Call:
        return _json_call(
            f"v2/repository/models/{quote_name(model_name)}/unload",
            {"parameters": {"unload_dependents": unload_dependents}},
            NONE,
            f"Unloaded model '{model_name}'",
        )

    @staticmethod
    def inference_statistics(model_name: str = "", model_version: str = "") -> Call:
        if model_name != "":
            _check_version(model_version)
            return Call("GET", _model_path(model_name, model_version, "/stats"), JSON)
        return Call("GET", "v2/models/stats", JSON)

    @staticmethod
    def _trace_path(model_name: str | None) -> str:
        if model_name is not None and model_name != "":
            return f"v2/models/{quote_name(model_name)}/trace/setting"
        return "v2/trace/setting"

    @staticmethod
    def update_trace_settings(model_name: str | None, settings: Mapping[str, Any]) -> Call:
        return _json_call(Endpoints._trace_path(model_name), settings, JSON)

    @staticmethod
    def trace_settings(model_name: str | None) -> Call:
        return Call("GET", Endpoints._trace_path(model_name), JSON)

    @staticmethod
    def update_log_settings(settings: Mapping[str, Any]) -> Call:
        return _json_call("v2/logging", settings, JSON)

    @staticmethod
    def log_settings() -> Call:
        return Call("GET", "v2/logging", JSON)

    @staticmethod
    def shm_status(kind: str, region_name: str = "") -> Call:
        """``kind`` is ``system`` or ``cuda``."""
        if region_name != "":
            return Call(
                "GET", f"v2/{kind}sharedmemory/region/{quote_name(region_name)}/status", JSON
            )
        return Call("GET", f"v2/{kind}sharedmemory/status", JSON)

    @staticmethod
    def register_system_shm(name: str, key: str, byte_size: int, offset: int = 0) -> Call:
        return _json_call(
            f"v2/systemsharedmemory/region/{quote_name(name)}/register",
            {"key": key, "offset": offset, "byte_size": byte_size},
            NONE,
            f"Registered system shared memory with name '{name}'",
        )

    @staticmethod
    def register_cuda_shm(name: str, raw_handle: Any, device_id: int, byte_size: int) -> Call:
        return _json_call(
            f"v2/cudasharedmemory/region/{quote_name(name)}/register",
            {"raw_handle": {"b64": raw_handle}, "device_id": device_id, "byte_size": byte_size},
            NONE,
            f"Registered cuda shared memory with name '{name}'",
        )

    @staticmethod
    def unregister_shm(kind: str, name: str = "") -> Call:
        """``kind`` is ``system`` or ``cuda``."""
        if name != "":
            return Call(
                "POST",
                f"v2/{kind}sharedmemory/region/{quote_name(name)}/unregister",
                NONE,
                [b""],
                0,
                done_message=f"Unregistered {kind} shared memory with name '{name}'",
            )
        return Call(
            "POST",
            f"v2/{kind}sharedmemory/unregister",
            NONE,
            [b""],
            0,
            done_message=f"Unregistered all {kind} shared memory regions",
        )

    @staticmethod
    def infer(
        model_name: str,
        model_version: str,
        body: InferBody,
        request_compression_algorithm: str | None = None,
        response_compression_algorithm: str | None = None,
    ) -> Call:
        """The POST for an inference; library headers as tritonclient sets them."""
        buffers, size, encoding = compress_body(body, request_compression_algorithm)
        headers: dict[str, Any] | None = None
        if encoding is not None:
            headers = {"Content-Encoding": encoding}
        if response_compression_algorithm in ("gzip", "deflate"):
            headers = headers or {}
            headers["Accept-Encoding"] = response_compression_algorithm
        if body.json_size is not None:
            headers = headers or {}
            headers["Inference-Header-Content-Length"] = body.json_size
        _check_version(model_version)
        return Call(
            "POST",
            _model_path(model_name, model_version, "/infer"),
            RESULT,
            buffers,
            size,
            headers=headers,
            printable=buffers,
        )

    @staticmethod
    def inference(
        model_name: str,
        inputs: Sequence[InputLike],
        model_version: str,
        outputs: Sequence[OutputLike] | None,
        request_id: str,
        sequence_id: int | str,
        sequence_start: bool,
        sequence_end: bool,
        priority: int,
        timeout: int | None,
        request_compression_algorithm: str | None,
        response_compression_algorithm: str | None,
        parameters: Mapping[str, Any] | None,
    ) -> Call:
        """The request of the clients' ``infer`` / ``async_infer``, from their arguments
        (in their order, without ``headers`` and ``query_params``)."""
        body = build_infer_body(
            inputs,
            outputs,
            request_id,
            sequence_id,
            sequence_start,
            sequence_end,
            priority,
            timeout,
            parameters,
        )
        return Endpoints.infer(
            model_name,
            model_version,
            body,
            request_compression_algorithm,
            response_compression_algorithm,
        )

    @staticmethod
    def generate(
        model_name: str,
        model_version: str,
        inputs: Mapping[str, Any],
        parameters: Mapping[str, Any] | None = None,
        stream: bool = False,
    ) -> Call:
        """The POST of Triton's generate extension (``/generate`` or ``/generate_stream``)."""
        _check_version(model_version)
        text = generate_body(inputs, parameters)
        data = text.encode()
        return Call(
            "POST",
            _model_path(model_name, model_version, "/generate_stream" if stream else "/generate"),
            STREAM if stream else GENERATE,
            [data],
            len(data),
            headers={"Content-Type": "application/json"},
            printable=text,
        )
