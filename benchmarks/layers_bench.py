"""What an in-process add_sub request costs in each layer of the server, and how much
slower the same code runs after its CPU has slept.

    python benchmarks/layers_bench.py [--requests 20000]

Two tables, both from a hot loop in this process (no socket, no HTTP server), the
model's instance executing inline on the event loop as it does under load:

* **layers**: each row times the layer above plus one more, from the model's own
  ``execute`` up to ``ModelVersion.infer``; then parsing, admission, encoding and the
  whole application (best of 5 runs of ``--requests``, µs per request);
* **after a gap**: the whole application's time per request (median) when something
  runs before each request: nothing, the polling the server does between requests,
  another process on the same CPU (touching no memory, or 1 MiB of it), a 1 ms sleep.
  Code that finds its caches taken by another process, or its vCPU back from a halt,
  runs much slower than in a hot loop.

It measures our server only (there is no reference to compare with); see
``backend_bench.py`` for the ratios against real Triton, and ``docs/performance.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import itertools
import os
import select
import socket
import statistics
import sys
import threading
import time
from collections.abc import Callable, Coroutine, MutableMapping
from pathlib import Path
from typing import Any

try:
    from _common import ADD_BODY, instances_always_inline, machine
except ImportError:  # run as a module
    from benchmarks._common import ADD_BODY, instances_always_inline, machine

MODELS = Path(__file__).resolve().parent.parent / "tests" / "models"
PATH = "/v2/models/add_sub/infer"
BODY = ADD_BODY.encode()


def _best_us(fn: Callable[[], object], n: int) -> float:
    for _ in range(min(n, 2000)):
        fn()
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t) / n * 1e6)
    return best


def _now(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run a coroutine that completes without waiting (an idle inline instance)."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    coro.close()
    raise RuntimeError("the request had to wait: not an idle inline instance")


def _model_module() -> Any:
    spec = importlib.util.spec_from_file_location("add_sub_model", MODELS / "add_sub/1/model.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def _run(n: int) -> None:
    from tritonhttp.server._options import parse_args
    from tritonhttp.server._server import Server
    from tritonhttp.server.backends.python._convert import pb_request, pb_tensor
    from tritonhttp.server.backends.python._inprocess import _Link
    from tritonhttp.server.core._types import ExecutionTimes
    from tritonhttp.server.front._infer import encode_response, parse_infer_request

    server = Server(
        parse_args(
            ["--model-repository", str(MODELS), "--log-info=false",
             "--python-isolation=in-process", "--model-control-mode=explicit",
             "--load-model=add_sub", "--allow-metrics=false"]
        )
    )  # fmt: skip
    await server.load_models()
    app = server.http
    core = app.core
    model = core.repository.get("add_sub", "")
    inst = model.instances[0]
    scheduler = model.scheduler
    assert scheduler is not None
    body = bytearray(BODY)

    def parsed() -> Any:
        return parse_infer_request(body, len(body), model, core.shm)

    pool = itertools.cycle([parsed().request for _ in range(min(n, 50_000))])
    loop = asyncio.get_running_loop()
    ident = threading.get_ident()
    wanted = set(model.output_names)
    user_model = _model_module().TritonPythonModel()

    def pb_requests() -> list[Any]:
        req = next(pool)
        link = _Link(req, False, wanted, loop, ident)
        inputs = [pb_tensor(t.name, t.datatype, t.array) for t in req.inputs.values()]
        return [pb_request(req, inputs, wanted, link)]

    built = pb_requests()
    one = parsed()
    response = _now(model.infer(next(pool)))
    rows: list[tuple[str, Callable[[], object]]] = [
        ("the model's own execute", lambda: user_model.execute(built)),
        ("+ its pb_utils request, tensors and link", lambda: user_model.execute(pb_requests())),
        ("+ ModelHost.execute (return checked, sent)", lambda: inst.host.execute(pb_requests())),
        ("+ the instance (InProcessInstance.execute)",
         lambda: _now(inst.execute([next(pool)], ExecutionTimes()))),
        ("+ the execution counted (statistics)", lambda: _now(model._execute(inst, [next(pool)]))),
        ("+ the scheduler", lambda: _now(scheduler.infer(next(pool)))),
        ("+ ModelVersion.infer", lambda: _now(model.infer(next(pool)))),
        ("parsing the body", parsed),
        ("admission", lambda: model.admit(next(pool))),
        ("encoding the answer", lambda: encode_response(one, response, model)),
    ]  # fmt: skip

    scope: dict[str, Any] = {
        "type": "http", "http_version": "1.1", "method": "POST", "path": PATH,
        "raw_path": PATH.encode(), "query_string": b"", "tritonhttp.on_disconnect": None,
        "tritonhttp.body_sink": None,
        "headers": [(b"host", b"localhost"), (b"content-type", b"application/json"),
                    (b"content-length", str(len(BODY)).encode())],
    }  # fmt: skip
    sent: list[MutableMapping[str, Any]] = []

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    async def receive() -> MutableMapping[str, Any]:
        return {"type": "http.request", "body": BODY, "more_body": False}

    def whole() -> None:
        sent.clear()
        _now(app(dict(scope), receive, send))

    whole()
    if sent[0].get("status") != 200:
        raise SystemExit(f"add_sub answered {sent}")
    rows.append(("the whole application (front included)", whole))

    print("layers (hot loop, best of 5, µs per request):")
    for label, fn in rows:
        print(f"  {label:44s} {_best_us(fn, n):7.1f}")

    # ---- after a gap
    cpus = os.sched_getaffinity(0)
    one_cpu = {min(cpus)}
    peers = {touch: _peer(touch, one_cpu) for touch in (0, 1 << 20)}
    poller = select.poll()
    for sock, _ in peers.values():
        poller.register(sock.fileno(), select.POLLIN)

    def polling() -> None:
        for _ in range(50):
            poller.poll(0)
            os.sched_yield()

    def ping(touch: int) -> Callable[[], None]:
        sock = peers[touch][0]

        def run() -> None:
            sock.send(b"x")
            sock.recv(64)

        return run

    gaps: list[tuple[str, Callable[[], object]]] = [
        ("nothing", lambda: None),
        ("50 x (poll(0), sched_yield): the server's polling", polling),
        ("a process on this CPU runs, touching nothing", ping(0)),
        ("a process on this CPU runs, touching 1 MiB", ping(1 << 20)),
        ("time.sleep(0.001)", lambda: time.sleep(0.001)),
    ]
    print("after a gap (median µs per request; p10):")
    try:
        for label, gap in gaps:
            if label.startswith("a process"):
                os.sched_setaffinity(0, one_cpu)
            times = []
            for _ in range(min(n, 3000)):
                gap()
                t = time.perf_counter_ns()
                whole()
                times.append(time.perf_counter_ns() - t)
            os.sched_setaffinity(0, cpus)
            times.sort()
            print(
                f"  {label:50s} {statistics.median(times) / 1000:7.1f}"
                f"  ({times[len(times) // 10] / 1000:.1f})"
            )
    finally:
        os.sched_setaffinity(0, cpus)
        for sock, _ in peers.values():
            sock.close()  # (all first: a later child holds an earlier one's socket too)
        for _, pid in peers.values():
            os.waitpid(pid, 0)


def _peer(touch: int, cpus: set[int]) -> tuple[socket.socket, int]:
    """A child process on ``cpus`` that, for each byte it receives, writes to every cache
    line of ``touch`` bytes and sends the byte back."""
    mine, theirs = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        mine.close()
        os.sched_setaffinity(0, cpus)
        junk = bytearray(touch)
        while data := theirs.recv(64):
            for i in range(0, touch, 64):
                junk[i] = (junk[i] + 1) & 255
            theirs.send(data)
        os._exit(0)
    theirs.close()
    return mine, pid


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20_000, help="requests per timed run")
    args = parser.parse_args(argv)
    print(machine())
    instances_always_inline()
    import uvloop

    uvloop.run(_run(args.requests))
    return 0


if __name__ == "__main__":
    sys.exit(main())
