"""Worker processes forked from a warm interpreter (a "zygote") instead of started fresh.

A fresh worker (``python -I _worker_boot.py``) imports numpy, ``triton_python_backend_utils``
and the worker module before it can load its model. The zygote is one interpreter,
started by the server the same way (``_worker_boot.py --zygote``), that imports all that
once, calls ``gc.freeze()`` and then only forks: each worker is a child of the zygote that
runs ``_worker.main`` with those modules loaded, sharing their memory pages with the
zygote and its siblings (copy-on-write; the frozen objects are never written by the
collector).

Server side, :func:`spawn` gives a :class:`ForkedProcess` (what ``subprocess.Popen`` offers
a worker's owner: ``pid``, ``returncode``, ``poll``, ``wait``, ``send_signal``, ``kill``,
``terminate``), or None when the worker is to be started with ``subprocess.Popen`` as
before: another interpreter or an environment of the model's own (``EXECUTION_ENV_PATH``),
a platform other than Linux, ``TRITONHTTP_WORKER_SPAWN=popen``, a zygote that could not
start, or environment variables read at interpreter or numpy start that changed since the
zygote started. Each server thread that spawns workers has its own zygote (Linux ties a
child's parent-death signal to the thread that started it), started on first use.

Zygote side, :func:`serve` (called by ``_worker_boot.py``) answers the server's requests
and returns, in a forked child, the worker's arguments for ``_worker.main``.

The channel is a ``SOCK_SEQPACKET`` Unix socket pair; each message is one JSON object.
Server to zygote: ``spawn`` (the child's control and descriptor sockets, and the server's
stdout and stderr, ride along as SCM_RIGHTS; with the reply codec's module name, imported
by the zygote the first time, and the server's working directory and, when it changed,
its environment: a fresh interpreter would have inherited both at that moment) and
``signal``. Zygote to server: ``ready``, ``spawned`` (the child's pid),
``failed`` (no fork) and ``exit`` (the child's status as ``Popen.returncode`` gives it:
negative for a signal).

Linux only (elsewhere workers start with ``subprocess.Popen``). Lifetimes: the zygote dies
with the server thread that started it (``PR_SET_PDEATHSIG``, see
:func:`~tritonhttp.server.support._platform.die_with_parent`), and ends when its socket
closes, SIGKILLing its children first; a child dies with the zygote (``PR_SET_PDEATHSIG``
again, set in the child and by ``_worker.main``, which is given the zygote's pid).
Workers write to the server's stdout and stderr as a fresh interpreter would (the
descriptors the server holds at each spawn).

Unlike fresh interpreters, forked workers share the zygote's ``str`` hash seed; numpy's
global random generator is reseeded in each (Python's ``random`` reseeds itself).
"""

from __future__ import annotations

import collections
import contextlib
import gc
import itertools
import json
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from ...support import _platform

__all__ = [
    "SPAWN_VARIABLE",
    "ForkServer",
    "ForkedProcess",
    "WorkerHandle",
    "can_fork",
    "close",
    "serve",
    "spawn",
]

log = logging.getLogger("tritonhttp.server")

BOOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_worker_boot.py")
#: environment variable choosing how workers start: ``fork`` (from the zygote, the
#: default) or ``popen`` (a fresh interpreter each)
SPAWN_VARIABLE = "TRITONHTTP_WORKER_SPAWN"
#: the longest the first spawn waits for a starting zygote (then: Popen, from then on)
READY_TIMEOUT_S = 60.0
#: the longest a request to the zygote waits for room in its socket
SEND_TIMEOUT_S = 5.0
#: variables read when an interpreter, its C libraries or numpy start (a forked worker
#: keeps the zygote's): a worker is started fresh when one of them changed
IMPORT_TIME_PREFIXES = (
    "LD_", "MALLOC_", "GLIBC_", "OMP_", "OPENBLAS_", "GOTO", "MKL_", "BLIS_", "NPY_",
    "NUMPY_", "LC_", "LANG", "PYTHON", "CUDA_",
)  # fmt: skip
_BUFSIZE = 1 << 20
#: imports a reply codec by module name in the zygote (None: none, or not importable)
_CodecLoader = Callable[[str], Any]


class WorkerHandle(Protocol):
    """What the server uses of a worker's process (``subprocess.Popen`` has it too)."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | None: ...

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...

    def send_signal(self, sig: int) -> None: ...

    def kill(self) -> None: ...


def _encode(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode()


def _import_time(environ: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in environ.items() if k.startswith(IMPORT_TIME_PREFIXES)}


# ---------------------------------------------------------------------- server side


class ForkedProcess:
    """A worker forked by the zygote, seen from the server (Popen-like)."""

    def __init__(self, server: ForkServer, token: int, args: list[str]) -> None:
        self.args = args
        self._server = server
        self._token = token
        self._pid = 0
        #: the exit status once the zygote reported it (negative: the signal that ended it)
        self.returncode: int | None = None

    def __repr__(self) -> str:
        return f"<ForkedProcess pid={self._pid} returncode={self.returncode}>"

    @property
    def pid(self) -> int:
        """The process id (waits for the zygote's answer to the spawn; 0: it never ran)."""
        if not self._pid and self.returncode is None:
            self._server.wait_until(
                lambda: bool(self._pid) or self.returncode is not None, READY_TIMEOUT_S
            )
        return self._pid

    def poll(self) -> int | None:
        """The exit status, or None while the process runs (never blocks)."""
        if self.returncode is None:
            self._server.pump()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the exit status; raises ``subprocess.TimeoutExpired`` after ``timeout``."""
        if not self._server.wait_until(lambda: self.returncode is not None, timeout):
            raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        """Signal the process unless it already ended (the zygote, which reaps it, sends
        the signal: no other process gets it should the pid be reused)."""
        if self.poll() is None:
            self._server.signal_child(self._token, sig)

    def kill(self) -> None:
        """SIGKILL the process."""
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        """SIGTERM the process (workers ignore it, as Triton's stubs do)."""
        self.send_signal(signal.SIGTERM)

    # called by ForkServer with its lock held

    def _spawned(self, pid: int) -> None:
        self._pid = pid

    def _ended(self, status: int) -> None:
        if self.returncode is None:
            self.returncode = status


class ForkServer:
    """The server's end of one zygote: starts it, asks it for workers, tracks them.

    Thread-safe; the messages of the zygote are read by whichever thread polls or waits.
    """

    def __init__(self, python: str, pb_dir: str, codec: str | None = None) -> None:
        self.python = python
        self.pb_dir = pb_dir
        #: the environment the zygote started with
        self.environ = dict(os.environ)
        self.zygote_pid = 0
        self._lock = threading.RLock()
        self._tokens = itertools.count(1)
        self._handles: dict[int, ForkedProcess] = {}
        self._ready = False
        self._lost = False
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.args = [python, "-I", BOOT, "--zygote", str(theirs.fileno()), str(os.getpid()),
                     pb_dir, codec or ""]  # fmt: skip
        try:
            self._proc = subprocess.Popen(
                self.args, pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        ours.setblocking(False)
        self._sock = ours

    @property
    def alive(self) -> bool:
        """The zygote runs and its channel is open."""
        with self._lock:
            return not self._lost and self._proc.poll() is None

    @property
    def busy(self) -> bool:
        """Workers of this zygote still run (or were not reported ended yet)."""
        with self._lock:
            self.pump()
            return bool(self._handles)

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> bool:
        """Wait until the zygote has imported everything (False: it failed, and is gone)."""
        if self.wait_until(lambda: self._ready or self._lost, timeout) and self._ready:
            return True
        if not self._lost:
            log.warning("the worker zygote did not start within %g s", timeout)
        self.close()
        return False

    def spawn(self, ctl_fd: int, fds_fd: int, codec: str | None = None) -> ForkedProcess | None:
        """Ask for a worker on these two sockets, handed the reply codec ``codec`` (None:
        start it with Popen instead).

        Does not wait for the fork: the handle learns its pid when the zygote answers."""
        with self._lock:
            if not self._ready and not self.wait_ready():
                return None
            self.pump()  # (what ended meanwhile: the zygote's reports never pile up)
            environ = dict(os.environ)
            if _import_time(environ) != _import_time(self.environ):
                return None
            try:
                cwd = os.getcwd()
            except OSError:
                return None
            token = next(self._tokens)
            request = {"op": "spawn", "token": token, "cwd": cwd, "codec": codec or "",
                       "env": environ if environ != self.environ else None}  # fmt: skip
            try:
                self._send(request, [ctl_fd, fds_fd, 1, 2])
            except OSError:
                return None
            handle = ForkedProcess(self, token, self.args)
            self._handles[token] = handle
            return handle

    def signal_child(self, token: int, sig: int) -> None:
        """Have the zygote signal one of its children (if it still runs)."""
        with self._lock, contextlib.suppress(OSError):
            self._send({"op": "signal", "token": token, "sig": int(sig)}, [])

    def pump(self) -> None:
        """Read what the zygote reported (never blocks)."""
        with self._lock:
            while not self._lost:
                try:
                    data, _, _, _ = socket.recv_fds(self._sock, _BUFSIZE, 0)
                except (BlockingIOError, InterruptedError):
                    return
                except OSError:
                    data = b""
                if not data:
                    self._channel_lost()
                    return
                self._dispatch(json.loads(data))

    def wait_until(self, done: Callable[[], bool], timeout: float | None = None) -> bool:
        """Read the zygote's reports until ``done()`` (False: ``timeout`` passed first)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._lock:
                self.pump()
                if done():
                    return True
                if self._lost:
                    return done()
                fd = self._sock.fileno()
            left = 0.05 if deadline is None else min(0.05, deadline - time.monotonic())
            if left <= 0:
                return False
            # (short naps: another thread may read the report this one waits for)
            with contextlib.suppress(OSError, ValueError):
                select.select([fd], [], [], left)

    def close(self, timeout: float = 5.0) -> None:
        """Close the channel: the zygote SIGKILLs its children and exits (waited for)."""
        with self._lock:
            self._channel_lost()
        try:
            self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()

    # ---------------------------------------------------------------- internals

    def _send(self, message: dict[str, Any], fds: list[int]) -> None:
        if self._lost:
            raise BrokenPipeError("the worker zygote is gone")
        data = [_encode(message)]
        deadline = time.monotonic() + SEND_TIMEOUT_S
        while True:
            try:
                if fds:
                    socket.send_fds(self._sock, data, fds)
                else:
                    self._sock.send(data[0])
                return
            except (BlockingIOError, InterruptedError):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("the worker zygote takes no requests") from None
                select.select([], [self._sock], [], min(left, 0.05))
                self.pump()  # (the zygote may wait for room in our direction)
                if self._lost:
                    raise BrokenPipeError("the worker zygote is gone") from None

    def _dispatch(self, message: dict[str, Any]) -> None:
        op = message.get("op")
        if op == "ready":
            self._ready = True
            self.zygote_pid = int(message["pid"])
            return
        handle = self._handles.get(int(message.get("token", 0)))
        if handle is None:
            return
        if op == "spawned":
            handle._spawned(int(message["pid"]))
        elif op in ("exit", "failed"):
            if op == "failed":
                log.error("the worker zygote started no worker: %s", message.get("error"))
            handle._ended(int(message.get("status", 1)))
            del self._handles[handle._token]

    def _channel_lost(self) -> None:
        """The zygote is gone or being closed: its children die with it (SIGKILL)."""
        if self._lost:
            return
        self._lost = True
        self._sock.close()
        for handle in self._handles.values():
            handle._ended(-signal.SIGKILL)
        self._handles.clear()
        self._proc.poll()  # (reaped now if it already exited)


_ZYGOTES: dict[tuple[int, int, str, str], ForkServer] = {}
_FAILED: set[tuple[int, int, str, str]] = set()
_REGISTRY = threading.Lock()


def can_fork(python: str, env: Mapping[str, str] | None) -> bool:
    """Whether a worker for this interpreter and environment may come from a zygote."""
    return (
        env is None
        and python == sys.executable
        and _platform.system().startswith("linux")
        and hasattr(os, "fork")
        and hasattr(socket, "send_fds")
        and hasattr(socket, "SOCK_SEQPACKET")
        and os.environ.get(SPAWN_VARIABLE, "fork").strip().lower() != "popen"
    )


def spawn(
    python: str,
    pb_dir: str,
    ctl_fd: int,
    fds_fd: int,
    env: Mapping[str, str] | None = None,
    codec: str | None = None,
) -> ForkedProcess | None:
    """A worker forked from this thread's zygote (started on first use) on the sockets
    ``ctl_fd`` and ``fds_fd``, handed the reply codec module ``codec``; or None: then
    start it with ``subprocess.Popen``.

    ``python``/``env``: the interpreter and environment the worker is to run with (only
    the server's own, ``sys.executable`` and None, are forked)."""
    if not can_fork(python, env):
        return None
    key = (os.getpid(), threading.get_ident(), python, pb_dir)
    with _REGISTRY:
        server = _ZYGOTES.get(key)
        if server is not None and not server.alive:
            del _ZYGOTES[key]
            server.close()
            server = None
        if server is None:
            if key in _FAILED:
                return None
            try:
                server = ForkServer(python, pb_dir, codec)
            except (OSError, subprocess.SubprocessError) as e:
                log.warning("no worker zygote (%s): workers start as fresh interpreters", e)
                _FAILED.add(key)
                return None
            _ZYGOTES[key] = server
    if not server._ready and not server.wait_ready():
        with _REGISTRY:
            _FAILED.add(key)
            _ZYGOTES.pop(key, None)
        log.warning("the worker zygote failed to start: workers start as fresh interpreters")
        return None
    return server.spawn(ctl_fd, fds_fd, codec)


def close(idle_only: bool = False, all_threads: bool = False) -> None:
    """Close this thread's zygotes (``all_threads``: every zygote of this process),
    SIGKILLing the workers they still have; the next spawn starts a fresh one.

    ``idle_only``: only those whose workers have all ended (a server that stopped
    leaves the zygote alone while another server on the same thread still has workers
    from it)."""
    me, thread = os.getpid(), threading.get_ident()

    def mine(key: tuple[int, int, str, str]) -> bool:
        return key[0] == me and (all_threads or key[1] == thread)

    with _REGISTRY:
        keys = [k for k in _ZYGOTES if mine(k) and not (idle_only and _ZYGOTES[k].busy)]
        servers = [_ZYGOTES.pop(k) for k in keys]
        _FAILED.difference_update([k for k in _FAILED if mine(k)])
    for server in servers:
        server.close()


# ---------------------------------------------------------------------- zygote side


def _no_op(signum: int, frame: Any) -> None:
    """SIGCHLD handler: the wake-up descriptor already woke the loop."""


class _Zygote:
    """The zygote's loop: forks on request, reaps its children, reports their ends."""

    def __init__(
        self, sock: socket.socket, pb_dir: str, codecs: dict[str, Any], load: _CodecLoader
    ) -> None:
        self.sock = sock
        self.pb_dir = pb_dir
        #: the reply codecs imported so far, by module name (None: not importable)
        self.codecs = codecs
        self.load = load
        self.pid = os.getpid()
        self.children: dict[int, int] = {}  # token -> pid
        self.tokens: dict[int, int] = {}  # pid -> token
        self.outbox: collections.deque[bytes] = collections.deque()
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)
        sock.setblocking(False)
        signal.signal(signal.SIGCHLD, _no_op)
        signal.set_wakeup_fd(self.wake_w)

    def run(self) -> tuple[list[str], Any] | None:
        """Serve until the channel closes (None), or, in a forked child, its arguments
        and reply codec."""
        gc.collect()
        gc.freeze()
        self.post({"op": "ready", "pid": self.pid})
        while True:
            if not self.flush():
                break
            sock = self.sock.fileno()
            with contextlib.suppress(InterruptedError):
                select.select([sock, self.wake_r], [sock] if self.outbox else [], [], 5.0)
            with contextlib.suppress(OSError):
                while os.read(self.wake_r, 512):
                    pass
            self.reap()
            result = self.receive()
            if isinstance(result, tuple):
                return result
            if result is False:
                break
        self.shutdown()
        return None

    def post(self, message: dict[str, Any]) -> None:
        self.outbox.append(_encode(message))

    def flush(self) -> bool:
        """Send what waits (False: the server is gone)."""
        while self.outbox:
            try:
                self.sock.send(self.outbox[0])
            except (BlockingIOError, InterruptedError):
                return True
            except OSError:
                return False
            self.outbox.popleft()
        return True

    def reap(self) -> None:
        while self.tokens:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            token = self.tokens.pop(pid, None)
            if token is not None:
                del self.children[token]
                self.post({"op": "exit", "token": token,
                           "status": os.waitstatus_to_exitcode(status)})  # fmt: skip

    def receive(self) -> tuple[list[str], Any] | bool:
        """Handle the requests that wait: a child's arguments and codec in a forked
        child, False once the channel closed, else True."""
        while True:
            try:
                data, fds, _, _ = socket.recv_fds(self.sock, _BUFSIZE, 8)
            except (BlockingIOError, InterruptedError):
                return True
            except OSError:
                return False
            if not data and not fds:
                return False
            try:
                message = json.loads(data)
            except ValueError:
                message = {}
            op = message.get("op")
            if op == "spawn" and len(fds) == 4:
                child = self.fork(message, fds)
                if child is not None:
                    return child
                continue
            if op == "spawn":
                self.refuse(int(message["token"]), fds, "the request lacks its descriptors")
                continue
            for fd in fds:
                os.close(fd)
            if op == "signal":
                pid = self.children.get(int(message["token"]))
                if pid is not None:
                    with contextlib.suppress(OSError):
                        os.kill(pid, int(message["sig"]))

    def fork(self, message: dict[str, Any], fds: list[int]) -> tuple[list[str], Any] | None:
        token = int(message["token"])
        codec = str(message.get("codec") or "")
        if codec not in self.codecs:  # (imported here once: every later child shares it)
            try:
                self.codecs[codec] = self.load(codec)
            except Exception as e:  # (a fresh worker would have died of it)
                traceback.print_exc()
                self.refuse(token, fds, f"the reply codec failed to import: {e}")
                return None
            gc.freeze()
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            with warnings.catch_warnings():
                # (3.12+ warns of forking a process with threads: numpy's BLAS has
                # some, and prepares itself for fork)
                warnings.simplefilter("ignore", DeprecationWarning)
                pid = os.fork()
        except OSError as e:
            self.refuse(token, fds, str(e))
            return None
        if pid == 0:
            return self.become_child(message, fds)
        for fd in fds:
            os.close(fd)
        self.children[token] = pid
        self.tokens[pid] = token
        self.post({"op": "spawned", "token": token, "pid": pid})
        return None

    def refuse(self, token: int, fds: list[int], error: str) -> None:
        """No child for this request: the server sees its sockets close."""
        for fd in fds:
            os.close(fd)
        self.post({"op": "failed", "token": token, "status": 1, "error": error})

    def become_child(self, message: dict[str, Any], fds: list[int]) -> tuple[list[str], Any]:
        """(In the forked child.) Drop the zygote's state, take the server's stdout,
        stderr, directory and environment; the worker's arguments."""
        ctl, fd_sock, out, err = fds
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        self.sock.close()
        os.close(self.wake_r)
        os.close(self.wake_w)
        self.outbox.clear()
        self.children.clear()
        self.tokens.clear()
        _platform.die_with_parent(self.pid)  # (exits now if the zygote already died)
        os.dup2(out, 1)
        os.dup2(err, 2)
        os.close(out)
        os.close(err)
        with contextlib.suppress(OSError):
            os.chdir(message["cwd"])
        env = message.get("env")
        if isinstance(env, dict):
            os.environ.clear()
            os.environ.update(env)
            time.tzset()
        random = sys.modules.get("numpy.random")
        if random is not None:  # (its global generator would repeat in every child)
            random.seed()
        codec = str(message.get("codec") or "")
        return [str(ctl), str(fd_sock), str(self.pid), self.pb_dir, codec], self.codecs[codec]

    def shutdown(self) -> None:
        """SIGKILL and reap the children; close the channel."""
        for pid in self.children.values():
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        for pid in self.children.values():
            with contextlib.suppress(OSError):
                os.waitpid(pid, 0)
        self.children.clear()
        self.tokens.clear()
        self.sock.close()


def serve(argv: list[str], codec: Any, load: _CodecLoader) -> tuple[list[str], Any] | None:
    """The zygote: ``<socket fd> <server pid> <pb_utils dir> [<reply codec module>]``;
    ``codec`` is that module, imported, and ``load`` imports another.

    Returns None when the server closed the channel (the zygote then exits), or, in a
    forked child, the arguments of ``_worker.main`` (``<control fd> <descriptor fd>
    <zygote pid> <pb_utils dir> <reply codec module>``) and the codec it names."""
    sock_fd, server_pid, pb_dir = int(argv[0]), int(argv[1]), argv[2]
    codecs = {argv[3] if len(argv) > 3 else "": codec}
    _platform.die_with_parent(server_pid)  # (exits now if the server already ended)
    for fd in (0, 1, 2):  # (so that no descriptor received takes one of these numbers)
        try:
            os.fstat(fd)
        except OSError:
            os.open(os.devnull, os.O_RDWR)
    # the server decides when workers end (Ctrl+C reaches its whole process group)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    return _Zygote(socket.socket(fileno=sock_fd), pb_dir, codecs, load).run()
