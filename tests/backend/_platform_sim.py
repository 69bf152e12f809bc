"""Run the bundled server, the client and the CLI as macOS or Windows would, on Linux.

``python _platform_sim.py <model repository> <darwin|win32>``: makes the server's platform
facts (``tritonhttp.server.support._platform.system()``) say that platform; for
``win32`` first takes away what Windows lacks (``fcntl``, ``_posixshmem``,
``resource``, ``uvloop``; ``socket.AF_UNIX``, ``send_fds``, ``MSG_DONTWAIT``;
``os.fork``, ``os.sched_yield``; ``select.poll``; ``signal.SIGKILL``...). Then imports
the client, the CLI, the pytest plugin and the server, starts the server with its
default options (worker processes asked for), asks ``add_sub`` for an inference with the
client and prints one JSON line: the answer, the server's log lines and the pids of the
worker processes that ran meanwhile (children of this process running
``_worker_boot.py``).
"""

from __future__ import annotations

import asyncio
import importlib.util
import io
import json
import logging
import os
import select
import signal
import socket
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLATFORM = sys.argv[2]
# the event loop's self-pipe needs a socket pair: made before AF_UNIX goes
loop = asyncio.new_event_loop()

if PLATFORM == "win32":
    for name in ("fcntl", "_posixshmem", "resource", "uvloop", "termios", "pwd", "grp"):
        sys.modules[name] = None  # type: ignore[assignment]  # (importing raises ImportError)
    for module, names in (
        (socket, ("AF_UNIX", "send_fds", "recv_fds", "MSG_DONTWAIT", "MSG_NOSIGNAL",
                  "SOCK_SEQPACKET")),
        (os, ("fork", "sched_yield", "forkpty", "killpg", "setsid")),
        (select, ("poll", "epoll")),
        (signal, ("SIGKILL", "SIGCHLD", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2")),
    ):  # fmt: skip
        for attr in names:
            if hasattr(module, attr):
                delattr(module, attr)


def _platform_facts() -> None:
    """Load the server's platform module (standard library only) ahead of its package,
    saying ``PLATFORM``: every module of the server then finds it so."""
    name = "tritonhttp.server.support._platform"
    path = os.path.join(ROOT, "tritonhttp", "server", "support", "_platform.py")
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.system = lambda: PLATFORM  # type: ignore[attr-defined]
    sys.modules[name] = module


_platform_facts()

import numpy as np  # noqa: E402
import tritonhttp_cli.main  # noqa: E402, F401

import tritonhttp  # noqa: E402
import tritonhttp.testing.pytest_plugin  # noqa: E402
from tritonhttp.server._options import parse_args  # noqa: E402
from tritonhttp.server._server import Server  # noqa: E402


def _workers() -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
        except (OSError, ValueError, IndexError):
            continue
        if ppid == os.getpid() and b"_worker_boot.py" in cmdline:
            found.append(int(entry))
    return found


def _ask(port: int) -> list[float]:
    with tritonhttp.InferenceServerClient(f"127.0.0.1:{port}") as client:
        inputs = [tritonhttp.InferInput(n, [4], "FP32") for n in ("INPUT0", "INPUT1")]
        inputs[0].set_data_from_numpy(np.array([1, 2, 3, 4], np.float32))
        inputs[1].set_data_from_numpy(np.array([4, 3, 2, 1], np.float32))
        result = client.infer("add_sub", inputs)
        return [float(x) for x in result.as_numpy("OUTPUT0")]


async def scenario(repo: str) -> dict[str, object]:
    log = io.StringIO()
    logger = logging.getLogger("tritonhttp.server")
    logger.addHandler(logging.StreamHandler(log))
    logger.setLevel(logging.INFO)
    server = Server(parse_args(["--model-repository", repo, "--http-port", "0",
                                "--allow-metrics", "false"]))  # fmt: skip
    await server.start()
    try:
        port = server._listeners[0].ports[0]
        answer = await asyncio.to_thread(_ask, port)
        workers = _workers()
    finally:
        await server.stop()
    return {"answer": answer, "log": log.getvalue().splitlines(), "workers": workers}


if __name__ == "__main__":
    print(json.dumps(loop.run_until_complete(scenario(sys.argv[1]))))
