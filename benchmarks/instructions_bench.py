"""Instructions per request of the server's application, counted by callgrind.

    python benchmarks/instructions_bench.py [--case add_sub|health] [--requests 2000]
    python benchmarks/instructions_bench.py --socket [--isolation process] [--case ...]

Wall-clock figures on these shared 2-core machines move by 10-30% between runs, too
much to see a 2% change; callgrind's instruction count of the same work does not (within
0.1% here, with hash randomisation and the BLAS threads pinned). This drives the ASGI
application (`HttpFrontend`) in-process with the same request over and over, with no
socket and no HTTP server, add_sub executing inline on the event loop as it does under
load, and reports the difference between two runs of different lengths divided by the
extra requests (so start-up and model loading cancel out).

``--socket`` counts the whole server process instead (``python -m tritonhttp.server``
under callgrind, the HTTP server included) while a client in another process sends the
requests one after another over a real socket; with ``--isolation process`` the model
runs in its worker process, which callgrind does not follow, so the count is the
server's side of the round trip. Polling is off on both sides (``--http-busy-wait-us=0``,
``busy-wait-us=0``), so that no spinning is counted.

It needs valgrind (`apt-get install -y valgrind`); it measures our server only, there is
no reference to compare with. Use it before and after a change to the request path.
"""

from __future__ import annotations

import argparse
import gc
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

try:
    from _common import ADD_BODY, instances_always_inline
except ImportError:  # run as a module
    from benchmarks._common import ADD_BODY, instances_always_inline

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "tests" / "models"
CASES = {
    "add_sub": ("/v2/models/add_sub/infer", "POST", ADD_BODY.encode()),
    "health": ("/v2/health/live", "GET", b""),
}
WARM_UP = 300
BASE = 500


def _drive(repo: str, case: str, requests: int) -> None:
    """(In the child, under callgrind.) Serve ``requests`` requests of ``case``."""
    import uvloop

    from tritonhttp.server._options import parse_args
    from tritonhttp.server._server import Server

    instances_always_inline()
    path, method, body = CASES[case]

    async def main() -> None:
        server = Server(
            parse_args(
                ["--model-repository", repo, "--log-info=false", "--python-isolation=in-process"]
            )
        )
        await server.load_models()
        app = server.http
        scope = {
            "type": "http",
            "http_version": "1.1",
            "method": method,
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "tritonhttp.on_disconnect": None,
            "tritonhttp.body_sink": None,
            "headers": [
                (b"host", b"localhost"),
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
        sent: list[MutableMapping[str, Any]] = []

        async def send(message: MutableMapping[str, Any]) -> None:
            sent.append(message)

        async def receive() -> MutableMapping[str, Any]:
            return {"type": "http.request", "body": body, "more_body": False}

        for _ in range(WARM_UP):
            await app(dict(scope), receive, send)
        if sent[0].get("status") != 200:
            raise SystemExit(f"{case} answered {sent[:2]}")
        gc.collect()
        gc.disable()  # (a collection at a different moment would move the count)
        for _ in range(requests):
            sent.clear()
            await app(dict(scope), receive, send)

    uvloop.run(main())


def _count(repo: str, case: str, requests: int) -> int:
    env = dict(os.environ, PYTHONHASHSEED="0", OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
           __file__, "--child", repo, "--case", case, "--requests", str(requests)]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    m = re.search(r"Collected\s*:\s*(\d+)", out.stderr)
    if out.returncode or not m:
        raise RuntimeError(f"callgrind run failed:\n{out.stdout}\n{out.stderr[-3000:]}")
    return int(m.group(1))


def _serve_child(argv: list[str]) -> None:
    """(In the child, under callgrind.) The server, its instances always inline."""
    from tritonhttp.server.__main__ import main as server_main

    instances_always_inline()
    raise SystemExit(server_main(argv))


def _one_response(sock: socket.socket) -> bytes:
    buf = b""
    while True:
        data = sock.recv(65536)
        if not data:
            raise RuntimeError(f"the server closed the connection: {buf!r}")
        buf += data
        head, sep, rest = buf.partition(b"\r\n\r\n")
        if sep:
            m = re.search(rb"(?i)content-length: *(\d+)", head)
            if m is not None and len(rest) >= int(m.group(1)):
                return head


def _count_socket(repo: str, case: str, isolation: str, requests: int) -> int:
    path, method, body = CASES[case]
    head = f"{method} {path} HTTP/1.1\r\nHost: x\r\n"
    if body:
        head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    request = (head + "\r\n").encode() + body
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = dict(os.environ, PYTHONHASHSEED="0", OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
           __file__, "--serve-child", "--model-repository", repo, "--http-port", str(port),
           "--log-info=false", f"--python-isolation={isolation}", "--http-busy-wait-us=0",
           "--backend-config", "python,busy-wait-us=0", "--allow-metrics=false"]  # fmt: skip
    server = subprocess.Popen(
        cmd, env=env, cwd=tempfile.gettempdir(), stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                sock = socket.create_connection(("127.0.0.1", port), timeout=60)
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the server did not start (valgrind missing?)") from None
                time.sleep(0.2)
        with sock:
            for i in range(requests):
                sock.sendall(request)
                answer = _one_response(sock)
                if i == 0 and b" 200 " not in answer.split(b"\r\n", 1)[0]:
                    raise SystemExit(f"{case} answered {answer!r}")
    finally:
        server.terminate()
        _, err = server.communicate(timeout=300)
    m = re.search(r"Collected\s*:\s*(\d+)", err)
    if not m:
        raise RuntimeError(f"callgrind run failed:\n{err[-3000:]}")
    return int(m.group(1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=sorted(CASES), default="add_sub")
    parser.add_argument("--requests", type=int, default=2000, help="requests counted")
    parser.add_argument("--socket", action="store_true", help="count the server process")
    parser.add_argument("--isolation", choices=["in-process", "process"], default="in-process",
                        help="with --socket: where the model runs")  # fmt: skip
    parser.add_argument("--child", metavar="REPO", help=argparse.SUPPRESS)
    if argv is None and sys.argv[1:2] == ["--serve-child"]:
        _serve_child(sys.argv[2:])
    args = parser.parse_args(argv)
    if args.child:
        _drive(args.child, args.case, args.requests)
        return 0
    if shutil.which("valgrind") is None:
        print("valgrind is not installed (apt-get install -y valgrind)")
        return 1
    with tempfile.TemporaryDirectory(prefix="tritonhttp-instr-") as tmp:
        shutil.copytree(MODELS / "add_sub", Path(tmp) / "add_sub")
        if args.socket:
            low = _count_socket(tmp, args.case, args.isolation, BASE)
            high = _count_socket(tmp, args.case, args.isolation, BASE + args.requests)
            what = f"server process over a socket, {args.isolation}"
        else:
            low = _count(tmp, args.case, BASE)
            high = _count(tmp, args.case, BASE + args.requests)
            what = "application only"
    per = (high - low) / args.requests
    print(f"{args.case}: {per:,.0f} instructions/request (callgrind, {what})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
