"""The worker's hold on clients' shared-memory regions for the batch it runs.

:class:`BatchRegions` (held by the worker, :mod:`._worker`) keeps the descriptors of
the clients' objects the server passed, maps the inputs a request names there
(privately: the model never writes the client's pages), writes the large outputs asked
into system regions straight into them, and lets all of that go when the batch ends.
Imports only the standard library, ``triton_python_backend_utils`` and this folder's
:mod:`._ipc`.
"""

from __future__ import annotations

import mmap
import os
from typing import Protocol

from triton_python_backend_utils._tensor import Tensor

from ._ipc import DTYPES, MAPPED_MIN, map_private, place_output, settle_private

__all__ = ["BatchRegions", "Dest", "Placing", "close_dests"]

#: where an output asked into a client's system region goes: (descriptor of the region's
#: object or -1, offset in the object, byte size, the object's (st_dev, st_ino))
Dest = tuple[int, int, int, tuple[int, int]]


class Placing(Protocol):
    """A request of the batch whose outputs may go into clients' regions (the worker's
    link back to the server)."""

    #: name -> :data:`Dest` while its batch runs; None: none
    dests: dict[str, Dest] | None


class BatchRegions:
    """The clients' shared-memory objects of the batch being run (main thread, but
    :attr:`fds` is added to by whichever thread reads the channel)."""

    def __init__(self) -> None:
        #: clients' shared-memory objects for mapped inputs and placed outputs (handle ->
        #: descriptor); added by whichever thread reads the channel, taken by the main
        #: thread
        self.fds: dict[int, int] = {}
        #: the private mappings of the inputs of the batch being run
        self.mapped: list[mmap.mmap] = []
        #: where those inputs are: ((st_dev, st_ino) of the object, start, end)
        self.mapped_ranges: list[tuple[tuple[int, int], int, int]] = []
        #: the batch's requests with outputs asked into clients' system regions
        self.placing: list[Placing] = []

    def map_inputs(
        self,
        mapped: list[tuple[int, str, str, tuple[int, ...], int, int, int]],
        tensors: list[Tensor],
    ) -> None:
        """Insert a request's inputs mapped from clients' shared-memory objects
        (``ExecRequest.mapped``) into ``tensors`` (raises OSError when one cannot be
        mapped)."""
        fds = [self.fds.pop(m[4]) for m in mapped]
        try:
            for (position, name, wire, shape, _, offset, nbytes), fd in zip(
                mapped, fds, strict=True
            ):
                try:
                    st = os.fstat(fd)
                    data, mm = map_private(fd, offset, nbytes, wire, shape)
                except (OSError, ValueError) as e:
                    raise OSError(
                        f"failed to map input '{name}' from its shared memory region: {e}"
                    ) from None
                self.mapped.append(mm)
                self.mapped_ranges.append(((st.st_dev, st.st_ino), offset, offset + nbytes))
                tensors.insert(position, Tensor._wrap(name, wire, data))
        finally:
            for fd in fds:
                os.close(fd)

    def dests(self, dests: list[tuple[str, int, int, int]]) -> dict[str, Dest]:
        """A request's ``ExecRequest.dests`` with the descriptors of their objects."""
        out: dict[str, Dest] = {}
        for name, handle, offset, byte_size in dests:
            fd, identity = -1, (0, 0)
            if handle >= 0:
                fd = self.fds.pop(handle)
                try:
                    st = os.fstat(fd)
                    identity = (st.st_dev, st.st_ino)
                except OSError:
                    os.close(fd)
                    fd = -1
            out[name] = (fd, offset, byte_size, identity)
        return out

    def place_outputs(
        self, outputs: list[Tensor], dests: dict[str, Dest]
    ) -> list[tuple[int, str, str, tuple[int, ...]]] | None:
        """Write the large outputs of a response into their clients' regions; what was
        written (``OutputsDesc.placed``), None: nothing. Only when every output the
        client asked into a region fits it, so that the regions are written exactly when
        the front end would write them (it writes them all before encoding the answer,
        unless one does not fit). An output that overlaps an input mapped for the batch
        (the front end writes it after the batch) or that the object no longer holds
        stays in the arena; after the latter none is written (the front end's check of
        it fails the response, as it would have)."""
        names = set()
        for t in outputs:
            if t._name in names:
                return None
            names.add(t._name)
            dest = dests.get(t._name)
            if dest is not None and (t._wire == "BYTES" or t._array.nbytes > dest[2]):
                return None
        placed = None
        for position, t in enumerate(outputs):
            dest = dests.get(t._name)
            if dest is None or not self._placeable(t, dest):
                continue
            fd, offset, _, _ = dest
            try:
                written = place_output(fd, offset, t._array)
            except (OSError, ValueError):
                written = False
            if not written:
                break
            if placed is None:
                placed = []
            placed.append((position, t._name, t._wire, tuple(map(int, t._array.shape))))
        return placed

    def _placeable(self, t: Tensor, dest: Dest) -> bool:
        """Whether the worker writes output ``t`` into its region itself: a large one in
        the wire's layout, with the region's object at hand, away from the batch's
        mapped inputs (writing the client's pages under a private mapping that still
        shares them would change what the model holds)."""
        fd, offset, _, identity = dest
        array = t._array
        nbytes = int(array.nbytes)
        if (
            fd < 0
            or nbytes < MAPPED_MIN
            or array.dtype.byteorder == ">"
            or array.dtype.itemsize != DTYPES[t._wire].itemsize
        ):
            return False
        end = offset + nbytes
        return not any(
            obj == identity and start < end and offset < stop
            for obj, start, stop in self.mapped_ranges
        )

    def settle_mapped(self) -> None:
        """Before the batch's answers go: the inputs it mapped from clients' regions are
        unmapped, or, where the model kept them, made wholly private (the model's copy
        then no longer follows the client's region, as a copy would not)."""
        mapped, self.mapped = self.mapped, []
        self.mapped_ranges = []
        for mm in mapped:
            settle_private(mm)

    def end_placing(self) -> None:
        """The batch is over: its requests' output regions are let go."""
        placing, self.placing = self.placing, []
        for link in placing:
            dests, link.dests = link.dests, None
            if dests is not None:
                close_dests(dests)


def close_dests(dests: dict[str, Dest]) -> None:
    for fd, _, _, _ in dests.values():
        if fd >= 0:
            os.close(fd)
