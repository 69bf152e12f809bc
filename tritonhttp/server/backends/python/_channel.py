"""The worker's end of its control socket (:class:`Channel`), shared by all its threads.

Any thread that waits for the server (the main thread between batches, a model thread in
a BLS call or ``is_cancelled()``) reads the socket itself when nobody else does, and hands
what it reads to whoever it is for ("leader/follower"), so a request costs no thread
hand-off in the worker. Imports only the standard library and the modules of this folder
that need nothing else (the worker, :mod:`._worker`, imports it at start-up).
"""

from __future__ import annotations

import collections
import contextlib
import os
import select
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from ...support import _platform
from . import _messages as msg
from ._ipc import send_fd
from ._polling import MessagePoll

__all__ = ["Channel"]


class Channel:
    """The worker's end of the control socket, shared by all its threads."""

    def __init__(self, sock: socket.socket, fd_sock: socket.socket) -> None:
        self.sock = sock
        self.fd_sock = fd_sock
        self._send_lock = threading.Lock()
        self._cond = threading.Condition()
        self._reading = False
        self._waiting = 0  # threads in ``_cond.wait()``
        self._inside = 0  # threads in ``wait_until``
        self._frames = msg.FrameReader()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self.inbox: collections.deque[msg.Message] = collections.deque()
        self.replies: dict[int, msg.CallResult] = {}
        self.route: Callable[[msg.Message], None] = lambda m: None
        self.closed = False
        self.poll = MessagePoll()

    def send(self, message: msg.Message) -> None:
        data = msg.encode(message)
        with self._send_lock:
            self.sock.sendall(data)

    def send_segment(self, segment_id: int, fd: int, size: int) -> None:
        with self._send_lock:
            send_fd(self.fd_sock, fd)
            self.sock.sendall(msg.encode(msg.Segment(segment_id, size)))

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
            self._inside += 1
            try:
                while not ready():
                    self._take_turn(wakeable)
            finally:
                self._inside -= 1

    def pumped(self) -> bool:
        """Whether a thread waits in :meth:`wait_until` now (and so routes messages)."""
        return self._inside > 0

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
            if type(m) in msg.MAIN_THREAD:
                self.inbox.append(m)
            else:
                self.route(m)
        if self._waiting:
            cond.notify_all()

    def _read(self, wakeable: bool) -> list[msg.Message]:
        poll = self.poll
        if poll.spin_s and not wakeable:
            start = time.perf_counter()
            if poll.worth_it():
                messages = self._spin(start + poll.spin_s)
                if messages:
                    poll.gap_s = time.perf_counter() - start
                    return messages
            data = self.sock.recv(1 << 18)
            poll.gap_s = time.perf_counter() - start
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

    def _spin(self, deadline: float) -> list[msg.Message]:
        """Poll the socket until a message or ``deadline`` (:class:`MessagePoll`): a
        non-blocking ``recv`` between yields of the CPU."""
        recv, yield_cpu = self.sock.recv, _platform.yield_cpu
        while True:
            try:
                data = recv(1 << 18, socket.MSG_DONTWAIT)
            except BlockingIOError:
                if time.perf_counter() < deadline:
                    yield_cpu()  # whoever else wants this CPU goes first
                    continue
                return []
            if not data:
                os._exit(0)
            messages = self._frames.feed(data)
            if messages:
                return messages

    def next_main(self) -> msg.Message:
        """The next message for the main thread."""
        inbox = self.inbox
        with self._cond:
            while not inbox:
                self._take_turn(False)
            return inbox.popleft()
