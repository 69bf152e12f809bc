"""Triton's trace file, differentially: the same traffic to real Triton 2.51 and to our
server, each writing its trace file; the traces are compared by structure (models,
versions, request ids, parents, which timestamps and tensors, their order), not by value.

Traffic avoids requests refused at admission: real Triton 2.51 never releases the trace
of such a request, and then writes no trace file at all (ours writes it).
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from _real import skip_without_real_triton

from tritonhttp.server import _launch
from tritonhttp.testing import _real_triton as rt

pytestmark = pytest.mark.real_triton

#: timestamps that happen in this order on both servers, whichever are present
CHAIN = [
    "HTTP_RECV_START", "HTTP_RECV_END", "REQUEST_START", "QUEUE_START", "COMPUTE_START",
    "COMPUTE_INPUT_END", "COMPUTE_OUTPUT_START", "COMPUTE_END", "REQUEST_END",
]  # fmt: skip
SEND = ["COMPUTE_OUTPUT_START", "INFER_RESPONSE_COMPLETE", "HTTP_SEND_START", "HTTP_SEND_END"]


def _post(url: str, path: str, doc: dict[str, Any]) -> dict[str, Any]:
    req = urllib.request.Request(
        f"http://{url}{path}", json.dumps(doc).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=60) as r:
        out: dict[str, Any] = json.loads(r.read())
    return out


def _add_sub(url: str, model: str = "add_sub", rid: str = "", batch: int = 0) -> None:
    shape = [4] if not batch else [batch, 4]
    values = [0.5, 1e-7, 3.25e10, -1 / 3] * max(batch, 1)
    doc: dict[str, Any] = {
        "inputs": [
            {"name": n, "datatype": "FP32", "shape": shape, "data": values}
            for n in ("INPUT0", "INPUT1")
        ]
    }
    if rid:
        doc["id"] = rid
    _post(url, f"/v2/models/{model}/infer", doc)


def _bls(url: str, mode: int) -> str:
    doc = {"inputs": [{"name": "MODE", "datatype": "INT32", "shape": [1], "data": [mode]}]}
    out = _post(url, "/v2/models/bls_traced/infer", doc)
    return str(out["outputs"][0]["data"][0])


def traffic(url: str) -> list[str]:
    """Requests in a fixed order: plain, BLS with and without the caller's trace, two
    traced BLS children, a batch to a dynamic batcher. The models' trace contexts."""
    _add_sub(url, rid="a")
    contexts = [_bls(url, 0), _bls(url, 1), _bls(url, 2)]
    _add_sub(url, "dyn_batch", batch=2)
    _add_sub(url, rid="b")
    return contexts


Starter = Callable[..., Any]


def _run(start: Starter, repo: Path, trace_file: Path, args: tuple[str, ...],
         drive: Callable[[str], Any]) -> tuple[Any, dict[str, list[Any]]]:  # fmt: skip
    server = start(repo, f"--trace-config=triton,file={trace_file}", *args)
    try:
        result = drive(server.url)
    finally:
        server.stop()
    files = {}
    for path in sorted(trace_file.parent.iterdir()):
        if path.name.startswith(trace_file.name):
            files[path.name[len(trace_file.name) :] or "-"] = json.loads(path.read_text())
    return result, files


def _groups(objects: list[dict[str, Any]]) -> Iterator[tuple[int, list[dict[str, Any]]]]:
    """The file's objects by trace id, in file order of first appearance."""
    by_id: dict[int, list[dict[str, Any]]] = {}
    for obj in objects:
        by_id.setdefault(obj["id"], []).append(obj)
    yield from by_id.items()


def structure(objects: list[dict[str, Any]]) -> list[Any]:
    """What must agree between the servers: per trace (in the order of their model
    info), its model, version, request id, its parent's position, the names of its
    timestamps (sorted), its tensors in order, and where its model info sits."""
    traces = list(_groups(objects))
    position = {tid: i for i, (tid, _) in enumerate(traces)}
    out: list[Any] = []
    for _tid, objs in traces:
        info = next((o for o in objs if "model_name" in o), {})
        names = [o["timestamps"][0]["name"] for o in objs if "timestamps" in o]
        tensors = [(o["activity"], o["tensor"]) for o in objs if "activity" in o]
        kinds = [
            "info" if "model_name" in o else o.get("activity") or o["timestamps"][0]["name"]
            for o in objs
        ]
        info_at = kinds.index("info") if "info" in kinds else -1
        out.append({
            "model": (info.get("model_name"), info.get("model_version"), info.get("request_id")),
            "parent": position.get(info["parent_id"]) if "parent_id" in info else None,
            "timestamps": sorted(names),
            "tensors": tensors,
            "info_before": kinds[info_at + 1] if info_at >= 0 else None,
        })  # fmt: skip
    return out


def same_structure(ours: list[dict[str, Any]], real: list[dict[str, Any]]) -> None:
    """Assert both files have the same structure, naming the first trace that differs."""
    a, b = structure(ours), structure(real)
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        assert x == y, f"trace #{i} differs:\nours {x}\nreal {y}"
    assert len(a) == len(b)


def check_order(objects: list[dict[str, Any]]) -> list[str]:
    """Timestamps out of the order both servers keep; children written before parents."""
    problems = []
    seen: set[int] = set()
    for tid, objs in _groups(objects):
        ns = {
            o["timestamps"][0]["name"]: o["timestamps"][0]["ns"] for o in objs if "timestamps" in o
        }
        for chain in (CHAIN, SEND):
            present = [ns[n] for n in chain if n in ns]
            if present != sorted(present):
                problems.append(f"trace {tid}: {chain} out of order: {ns}")
        info = next((o for o in objs if "model_name" in o), {})
        if info.get("parent_id") in seen:
            problems.append(f"trace {tid}: written after its parent")
        seen.add(tid)
    return problems


def _pair(
    model_repo: Any,
    tmp_path: Path,
    *args: str,
    drive: Callable[[str], Any] = traffic,
    ours_only: tuple[str, ...] = (),
) -> Any:
    skip_without_real_triton(rt.platform_problem())
    rt.ensure_installed()
    repo = model_repo("trace_models")
    (tmp_path / "real").mkdir()
    (tmp_path / "ours").mkdir()
    real = _run(rt.start, repo, tmp_path / "real" / "trace.json", args, drive)
    ours = _run(_launch.start, repo, tmp_path / "ours" / "trace.json", args + ours_only, drive)
    return real, ours


def test_timestamps_and_tensors(model_repo: Any, tmp_path: Path) -> None:
    args = ("--trace-config=level=TIMESTAMPS", "--trace-config=level=TENSORS",
            "--trace-config=rate=1")  # fmt: skip
    (real_ctx, real), (ours_ctx, ours) = _pair(model_repo, tmp_path, *args)
    assert list(ours) == list(real) == ["-"]
    assert ours_ctx == real_ctx == ["null"] * 3  # (no context in Triton's mode)
    same_structure(ours["-"], real["-"])
    assert check_order(real["-"]) == []
    assert check_order(ours["-"]) == []
    # what is checked is there: 6 requests from clients, 3 traced BLS children
    assert sum(1 for o in ours["-"] if "parent_id" in o) == 3
    assert sum(1 for o in ours["-"] if "model_name" in o) == 9


def test_in_process_isolation(model_repo: Any, tmp_path: Path) -> None:
    """Models run inside our server: the same traces (BLS children through the in-process
    runtime)."""
    args = ("--trace-config=level=TIMESTAMPS", "--trace-config=rate=1")
    (_, real), (_, ours) = _pair(
        model_repo, tmp_path, *args, ours_only=("--python-isolation=in-process",)
    )
    same_structure(ours["-"], real["-"])
    assert check_order(ours["-"]) == []
    assert sum(1 for o in ours["-"] if "parent_id" in o) == 3


def test_tensors_only(model_repo: Any, tmp_path: Path) -> None:
    args = ("--trace-config=level=TENSORS", "--trace-config=rate=1")
    (_, real), (_, ours) = _pair(model_repo, tmp_path, *args)
    same_structure(ours["-"], real["-"])
    assert not any("timestamps" in o or "model_name" in o for o in ours["-"])
    assert any(o.get("activity") == "TENSOR_BACKEND_OUTPUT" for o in ours["-"])


def test_log_frequency_and_count_schedule(model_repo: Any, tmp_path: Path) -> None:
    """Every 2 traces to FILE.<n>; with a count, what was collected when it runs out."""
    args = ("--trace-config=level=TIMESTAMPS", "--trace-config=rate=2",
            "--trace-config=triton,log-frequency=2", "--trace-config=count=3")  # fmt: skip
    (_, real), (_, ours) = _pair(model_repo, tmp_path, *args)
    assert list(ours) == list(real)
    assert len(real) >= 2
    for name in real:
        same_structure(ours[name], real[name])


def _model_settings(url: str) -> list[Any]:
    """Trace add_sub alone (every request), through the trace API, then send traffic."""
    body = {"trace_level": ["TIMESTAMPS"], "trace_rate": "1"}
    views = [_post(url, "/v2/models/add_sub/trace/setting", body)]
    traffic(url)
    _post(url, "/v2/models/add_sub/trace/setting", {"trace_count": "1"})
    _add_sub(url, rid="c")
    _add_sub(url, rid="d")
    return views


def test_per_model_settings(model_repo: Any, tmp_path: Path) -> None:
    (real_views, real), (ours_views, ours) = _pair(
        model_repo, tmp_path, "--trace-config=rate=1", drive=_model_settings
    )
    for view in (*ours_views, *real_views):
        view.pop("trace_file")
    assert ours_views == real_views
    assert list(ours) == list(real)
    for name in real:
        same_structure(ours[name], real[name])
    models = {o["model_name"] for objs in ours.values() for o in objs if "model_name" in o}
    assert models == {"add_sub"}


def _ensemble_traffic(url: str) -> None:
    doc = {"id": "e1", "inputs": [{"name": "IN", "datatype": "FP32", "shape": [1, 4],
                                   "data": [1.0, 2.0, 3.0, 4.0]}]}  # fmt: skip
    _post(url, "/v2/models/ens/infer", doc)
    doc["id"] = ""
    _post(url, "/v2/models/ens/infer", doc)


def test_ensemble_steps_are_children(model_repo: Any, tmp_path: Path) -> None:
    skip_without_real_triton(rt.platform_problem())
    rt.ensure_installed()
    repo = model_repo("ensemble_basic")
    args = ("--model-control-mode=explicit", "--load-model=ens",
            "--trace-config=level=TIMESTAMPS", "--trace-config=rate=1")  # fmt: skip
    (tmp_path / "real").mkdir()
    (tmp_path / "ours").mkdir()
    _, real = _run(rt.start, repo, tmp_path / "real" / "trace.json", args, _ensemble_traffic)
    _, ours = _run(_launch.start, repo, tmp_path / "ours" / "trace.json", args, _ensemble_traffic)
    same_structure(ours["-"], real["-"])
    assert check_order(ours["-"]) == []
    steps = [o for o in ours["-"] if "parent_id" in o]
    assert [(o["model_name"], o.get("request_id")) for o in steps] == [
        ("post", "e1"), ("pre", "e1"), ("post", None), ("pre", None)
    ]  # fmt: skip


def _generate_traffic(url: str) -> None:
    doc = {"id": "g1", "INPUT0": [1.0, 2.0, 3.0, 4.0], "INPUT1": [1.0, 1.0, 1.0, 1.0]}
    _post(url, "/v2/models/add_sub/generate", doc)


def test_generate_requests(model_repo: Any, tmp_path: Path) -> None:
    """/generate is traced too (Triton writes 0 for its HTTP_SEND timestamps; ours are
    the moments the answer was sent)."""
    args = ("--trace-config=level=TIMESTAMPS", "--trace-config=rate=1")
    (_, real), (_, ours) = _pair(model_repo, tmp_path, *args, drive=_generate_traffic)
    same_structure(ours["-"], real["-"])
    assert check_order(ours["-"]) == []
    assert structure(ours["-"])[0]["model"] == ("add_sub", 1, "g1")
