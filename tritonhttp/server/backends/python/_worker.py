"""A worker process: runs one model instance (or one ``auto_complete_config``) for the
server, as Triton's ``triton_python_backend_stub`` does.

Started by :mod:`._worker_process` through ``_worker_boot.py``: forked from the server's
zygote (:mod:`._forkserver`) or as a fresh interpreter. It imports only the standard
library, numpy, ``triton_python_backend_utils`` and the modules of this folder that need
nothing else. The boot hands it the server's reply codec (:mod:`._direct`), with which
it writes successful answers to the client connections the server passes it, and parses
the requests handed to it unparsed.

Threads: the main thread runs ``initialize``/``execute``/``finalize``. Any thread that
waits for the server (the main thread between batches, a model thread in a BLS call or
``is_cancelled()``) reads the control socket (:mod:`._channel`) itself when nobody else
does, and hands what it reads to whoever it is for ("leader/follower"), so a request
costs no thread hand-off here. The clients' shared-memory regions of the batch being run
are :mod:`._worker_regions`' (:class:`~._worker_regions.BatchRegions`).
"""

from __future__ import annotations

import gc
import os
import signal
import socket
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from triton_python_backend_utils import _runtime
from triton_python_backend_utils._errors import ErrorCode, TritonError, TritonModelException
from triton_python_backend_utils._request import InferenceRequest, InferenceResponse
from triton_python_backend_utils._tensor import Tensor, bytes_items

from ...core._admission import Admission
from ...support import _platform
from . import _messages as msg
from ._arena import Consumer, Producer
from ._channel import Channel
from ._convert import pb_request
from ._direct import DIRECT_MAX, ReplyCodec, ReplyWriter, RequestParser
from ._execution import ModelError, ModelHost, auto_complete, load_model_class
from ._ipc import DTYPES, read_block, recv_fd, write_block
from ._polling import MessagePoll
from ._priority import SlowModelPriority
from ._worker_regions import BatchRegions, Dest, close_dests

__all__ = ["main"]


class _Link:
    """A request's way back to the server from this worker."""

    __slots__ = ("answer", "decoupled", "dests", "token", "wanted", "worker")

    def __init__(
        self, worker: Worker, token: int, decoupled: bool, wanted: set[str], answer: Any = None
    ) -> None:
        self.worker = worker
        self.token = token
        self.decoupled = decoupled
        self.wanted = wanted
        #: (connection key, the front's answer spec) to answer the client itself, or None
        self.answer = answer
        #: the outputs asked into clients' system regions (``ExecRequest.dests``), while
        #: its batch runs: name -> :data:`Dest`; None: none
        self.dests: dict[str, Dest] | None = None

    def deliver(self, response: InferenceResponse | None, final: bool) -> None:
        worker = self.worker
        if self.answer is not None and response is not None:
            desc = worker.answer_client(self.answer, response, self.wanted)
            if desc is not None:
                worker.respond(self, desc, final, False)
                return
        encoded = worker.encode_response(response, self.wanted, self.dests)
        worker.respond(self, encoded, final, False)

    def fail(self, message: str) -> None:
        self.worker.respond(self, msg.ErrorDesc(ErrorCode.INTERNAL.value, message), True, True)

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
        self.worker.channel.send(msg.Log(level, message, file, line))

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
        self.worker.channel.send(msg.FamilyDelete(family_id))

    def metric_create(
        self, family_id: int, labels: dict[str, str], buckets: list[float] | None
    ) -> int:
        return int(self.worker.call("metric", family_id, labels, buckets))

    def metric_delete(self, metric_id: int) -> None:
        self.worker.channel.send(msg.MetricDelete(metric_id))

    def metric_update(self, metric_id: int, op: int, value: float) -> None:
        self.worker.channel.send(msg.MetricOp(metric_id, op, value))

    def metric_value(self, metric_id: int) -> float:
        return float(self.worker.call("metric_value", metric_id))


class Worker:
    """The worker's state: channel, arenas, the model host."""

    def __init__(self, channel: Channel, codec: ReplyCodec | None = None) -> None:
        self.channel = channel
        self.codec = codec
        self.inputs = Consumer()  # server -> worker tensors
        self.outputs: Producer | None = None  # worker -> server tensors
        self.host: ModelHost | None = None
        self.instance_name = ""
        self._next_call = 1
        self._call_lock = threading.Lock()
        self._streams: dict[int, _runtime.ResponseStream] = {}
        self._main = threading.get_ident()
        self._batch: list[msg.Final] | None = None
        self.priority = SlowModelPriority(0)
        #: client connections the server handed over (key -> socket, its writer); main
        #: thread only, but added by whichever thread reads the channel
        self.connections: dict[int, tuple[socket.socket, ReplyWriter | None]] = {}
        #: the clients' shared-memory objects the server passed, and what the batch
        #: being run mapped from them or writes into them
        self.regions = BatchRegions()
        #: the codec's parser and the model's admission rules, when this worker takes
        #: requests unparsed
        self.parser: RequestParser | None = None
        self.rules: Admission | None = None
        channel.route = self.route

    # ------------------------------------------------------------------ messages

    def route(self, m: msg.Message) -> None:
        match m:
            case msg.CallResult(call_id):
                self.channel.replies[call_id] = m
            case msg.BlsResponse(call_id, desc, final):
                stream = self._streams.get(call_id)
                if stream is not None:
                    if final:
                        del self._streams[call_id]
                    stream.push(self.decode_response(desc), final)
            case msg.Segment(segment_id, size):
                self.inputs.add(segment_id, recv_fd(self.channel.fd_sock), size)
            case msg.DropSegment(segment_id):
                self.inputs.drop(segment_id)
            case msg.RegionFd(handle):
                self.regions.fds[handle] = recv_fd(self.channel.fd_sock)
            case msg.Connection(key, writer):
                sock = socket.socket(fileno=recv_fd(self.channel.fd_sock))
                codec = self.codec
                self.connections[key] = (sock, codec.open_writer(*writer) if codec else None)

    def _new_call(self) -> int:
        with self._call_lock:
            n = self._next_call
            self._next_call += 1
            return n

    def call(self, op: str, *args: Any) -> Any:
        """A request to the server that waits for its answer (errors raised)."""
        call_id = self._new_call()
        replies = self.channel.replies
        self.channel.send(msg.Call(call_id, op, args))
        self.channel.wait_until(lambda: call_id in replies)
        result = replies.pop(call_id)
        if not result.ok:
            raise TritonModelException(result.value)
        return result.value

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

    def request_inputs(self, d: msg.ExecRequest) -> list[Tensor]:
        """A request's input tensors: from its block, and mapped from clients'
        shared-memory objects (raises OSError when one cannot be mapped)."""
        tensors = self.block_in(d.block)
        if d.mapped:
            self.regions.map_inputs(d.mapped, tensors)
        return tensors

    def encode_response(
        self,
        response: InferenceResponse | None,
        wanted: set[str] | None,
        dests: dict[str, Dest] | None = None,
    ) -> msg.ResponseDesc | None:
        """A response as the server gets it: its outputs in the arena, but for large
        ones the worker wrote into their clients' regions itself (``dests``, only while
        the batch runs on the main thread)."""
        if response is None:
            return None
        error = response._error
        if error is not None:
            return msg.ErrorDesc(error.code().value, error.message())
        outputs = response._outputs
        if wanted is not None:
            outputs = [t for t in outputs if t._name in wanted]
        placed = None
        if dests and self._batch is not None and threading.get_ident() == self._main:
            placed = self.regions.place_outputs(outputs, dests)
            if placed is not None:
                done = {p[0] for p in placed}
                outputs = [t for i, t in enumerate(outputs) if i not in done]
        return msg.OutputsDesc(self.block_out(outputs), response._parameters or None, placed)

    def answer_client(
        self, answer: Any, response: InferenceResponse, wanted: set[str] | None
    ) -> msg.AnsweredDesc | None:
        """Write a successful answer to the client's connection itself (``answer``: the
        connection's key and the front's spec); None: the server answers."""
        if response._error is not None or threading.get_ident() != self._main:
            return None
        key, spec = answer
        sock, writer = self.connections.get(key, (None, None))
        if sock is None or writer is None:
            return None
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
        rest = writer.write(sock, spec, response._parameters or None, outputs, 2 * DIRECT_MAX)
        return None if rest is None else msg.AnsweredDesc(rest)

    def close_connection(self, key: int) -> None:
        held = self.connections.pop(key, None)
        if held is not None:
            held[0].close()

    def decode_response(self, desc: msg.ResponseDesc | None) -> InferenceResponse | None:
        match desc:
            case msg.ErrorDesc(code, message):
                return InferenceResponse(error=TritonError(message, ErrorCode(code)))
            case msg.OutputsDesc(block, parameters):
                out = InferenceResponse(self.block_in(block))
                if parameters:
                    out._parameters = parameters
                return out
        return None

    # ------------------------------------------------------------------ answers

    def respond(
        self, link: _Link, desc: msg.ResponseDesc | None, final: bool, failed: bool
    ) -> None:
        batch = self._batch
        if (
            batch is not None
            and final
            and not link.decoupled
            and threading.get_ident() == self._main
        ):
            batch.append(msg.Final(link.token, desc, failed))
            return
        self.channel.send(msg.Streamed(link.token, desc, final, failed))

    def bls(self, request: InferenceRequest, decoupled: bool) -> _runtime.ResponseStream:
        call_id = self._new_call()
        stream = _runtime.ResponseStream(self.channel.wait_until, self.channel.pumped)
        stream.cancel_hook = lambda: self.channel.send(msg.BlsCancel(call_id))
        self._streams[call_id] = stream
        tensors = self.block_out(request._inputs)
        carried = msg.BlsRequest(
            request._request_id, request._correlation_id, request._flags, request._timeout,
            request._param_dict, sorted(request._requested), tensors,
            request._trace._id or None,
        )  # fmt: skip
        self.channel.send(
            msg.Bls(call_id, request._model_name, request._model_version, decoupled, carried)
        )
        return stream

    # ------------------------------------------------------------------ roles

    def setup(self, m: msg.Setup) -> None:
        self.channel.poll = MessagePoll(m.spin_us)
        self.priority = SlowModelPriority(m.slow_nice)
        self.outputs = Producer(
            m.shm_prefix,
            m.shm_default,
            m.shm_growth,
            self.channel.send_segment,
            lambda sid: self.channel.send(msg.DropSegment(sid)),
        )

    def run_autocomplete(self, m: msg.AutoComplete) -> None:
        try:
            cls, _ = load_model_class(Path(m.model_dir), m.version, m.filename, own_process=True)
            completed = auto_complete(cls, m.model_name, m.config_json)
        except ModelError as e:
            self.channel.send(msg.InitError(str(e)))
            return
        self.channel.send(msg.AutoCompleted(completed))

    def run_instance(self, m: msg.Init) -> None:
        self.instance_name = m.instance_name
        _runtime.install(WorkerRuntime(self))
        try:
            model_dir = Path(m.model_dir)
            cls, path = load_model_class(model_dir, m.version, m.filename, own_process=True)
            host = ModelHost(cls, path, m.instance_name, m.decoupled, block=self._block)
            self.host = host
            host.initialize(m.args)
        except ModelError as e:
            self.channel.send(msg.InitError(str(e)))
            return
        # what lives on after initialize (modules, the model) is left out of the
        # collector's scans from now on
        gc.freeze()
        codec = self.codec
        if m.rules is not None and codec is not None and not m.decoupled:
            self.parser = codec.open_parser()
            self.rules = Admission(*m.rules) if self.parser is not None else None
        self.channel.send(msg.Ready(os.getpid(), host.has_ready_hook(), self.parser is not None))
        while True:
            match self.channel.next_main():
                case msg.Exec(batch_id, requests):
                    self.execute(batch_id, requests)
                case msg.ExecUnparsed() as unparsed:
                    self.execute_unparsed(unparsed)
                case msg.ExecWithUnparsed(batch_id, items, sizes):
                    self.execute_with_unparsed(batch_id, items, sizes)
                case msg.IsReady(call_id):
                    self.channel.send(msg.ReadyAnswer(call_id, host.is_ready()))
                case msg.DropConnection(key):
                    self.close_connection(key)
                case msg.Fini():
                    host.finalize()
                    self.channel.send(msg.FiniDone())
                    return

    def _block(self, fut: Any) -> Any:
        fut.add_done_callback(lambda _: self.channel.wake())
        self.channel.wait_until(fut.done, wakeable=True)
        return fut.result()

    def execute(self, batch_id: int, descs: list[msg.ExecRequest]) -> None:
        failed: list[msg.Final] = []
        made = [self._request(d, failed) for d in descs]
        requests = [r for r in made if r is not None]
        del made  # (``_run`` lets the requests go once executed: no other reference)
        if not failed:
            self._run(batch_id, requests, None)
        elif requests:
            taken = [not any(f.token == d.token for f in failed) for d in descs]
            self._run(batch_id, requests, None, failed, taken)
        else:
            self.channel.send(msg.Done(batch_id, failed, [False] * len(failed)))

    def _request(self, d: msg.ExecRequest, failed: list[msg.Final]) -> InferenceRequest | None:
        """The request ``d`` describes; None when its inputs cannot be read (its error is
        added to ``failed``)."""
        host = self.host
        assert host is not None
        dests = self.regions.dests(d.dests) if d.dests else None
        try:
            inputs = self.request_inputs(d)
        except OSError as e:
            if dests is not None:
                close_dests(dests)
            failed.append(msg.Final(d.token, msg.ErrorDesc(ErrorCode.INTERNAL.value, str(e)), True))
            return None
        wanted = set(d.wanted)
        link = _Link(self, d.token, host.decoupled, wanted, d.answer)
        if dests is not None:
            link.dests = dests
            self.regions.placing.append(link)
        return InferenceRequest._server_side(
            d.request_id,
            d.correlation_id,
            inputs,
            wanted,
            d.flags,
            d.timeout_us,
            d.parameters,
            link,
            d.trace,
        )

    def execute_unparsed(self, m: msg.ExecUnparsed) -> None:
        """Parse, check and run a request the front did not parse, or decline it."""
        parsed = self._parse(m)
        if parsed is None:
            declined = msg.Final(m.token, msg.DeclinedDesc(), False)
            self.channel.send(msg.Done(m.batch_id, [declined], [False]))
            return
        request, size = parsed
        self._run(m.batch_id, [request], {m.token: size} if size != 1 else None)

    def execute_with_unparsed(
        self, batch_id: int, items: list[msg.ExecRequest | msg.ExecUnparsed], sizes: list[int]
    ) -> None:
        """Run a batch with requests the front did not parse: each of those is parsed and
        checked, and declined unless it has the batch size the batcher counted; the
        others run as one batch."""
        requests: list[InferenceRequest] = []
        declined: list[msg.Final] = []
        taken: list[bool] = []
        for m, size in zip(items, sizes, strict=True):
            request: InferenceRequest | None
            if isinstance(m, msg.ExecRequest):
                request = self._request(m, declined)  # (None: failed, in ``declined``)
            else:
                parsed = self._parse(m)
                request = parsed[0] if parsed is not None and parsed[1] == size else None
                if request is None:
                    declined.append(msg.Final(m.token, msg.DeclinedDesc(), False))
            taken.append(request is not None)
            if request is not None:
                requests.append(request)
        if not requests:
            self.channel.send(msg.Done(batch_id, declined, [False] * len(declined)))
            return
        del request
        self._run(batch_id, requests, None, declined, taken)

    def _run(
        self,
        batch_id: int,
        requests: list[InferenceRequest],
        sizes: dict[int, int] | None,
        declined: list[msg.Final] | None = None,
        taken: list[bool] | None = None,
    ) -> None:
        """Execute a batch and tell the server (the shortest message when it can).
        ``declined``: the batch's requests left out (their answers go first);
        ``taken``: per request of the batch, whether it is in ``requests``."""
        host = self.host
        assert host is not None
        batch: list[msg.Final] = declined or []
        self._batch = batch
        started = time.perf_counter_ns()
        try:
            # (a list of the host's own: an async or decoupled model may keep it)
            rescheduled = host.execute(list(requests))
        finally:
            self._batch = None
        self.priority.executed(time.perf_counter_ns() - started, len(requests))
        requests.clear()  # (the callers' list too: inputs no longer used are let go)
        regions = self.regions
        if regions.mapped:
            regions.settle_mapped()
        if regions.placing:
            regions.end_placing()
        if taken is not None and rescheduled is not None:
            flags = iter(rescheduled)
            rescheduled = [next(flags) if t else False for t in taken]
        if len(batch) == 1 and rescheduled == [False] and sizes is None:
            token, desc, failed = batch[0]
            if not failed and type(desc) is msg.AnsweredDesc and not desc.rest:
                self.channel.send(msg.DoneAnswered(batch_id, token))
                return
        self.channel.send(msg.Done(batch_id, batch, rescheduled, sizes))

    def _parse(self, m: msg.ExecUnparsed) -> tuple[InferenceRequest, int] | None:
        """An unparsed request, parsed and checked as the server would, and its batch
        size; None: declined (the server parses it again and answers it, errors
        included)."""
        parser, rules = self.parser, self.rules
        if parser is None or rules is None or m.key not in self.connections:
            return None
        body = m.body
        if isinstance(body, bytes):
            body = bytearray(body)
        else:
            body = memoryview(read_block(self.inputs, body)[0][3])
        result = parser.parse(body, m.header_len, rules)
        if result is None:
            return None
        req, spec = result
        try:
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
        wanted = set(req.requested_outputs or rules.output_names)
        link = _Link(self, m.token, False, wanted, (m.key, spec))
        return pb_request(req, tensors, wanted, link), req.batch_size


def main(argv: list[str], codec: ReplyCodec | None = None) -> int:
    """``<control fd> <descriptor fd> <server pid>``: serve the server until it says
    goodbye. ``codec``: the server's reply codec (:mod:`._direct`), None without one."""
    # killed when the server (or the zygote that forked this worker) goes, whatever way
    # it ends; already gone: exits now
    _platform.die_with_parent(int(argv[2]) if len(argv) > 2 else 0)
    # Triton's stubs ignore these: the server decides when an instance ends.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sock = socket.socket(fileno=int(argv[0]))
    fd_sock = socket.socket(fileno=int(argv[1]))
    channel = Channel(sock, fd_sock)
    worker = Worker(channel, codec)
    try:
        while True:
            match channel.next_main():
                case msg.Setup() as setup:
                    worker.setup(setup)
                case msg.AutoComplete() as auto:
                    worker.run_autocomplete(auto)
                    return 0
                case msg.Init() as init:
                    worker.run_instance(init)
                    return 0
    except BaseException:
        if isinstance(sys.exc_info()[1], SystemExit):
            raise
        traceback.print_exc()
        return 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
