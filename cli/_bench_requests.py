"""``bench`` requests: the prepared tensors of each data step, shared-memory regions,
sequence control and the check of outputs against ``validation_data``."""

from __future__ import annotations

import contextlib
import importlib
import itertools
import os
import secrets
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ._errors import CliError, InputError, describe
from ._shm_io import unregister_region

if TYPE_CHECKING:
    import tritonhttp

    from ._bench_inputs import DataSet, Step
    from ._values import ModelIO

__all__ = ["Prepared", "RequestSource", "SequenceOptions", "check_outputs", "prepare"]


@dataclass(frozen=True)
class Prepared:
    """One step ready to send: its inputs, the outputs asked for, the values expected."""

    inputs: list[tritonhttp.InferInput]
    outputs: list[tritonhttp.InferRequestedOutput]
    expected: dict[str, Any]


@dataclass(frozen=True)
class SequenceOptions:
    """``--sequence-length``, ``--sequence-id-range`` and ``--serial-sequences``."""

    length: int = 20
    id_start: int = 1
    id_end: int = 2**63 - 1
    serial: bool = False


@dataclass
class _Sequence:
    ident: int
    stream: int
    length: int
    sent: int = 0


@dataclass
class RequestSource:
    """Hands out what each request sends: steps round-robin, or for a sequence model,
    whole sequences (one per worker at a time) with their ids and start/end flags."""

    streams: list[list[Prepared]]
    sequences: SequenceOptions | None  # None: not a sequence model
    from_streams: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _next_step: Iterator[int] = field(default_factory=itertools.count)
    _next_id: Iterator[int] = field(default_factory=itertools.count)
    _next_stream: Iterator[int] = field(default_factory=itertools.count)
    _live: set[int] = field(default_factory=set)  # ids of the sequences being played
    sequences_done: int = 0

    def new_level(self) -> None:
        """A level starts: the sequences of the last one are over."""
        with self._lock:
            self._live.clear()

    def next(self, state: dict[str, Any]) -> tuple[Prepared, dict[str, Any]]:
        """The next request for one worker (``state`` is that worker's own dict), with the
        sequence arguments of ``generate_request_body``."""
        if self.sequences is None:
            flat = self.streams[0]
            with self._lock:
                index = next(self._next_step)
            return flat[index % len(flat)], {}
        sequence: _Sequence | None = state.get("sequence")
        if sequence is None or sequence.sent >= sequence.length:
            sequence = self._new_sequence()
            state["sequence"] = sequence
        steps = self.streams[sequence.stream]
        prepared = steps[sequence.sent % len(steps)]
        sequence.sent += 1
        end = sequence.sent >= sequence.length
        if end:
            with self._lock:
                self.sequences_done += 1
                self._live.discard(sequence.ident)
        return prepared, {
            "sequence_id": sequence.ident,
            "sequence_start": sequence.sent == 1,
            "sequence_end": end,
        }

    def finish(self, state: dict[str, Any]) -> tuple[Prepared, dict[str, Any]] | None:
        """The request that ends the worker's open sequence (its next step, with the END
        flag), or None when it has none. A stopping worker sends it, as perf_analyzer
        does, so that no sequence holds a server slot until its idle timeout."""
        sequence: _Sequence | None = state.pop("sequence", None)
        if sequence is None or sequence.sent >= sequence.length:
            return None
        steps = self.streams[sequence.stream]
        with self._lock:
            self._live.discard(sequence.ident)
        end = {"sequence_id": sequence.ident, "sequence_start": False, "sequence_end": True}
        return steps[sequence.sent % len(steps)], end

    def _new_sequence(self) -> _Sequence:
        assert self.sequences is not None
        seq = self.sequences
        span = seq.id_end - seq.id_start + 1
        with self._lock:
            # the next id that no sequence in flight holds: two sequences under one id
            # would be one sequence to the server
            for _ in range(min(span, len(self._live) + 1)):
                ident = seq.id_start + next(self._next_id) % span
                if ident not in self._live:
                    break
            self._live.add(ident)
            stream = next(self._next_stream) % len(self.streams)
        length = len(self.streams[stream]) if self.from_streams else seq.length
        return _Sequence(ident, stream, length)


def _tensor(name: str, array: Any, binary: bool) -> tritonhttp.InferInput:
    import tritonhttp

    from ._values import triton_datatype

    tensor = tritonhttp.InferInput(name, list(array.shape), triton_datatype(array, name))
    return tensor.set_data_from_numpy(array, binary_data=binary)


def prepare(
    data: DataSet, io: ModelIO, binary: bool, shm: SharedMemory | None
) -> list[list[Prepared]]:
    """Every step as tensors (in shared memory when ``shm`` is given)."""
    import tritonhttp

    out: list[list[Prepared]] = []
    for stream in data.streams:
        prepared = []
        for step in stream:
            if shm is not None:
                inputs = shm.place_inputs(step)
            else:
                inputs = [_tensor(n, a, binary) for n, a in step.arrays.items()]
            outputs = [tritonhttp.InferRequestedOutput(n, binary_data=binary) for n in io.outputs]
            prepared.append(Prepared(inputs, outputs, step.expected))
        out.append(prepared)
    return out


def check_outputs(result: tritonhttp.InferResult, expected: dict[str, Any]) -> str | None:
    """Why the outputs differ from ``validation_data`` (None when they match)."""
    import numpy as np

    for name, want in expected.items():
        got = result.as_numpy(name)
        if got is None:
            return f"validation: output '{name}' is missing from the response"
        if got.shape != want.shape:
            got = got.reshape(-1)
            want = want.reshape(-1)
        if got.shape != want.shape or not np.array_equal(got, want):
            return f"validation: output '{name}' differs from validation_data"
    return None


# -- shared memory -----------------------------------------------------------------------


class SharedMemory:
    """The regions of a ``--shared-memory system|cuda`` run: one for every step's inputs,
    and (with ``--output-shared-memory-size``) one per worker for the outputs."""

    def __init__(
        self, kind: str, client: tritonhttp.InferenceServerClient, headers: Any, device: int
    ) -> None:
        self.kind = kind
        self._client = client
        self._headers = headers
        self._device = device
        self._stack = contextlib.ExitStack()
        name = "tritonhttp.utils." + ("shared_memory" if kind == "system" else "cuda_shared_memory")
        try:
            self._module: Any = importlib.import_module(name)
            if kind == "cuda":
                self._probe()
        except (ImportError, RuntimeError, OSError) as e:
            raise InputError(
                f"--shared-memory cuda needs a CUDA device and runtime: {describe(e)}"
            ) from None
        except Exception as e:
            raise InputError(f"--shared-memory {kind}: {describe(e)}") from None

    def _probe(self) -> None:
        handle = self._module.create_shared_memory_region("triton_cli_probe", 1, self._device)
        self._module.destroy_shared_memory_region(handle)

    def close(self) -> None:
        """Unregister and destroy every region."""
        self._stack.close()

    def region(self, size: int) -> tuple[str, Any]:
        """A new registered region of ``size`` bytes: (name, handle)."""
        tag = f"{os.getpid()}_{secrets.token_hex(4)}"
        name = f"triton_cli_bench_{tag}"
        size = max(size, 1)
        module, client, headers = self._module, self._client, self._headers
        try:
            if self.kind == "system":
                handle = module.create_shared_memory_region(name, "/" + name, size)
                self._stack.callback(module.destroy_shared_memory_region, handle)
                client.register_system_shared_memory(name, "/" + name, size, headers=headers)
                self._stack.callback(
                    unregister_region, client.unregister_system_shared_memory, name, headers
                )
            else:
                handle = module.create_shared_memory_region(name, size, self._device)
                self._stack.callback(module.destroy_shared_memory_region, handle)
                raw = module.get_raw_handle(handle)
                client.register_cuda_shared_memory(name, raw, self._device, size, headers=headers)
                self._stack.callback(
                    unregister_region, client.unregister_cuda_shared_memory, name, headers
                )
        except Exception as e:
            raise CliError(f"--shared-memory {self.kind}: {describe(e)}") from None
        return name, handle

    def place_inputs(self, step: Step) -> list[tritonhttp.InferInput]:
        """Write the step's inputs into a new region; tensors that point at it."""
        from ._shm_io import _byte_size

        sizes = {n: _byte_size(a) for n, a in step.arrays.items()}
        name, handle = self.region(sum(sizes.values()))
        inputs, offset = [], 0
        for tensor_name, array in step.arrays.items():
            if sizes[tensor_name]:
                self._module.set_shared_memory_region(handle, [array], offset=offset)
            tensor = _tensor(tensor_name, array, True)
            inputs.append(tensor.set_shared_memory(name, sizes[tensor_name], offset))
            offset += sizes[tensor_name]
        return inputs

    def output_region(self, names: list[str], size: int) -> list[tuple[str, str, int, int]]:
        """A region for one worker's outputs: (output, region, byte size, offset) each."""
        region, _ = self.region(size * len(names))
        return [(n, region, size, i * size) for i, n in enumerate(names)]


def sequence_model(config: dict[str, Any]) -> bool:
    """Whether the model's configuration has a sequence batcher."""
    return "sequence_batching" in config


def parse_id_range(text: str | None) -> tuple[int, int]:
    """``--sequence-id-range START[:END]`` -> the first and last id. END is excluded, as
    perf_analyzer excludes it: ``1:5`` gives ids 1 to 4."""
    if not text:
        return 1, 2**63 - 1
    try:
        parts = [int(x) for x in text.split(":")]
    except ValueError:
        parts = []
    if len(parts) not in (1, 2) or parts[0] < 1 or (len(parts) == 2 and parts[1] <= parts[0]):
        raise InputError(
            f"--sequence-id-range: expected START[:END] with 1 <= START < END (END is not "
            f"used), got {text!r}"
        )
    return parts[0], parts[1] - 1 if len(parts) == 2 else 2**63 - 1
