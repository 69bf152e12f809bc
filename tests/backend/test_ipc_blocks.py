"""Tensor blocks between the server and a worker (`_ipc.write_block` / `read_block`), and
the framing of its control messages (`_ipc.encode` / `FrameReader`).

A block of at most ``INLINE`` bytes rides inside the control message; a larger one is
written into the producer's shared-memory arena. Either way the receiver must get every
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
    INLINE,
    SMALL,
    FrameReader,
    encode,
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
    padded = sum((_nbytes(d) + 63) & ~63 for *_, d in case)
    assert (len(block) == 2) == (padded <= INLINE)  # inline exactly when small
    back = read_block(consumer, block)
    assert [(n, w, s) for n, w, s, _ in back] == [(n, w, tuple(s)) for n, w, s, _ in case]
    for (_, datatype, _, got), (*_, sent) in zip(back, case, strict=True):
        assert got.shape == sent.shape
        if datatype == "BYTES":
            assert got.ravel().tolist() == sent.ravel().tolist()
        else:
            assert got.dtype == sent.dtype and got.tobytes() == sent.tobytes()
            assert got.flags.writeable  # a model may modify its inputs in place


def test_inline_and_arena_at_the_threshold(pair: tuple[Producer, Consumer]) -> None:
    producer, consumer = pair
    at = np.arange(INLINE // 4, dtype=np.float32)
    over = np.arange(INLINE // 4 + 1, dtype=np.float32)
    small = write_block(producer, [("A", "FP32", at.shape, at)])
    large = write_block(producer, [("A", "FP32", over.shape, over)])
    assert len(small) == 2 and isinstance(small[0], bytes)
    assert len(large) == 5 and large[0] in consumer.segments
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


MESSAGES = st.lists(
    st.recursive(
        st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=20),
                  st.binary(max_size=300)),
        lambda inner: st.one_of(st.lists(inner, max_size=4),
                                st.tuples(inner, inner)),
        max_leaves=12,
    ),
    min_size=1,
    max_size=6,
)  # fmt: skip


_FIELD = st.one_of(st.integers(-(1 << 63), (1 << 63) - 1), st.integers(), st.booleans(), st.just(0))
#: the shapes of the two messages that travel packed, with values that may or may not
#: fit them (those go pickled): each must come back the same, types included
NEAR_PACKED = st.one_of(
    st.builds(
        lambda batch, token, size, body, key: ("exec", batch, [(token, size, body, key)]),
        _FIELD, _FIELD, _FIELD, st.one_of(st.binary(max_size=600), st.tuples(st.binary())), _FIELD,
    ),
    st.builds(
        lambda batch, token, desc, failed, flags: ("done", batch, [(token, desc, failed)], flags),
        _FIELD, _FIELD,
        st.sampled_from([(2, b""), (2, b"rest"), (0, 3, "error"), (3,), (2, bytearray())]),
        st.sampled_from([False, True, 0]),
        st.sampled_from([[False], [True], [0], None, [False, False]]),
    ),
)  # fmt: skip


def _through_a_reader(messages: list[Any], data: Any) -> list[Any]:
    """``messages`` framed, fed to one reader in pieces cut where ``data`` draws, read."""
    stream = b"".join(encode(m) for m in messages)
    cuts = sorted(set(data.draw(st.lists(st.integers(0, len(stream)), max_size=8))))
    reader = FrameReader()
    out: list[Any] = []
    start = 0
    for cut in [*cuts, len(stream)]:
        if cut > start:
            out.extend(reader.feed(stream[start:cut]))
            start = cut
    return out


def _typed(value: Any) -> Any:
    """``value`` with the type of every part beside it (so that 0 != False, b"" != bytearray)."""
    if isinstance(value, (list, tuple)):
        return (type(value), [_typed(v) for v in value])
    return (type(value), value)


@settings(max_examples=300, deadline=None)
@given(messages=st.lists(st.one_of(NEAR_PACKED, MESSAGES.map(tuple)), min_size=1, max_size=6),
       data=st.data())  # fmt: skip
def test_packed_messages_come_back_the_same_as_pickled_ones(messages: list[Any], data: Any) -> None:
    """An unparsed request's ``exec`` and its ``done`` go packed with ``struct`` (not
    pickled) when their values fit; whatever the values, every message must come back
    equal and of the same types, however the stream is cut."""
    out = _through_a_reader(messages, data)
    assert [_typed(m) for m in out] == [_typed(m) for m in messages]


def test_the_plain_request_messages_are_packed() -> None:
    """The two messages of a plain request handed over unparsed are the packed ones (flagged
    in the length's top bit), and are far smaller than pickled."""
    body = b'{"inputs":[]}'
    exec_frame = encode(("exec", 12, [(34, len(body), body, 56)]))
    done_frame = encode(("done", 12, [(34, (2, b""), False)], [False]))
    for frame in (exec_frame, done_frame):
        head = int.from_bytes(frame[:4], "little")
        assert head >> 31 == 1 and head & 0x7FFFFFFF == len(frame) - 4
    assert exec_frame.endswith(body) and len(exec_frame) == 4 + 33 + len(body)
    assert len(done_frame) == 4 + 17
    # not the plain shapes: pickled (the top bit clear)
    for other in (
        ("exec", 12, [(34, 0, (b"", []), 56)]),
        ("done", 12, [(34, (2, b"x"), False)], [False]),
        ("done", 12, [(34, (2, b""), False)], [True]),
    ):
        assert encode(other)[3] >> 7 == 0


def test_a_pickled_message_too_large_for_its_frame_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The frame length's top bit marks packed messages, so a pickled one must stay under
    2 GiB: a larger one is refused with a clear error rather than read back as packed
    (the limit is lowered here to keep the test small)."""
    from tritonhttp.server.backends.python import _ipc

    monkeypatch.setattr(_ipc, "_SIZE", 100)
    with pytest.raises(ValueError, match="over the 2 GiB limit"):
        encode(("reply", 1, b"x" * 200))


@settings(max_examples=200, deadline=None)
@given(messages=MESSAGES, data=st.data())
def test_frames_come_out_whole_and_in_order_however_the_bytes_arrive(
    messages: list[Any], data: Any
) -> None:
    """Control messages cut at any byte (one message per read is the usual case, the
    reader's fast path; several per read, or a message split over reads, must give the
    same messages in the same order)."""
    assert _through_a_reader(messages, data) == messages


def test_one_whole_message_per_read_leaves_nothing_behind() -> None:
    """The fast path: each read holding exactly one message; the next partial read must
    still be completed by the read after it."""
    reader = FrameReader()
    first, second = encode(("done", 1, [(7, None, False)], [False])), encode(("log", "x"))
    assert reader.feed(first) == [("done", 1, [(7, None, False)], [False])]
    assert reader.feed(second[:3]) == []
    assert reader.feed(second[3:]) == [("log", "x")]
    assert reader.feed(first + second) == [("done", 1, [(7, None, False)], [False]), ("log", "x")]
