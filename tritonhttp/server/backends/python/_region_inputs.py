"""Request inputs a worker maps from the client's system shared-memory region.

A large input the front reads in place from a registered system region (a numpy view
of the server's mapping) does not go through the worker's arena: the server opens the
region's object again by its key, as the registry does, checks that it still is the
object registered (device and inode) and large enough, and passes the descriptor to the
worker, which maps the input copy-on-write (:func:`._ipc.map_private`). An input whose
key names another object by now (the client destroyed and re-created it) goes through
the arena from the server's own mapping, as before.

Outputs the client asked into system regions go the other way (:func:`output_dests`):
the worker writes a large one straight into its object (:func:`._ipc.place_output`) and
the server answers with a view of its own mapping of those bytes, which the front end
then finds in place (no second copy). The front end's checks stay the ones that count:
the worker writes only outputs it knows will pass them (see ``ExecRequest.dests``).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ...core._shm import SystemRegion
from ...core._types import InferRequest
from ._ipc import MAPPED_MIN

__all__ = ["Dest", "Mapped", "mapped_inputs", "output_dests"]

#: (position among the inputs, name, datatype, shape, handle, offset in the object,
#: nbytes): ``ExecRequest.mapped``
Mapped = tuple[int, str, str, tuple[int, ...], int, int, int]


def _place(array: np.ndarray[Any, Any], regions: list[Any]) -> tuple[SystemRegion, int] | None:
    """The system region ``array``'s data lies in, and its offset in the region."""
    if not array.flags.c_contiguous:
        return None
    address = int(array.__array_interface__["data"][0])
    nbytes = int(array.nbytes)
    for region in regions:
        if type(region) is SystemRegion:
            rel = address - region.address
            if rel >= 0 and rel + nbytes <= region.byte_size:
                return region, rel
    return None


def _pass_object(
    region: SystemRegion, send: Callable[[int, int], bool], handles: Iterator[int]
) -> int | None:
    """Send the worker the descriptor of ``region``'s object: its handle; -1 when the
    region's key names another object by now (nothing sent); None when the worker could
    not take it (send no more)."""
    fd = region.open_object()
    if fd is None:
        return -1
    handle = next(handles)
    try:
        return handle if send(handle, fd) else None
    finally:
        os.close(fd)


def mapped_inputs(
    req: InferRequest, send: Callable[[int, int], bool], handles: Iterator[int]
) -> list[Mapped] | None:
    """The inputs of ``req`` the worker maps itself (their descriptors already sent with
    ``send(handle, fd)``, which returns False when the worker cannot take one; handles
    from the iterator ``handles``); None: none."""
    mapped: list[Mapped] | None = None
    for position, t in enumerate(req.inputs.values()):
        array = t.array
        if array is None or t.datatype == "BYTES" or array.nbytes < MAPPED_MIN:
            continue
        place = _place(array, req.regions)
        if place is None:
            continue
        region, rel = place
        handle = _pass_object(region, send, handles)
        if handle is None:
            return mapped
        if handle < 0:
            continue
        entry = (position, t.name, t.datatype, tuple(map(int, t.shape)), handle,
                 region.offset + rel, int(array.nbytes))  # fmt: skip
        if mapped is None:
            mapped = []
        mapped.append(entry)
    return mapped


#: (output name, handle or -1, offset in the object, byte size): ``ExecRequest.dests``
Dest = tuple[str, int, int, int]


def output_dests(
    req: InferRequest, send: Callable[[int, int], bool], handles: Iterator[int]
) -> list[Dest] | None:
    """Where the outputs of ``req`` go: one entry per output asked into a region, with
    the descriptor of its object sent with ``send`` (as for :func:`mapped_inputs`) for a
    large one whose key still names the object registered; None: the worker writes none
    itself (an output into a CUDA region, or two outputs whose bytes overlap: the front
    end then writes them all in the response's order, as always)."""
    parts = req.output_regions
    if not parts:
        return None
    ranges = []
    for part in parts.values():
        region = part.region
        if type(region) is not SystemRegion:
            return None
        start = region.offset + part.offset
        ranges.append((region.identity, start, start + part.byte_size))
    ranges.sort()
    for a, b in itertools.pairwise(ranges):
        if a[0] == b[0] and b[1] < a[2]:
            return None
    dests: list[Dest] = []
    sending = True
    for name, part in parts.items():
        region = part.region
        handle = -1
        if sending and part.byte_size >= MAPPED_MIN:
            passed = _pass_object(region, send, handles)
            sending = passed is not None
            handle = -1 if passed is None else passed
        dests.append((name, handle, region.offset + part.offset, part.byte_size))
    return dests
