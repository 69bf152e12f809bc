"""Request inputs a worker maps from the client's system shared-memory region.

A large input the front reads in place from a registered system region (a numpy view
of the server's mapping) does not go through the worker's arena: the server opens the
region's object again by its key, as the registry does, checks that it still is the
object registered (device and inode) and large enough, and passes the descriptor to the
worker, which maps the input copy-on-write (:func:`._ipc.map_private`). An input whose
key names another object by now (the client destroyed and re-created it) goes through
the arena from the server's own mapping, as before.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ...core._shm import SystemRegion
from ...core._types import InferRequest
from ._ipc import MAPPED_MIN

__all__ = ["Mapped", "mapped_inputs"]

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
        fd = region.open_object()
        if fd is None:
            continue
        handle = next(handles)
        try:
            sent = send(handle, fd)
        finally:
            os.close(fd)
        if not sent:
            return mapped
        entry = (position, t.name, t.datatype, tuple(map(int, t.shape)), handle,
                 region.offset + rel, int(array.nbytes))  # fmt: skip
        if mapped is None:
            mapped = []
        mapped.append(entry)
    return mapped
