"""Ports for the servers the tests start: the several ports of one server must differ.

Separate picks can repeat a port (the kernel hands a just-freed port out again: about one
list of 100 separate picks in four had a repeat here), and a repeat once made real Triton
refuse to start ("cannot listen to GRPC requests and metrics requests at the same address
and port")."""

from __future__ import annotations

import contextlib
import socket

from tritonhttp.testing._process import free_ports


def test_the_ports_of_one_pick_all_differ_and_are_free() -> None:
    for _ in range(20):
        ports = free_ports(100)
        assert len(set(ports)) == 100
        with contextlib.ExitStack() as stack:
            for port in ports:  # each one can be bound right after
                s = stack.enter_context(socket.socket())
                s.bind(("127.0.0.1", port))
