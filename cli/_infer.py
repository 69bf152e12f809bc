"""``infer MODEL``: one inference (or ``--repeat N``) from the command line."""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ._complete import complete_model
from ._errors import InputError
from ._render import array_json, emit_json, format_array, new_table, print_table
from ._settings import Settings, json_flag
from ._values import (
    ModelIO,
    RawValue,
    batch_size,
    fit_shape,
    parse_assignments,
    parse_dims,
    parse_json_or_text,
    parse_tensor_value,
    to_array,
    triton_datatype,
)

if TYPE_CHECKING:
    import numpy as np

    import tritonhttp

__all__ = [
    "InputArgs",
    "OutputTensor",
    "build_inputs",
    "fetch_model_io",
    "infer",
    "input_options",
    "parse_input_args",
]


def fetch_model_io(
    client: tritonhttp.InferenceServerClient, settings: Settings, model: str, version: str
) -> ModelIO:
    """The model's inputs, outputs and batching, from its metadata and configuration."""
    headers = settings.request_headers
    metadata = client.get_model_metadata(model, version, headers=headers)
    config = client.get_model_config(model, version, headers=headers)
    return ModelIO.from_server(metadata, config)


def input_options(function: Any) -> Any:
    """``--input``, ``--shape`` and ``--datatype`` (shared by infer and bench)."""
    for option in reversed(
        [
            click.option(
                "--input",
                "-i",
                "inputs",
                multiple=True,
                metavar="NAME=VALUE",
                help="Input value: 1,2,3 | JSON [..] | @file.npy | @file.json | @file "
                "(raw BYTES). Repeatable.",
            ),
            click.option(
                "--shape",
                "shapes",
                multiple=True,
                metavar="NAME=D1,D2",
                help="Shape of an input (default: from the model, batch dim added).",
            ),
            click.option(
                "--datatype",
                "datatypes",
                multiple=True,
                metavar="NAME=TYPE",
                help="Datatype of an input (default: from the model).",
            ),
        ]
    ):
        function = option(function)
    return function


@dataclass
class InputArgs:
    """``--input``/``--shape``/``--datatype`` parsed (files read), before the model is known."""

    values: dict[str, RawValue]
    shapes: dict[str, list[int]]
    datatypes: dict[str, str]


def parse_input_args(
    inputs: tuple[str, ...], shapes: tuple[str, ...], datatypes: tuple[str, ...]
) -> InputArgs:
    """Check the syntax of the input options (no server needed)."""
    shape_of = {k: parse_dims(v, f"--shape {k}") for k, v in parse_assignments(shapes, "--shape")}
    type_of = {k: v.strip().upper() for k, v in parse_assignments(datatypes, "--datatype")}
    values: dict[str, RawValue] = {}
    for name, text in parse_assignments(inputs, "--input"):
        if name in values:
            raise InputError(f"input '{name}' is given more than once")
        values[name] = parse_tensor_value(name, text)
    for name in [*shape_of, *type_of]:
        if name not in values:
            raise InputError(f"--shape/--datatype given for '{name}', which has no --input")
    return InputArgs(values, shape_of, type_of)


def build_inputs(io: ModelIO, args: InputArgs) -> dict[str, np.ndarray[Any, Any]]:
    """Numpy arrays for the ``--input`` values, shaped and typed for the model."""
    arrays: dict[str, np.ndarray[Any, Any]] = {}
    for name, raw in args.values.items():
        spec = io.inputs.get(name) if name in args.datatypes else io.input(name)
        datatype = args.datatypes.get(name) or (spec.datatype if spec else "")
        array = to_array(raw, datatype)
        arrays[name] = fit_shape(array, raw, spec, io.batches, args.shapes.get(name))
    return arrays


@dataclass
class OutputTensor:
    """An output as shown: name, datatype, shape and its values."""

    name: str
    datatype: str
    shape: list[int]
    array: np.ndarray[Any, Any]


def _make_inputs(
    arrays: dict[str, np.ndarray[Any, Any]], binary: bool, shm: Any
) -> list[tritonhttp.InferInput]:
    import tritonhttp

    made = []
    for name, array in arrays.items():
        tensor = tritonhttp.InferInput(name, list(array.shape), triton_datatype(array, name))
        if shm is not None:
            offset, size = shm.inputs[name]
            tensor.set_shared_memory(shm.region_name, size, offset)
        else:
            tensor.set_data_from_numpy(array, binary_data=binary)
        made.append(tensor)
    return made


def _make_outputs(
    names: list[str], binary: bool, shm: Any
) -> list[tritonhttp.InferRequestedOutput]:
    import tritonhttp

    made = []
    for name in names:
        output = tritonhttp.InferRequestedOutput(name, binary_data=binary)
        if shm is not None and name in shm.outputs:
            offset, size = shm.outputs[name]
            output.set_shared_memory(shm.region_name, size, offset)
        made.append(output)
    return made


def _collect(result: tritonhttp.InferResult, shm: Any) -> list[OutputTensor]:
    collected = []
    for output in result.get_response().get("outputs", []):
        name = output["name"]
        shape = [int(d) for d in output["shape"]]
        if shm is not None and name in shm.outputs:  # Triton wrote it into the region
            array = shm.read_output(name, output["datatype"], shape)
        else:
            found = result.as_numpy(name)
            if found is None:  # pragma: no cover - the output is listed in the response
                continue
            array = found
        collected.append(OutputTensor(name, output["datatype"], shape, array))
    return collected


def _save_folder(directory: Path) -> None:
    """Make the ``--save`` folder before the inference runs (or say why it cannot be)."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(f"--save: cannot create {directory}: {e.strerror or e}") from None
    if not os.access(directory, os.W_OK):
        raise InputError(f"--save: cannot write into {directory}")


def _save(directory: Path, outputs: list[OutputTensor]) -> list[str]:
    import numpy as np

    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for out in outputs:
        array = out.array
        if array.dtype.kind == "O":
            items = [
                bytes(x) if isinstance(x, (bytes, bytearray)) else str(x).encode()
                for x in array.reshape(-1)
            ]
            if not any(x.endswith(b"\x00") for x in items):
                # Fixed-width bytes load without pickle; trailing NULs would be lost.
                array = np.array(items, dtype=np.bytes_).reshape(array.shape)
        elif out.datatype == "BF16" and array.dtype.kind != "f":
            # numpy's .npy has no bfloat16: it would be written as opaque 2-byte voids.
            # FP32 holds every BF16 value exactly (and @file.npy casts it back).
            array = array.astype(np.float32)
        path = directory / f"{out.name}.npy"
        np.save(path, array, allow_pickle=array.dtype.kind == "O")
        written.append(str(path))
    return written


def _timing(latencies: list[float]) -> dict[str, Any]:
    ordered = sorted(latencies)
    n = len(ordered)
    return {
        "requests": n,
        "total_s": sum(ordered),
        "mean_ms": 1000 * sum(ordered) / n,
        "min_ms": 1000 * ordered[0],
        "p50_ms": 1000 * ordered[min(n - 1, math.ceil(0.5 * n) - 1)],
        "max_ms": 1000 * ordered[-1],
    }


@click.command()
@click.argument("model", shell_complete=complete_model)
@input_options
@click.option(
    "--output",
    "-o",
    "output_names",
    multiple=True,
    metavar="NAME",
    help="Output to request (repeatable; default: all).",
)
@click.option("--model-version", default="", metavar="VERSION", help="Model version.")
@click.option(
    "--parameter",
    "-p",
    "parameters",
    multiple=True,
    metavar="K=V",
    help='Request parameter (V as JSON if it parses: 1, true, "s"). Repeatable.',
)
@click.option(
    "--binary/--no-binary",
    default=True,
    show_default=True,
    help="Tensors as binary data (or inside the JSON).",
)
@click.option(
    "--shm",
    type=click.Choice(["system", "cuda"]),
    help="Pass inputs (and fixed-size outputs) through a temporary shared-memory region.",
)
@click.option("--device-id", type=int, default=0, show_default=True, help="GPU for --shm cuda.")
@click.option(
    "--save",
    type=click.Path(file_okay=False),
    metavar="DIR",
    help="Write each output to DIR/NAME.npy.",
)
@click.option(
    "--repeat",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Send the request N times (shows the last result and the timings).",
)
@json_flag
@click.pass_obj
def infer(
    settings: Settings,
    model: str,
    inputs: tuple[str, ...],
    shapes: tuple[str, ...],
    datatypes: tuple[str, ...],
    output_names: tuple[str, ...],
    model_version: str,
    parameters: tuple[str, ...],
    binary: bool,
    shm: str | None,
    device_id: int,
    save: str | None,
    repeat: int,
) -> None:
    """Run an inference on MODEL and show its outputs.

    \b
    Examples:
      triton-cli infer add_sub -i INPUT0=1,2,3,4 -i INPUT1=10,20,30,40
      triton-cli infer identity_bytes -i 'INPUT0=["hello", "world"]'
      triton-cli infer simple -i INPUT0=@a.npy -i INPUT1=@b.npy --save out/
    """
    params = {k: parse_json_or_text(v) for k, v in parse_assignments(parameters, "--parameter")}
    input_args = parse_input_args(inputs, shapes, datatypes)
    if save:
        _save_folder(Path(save))
    with settings.client() as client:
        io = fetch_model_io(client, settings, model, model_version)
        arrays = build_inputs(io, input_args)
        missing = io.missing_inputs(arrays)
        if missing:
            names = ", ".join(f"'{n}'" for n in missing)
            raise InputError(
                f"model '{model}' needs input {names} (give "
                f"{' '.join(f'-i {n}=...' for n in missing)})"
            )
        wanted = [io.output(n).name for n in output_names] if output_names else list(io.outputs)
        request = _Request(client, settings, model, model_version, params, binary, repeat)
        if shm is not None:
            from ._shm_io import shared_memory_io

            specs = [io.outputs[n] for n in wanted]
            batch = batch_size(io, arrays) if io.batches else None
            with shared_memory_io(
                shm, client, settings.request_headers, arrays, specs, batch, device_id,
                settings.timeout,
            ) as shm_io:  # fmt: skip
                result, latencies = request.run(arrays, wanted, shm_io)
                outputs = _collect(result, shm_io)
        else:
            result, latencies = request.run(arrays, wanted, None)
            outputs = _collect(result, None)
    saved = _save(Path(save), outputs) if save else []
    _show(settings, model, result.get_response(), outputs, latencies, saved)


@dataclass
class _Request:
    """One ``infer`` call, sent ``repeat`` times."""

    client: tritonhttp.InferenceServerClient
    settings: Settings
    model: str
    version: str
    parameters: dict[str, Any]
    binary: bool
    repeat: int

    def run(
        self, arrays: dict[str, np.ndarray[Any, Any]], wanted: list[str], shm_io: Any
    ) -> tuple[tritonhttp.InferResult, list[float]]:
        tensors = _make_inputs(arrays, self.binary, shm_io)
        requested = _make_outputs(wanted, self.binary, shm_io)
        latencies = []
        result = None
        for _ in range(self.repeat):
            start = time.perf_counter()
            result = self.client.infer(
                self.model,
                tensors,
                model_version=self.version,
                outputs=requested,
                headers=self.settings.request_headers,
                parameters=self.parameters or None,
            )
            latencies.append(time.perf_counter() - start)
        assert result is not None
        return result, latencies


def _show(
    settings: Settings,
    model: str,
    response: dict[str, Any],
    outputs: list[OutputTensor],
    latencies: list[float],
    saved: list[str],
) -> None:
    if settings.json_output:
        rendered = []
        for out in outputs:
            data, encoding = array_json(out.array)
            entry: dict[str, Any] = {
                "name": out.name,
                "datatype": out.datatype,
                "shape": out.shape,
                "data": data,
            }
            if encoding is not None:
                entry["encoding"] = encoding
            rendered.append(entry)
        emit_json(
            settings,
            {
                "model_name": response.get("model_name", model),
                "model_version": response.get("model_version", ""),
                "id": response.get("id", ""),
                "parameters": response.get("parameters", {}),
                "outputs": rendered,
                "timing": _timing(latencies),
                "saved": saved,
            },
        )
        return
    name = response.get("model_name", model)
    version = response.get("model_version", "?")
    table = new_table("output", "datatype", "shape", "values", title=f"{name} (version {version})")
    for out in outputs:
        shape = "[" + ",".join(map(str, out.shape)) + "]"
        table.add_row(out.name, out.datatype, shape, format_array(out.array))
    print_table(settings, table)
    stream = settings.stdout
    if len(latencies) > 1:
        t = _timing(latencies)
        stream.write(
            f"{t['requests']} requests: mean {t['mean_ms']:.3f} ms, p50 {t['p50_ms']:.3f} ms, "
            f"min {t['min_ms']:.3f} ms, max {t['max_ms']:.3f} ms\n"
        )
    for path in saved:
        stream.write(f"saved {path}\n")
