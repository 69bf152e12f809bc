"""The server's handle on one worker process.

:class:`WorkerProcess` spawns the worker (forked from the server's warm zygote,
:mod:`._forkserver`, where it can, else a fresh interpreter: ``python -I
_worker_boot.py``, never a fork of the server), connects its control socket to the event
loop (``add_reader``: no thread hop per request) and owns the two shared-memory arenas.
:class:`WorkerContext` is what every worker instance of one backend shares, and
:func:`run_auto_complete` runs a model's ``auto_complete_config`` in a short-lived worker.
POSIX only (Unix sockets passing descriptors, POSIX shared memory): on Windows
:meth:`WorkerProcess.start` raises ``OSError`` and models run in the server's process.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import itertools
import os
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from triton_python_backend_utils import _errors as _pb_errors

from ....utils._dtypes import BF16
from ...core._errors import Code, CoreError
from ...support import _platform
from . import _forkserver
from . import _messages as msg
from ._arena import Consumer, Producer
from ._direct import DIRECT_CONNECTIONS, DirectReply
from ._ipc import DTYPES, read_block, recv_fd, send_fd
from ._polling import ReplyPoll
from ._services import ModelServices
from ._settings import BackendSettings

__all__ = ["WorkerContext", "WorkerProcess", "run_auto_complete"]

BOOT = str(Path(__file__).with_name("_worker_boot.py"))
PB_UTILS_DIR = str(Path(_pb_errors.__file__).resolve().parent)
_SERVER_DTYPES = {**DTYPES, "BF16": BF16}


@dataclass(frozen=True)
class WorkerContext:
    """What every worker instance of one backend shares."""

    services: ModelServices
    #: how the event loop waits for answers (counts executes over all workers)
    poll: ReplyPoll
    #: the module a worker imports to write answers to clients (``_direct.ReplyCodec``);
    #: None: workers never answer clients themselves
    reply_codec: str | None = None


def _not_healthy(name: str) -> str:
    return f"Stub process '{name}' is not healthy."


class WorkerProcess:
    """One worker process and the server's end of its channel (event-loop side)."""

    def __init__(
        self,
        name: str,
        settings: BackendSettings,
        on_message: Callable[[msg.Message], None],
        on_exit: Callable[[], None],
        python: str | None = None,
        env: dict[str, str] | None = None,
        reply_codec: str | None = None,
    ) -> None:
        self.name = name
        self._settings = settings
        self._reply_codec = reply_codec
        self._on_message = on_message
        self._on_exit = on_exit
        self._python = python or settings.python
        self._env = env
        self.proc: _forkserver.WorkerHandle | None = None
        self._sock: socket.socket | None = None
        self._fd_sock: socket.socket | None = None
        self._frames = msg.FrameReader()
        self._out: collections.deque[memoryview] = collections.deque()
        self._writing = False
        self.inputs: Producer | None = None
        self.outputs = Consumer()
        #: client connections this worker holds a descriptor of (their keys)
        self.connections: set[int] = set()
        #: handles of the shared-memory descriptors sent for mapped inputs
        self.region_handles = itertools.count(1)
        self.alive = False
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> None:
        """Spawn the process and set its arenas up (messages flow from now on)."""
        loop = asyncio.get_running_loop()
        self._loop = loop
        if not _platform.workers_supported():
            raise OSError(
                f"worker processes are not supported on this platform ({_platform.system()}): "
                "models run in the server's process, and a model with EXECUTION_ENV_PATH "
                "cannot run"
            )
        ctl, ctl_child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        fds, fds_child = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            # forked from the server's warm zygote where it can, else a fresh interpreter
            self.proc = _forkserver.spawn(
                self._python, PB_UTILS_DIR, ctl_child.fileno(), fds_child.fileno(), self._env,
                self._reply_codec,
            )  # fmt: skip
            if self.proc is None:
                self.proc = subprocess.Popen(
                    [self._python, "-I", BOOT, str(ctl_child.fileno()), str(fds_child.fileno()),
                     str(os.getpid()), PB_UTILS_DIR, self._reply_codec or ""],
                    pass_fds=(ctl_child.fileno(), fds_child.fileno()),
                    stdin=subprocess.DEVNULL,
                    env=self._env,
                )  # fmt: skip
        except OSError:
            for s in (ctl, ctl_child, fds, fds_child):
                s.close()
            raise
        ctl_child.close()
        fds_child.close()
        ctl.setblocking(False)
        fds.settimeout(30)
        self._sock, self._fd_sock = ctl, fds
        self.alive = True
        loop.add_reader(ctl.fileno(), self._readable)
        cfg = self._settings
        setup = msg.Setup(
            cfg.shm_prefix, cfg.shm_default, cfg.shm_growth, cfg.busy_wait_us, cfg.slow_model_nice
        )
        self.send(setup)
        self.inputs = Producer(
            cfg.shm_prefix, cfg.shm_default, cfg.shm_growth, self._announce, self._retire
        )

    # ------------------------------------------------------------------ sending

    def _announce(self, segment_id: int, fd: int, size: int) -> None:
        if self._fd_sock is not None and self.alive:
            try:
                send_fd(self._fd_sock, fd)
            except OSError:
                return
        self.send(msg.Segment(segment_id, size))

    def send_region(self, handle: int, fd: int) -> bool:
        """Pass a client's shared-memory object to the worker (:class:`msg.RegionFd`);
        False when it cannot take it."""
        if self._fd_sock is None or not self.alive:
            return False
        try:
            send_fd(self._fd_sock, fd)
        except OSError:
            return False
        self.send(msg.RegionFd(handle))
        return True

    def _retire(self, segment_id: int) -> None:
        self.send(msg.DropSegment(segment_id))

    def hold(self, reply: DirectReply) -> bool:
        """Make sure the worker holds the reply's client connection (False: it cannot)."""
        key = reply.key
        if key in self.connections:
            return True
        if (
            self._reply_codec is None
            or len(self.connections) >= DIRECT_CONNECTIONS
            or self._fd_sock is None
            or not self.alive
        ):
            return False
        try:
            send_fd(self._fd_sock, reply.fd)
        except OSError:
            return False
        self.send(msg.Connection(key, reply.writer))  # (the writer goes once per connection)
        self.connections.add(key)
        reply.on_close(functools.partial(self._connection_closed, key))
        return True

    def _connection_closed(self, key: int) -> None:
        if key in self.connections:
            self.connections.discard(key)
            self.send(msg.DropConnection(key))

    def send(self, message: msg.Message) -> None:
        """Queue a control message (written at once when the socket takes it)."""
        self.send_frame(msg.encode(message))

    def send_frame(self, data: bytes) -> None:
        """Queue an encoded control message."""
        if not self.alive or self._sock is None:
            return
        if self._writing:
            self._out.append(memoryview(data))
            return
        try:
            n = self._sock.send(data)
        except (BlockingIOError, InterruptedError):
            n = 0
        except OSError:
            self._died()
            return
        if n < len(data):
            self._out.append(memoryview(data)[n:])
            self._writing = True
            assert self._loop is not None
            self._loop.add_writer(self._sock.fileno(), self._writable)

    def _writable(self) -> None:
        sock = self._sock
        assert sock is not None
        while self._out:
            chunk = self._out[0]
            try:
                n = sock.send(chunk)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                self._died()
                return
            if n < len(chunk):
                self._out[0] = chunk[n:]
                return
            self._out.popleft()
        self._writing = False
        assert self._loop is not None
        self._loop.remove_writer(sock.fileno())

    # ------------------------------------------------------------------ receiving

    def _readable(self) -> None:
        sock = self._sock
        if sock is None:
            return
        try:
            data = sock.recv(1 << 18)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._died()
            return
        for message in self._frames.feed(data):
            match message:
                case msg.Segment(segment_id, size):
                    assert self._fd_sock is not None
                    try:
                        self.outputs.add(segment_id, recv_fd(self._fd_sock), size)
                    except OSError:
                        self._died()
                        return
                case msg.DropSegment(segment_id):
                    self.outputs.drop(segment_id)
                case _:
                    self._on_message(message)

    def read_now(self) -> None:
        """Read what the worker sent, if anything, without waiting (a poll)."""
        self._readable()

    def read_block(self, block: Any) -> list[tuple[str, str, tuple[int, ...], Any]]:
        """The tensors of a block the worker wrote."""
        return read_block(self.outputs, block, _SERVER_DTYPES)

    # ------------------------------------------------------------------ ending

    def _died(self) -> None:
        if not self.alive:
            return
        self.alive = False
        self._close_channel()
        self._on_exit()

    def _close_channel(self) -> None:
        loop = self._loop
        sock = self._sock
        if sock is not None and loop is not None:
            with contextlib.suppress(Exception):
                loop.remove_reader(sock.fileno())
            if self._writing:
                with contextlib.suppress(Exception):
                    loop.remove_writer(sock.fileno())
        for s in (self._sock, self._fd_sock):
            if s is not None:
                s.close()
        self._sock = self._fd_sock = None
        self._out.clear()
        self._writing = False
        self.connections.clear()
        if self.inputs is not None:
            self.inputs.close()
        self.outputs.close()

    def kill(self) -> None:
        """SIGKILL the process (its requests are failed by ``on_exit``)."""
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(_platform.KILL_SIGNAL)
        self._died()

    async def reap(self, timeout: float = 10.0) -> None:
        """Wait for the process to end (killing it after ``timeout``)."""
        proc = self.proc
        if proc is None:
            return
        deadline = time.monotonic() + timeout
        while proc.poll() is None:
            if time.monotonic() > deadline:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await asyncio.get_running_loop().run_in_executor(None, proc.wait)
                break
            await asyncio.sleep(0.01)

    def close(self) -> None:
        """Close the channel (the process exits when it sees that)."""
        was = self.alive
        self.alive = False
        if was:
            self._close_channel()


async def run_auto_complete(
    settings: BackendSettings,
    message: msg.AutoComplete,
    name: str,
    python: str | None = None,
    env: dict[str, str] | None = None,
) -> str | None:
    """Run ``auto_complete_config`` in a short-lived worker (as Triton's model-level stub).

    Returns the completed config JSON (None: the model has no such method); raises
    CoreError with the model's error."""
    loop = asyncio.get_running_loop()
    result: asyncio.Future[tuple[str, Any]] = loop.create_future()

    def on_message(m: msg.Message) -> None:
        if not result.done():
            if isinstance(m, msg.AutoCompleted):
                result.set_result(("ok", m.config_json))
            elif isinstance(m, msg.InitError):
                result.set_result(("error", m.message))

    def on_exit() -> None:
        if not result.done():
            result.set_result(("error", _not_healthy(name)))

    worker = WorkerProcess(name, settings, on_message, on_exit, python, env)
    try:
        worker.start()
    except OSError as e:
        raise CoreError(f"failed to start the Python stub process: {e}", Code.INTERNAL) from None
    try:
        worker.send(message)
        status, value = await result
    finally:
        worker.close()
        await worker.reap()
    if status == "error":
        raise CoreError(value, Code.INTERNAL)
    return cast("str | None", value)
