"""``model new``: the files of a new Python-backend model, ready to serve and to test.

A model is written as ``<repository>/<NAME>/config.pbtxt`` and
``<repository>/<NAME>/1/model.py``, with ``test_<NAME>.py`` next to the repository.
Three kinds: ``plain`` (one response per request), ``decoupled`` (a stream of responses
through the response sender) and ``bls`` (calls another model with business logic
scripting). The generated code passes ``ruff`` and ``mypy --strict``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from ._errors import InputError

__all__ = ["Scaffold", "TensorSpec", "parse_tensor", "scaffold"]

#: the wire data types a template can declare, with their numpy spelling
_NUMPY = {
    "BOOL": "np.bool_",
    "UINT8": "np.uint8",
    "UINT16": "np.uint16",
    "UINT32": "np.uint32",
    "UINT64": "np.uint64",
    "INT8": "np.int8",
    "INT16": "np.int16",
    "INT32": "np.int32",
    "INT64": "np.int64",
    "FP16": "np.float16",
    "FP32": "np.float32",
    "FP64": "np.float64",
    "BYTES": "np.object_",
}
_CONFIG_TYPE = {wire: f"TYPE_{'STRING' if wire == 'BYTES' else wire}" for wire in _NUMPY}
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class TensorSpec:
    """An input or output: its name, wire data type and dims (-1: any size)."""

    name: str
    datatype: str
    dims: tuple[int, ...]

    def example_shape(self, batched: bool) -> list[int]:
        """A concrete shape for a request (variable dims become 2, batch size 1)."""
        return [1] * batched + [2 if d < 0 else d for d in self.dims]


def parse_tensor(text: str, option: str) -> TensorSpec:
    """``NAME:DTYPE:DIMS`` (DIMS like ``4``, ``-1,3`` or ``[2,2]``) as a TensorSpec."""
    parts = text.split(":")
    if len(parts) != 3:
        raise InputError(f"{option} {text!r}: expected NAME:DTYPE:DIMS, e.g. INPUT0:FP32:4")
    name, datatype, dims_text = parts
    if not _NAME.match(name):
        raise InputError(f"{option} {text!r}: {name!r} is not a valid tensor name")
    datatype = datatype.upper().removeprefix("TYPE_")
    datatype = "BYTES" if datatype == "STRING" else datatype
    if datatype not in _NUMPY:
        raise InputError(
            f"{option} {text!r}: unknown data type {parts[1]!r} (one of {', '.join(_NUMPY)})"
        )
    try:
        dims = tuple(int(d) for d in dims_text.strip("[] ").split(",") if d.strip())
    except ValueError:
        raise InputError(f"{option} {text!r}: DIMS must be integers, e.g. 4 or -1,3") from None
    if not dims or any(d == 0 or d < -1 for d in dims):
        raise InputError(f"{option} {text!r}: DIMS must be positive integers or -1")
    return TensorSpec(name, datatype, dims)


@dataclass(frozen=True)
class Scaffold:
    """What ``model new`` writes for one model."""

    name: str
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    max_batch_size: int = 0
    kind: str = "plain"  # plain | decoupled | bls
    #: for ``bls``: the model it calls
    target: str = ""
    #: the repository as the test file reaches it (relative to the test's folder)
    repository_ref: str = "models"

    def source_of(self, output: TensorSpec) -> TensorSpec | None:
        """The input an output is copied from (same dims and kind of data), if any."""
        index = self.outputs.index(output)
        candidate = self.inputs[index] if index < len(self.inputs) else self.inputs[0]
        same_kind = (candidate.datatype == "BYTES") == (output.datatype == "BYTES")
        return candidate if same_kind and candidate.dims == output.dims else None


# ---------------------------------------------------------------------- config.pbtxt


def _tensor_block(key: str, specs: tuple[TensorSpec, ...]) -> str:
    items = [
        f'  {{\n    name: "{t.name}"\n    data_type: {_CONFIG_TYPE[t.datatype]}\n'
        f"    dims: [ {', '.join(str(d) for d in t.dims)} ]\n  }}"
        for t in specs
    ]
    return f"{key} [\n" + ",\n".join(items) + "\n]\n"


def config_text(s: Scaffold) -> str:
    """The model's ``config.pbtxt``."""
    lines = [f'name: "{s.name}"\n', 'backend: "python"\n', f"max_batch_size: {s.max_batch_size}\n"]
    text = "".join(lines) + _tensor_block("input", s.inputs) + _tensor_block("output", s.outputs)
    if s.max_batch_size > 0:
        text += "dynamic_batching { }\n"
    if s.kind == "decoupled":
        text += "model_transaction_policy { decoupled: true }\n"
    if s.kind == "bls":
        text += f'parameters {{ key: "target_model" value: {{ string_value: "{s.target}" }} }}\n'
    return text + "instance_group [ { count: 1, kind: KIND_CPU } ]\n"


# ---------------------------------------------------------------------- model.py

_HEADER = '''"""{summary}

Triton calls ``initialize`` once for each instance, ``execute`` with each batch of
requests and ``finalize`` when the model is unloaded. The inputs and outputs are declared
in ``../config.pbtxt``. Check the model without serving it with::

    triton-cli model check {repo_dir}{load}
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import triton_python_backend_utils as pb_utils


def input_array(request: pb_utils.InferenceRequest, name: str) -> np.ndarray[Any, Any]:
    """The input ``name`` of ``request`` as a numpy array."""
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    if tensor is None:
        raise pb_utils.TritonModelException(f"input {{name!r}} is missing")
    return tensor.as_numpy()

'''


def _load_hint(s: Scaffold) -> str:
    return f" --load {s.target}" if s.kind == "bls" else ""


def _output_expr(s: Scaffold, out: TensorSpec) -> str:
    source = s.source_of(out)
    dtype = _NUMPY[out.datatype]
    if source is not None:
        var = _var(source.name)
        return var if out.datatype == "BYTES" else f"{var}.astype({dtype})"
    dims = ", ".join("1" if d < 0 else str(d) for d in out.dims)
    batch = f"len({_var(s.inputs[0].name)}), " if s.max_batch_size > 0 else ""
    shape = f"({batch}{dims},)" if not batch and len(out.dims) == 1 else f"({batch}{dims})"
    if out.datatype == "BYTES":
        return f'np.full({shape}, b"", dtype=np.object_)'
    return f"np.zeros({shape}, dtype={dtype})"


def _var(name: str) -> str:
    text = re.sub(r"\W", "_", name).lower()
    return text if text.isidentifier() and not text[0].isdigit() else f"t_{text}"


def _compute_body(s: Scaffold, indent: str) -> str:
    used = {src.name for o in s.outputs if (src := s.source_of(o)) is not None}
    if s.max_batch_size > 0 and len(used) < len(s.outputs):
        used.add(s.inputs[0].name)  # its length is the batch size of zero outputs
    lines = [
        f'{_var(t.name)} = input_array(request, "{t.name}")'
        if t.name in used
        else f'# {_var(t.name)} = input_array(request, "{t.name}")'
        for t in s.inputs
    ]
    lines.append("# Replace these lines with the model's computation.")
    lines.append("outputs = [")
    lines += [f'    pb_utils.Tensor("{o.name}", {_output_expr(s, o)}),' for o in s.outputs]
    lines.append("]")
    return "\n".join(f"{indent}{line}" for line in lines)


def model_text(s: Scaffold, repo_dir: str) -> str:
    """The model's ``1/model.py`` for its kind."""
    if s.kind == "decoupled":
        return _decoupled_model(s, repo_dir)
    if s.kind == "bls":
        return _bls_model(s, repo_dir)
    summary = f"{s.name}: a Triton Python-backend model answering each request once."
    return (
        _HEADER.format(summary=summary, repo_dir=repo_dir, load=_load_hint(s))
        + f'''
class TritonPythonModel:
    """{_describe(s)}"""

    def initialize(self, args: dict[str, str]) -> None:
        """Read the configuration (``args["model_config"]`` is its JSON text)."""
        self.model_config = json.loads(args["model_config"])

    def execute(
        self, requests: list[pb_utils.InferenceRequest]
    ) -> list[pb_utils.InferenceResponse]:
        """One response per request, in the order of ``requests``."""
        responses = []
        for request in requests:
{_compute_body(s, " " * 12)}
            responses.append(pb_utils.InferenceResponse(output_tensors=outputs))
        return responses

    def finalize(self) -> None:
        """Release what ``initialize`` acquired (nothing here)."""
'''
    )


def _describe(s: Scaffold) -> str:
    parts = []
    for out in s.outputs:
        source = s.source_of(out)
        parts.append(f"{out.name} = {source.name}" if source else f"{out.name} = zeros")
    return "Answers with " + ", ".join(parts) + " (replace with your computation)."


def _decoupled_model(s: Scaffold, repo_dir: str) -> str:
    summary = f"{s.name}: a decoupled Triton Python-backend model streaming its responses."
    return (
        _HEADER.format(summary=summary, repo_dir=repo_dir, load=_load_hint(s))
        + f'''
#: how many responses each request gets before its final flag
RESPONSES = 3


class TritonPythonModel:
    """Sends RESPONSES responses per request through its response sender, then the
    final flag. {_describe(s)}"""

    def initialize(self, args: dict[str, str]) -> None:
        """Read the configuration (``args["model_config"]`` is its JSON text)."""
        self.model_config = json.loads(args["model_config"])
        if not pb_utils.using_decoupled_model_transaction_policy(self.model_config):
            raise pb_utils.TritonModelException("this model must be decoupled")

    def execute(self, requests: list[pb_utils.InferenceRequest]) -> None:
        """Answer through each request's sender; the responses may also be sent later,
        from another thread."""
        for request in requests:
            sender = request.get_response_sender()
{_compute_body(s, " " * 12)}
            for _ in range(RESPONSES):
                if sender.is_cancelled():
                    break
                sender.send(pb_utils.InferenceResponse(output_tensors=outputs))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)

    def finalize(self) -> None:
        """Release what ``initialize`` acquired (nothing here)."""
'''
    )


def _bls_model(s: Scaffold, repo_dir: str) -> str:
    summary = f"{s.name}: a Triton Python-backend model calling another model (BLS)."
    names = ", ".join(f'"{o.name}"' for o in s.outputs)
    return (
        _HEADER.format(summary=summary, repo_dir=repo_dir, load=_load_hint(s))
        + f'''
class TritonPythonModel:
    """Sends its inputs to the model named by the ``target_model`` parameter of its
    configuration and answers with that model's outputs of the same names."""

    def initialize(self, args: dict[str, str]) -> None:
        """Read the configuration: the model to call and the outputs to ask it for."""
        self.model_config = json.loads(args["model_config"])
        parameters = self.model_config.get("parameters", {{}})
        self.target = str(parameters["target_model"]["string_value"])
        self.output_names = [{names}]

    def execute(
        self, requests: list[pb_utils.InferenceRequest]
    ) -> list[pb_utils.InferenceResponse]:
        """For each request, one call to the target model with the same inputs."""
        responses = []
        for request in requests:
            call = pb_utils.InferenceRequest(
                model_name=self.target,
                inputs=request.inputs(),
                requested_output_names=self.output_names,
            )
            answer: pb_utils.InferenceResponse = call.exec()
            error = answer.error()
            if error is not None:
                responses.append(pb_utils.InferenceResponse(error=error))
                continue
            outputs = []
            for name in self.output_names:
                tensor = pb_utils.get_output_tensor_by_name(answer, name)
                if tensor is None:
                    raise pb_utils.TritonModelException(f"{{self.target}} gave no {{name}}")
                outputs.append(pb_utils.Tensor(name, tensor.as_numpy()))
            responses.append(pb_utils.InferenceResponse(output_tensors=outputs))
        return responses

    def finalize(self) -> None:
        """Release what ``initialize`` acquired (nothing here)."""
'''
    )


# ---------------------------------------------------------------------- test_NAME.py


def _input_lines(s: Scaffold) -> list[str]:
    lines = []
    batched = s.max_batch_size > 0
    for t in s.inputs:
        shape = t.example_shape(batched)
        count = 1
        for d in shape:
            count *= d
        var = _var(t.name)
        if t.datatype == "BYTES":
            data = f'np.array([b"text"] * {count}, dtype=np.object_).reshape({shape})'
        elif t.datatype == "BOOL":
            data = f"(np.arange({count}) % 2 == 0).reshape({shape})"
        else:
            data = f"np.arange({count}).astype({_NUMPY[t.datatype]}).reshape({shape})"
        lines.append(f"{var} = {data}")
        lines.append(f'{var}_input = tritonhttp.InferInput("{t.name}", {shape}, "{t.datatype}")')
        lines.append(f"{var}_input.set_data_from_numpy({var})")
    return lines


def _output_checks(s: Scaffold, getter: str, indent: str) -> list[str]:
    lines = []
    batched = s.max_batch_size > 0
    for out in s.outputs:
        var = f"{_var(out.name)}_out"
        lines.append(f"{var} = {getter.format(name=out.name)}")
        lines.append(f"assert {var} is not None")
        source = s.source_of(out)
        if source is not None:
            expected = _var(source.name)
            if out.datatype != "BYTES":
                expected += f".astype({_NUMPY[out.datatype]})"
            lines.append(f"assert {var}.tolist() == {expected}.tolist()")
        else:
            shape = [1] * batched + [1 if d < 0 else d for d in out.dims]
            lines.append(f"assert list({var}.shape) == {shape}")
    return [indent + line for line in lines]


def test_text(s: Scaffold) -> str:
    """``test_NAME.py``: tests with tritonhttp's pytest fixtures, passing as written."""
    inputs = ", ".join(f"{_var(t.name)}_input" for t in s.inputs)
    arrays = ", ".join(_var(t.name) for t in s.inputs)
    models = f'["{s.name}", "{s.target}"]' if s.kind == "bls" else f'["{s.name}"]'
    decoupled = s.kind == "decoupled"
    extra = "import importlib.util\nimport json\nfrom pathlib import Path\n" if decoupled else ""
    extra_tp = "import triton_python_backend_utils as pb_utils\n" if decoupled else ""
    head = f'''"""Tests of the {s.name} model, served by tritonhttp's pytest fixture
``triton_server`` in this process: breakpoints in its model.py stop here too."""

from __future__ import annotations

{extra}from typing import Any

import numpy as np
{extra_tp}import tritonhttp
from tritonhttp.testing.pytest_plugin import ServeRepository

#: the model repository, relative to this file's folder
REPOSITORY = "{s.repository_ref}"


def make_inputs() -> tuple[list[tritonhttp.InferInput], list[np.ndarray[Any, Any]]]:
    """The request's inputs, and their arrays."""
'''
    body = "".join(f"    {line}\n" for line in _input_lines(s))
    head += body + f"    return [{inputs}], [{arrays}]\n\n\n"
    unpack = f"    [{arrays}] = arrays\n" if len(s.inputs) > 1 else f"    ({arrays},) = arrays\n"
    if decoupled:
        return head + _decoupled_tests(s, unpack)
    checks = "\n".join(_output_checks(s, 'result.as_numpy("{name}")', "    "))
    return (
        head
        + f'''def test_{_var(s.name)}_answers(triton_server: ServeRepository) -> None:
    served = triton_server(REPOSITORY, models={models})
    inputs, arrays = make_inputs()
{unpack}    result = served.client.infer("{s.name}", inputs)
{checks}
'''
    )


def _decoupled_tests(s: Scaffold, unpack: str) -> str:
    checks = "\n".join(_output_checks(s, 'output(answer, "{name}")', "        "))
    names = ", ".join(f'"{t.name}": {_var(t.name)}' for t in s.inputs)
    return f'''def output(
    response: pb_utils.InferenceResponse, name: str
) -> np.ndarray[Any, Any] | None:
    """The output ``name`` of a response, as a numpy array."""
    tensor = pb_utils.get_output_tensor_by_name(response, name)
    return None if tensor is None else tensor.as_numpy()


def test_{_var(s.name)}_is_served(triton_server: ServeRepository) -> None:
    served = triton_server(REPOSITORY, models=["{s.name}"])
    assert served.client.is_model_ready("{s.name}")


def test_{_var(s.name)}_streams_its_responses() -> None:
    """execute() on a request built as the server builds it, without a server."""
    from tritonhttp.testing import server_request

    path = Path(__file__).parent / REPOSITORY / "{s.name}" / "1" / "model.py"
    spec = importlib.util.spec_from_file_location("model_under_test", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model = module.TritonPythonModel()
    config = {{"model_transaction_policy": {{"decoupled": True}}}}
    model.initialize({{"model_config": json.dumps(config)}})
    _, arrays = make_inputs()
{unpack}    request, sink = server_request({{{names}}}, decoupled=True)
    assert model.execute([request]) is None
    assert sink.finished and len(sink.responses) == module.RESPONSES
    for answer in sink.responses:
{checks}
'''


# ---------------------------------------------------------------------- writing


def scaffold(s: Scaffold, repository: Path, tests_dir: Path | None, force: bool) -> list[Path]:
    """Write the model's files, and its test unless ``tests_dir`` is None (refusing to
    overwrite unless ``force``); returns their paths."""
    folder = repository / s.name
    files = {
        folder / "config.pbtxt": config_text(s),
        folder / "1" / "model.py": model_text(s, _shown(folder)),
    }
    if tests_dir is not None:
        files[tests_dir / f"test_{_var(s.name)}.py"] = test_text(s)
    existing = [p for p in files if p.exists()]
    if existing and not force:
        raise InputError(
            f"{_shown(existing[0])} already exists (use --force to overwrite "
            f"{', '.join(_shown(p) for p in existing)})"
        )
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return list(files)


def _shown(path: Path) -> str:
    """``path`` relative to the current folder when it is below it, else absolute."""
    try:
        relative = os.path.relpath(path)
    except ValueError:  # another drive (Windows)
        return str(path)
    return str(path) if relative.startswith("..") else relative


def build_scaffolds(
    name: str,
    repository: Path,
    inputs: tuple[str, ...],
    outputs: tuple[str, ...],
    max_batch_size: int,
    decoupled: bool,
    bls: bool,
    calls: str | None,
    tests_dir: Path | None,
    force: bool,
) -> list[Path]:
    """What ``model new`` does with its options: check them, write the files (for
    ``bls``, also the called model when it does not exist); the paths written."""
    if not _NAME.match(name) or name in (".", ".."):
        raise InputError(f"{name!r} is not a valid model name (letters, digits, _ . -)")
    if decoupled and bls:
        raise InputError("--decoupled and --bls are different templates: choose one")
    if calls is not None and not bls:
        raise InputError("--calls needs --bls")
    in_specs = tuple(parse_tensor(t, "--input") for t in inputs) or (
        TensorSpec("INPUT0", "FP32", (4,)),
    )
    first = in_specs[0]
    out_specs = tuple(parse_tensor(t, "--output") for t in outputs) or (
        TensorSpec("OUTPUT0", first.datatype, first.dims),
    )
    for what, specs in (("input", in_specs), ("output", out_specs)):
        names = [t.name for t in specs]
        duplicate = next((n for n in names if names.count(n) > 1), None)
        if duplicate:
            raise InputError(f"{what} {duplicate!r} is declared twice")
    tests = tests_dir
    if tests is None:  # beside the repository, unless that is above the current folder
        inside = Path.cwd().resolve().is_relative_to(repository.resolve())
        tests = Path.cwd() if inside else repository.resolve().parent
    ref = os.path.relpath(repository.resolve(), tests.resolve()).replace(os.sep, "/")
    kind = "decoupled" if decoupled else ("bls" if bls else "plain")
    target = (calls or f"{name}_inner") if bls else ""
    main = Scaffold(name, in_specs, out_specs, max_batch_size, kind, target, ref)
    written: list[Path] = []
    if bls and calls is None and not (repository / target).exists():
        inner = Scaffold(target, in_specs, out_specs, max_batch_size, "plain", "", ref)
        written += scaffold(inner, repository, None, force)
    elif bls and not (repository / target).is_dir():
        raise InputError(f"--calls {target}: no model {target!r} in {_shown(repository)}")
    return written + scaffold(main, repository, tests, force)
