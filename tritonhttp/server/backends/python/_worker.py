"""A worker process: runs one model instance (or one ``auto_complete_config``) for the
server, as Triton's ``triton_python_backend_stub`` does.

Started by :mod:`._process` as a fresh interpreter (``python -I _worker_boot.py``);
imports only the standard library, numpy, ``triton_python_backend_utils`` and the
modules of this folder that need nothing else, and, where rapidjson is there, the
server's request parsing and admission (so that it can parse and check requests the
server hands over unparsed).

Threads: the main thread runs ``initialize``/``execute``/``finalize``. Any thread that
waits for the server (the main thread between batches, a model thread in a BLS call or
``is_cancelled()``) reads the control socket itself when nobody else does, and hands
what it reads to whoever it is for ("leader/follower"), so a request costs no thread
hand-off here.
"""

from __future__ import annotations

import collections
import contextlib
import gc
import os
import select
import signal
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from triton_python_backend_utils import _runtime
from triton_python_backend_utils._errors import ErrorCode, TritonError, TritonModelException
from triton_python_backend_utils._request import InferenceRequest, InferenceResponse
from triton_python_backend_utils._tensor import Tensor, bytes_items

from ...front._answer import AnswerError, encode_outputs
from ._arena import Consumer, Producer
from ._execution import ModelError, ModelHost, auto_complete, load_model_class
from ._ipc import (
    DECLINED,
    DTYPES,
    FrameReader,
    encode,
    read_block,
    recv_fd,
    send_fd,
    write_block,
)

try:  # parsing requests here (unparsed requests); an EXECUTION_ENV_PATH env may lack rapidjson
    from ...core._admission import Admission
    from ...front._infer import answerable_elsewhere, direct_answer, parse_infer_request
    from ._convert import pb_request
except ImportError:  # pragma: no cover (the server then parses every request itself)
    Admission = None  # type: ignore[assignment,misc]

__all__ = ["main"]

#: messages the main thread handles (the rest are handled by whoever reads them)
_MAIN = frozenset(("setup", "exec", "fini", "isready", "init", "autocomplete", "unconn"))
#: answers of at most this many bytes (tensor data) are written to the client directly
DIRECT_MAX = 64 * 1024
_SEND_FLAGS = socket.MSG_DONTWAIT | getattr(socket, "MSG_NOSIGNAL", 0)


class Channel:
    """The worker's end of the control socket, shared by all its threads."""

    def __init__(self, sock: socket.socket, fd_sock: socket.socket) -> None:
        self.sock = sock
        self.fd_sock = fd_sock
        self._send_lock = threading.Lock()
        self._cond = threading.Condition()
        self._reading = False
        self._waiting = 0  # threads in ``_cond.wait()``
        self._frames = FrameReader()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self.inbox: collections.deque[Any] = collections.deque()
        self.replies: dict[int, Any] = {}
        self.route: Callable[[Any], None] = lambda m: None
        self.closed = False
        #: poll this long for the next message before sleeping (0: never)
        self.spin_s = 0.0
        self._gap = 0.0

    def send(self, message: Any) -> None:
        data = encode(message)
        with self._send_lock:
            self.sock.sendall(data)

    def send_segment(self, segment_id: int, fd: int, size: int) -> None:
        with self._send_lock:
            send_fd(self.fd_sock, fd)
            self.sock.sendall(encode(("seg", segment_id, size)))

    def wake(self) -> None:
        """Make the reading thread re-check its condition (something else changed)."""
        with contextlib.suppress(BlockingIOError):
            os.write(self._wake_w, b"w")
        with self._cond:
            self._cond.notify_all()

    def wait_until(self, ready: Callable[[], bool], wakeable: bool = False) -> None:
        """Block until ``ready()``; read and route messages meanwhile when nobody else
        does. ``wakeable``: ``ready()`` may also turn true without a message (then
        :meth:`wake` is called), so the socket is read with ``select``."""
        with self._cond:
            while not ready():
                self._take_turn(wakeable)

    def _take_turn(self, wakeable: bool) -> None:
        """(Holding ``_cond``.) Read and route one lot of messages, or wait while another
        thread does."""
        cond = self._cond
        if self._reading:
            self._waiting += 1
            try:
                cond.wait()
            finally:
                self._waiting -= 1
            return
        self._reading = True
        cond.release()
        try:
            messages = self._read(wakeable)
        finally:
            cond.acquire()
            self._reading = False
        for m in messages:
            if m[0] in _MAIN:
                self.inbox.append(m)
            else:
                self.route(m)
        if self._waiting:
            cond.notify_all()

    def _read(self, wakeable: bool) -> list[Any]:
        if self.spin_s and not wakeable:
            # A busy instance gets its next message within microseconds: poll for it a
            # little while instead of sleeping (a wake-up costs tens of microseconds).
            start = time.perf_counter()
            if self._gap < self.spin_s:
                deadline = start + self.spin_s
                recv = self.sock.recv
                while True:
                    # (a non-blocking recv, not poll(): polling measured 20% slower at
                    # -c16 on a 2-core VM, whether or not it yields)
                    try:
                        data = recv(1 << 18, socket.MSG_DONTWAIT)
                    except BlockingIOError:
                        if time.perf_counter() < deadline:
                            os.sched_yield()  # whoever else wants this CPU goes first
                            continue
                        break
                    if not data:
                        os._exit(0)
                    self._gap = time.perf_counter() - start
                    messages = self._frames.feed(data)
                    if messages:
                        return messages
            data = self.sock.recv(1 << 18)
            self._gap = time.perf_counter() - start
            if not data:
                os._exit(0)
            messages = self._frames.feed(data)
            if messages:
                return messages
        while not wakeable:
            data = self.sock.recv(1 << 18)
            if not data:
                os._exit(0)  # the server is gone: nothing left to do for anyone
            messages = self._frames.feed(data)
            if messages:
                return messages
        while True:
            fds: list[Any] = [self.sock.fileno(), self._wake_r]
            ready, _, _ = select.select(fds, [], [])
            if self._wake_r in ready:
                try:
                    while os.read(self._wake_r, 4096):
                        pass
                except BlockingIOError:
                    pass
                if fds[0] not in ready:
                    return []
            data = self.sock.recv(1 << 18)
            if not data:
                # the server is gone: nothing left to do for anyone
                os._exit(0)
            messages = self._frames.feed(data)
            if messages:
                return messages

    def next_main(self) -> Any:
        """The next message for the main thread."""
        inbox = self.inbox
        with self._cond:
            while not inbox:
                self._take_turn(False)
            return inbox.popleft()


class _Link:
    """A request's way back to the server from this worker."""

    __slots__ = ("decoupled", "direct", "token", "wanted", "worker")

    def __init__(
        self, worker: Worker, token: int, decoupled: bool, wanted: set[str], direct: Any = None
    ) -> None:
        self.worker = worker
        self.token = token
        self.decoupled = decoupled
        self.wanted = wanted
        #: how to answer the client directly (the server's DirectOffer), or None
        self.direct = direct

    def deliver(self, response: InferenceResponse | None, final: bool) -> None:
        worker = self.worker
        if self.direct is not None and response is not None:
            desc = worker.answer_client(self.direct, response, self.wanted)
            if desc is not None:
                worker.respond(self, desc, final, False)
                return
        worker.respond(self, worker.encode_response(response, self.wanted), final, False)

    def fail(self, message: str) -> None:
        self.worker.respond(self, (0, ErrorCode.INTERNAL.value, message), True, True)

    def is_cancelled(self) -> bool:
        return bool(self.worker.call("cancelled", self.token))


class WorkerRuntime(_runtime.Runtime):
    """pb_utils' runtime inside a worker: everything goes to the server."""

    def __init__(self, worker: Worker) -> None:
        super().__init__()
        self.worker = worker

    def instance_name(self) -> str:
        return self.worker.instance_name

    def model_dir(self) -> str:
        host = self.worker.host
        return host.model_dir if host is not None else ""

    def log(self, level: int, message: str, file: str, line: int) -> None:
        self.worker.channel.send(("log", level, message, file, line))

    def check_bls(self) -> None:
        host = self.worker.host
        if host is None or host.phase != "ready":
            raise TritonModelException("BLS is only supported during the 'execute' function.")

    def infer(self, request: InferenceRequest, decoupled: bool) -> _runtime.ResponseStream:
        return self.worker.bls(request, decoupled)

    def load_model(self, name: str, config: str, files: dict[str, bytes]) -> None:
        self.worker.call("load", name, config, files)

    def unload_model(self, name: str, unload_dependents: bool) -> None:
        self.worker.call("unload", name, unload_dependents)

    def is_model_ready(self, name: str, version: str) -> bool:
        return bool(self.worker.call("ready", name, version))

    def family_create(self, name: str, description: str, kind: int) -> int:
        return int(self.worker.call("family", name, description, kind))

    def family_delete(self, family_id: int) -> None:
        self.worker.channel.send(("family_del", family_id))

    def metric_create(
        self, family_id: int, labels: dict[str, str], buckets: list[float] | None
    ) -> int:
        return int(self.worker.call("metric", family_id, labels, buckets))

    def metric_delete(self, metric_id: int) -> None:
        self.worker.channel.send(("metric_del", metric_id))

    def metric_update(self, metric_id: int, op: int, value: float) -> None:
        self.worker.channel.send(("metric_op", metric_id, op, value))

    def metric_value(self, metric_id: int) -> float:
        return float(self.worker.call("metric_value", metric_id))


class Worker:
    """The worker's state: channel, arenas, the model host."""

    def __init__(self, channel: Channel) -> None:
        self.channel = channel
        self.inputs = Consumer()  # server -> worker tensors
        self.outputs: Producer | None = None  # worker -> server tensors
        self.host: ModelHost | None = None
        self.instance_name = ""
        self._next_call = 1
        self._call_lock = threading.Lock()
        self._streams: dict[int, _runtime.ResponseStream] = {}
        self._main = threading.get_ident()
        self._batch: list[Any] | None = None
        #: client connections the server handed over (key -> socket, JSON head, binary
        #: head); main thread only, but added by whichever thread reads the channel
        self.connections: dict[int, tuple[socket.socket, bytes, bytes]] = {}
        self._heads: dict[Any, bytes] = {}
        #: the model's rules for requests, when this worker parses unparsed requests
        self.admission: Admission | None = None
        channel.route = self.route

    # ------------------------------------------------------------------ messages

    def route(self, m: Any) -> None:
        kind = m[0]
        if kind == "reply":
            self.channel.replies[m[1]] = m[2]
        elif kind == "bls_resp":
            stream = self._streams.get(m[1])
            if stream is not None:
                if m[3]:
                    del self._streams[m[1]]
                stream.push(self.decode_response(m[2]), m[3])
        elif kind == "seg":
            self.inputs.add(m[1], recv_fd(self.channel.fd_sock), m[2])
        elif kind == "unseg":
            self.inputs.drop(m[1])
        elif kind == "conn":
            sock = socket.socket(fileno=recv_fd(self.channel.fd_sock))
            self.connections[m[1]] = (sock, m[2], m[3])

    def _new_call(self) -> int:
        with self._call_lock:
            n = self._next_call
            self._next_call += 1
            return n

    def call(self, op: str, *args: Any) -> Any:
        """A request to the server that waits for its answer (errors raised)."""
        call_id = self._new_call()
        replies = self.channel.replies
        self.channel.send(("call", call_id, op, args))
        self.channel.wait_until(lambda: call_id in replies)
        ok, value = replies.pop(call_id)
        if not ok:
            raise TritonModelException(value)
        return value

    # ------------------------------------------------------------------ tensors

    def block_out(self, tensors: list[Tensor]) -> Any:
        """Write tensors into the worker's arena; the block descriptor."""
        assert self.outputs is not None
        parts: list[tuple[str, str, Any, Any]] = []
        for t in tensors:
            array = t._array
            if t._wire == "BYTES":
                items = t._items if t._items is not None else bytes_items(array)
                parts.append((t._name, "BYTES", array.shape, items))
            else:
                parts.append((t._name, t._wire, array.shape, array))
        return write_block(self.outputs, parts)

    def block_in(self, block: Any) -> list[Tensor]:
        return [Tensor._wrap(n, w, data) for n, w, _, data in read_block(self.inputs, block)]

    def encode_response(self, response: InferenceResponse | None, wanted: set[str] | None) -> Any:
        if response is None:
            return None
        error = response._error
        if error is not None:
            return (0, error.code().value, error.message())
        outputs = response._outputs
        if wanted is not None:
            outputs = [t for t in outputs if t._name in wanted]
        return (1, self.block_out(outputs), response._parameters or None)

    def answer_client(
        self, direct: Any, response: InferenceResponse, wanted: set[str] | None
    ) -> Any:
        """Write a successful answer to the client's connection itself; the descriptor
        for the server ``(2, what was not written)``, or None: the server answers."""
        if response._error is not None or threading.get_ident() != self._main:
            return None
        key, prefix, binary, binary_default = direct
        held = self.connections.get(key)
        if held is None:
            return None
        sock, json_head, binary_head = held
        outputs = []
        size = 0
        for t in response._outputs:
            if wanted is not None and t._name not in wanted:
                continue
            array = t._array
            wire = t._wire
            if wire == "BYTES":
                data: Any = t._items if t._items is not None else bytes_items(array)
            elif array.dtype != DTYPES[wire]:
                return None
            else:
                data = array
                size += array.nbytes
            outputs.append((t._name, wire, array.shape, data))
        if size > DIRECT_MAX:
            return None
        try:
            header, blobs = encode_outputs(
                prefix, response._parameters or None, outputs, binary, binary_default,
                self._heads,
            )  # fmt: skip
        except AnswerError:
            return None  # (the server sends the error)
        body = len(header)
        for blob in blobs:
            body += len(blob) if isinstance(blob, bytes) else blob.nbytes
        if body > 2 * DIRECT_MAX:
            return None
        head = binary_head % (len(header), body) if blobs else json_head % body
        try:
            if blobs:
                sent = sock.sendmsg([head, header, *blobs], [], _SEND_FLAGS)
            else:
                sent = sock.send(head + header, _SEND_FLAGS)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError:
            return (2, b"")  # the client is gone (the server sees that too)
        if sent == len(head) + body:
            return (2, b"")
        return (2, b"".join([head, header, *map(bytes, blobs)])[sent:])

    def close_connection(self, key: int) -> None:
        held = self.connections.pop(key, None)
        if held is not None:
            held[0].close()

    def decode_response(self, desc: Any) -> InferenceResponse | None:
        if desc is None:
            return None
        if desc[0] == 0:
            return InferenceResponse(error=TritonError(desc[2], ErrorCode(desc[1])))
        out = InferenceResponse(self.block_in(desc[1]))
        if desc[2]:
            out._parameters = desc[2]
        return out

    # ------------------------------------------------------------------ answers

    def respond(self, link: _Link, desc: Any, final: bool, failed: bool) -> None:
        batch = self._batch
        if (
            batch is not None
            and final
            and not link.decoupled
            and threading.get_ident() == self._main
        ):
            batch.append((link.token, desc, failed))
            return
        self.channel.send(("resp", link.token, desc, final, failed))

    def bls(self, request: InferenceRequest, decoupled: bool) -> _runtime.ResponseStream:
        call_id = self._new_call()
        stream = _runtime.ResponseStream(self.channel.wait_until)
        stream.cancel_hook = lambda: self.channel.send(("bls_cancel", call_id))
        self._streams[call_id] = stream
        tensors = self.block_out(request._inputs)
        self.channel.send(
            (
                "bls", call_id, request._model_name, request._model_version, decoupled,
                (request._request_id, request._correlation_id, request._flags,
                 request._timeout, request._param_dict, sorted(request._requested), tensors),
            )
        )  # fmt: skip
        return stream

    # ------------------------------------------------------------------ roles

    def setup(self, settings: dict[str, Any]) -> None:
        self.channel.spin_s = float(settings.get("spin_us", 0)) / 1e6
        self.outputs = Producer(
            settings["prefix"],
            settings["default_size"],
            settings["growth"],
            self.channel.send_segment,
            lambda sid: self.channel.send(("unseg", sid)),
        )

    def run_autocomplete(self, m: Any) -> None:
        _, model_dir, version, filename, model_name, config_json = m
        try:
            cls, _ = load_model_class(Path(model_dir), version, filename, own_process=True)
            completed = auto_complete(cls, model_name, config_json)
        except ModelError as e:
            self.channel.send(("init_error", str(e)))
            return
        self.channel.send(("ac", completed))

    def run_instance(self, m: Any) -> None:
        _, model_dir, version, filename, instance_name, decoupled, args = m[:7]
        spec = m[7] if len(m) > 7 else None
        self.instance_name = instance_name
        _runtime.install(WorkerRuntime(self))
        try:
            cls, path = load_model_class(Path(model_dir), version, filename, own_process=True)
            host = ModelHost(cls, path, instance_name, decoupled, block=self._block)
            host.exit_on_system_exit = True
            self.host = host
            host.initialize(args)
        except ModelError as e:
            self.channel.send(("init_error", str(e)))
            return
        # what lives on after initialize (modules, the model) is left out of the
        # collector's scans from now on
        gc.freeze()
        if spec is not None and Admission is not None and not decoupled:
            self.admission = Admission(*spec)
        ready = (os.getpid(), host.has_ready_hook(), self.admission is not None)
        self.channel.send(("ready", ready))
        while True:
            m = self.channel.next_main()
            kind = m[0]
            if kind == "exec":
                self.execute(m[1], m[2])
            elif kind == "isready":
                self.channel.send(("reply", m[1], host.is_ready()))
            elif kind == "unconn":
                self.close_connection(m[1])
            elif kind == "fini":
                host.finalize()
                self.channel.send(("fini_done",))
                return

    def _block(self, fut: Any) -> Any:
        fut.add_done_callback(lambda _: self.channel.wake())
        self.channel.wait_until(fut.done, wakeable=True)
        return fut.result()

    def execute(self, batch_id: int, descs: list[Any]) -> None:
        host = self.host
        assert host is not None
        decoupled = host.decoupled
        requests = []
        batch: list[Any] = []
        sizes: dict[int, int] | None = None
        for desc in descs:
            if len(desc) == 4:  # unparsed: (token, header length, body, connection key)
                parsed = self._parse(desc, decoupled)
                if parsed is None:
                    batch.append((desc[0], DECLINED, False))
                    continue
                request, size = parsed
                if size != 1:
                    sizes = sizes or {}
                    sizes[desc[0]] = size
                requests.append(request)
                continue
            token, rid, cid, flags, timeout, params, wanted, tensors, direct = desc
            wanted_set = set(wanted)
            requests.append(
                InferenceRequest._server_side(
                    rid,
                    cid,
                    self.block_in(tensors),
                    wanted_set,
                    flags,
                    timeout,
                    params,
                    _Link(self, token, decoupled, wanted_set, direct),
                )
            )
        self._batch = batch
        try:
            # (a declined request executes alone: nothing is left to run then)
            flags_out = host.execute(requests) if requests else None
        finally:
            self._batch = None
        del requests
        if sizes:
            self.channel.send(("done", batch_id, batch, flags_out, sizes))
        else:
            self.channel.send(("done", batch_id, batch, flags_out))

    def _parse(self, desc: Any, decoupled: bool) -> tuple[InferenceRequest, int] | None:
        """An unparsed request, parsed and checked as the server would, and its batch
        size; None: declined (the server parses it again and answers it, errors
        included). Only plain requests are taken: no shared memory, no classification."""
        token, header_len, block, key = desc
        admission = self.admission
        if admission is None or key not in self.connections:
            return None
        if isinstance(block, bytes):
            body: Any = bytearray(block)
        else:
            body = memoryview(read_block(self.inputs, block)[0][3])
        try:
            parsed = parse_infer_request(body, header_len, admission, None)
            req = parsed.request
            if not answerable_elsewhere(parsed) or admission.check(req) is not None:
                return None
            tensors = []
            for t in req.inputs.values():
                array = t.array
                assert array is not None
                dtype = DTYPES.get(t.datatype)
                if dtype is not None and array.dtype != dtype:
                    array = array.view(dtype)  # (BF16 travels as uint16)
                tensors.append(Tensor._wrap(t.name, t.datatype, array))
        except Exception:  # (the server's own parse answers it: the error is the same)
            return None
        wanted = set(req.requested_outputs or admission.output_names)
        link = _Link(self, token, decoupled, wanted, direct_answer(parsed, admission, key))
        return pb_request(req, tensors, wanted, link), req.batch_size


def _die_with_parent() -> None:
    """Linux: be killed when the server process goes (whatever way it ends)."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass


def main(argv: list[str]) -> int:
    """``<control fd> <descriptor fd>``: serve the server until it says goodbye."""
    _die_with_parent()
    parent = int(argv[2]) if len(argv) > 2 else 0
    if parent and os.getppid() != parent:
        return 0
    # Triton's stubs ignore these: the server decides when an instance ends.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sock = socket.socket(fileno=int(argv[0]))
    fd_sock = socket.socket(fileno=int(argv[1]))
    channel = Channel(sock, fd_sock)
    worker = Worker(channel)
    try:
        while True:
            m = channel.next_main()
            kind = m[0]
            if kind == "setup":
                worker.setup(m[1])
            elif kind == "autocomplete":
                worker.run_autocomplete(m)
                return 0
            elif kind == "init":
                worker.run_instance(m)
                return 0
    except BaseException:
        if isinstance(sys.exc_info()[1], SystemExit):
            raise
        traceback.print_exc()
        return 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
