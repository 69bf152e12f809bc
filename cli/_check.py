"""``model check``: load models as the server would, without serving them.

The bundled server's own code does the work: its config parsing and validation, its
Python backend (``auto_complete_config``, ``initialize``), in the isolation mode asked
for. What the server would log as a load failure is what ``check`` reports, with the
file, line and column added where it can tell them. Unless ``--no-run``, each loaded
model then answers one request of zero (or random) data of its configured shapes, and
the outputs are compared with the configuration (data types, shapes, outputs not
returned), which Triton itself does not do; in-process, the backend's ``check-outputs``
warnings add the outputs the configuration lacks (the server drops them). A decoupled
model gets its request through the generate extension's stream (inputs as flat lists);
its responses are counted, and compared with the configuration in-process only (a
stream's outputs carry no data types or shapes).
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._errors import InputError

if TYPE_CHECKING:
    import numpy as np

    from tritonhttp.server import Server

__all__ = ["ModelReport", "Problem", "check_path"]


@dataclass
class Problem:
    """One thing wrong with a model, with where it is when known."""

    kind: str  # config | load | model | output | run
    message: str
    file: str | None = None
    line: int | None = None
    column: int | None = None

    def text(self) -> str:
        where = ":".join(str(x) for x in (self.file, self.line, self.column) if x is not None)
        return f"{where}: {self.message}" if where else self.message


@dataclass
class ModelReport:
    """What ``check`` found for one model."""

    name: str
    path: str
    loaded: bool = False
    ran: bool = False
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {**asdict(self), "ok": not self.problems}


def models_at(path: Path) -> tuple[Path, list[str]]:
    """The repository and the model names that ``path`` (a model folder or a repository)
    stands for."""
    if not path.is_dir():
        raise InputError(f"{path}: no such folder (give a model folder or a repository)")
    is_model = (path / "config.pbtxt").is_file() or any(
        p.is_dir() and p.name.isdigit() for p in path.iterdir()
    )
    if is_model:
        return path.resolve().parent, [path.resolve().name]
    names = sorted(p.name for p in path.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not names:
        raise InputError(f"{path}: neither a model folder nor a repository with models")
    return path.resolve(), names


_PROTO = re.compile(r"failed to read text proto from (?P<file>.+?): (?P<line>\d+):(?P<col>\d+) : ?")


_FRAME = re.compile(r"^\s*(?P<file>.+?)\((?P<line>\d+)\): (?P<function>\S+)$", re.M)
_SYNTAX = re.compile(r"\((?P<file>[^,()]+\.py), line (?P<line>\d+)\)")


def _problem(reason: str, model_dir: Path) -> Problem:
    """A load failure as a Problem, located in config.pbtxt or model.py when possible."""
    proto = _PROTO.search(reason)
    if proto:
        rest = reason[proto.end() :].strip()
        return Problem("config", rest, _shown(proto["file"]), int(proto["line"]), int(proto["col"]))
    if "failed to read text proto" in reason:
        return Problem("config", reason, _shown(str(model_dir / "config.pbtxt")))
    version = re.match(r"version (\d+): (.*)$", reason, re.S)
    detail = version[2] if version else reason
    first = detail.split("\n\nAt:", 1)[0].strip()
    problem = Problem("load", first)
    # The Python backend's reasons end with the frames of the model's code ("At:",
    # innermost first); a SyntaxError names the file and line in its message.
    root = str(model_dir.resolve())
    for frame in _FRAME.finditer(detail.partition("\n\nAt:")[2]):
        if frame["file"].startswith(root):
            problem.kind = "model"
            problem.file, problem.line = _shown(frame["file"]), int(frame["line"])
            problem.message = f"{first} (in {frame['function']})"
            break
    syntax = _SYNTAX.search(first) if version and "SyntaxError" in first else None
    if syntax is not None and problem.file is None:
        problem.kind = "model"
        problem.file = _shown(str(model_dir / version[1] / syntax["file"]))  # type: ignore[index]
        problem.line = int(syntax["line"])
    return problem


def _shown(path: str) -> str:
    """``path`` relative to the current folder when it is below it, else absolute."""
    try:
        relative = os.path.relpath(path)
    except ValueError:  # another drive (Windows)
        return path
    return path if relative.startswith("..") else relative


def check_path(
    path: Path, *, run: bool, isolation: str, random_data: bool, also: tuple[str, ...] = ()
) -> list[ModelReport]:
    """Check the model folder (or every model of the repository) at ``path``; the models
    named in ``also`` are loaded too (not reported on)."""
    repository, names = models_at(path)
    for name in also:
        if not (repository / name).is_dir():
            raise InputError(f"--load {name}: no model {name!r} in {_shown(str(repository))}")
    return asyncio.run(_check(repository, names, also, run, isolation, random_data))


async def _check(
    repository: Path,
    names: list[str],
    also: tuple[str, ...],
    run: bool,
    isolation: str,
    random_data: bool,
) -> list[ModelReport]:
    from tritonhttp.server import Server, parse_args
    from tritonhttp.testing._load_log import collecting, load_failures
    from tritonhttp.testing._process import free_port

    argv = [
        f"--model-repository={repository}",
        "--model-control-mode=explicit",
        *(f"--load-model={n}" for n in sorted({*names, *also})),
        "--exit-on-error=false",
        "--allow-metrics=false",
        "--http-address=127.0.0.1",
        f"--http-port={free_port()}",
        f"--python-isolation={isolation}",
    ]
    if isolation == "in-process":  # (the server's own check also sees dropped outputs)
        argv.append("--backend-config=python,check-outputs=true")
    server = Server(parse_args(argv))
    reports = [ModelReport(n, str(repository / n)) for n in names]
    with collecting(logging.WARNING, quiet=True) as messages:
        try:
            await (server.start() if run else server.load_models())
            failures = load_failures(messages)
            for report in reports:
                _loaded(server, report, failures.get(report.name, []), isolation)
                if run and report.loaded:
                    await _run_once(server, report, random_data, messages)
        finally:
            await server.stop()
    return reports


def _loaded(server: Server, report: ModelReport, reasons: list[str], isolation: str) -> None:
    entry = server.repository.models.get(report.name)
    report.loaded = bool(entry and any(v.ready for v in entry.versions.values()))
    model_dir = Path(report.path)
    for reason in reasons:
        report.problems.append(_problem(reason, model_dir))
    if not report.loaded and not report.problems:
        report.problems.append(Problem("load", "the model did not load (no reason given)"))


async def _run_once(
    server: Server, report: ModelReport, random_data: bool, messages: list[str]
) -> None:
    """One inference through the server's HTTP endpoint; outputs against the config."""
    import tritonhttp.aio as aioclient
    from tritonhttp.server.core._config import wire_datatype

    mv = server.repository.get(report.name)
    cfg = mv.config
    assert cfg is not None
    batched = cfg.max_batch_size > 0
    options = server.options
    url = f"{options.http_address}:{options.http_port}"
    arrays = {}
    for spec in cfg.input:
        if not spec.optional:
            wire = wire_datatype(spec.data_type)
            shape = [1] * batched + [1 if d < 0 else int(d) for d in spec.dims]
            arrays[spec.name] = (wire, _data(wire, shape, random_data))
    async with aioclient.InferenceServerClient(url) as client:
        try:
            outputs: list[dict[str, Any]] | None = None
            if cfg.model_transaction_policy.decoupled:
                await _stream_once(client, report, arrays)
            else:
                inputs = []
                for name, (wire, array) in arrays.items():
                    tensor = aioclient.InferInput(name, list(array.shape), wire)
                    inputs.append(tensor.set_data_from_numpy(array))
                result = await client.infer(report.name, inputs)
                outputs = result.get_response().get("outputs", [])
        except aioclient.InferenceServerException as e:
            report.problems.append(Problem("run", f"inference failed: {e.message()}"))
            return
    report.ran = True
    found = _logged_output_problems(report.name, messages)
    if outputs is not None:
        found += output_problems(cfg, outputs, batched)
    seen: set[str] = set()
    for problem in found:
        if problem.message not in seen:
            seen.add(problem.message)
            report.problems.append(problem)


async def _stream_once(
    client: Any, report: ModelReport, arrays: dict[str, tuple[str, np.ndarray[Any, Any]]]
) -> None:
    """A decoupled model's stream for one request (the generate extension, inputs as
    flat lists); its outputs arrive without data types and shapes, so only the server's
    own check (in-process) compares them. Notes how many responses came."""
    values = {
        name: [x.decode() if isinstance(x, bytes) else x for x in array.reshape(-1).tolist()]
        for name, (_, array) in arrays.items()
    }
    count = 0
    async for _ in client.generate_stream(report.name, values):
        count += 1
    report.notes.append(f"decoupled: {count} response{'' if count == 1 else 's'}")


def _data(wire: str, shape: list[int], random_data: bool) -> np.ndarray[Any, Any]:
    import numpy as np

    from tritonhttp.utils import triton_to_np_dtype

    count = int(np.prod(shape, dtype=np.int64))
    if wire == "BYTES":
        return np.array([b"a" if random_data else b""] * count, dtype=np.object_).reshape(shape)
    dtype = triton_to_np_dtype(wire)
    if not random_data:
        return np.zeros(shape, dtype=dtype)
    rng = np.random.default_rng(0)
    if wire == "BOOL":
        return rng.integers(0, 2, size=shape).astype(bool)
    return (rng.random(shape) * 10).astype(dtype)


def output_problems(cfg: Any, outputs: list[dict[str, Any]], batched: bool) -> list[Problem]:
    """Where the outputs of an answer disagree with the model's configuration (the
    server's own comparison), and the configured outputs the answer lacks."""
    from tritonhttp.server.backends.python._output_check import disagreements
    from tritonhttp.server.core._config import wire_datatype

    declared = [(o.name, wire_datatype(o.data_type), list(o.dims)) for o in cfg.output]
    produced = [
        (str(o.get("name")), str(o.get("datatype")), list(o.get("shape", []))) for o in outputs
    ]
    problems = [Problem("output", text) for text in disagreements(declared, batched, produced)]
    returned = {name for name, _, _ in produced}
    for name, _, _ in declared:
        if name not in returned:
            problems.append(Problem("output", f"output '{name}' was not returned"))
    return problems


def _logged_output_problems(name: str, messages: list[str]) -> list[Problem]:
    """The server's check-outputs warnings about model ``name`` (in-process instances:
    they also see outputs the server drops)."""
    head = re.compile(rf"^model '{re.escape(name)}' version \d+: (?P<text>.*)$", re.S)
    return [Problem("output", m["text"]) for m in map(head.match, messages) if m is not None]
