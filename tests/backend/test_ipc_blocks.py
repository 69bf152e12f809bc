"""Tensor blocks between the server and a worker (`_ipc.write_block` / `read_block`).

A block is written into the producer's shared-memory arena. The receiver must get every
tensor back bit for bit, with its name, datatype and shape, and arena space must be
released once the arrays are gone. A real Producer/Consumer pair over real shared
memory, in one process.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tritonhttp.server.backends.python._arena import Consumer, Producer
from tritonhttp.server.backends.python._ipc import (
    DTYPES,
    SMALL,
    read_block,
    write_block,
)

MIB = 1 << 20


@pytest.fixture()
def pair() -> Iterator[tuple[Producer, Consumer]]:
    consumer = Consumer()
    producer = Producer(
        f"thipc{os.getpid()}_",
        MIB,
        MIB,
        lambda sid, fd, size: consumer.add(sid, os.dup(fd), size),
        consumer.drop,
    )
    yield producer, consumer
    producer.close()
    consumer.close()


NUMERIC = sorted(d for d in DTYPES if d != "BF16")


@st.composite
def tensors(draw: Any) -> list[tuple[str, str, list[int], Any]]:
    out = []
    for i in range(draw(st.integers(1, 4))):
        datatype = draw(st.sampled_from([*NUMERIC, "BYTES"]))
        shape = draw(st.lists(st.integers(0, 40), min_size=1, max_size=2))
        count = int(np.prod(shape))
        if datatype == "BYTES":
            items = draw(st.lists(st.binary(max_size=30), min_size=count, max_size=count))
            data: Any = np.empty(count, dtype=object)
            data[:] = items
            data = data.reshape(shape)
        else:
            raw = draw(st.binary(min_size=count * DTYPES[datatype].itemsize,
                                 max_size=count * DTYPES[datatype].itemsize))  # fmt: skip
            data = np.frombuffer(raw, DTYPES[datatype]).reshape(shape)
        out.append((f"T{i}", datatype, shape, data))
    return out


def _nbytes(data: Any) -> int:
    if data.dtype == object:
        return sum(4 + len(b) for b in data.ravel().tolist())
    return int(data.nbytes)


# one arena pair for every example, on purpose: the ring wraps and grows between them
@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(case=tensors())
def test_every_block_comes_back_bit_for_bit(
    pair: tuple[Producer, Consumer], case: list[tuple[str, str, list[int], Any]]
) -> None:
    producer, consumer = pair
    block = write_block(producer, case)
    assert len(block) == 5 and block[0] in consumer.segments
    back = read_block(consumer, block)
    assert [(n, w, s) for n, w, s, _ in back] == [(n, w, tuple(s)) for n, w, s, _ in case]
    for (_, datatype, _, got), (*_, sent) in zip(back, case, strict=True):
        assert got.shape == sent.shape
        if datatype == "BYTES":
            assert got.ravel().tolist() == sent.ravel().tolist()
        else:
            assert got.dtype == sent.dtype and got.tobytes() == sent.tobytes()
            assert got.flags.writeable  # a model may modify its inputs in place


def test_small_and_large_blocks_at_the_copy_threshold(pair: tuple[Producer, Consumer]) -> None:
    """A block up to ``SMALL`` bytes is copied out (writable, its space free at once); a
    larger one is used in place."""
    producer, consumer = pair
    at = np.arange(SMALL // 4, dtype=np.float32)
    over = np.arange(SMALL // 4 + 1, dtype=np.float32)
    small = write_block(producer, [("A", "FP32", at.shape, at)])
    large = write_block(producer, [("A", "FP32", over.shape, over)])
    for block, sent in ((small, at), (large, over)):
        ((_, _, _, got),) = read_block(consumer, block)
        assert np.array_equal(got, sent)
    assert write_block(producer, []) is None and read_block(consumer, None) == []


def test_arena_space_is_released_for_small_and_large_blocks(
    pair: tuple[Producer, Consumer],
) -> None:
    producer, consumer = pair
    seg = producer.segments[1]
    # a copied-out block (at most SMALL) is released at once
    mid = np.ones(SMALL // 8, dtype=np.float32)
    read_block(consumer, write_block(producer, [("M", "FP32", mid.shape, mid)]))
    assert seg.read_head() == producer._tail
    # a block used in place is released when its arrays are garbage collected
    big = np.ones(SMALL // 2, dtype=np.float32)
    block = write_block(producer, [("B", "FP32", big.shape, big)])
    ((_, _, _, view),) = read_block(consumer, block)
    assert seg.read_head() < producer._tail and float(view.sum()) == big.size
    del view
    gc.collect()
    assert seg.read_head() == producer._tail


def test_non_contiguous_and_bf16_inputs(pair: tuple[Producer, Consumer]) -> None:
    producer, consumer = pair
    strided = np.arange(20, dtype=np.int64).reshape(4, 5)[:, ::2]
    bf16 = np.array([0x3F80, 0x4000], dtype=np.uint16)
    block = write_block(producer, [("S", "INT64", strided.shape, strided),
                                   ("H", "BF16", bf16.shape, bf16)])  # fmt: skip
    (_, _, _, s), (_, _, _, h) = read_block(consumer, block)
    assert np.array_equal(s, strided) and s.flags.c_contiguous
    assert h.dtype == np.uint16 and h.tolist() == [0x3F80, 0x4000]
