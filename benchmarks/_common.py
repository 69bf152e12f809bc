"""Shared pieces of the benchmarks: a real Triton to talk to, the raw floor, and a raw
binary-data round trip through an identity model.

The *floor* of a scenario is the same request sent pre-built over a plain socket, with
the answer read into memory and not decoded: what the server and the kernel cost
alone. No client can be faster, so ``reference time / floor time`` is the largest
ratio any client could reach against tritonclient for that scenario.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import re
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httptools
import numpy as np

REPO = Path(__file__).resolve().parent.parent / "tests" / "models"
#: the add_sub inputs the client benchmarks build their requests from
ADD_A = np.arange(4, dtype=np.float32)
ADD_B = np.ones(4, dtype=np.float32)


async def aio_add_sub_once(m: Any, client: Any) -> None:
    """One add_sub request through an asyncio client of module ``m`` (``tritonhttp.aio``
    or ``tritonclient.http.aio``): build the inputs, infer, read both outputs."""
    inputs = [
        m.InferInput("INPUT0", [4], "FP32").set_data_from_numpy(ADD_A),
        m.InferInput("INPUT1", [4], "FP32").set_data_from_numpy(ADD_B),
    ]
    result = await client.infer("add_sub", inputs)
    result.as_numpy("OUTPUT0")
    result.as_numpy("OUTPUT1")


#: the add_sub JSON request every server benchmark sends (compact, as wrk posts it)
ADD_BODY = json.dumps({"inputs": [
    {"name": "INPUT0", "datatype": "FP32", "shape": [4], "data": [1, 2, 3, 4]},
    {"name": "INPUT1", "datatype": "FP32", "shape": [4], "data": [1, 1, 1, 1]},
]}, separators=(",", ":"))  # fmt: skip


@contextlib.contextmanager
def real_triton(url: str | None) -> Iterator[str]:
    """``url`` if given, else a real tritonserver started on ``tests/models``."""
    if url:
        yield url
        return
    from tritonhttp.testing import _real_triton as rt

    with rt.running(REPO) as server:
        yield server.url


class _Done:
    def __init__(self) -> None:
        self.done = False
        self.status = 0

    def on_message_complete(self) -> None:
        self.done = True


def raw_round_trips(
    url: str, path: str, headers: dict[str, str], body: Sequence[Any], n: int
) -> tuple[float, float]:
    """(mean, best) seconds per request of ``n`` pre-built POSTs on one keep-alive socket."""
    host, port = url.rsplit(":", 1)
    size = sum(memoryview(b).nbytes for b in body)
    head = f"POST {path} HTTP/1.1\r\nHost: {url}\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    head += f"Content-Length: {size}\r\n\r\n"
    parts = [head.encode(), *body]
    scratch = bytearray(1 << 20)
    view = memoryview(scratch)
    best = float("inf")
    total = 0.0
    with socket.create_connection((host, int(port))) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for _ in range(n):
            start = time.perf_counter()
            for part in parts:
                sock.sendall(part)
            state = _Done()
            parser = httptools.HttpResponseParser(state)
            while not state.done:
                got = sock.recv_into(scratch)
                if not got:
                    raise ConnectionError("server closed the connection")
                parser.feed_data(view[:got])
            elapsed = time.perf_counter() - start
            best = min(best, elapsed)
            total += elapsed
            if parser.get_status_code() != 200:
                raise RuntimeError(f"raw request failed with {parser.get_status_code()}")
    return total / n, best


def _recv_exact(sock: socket.socket, view: memoryview) -> None:
    got = 0
    while got < len(view):
        n = sock.recv_into(view[got:])
        if not n:
            raise ConnectionError("connection closed")
        got += n


def binary_round_trip(
    url: str, payload: np.ndarray[Any, Any], model: str = "identity_all"
) -> float:
    """Seconds for one binary-data identity request of ``payload`` (FP32) over a raw socket.

    The request goes to ``model``'s ``IN_FP32`` (JSON header plus the tensor's bytes,
    written without a copy) on a new connection; ``OUT_FP32`` is asked for as binary data
    and received into one buffer. The answer is checked (status, size, first bytes)."""
    host, port = url.rsplit(":", 1)
    blob = memoryview(payload).cast("B")
    head = json.dumps({
        "inputs": [{"name": "IN_FP32", "datatype": "FP32", "shape": [payload.size],
                    "parameters": {"binary_data_size": blob.nbytes}}],
        "outputs": [{"name": "OUT_FP32", "parameters": {"binary_data": True}}],
    }).encode()  # fmt: skip
    request = (
        f"POST /v2/models/{model}/infer HTTP/1.1\r\nHost: {url}\r\n"
        f"Inference-Header-Content-Length: {len(head)}\r\n"
        f"Content-Length: {len(head) + blob.nbytes}\r\n\r\n"
    ).encode() + head
    with socket.create_connection((host, int(port))) as sock:
        t0 = time.perf_counter()
        sock.sendall(request)
        sock.sendall(blob)
        buf = b""
        while b"\r\n\r\n" not in buf:
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError("no response")
            buf += chunk
        header, _, rest = buf.partition(b"\r\n\r\n")
        status = header.split(b" ", 2)[1]
        length = int(re.search(rb"(?im)^content-length:\s*(\d+)", header).group(1))  # type: ignore[union-attr]
        body = np.empty(length, dtype=np.uint8).data  # (a bytearray would be zero-filled)
        body[: len(rest)] = rest
        _recv_exact(sock, body[len(rest) :])
        elapsed = time.perf_counter() - t0
    size = f"{blob.nbytes / 2**20:g} MiB"
    if status != b"200":
        raise RuntimeError(f"{size} round trip failed on {url}: {bytes(body[:300])!r}")
    ihcl = int(re.search(rb"(?i)inference-header-content-length:\s*(\d+)", header).group(1))  # type: ignore[union-attr]
    if bytes(body[ihcl : ihcl + 64]) != blob[:64].tobytes() or len(body) - ihcl != blob.nbytes:
        raise RuntimeError(f"{size} round trip returned different bytes")
    return elapsed


def instances_always_inline() -> None:
    """In this process, model instances execute inline on the event loop from their first
    call (a loaded server under steady load does so; a profiler or callgrind makes every
    call slow, which would send them to their threads)."""
    from tritonhttp.server.backends.python import _runner

    plain_init = _runner.InstanceRunner.__init__

    def always_inline(self: _runner.InstanceRunner, name: str, inline: str = "auto") -> None:
        plain_init(self, name, "always")

    _runner.InstanceRunner.__init__ = always_inline  # type: ignore[method-assign]


def process_tree(root: int) -> list[tuple[int, int]]:
    """(pid, depth below ``root``) of ``root`` and all its descendants, from the parent
    ids in ``/proc/*/stat`` (a server and its worker processes, or real Triton and its
    Python stubs)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [(root, 0)]
    while todo:
        pid, depth = todo.pop()
        out.append((pid, depth))
        todo.extend((child, depth + 1) for child in children.get(pid, []))
    return out


def cpu_seconds(pid: int) -> float:
    """User + system seconds ``pid`` has used (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine() -> str:
    """One line naming the machine a run was measured on (ratios differ between kinds).

    CPU model, CPUs this process may use, kernel release, and whether it is a virtual
    machine (``/proc/cpuinfo``'s ``hypervisor`` flag)."""
    model, virtual = platform.processor() or platform.machine(), False
    with (
        contextlib.suppress(OSError),
        open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f,
    ):
        for text in f:
            key, _, value = text.partition(":")
            if key.strip() == "model name" and value.strip():
                model = value.strip()
            elif key.strip() == "flags":
                virtual = "hypervisor" in value.split()
                break
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (
        f"machine: {model}, {cpus} CPUs, {platform.system()} {platform.release()}"
        f"{', virtual machine' if virtual else ''}\n{interpreter()}"
    )


class _Point:
    __slots__ = ("name", "x")

    def __init__(self, x: int, name: str) -> None:
        self.x = x
        self.name = name


def _interpreter_loop(n: int) -> int:
    total, seen = 0, {}
    for i in range(n):
        p = _Point(i, str(i))
        seen[p.name] = p
        total += len(seen) if i % 3 else p.x
        if len(seen) > 100:
            seen.clear()
    return total


def interpreter() -> str:
    """One line naming the Python that runs the benchmark and the servers it starts, with
    the time it takes for a fixed pure-Python loop (best of 5).

    The bundled server spends most of its CPU in the interpreter, so the interpreter's
    build matters as much as the machine: on the 2-core machine the same CPython 3.11
    took 162 ms built by pyenv's defaults (no PGO or LTO, a shared libpython) and 111 ms
    as Debian builds it (PGO and LTO). See docs/performance.md."""
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        _interpreter_loop(300_000)
        best = min(best, time.perf_counter() - t)
    return (
        f"python: {platform.python_implementation()} {platform.python_version()}"
        f" ({os.path.realpath(sys.executable)}), a fixed pure-Python loop: {best * 1e3:.0f} ms"
    )


def describe_interpreter(python: str) -> str:
    """:func:`interpreter`'s line for another Python (one with this directory's imports)."""
    here = str(Path(__file__).resolve().parent)
    code = (
        f"import sys; sys.path.insert(0, {here!r}); from _common import interpreter; "
        "print(interpreter())"
    )
    return subprocess.run(
        [python, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()


def line(name: str, ours: float, reference: float, unit: str, higher_is_better: bool = True) -> str:
    ratio = ours / reference if higher_is_better else reference / ours
    return f"{name}: ours {ours:,.2f} {unit}, reference {reference:,.2f} {unit}, ratio {ratio:.2f}"


def wrk(url: str, path: str, connections: int, seconds: float, post: str | None = None) -> float:
    """Requests per second wrk reaches on ``path`` (a JSON POST of ``post``, else GET),
    one thread, ``connections`` keep-alive connections; any non-2xx answer is an error."""
    args = ["wrk", "-t1", f"-c{connections}", f"-d{max(1, round(seconds))}s"]
    with tempfile.TemporaryDirectory() as tmp:
        if post is not None:
            script = Path(tmp) / "post.lua"
            script.write_text(
                f'wrk.method = "POST"\nwrk.body = {json.dumps(post)}\n'
                'wrk.headers["Content-Type"] = "application/json"\n'
            )
            args += ["-s", str(script)]
        out = subprocess.run([*args, f"http://{url}{path}"], capture_output=True, text=True).stdout
    m = re.search(r"Requests/sec:\s+([\d.]+)", out)
    if not m or "Non-2xx" in out:
        raise RuntimeError(f"wrk failed against {url}{path}:\n{out}")
    return float(m.group(1))
