"""The messages between the server and a worker (`_messages`): typed records, framed.

Every record must come back from the wire as the same record of the same type (nested
records included), however the byte stream is cut between reads; the framing refuses
a message too large for its length field.
"""

from __future__ import annotations

import typing
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tritonhttp.server.backends.python import _messages as m

_INT = st.integers(-(1 << 63), (1 << 63) - 1)
_VALUE = st.recursive(
    st.one_of(st.none(), st.booleans(), _INT, st.text(max_size=12), st.binary(max_size=200)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.tuples(inner, inner)),
    max_leaves=6,
)
_DESC = st.one_of(
    st.none(),
    st.builds(m.ErrorDesc, _INT, st.text(max_size=20)),
    st.builds(m.OutputsDesc, _VALUE, st.none() | st.dictionaries(st.text(max_size=5), _INT)),
    st.builds(m.AnsweredDesc, st.binary(max_size=50)),
)
_UNPARSED = {
    "batch_id": st.integers(),
    "token": st.integers(),
    "header_len": st.integers(),
    "body": st.binary(max_size=100) | _VALUE,
    "key": st.integers(),
}
#: strategies for fields whose values must keep a shape (nested records)
_NESTED: dict[type[Any], dict[str, Any]] = {
    m.Exec: {
        "requests": st.lists(
            st.builds(m.ExecRequest, *[_VALUE] * len(m.ExecRequest._fields)), max_size=3
        )
    },
    m.Done: {
        "finals": st.lists(st.builds(m.Final, _INT, _DESC, st.booleans()), max_size=3),
        "rescheduled": st.none() | st.lists(st.booleans(), max_size=3),
    },
    m.Streamed: {"response": _DESC},
    m.BlsResponse: {"response": _DESC},
    m.Bls: {"request": st.builds(m.BlsRequest, *[_VALUE] * len(m.BlsRequest._fields))},
    m.DoneAnswered: {"batch_id": _INT, "token": _INT},
    m.ExecUnparsed: _UNPARSED,
    m.ExecWithUnparsed: {
        "requests": st.lists(
            st.builds(m.ExecUnparsed, **_UNPARSED)
            | st.builds(m.ExecRequest, *[_VALUE] * len(m.ExecRequest._fields)),
            max_size=3,
        ),
        "sizes": st.lists(st.integers(), max_size=3),
    },
}
MESSAGE_TYPES: list[type[Any]] = list(typing.get_args(m.Message))


def _record(cls: type[Any]) -> st.SearchStrategy[Any]:
    special = _NESTED.get(cls, {})
    fields = {name: special.get(name, _VALUE) for name in cls._fields}
    return st.builds(cls, **fields)


MESSAGES = st.one_of(*[_record(cls) for cls in MESSAGE_TYPES])


def _typed(value: Any) -> Any:
    """``value`` with the type of every part beside it (so that 0 != False, records of
    other types never compare equal, ...)."""
    if isinstance(value, (list, tuple)):
        return (type(value), [_typed(v) for v in value])
    if isinstance(value, dict):
        return (dict, sorted((repr(k), _typed(v)) for k, v in value.items()))
    return (type(value), value)


def _through_a_reader(messages: list[Any], data: Any) -> list[Any]:
    """``messages`` framed, fed to one reader in pieces cut where ``data`` draws, read."""
    stream = b"".join(m.encode(msg) for msg in messages)
    cuts = sorted(set(data.draw(st.lists(st.integers(0, len(stream)), max_size=8))))
    reader = m.FrameReader()
    out: list[Any] = []
    start = 0
    for cut in [*cuts, len(stream)]:
        if cut > start:
            out.extend(reader.feed(stream[start:cut]))
            start = cut
    return out


def test_every_message_type_has_a_number_of_its_own() -> None:
    assert len(MESSAGE_TYPES) == len(set(MESSAGE_TYPES)) == len(m._KIND_OF)
    assert sorted(m._KIND_OF.values()) == list(range(len(MESSAGE_TYPES)))


@settings(max_examples=300, deadline=None)
@given(messages=st.lists(MESSAGES, min_size=1, max_size=6), data=st.data())
def test_records_come_back_whole_typed_and_in_order(messages: list[Any], data: Any) -> None:
    out = _through_a_reader(messages, data)
    assert [_typed(x) for x in out] == [_typed(x) for x in messages]


def test_one_whole_message_per_read_leaves_nothing_behind() -> None:
    """The fast path: each read holding exactly one message; a partial read after it
    must still be completed by the next."""
    reader = m.FrameReader()
    done = m.Done(1, [m.Final(7, m.AnsweredDesc(b""), False)], [False])
    log = m.Log(20, "x", "model.py", 3)
    first, second = m.encode(done), m.encode(log)
    assert reader.feed(first) == [done]
    assert reader.feed(second[:3]) == []
    assert reader.feed(second[3:]) == [log]
    assert reader.feed(first + second) == [done, log]


def test_a_message_too_large_for_its_frame_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """The limit is lowered here to keep the test small."""
    monkeypatch.setattr(m, "MAX_FRAME", 100)
    with pytest.raises(ValueError, match="over the 2 GiB limit"):
        m.encode(m.Log(20, "x" * 200, "model.py", 1))


def test_the_main_thread_messages_are_the_server_s_orders() -> None:
    """A worker's main thread takes orders (setup, init, exec, ...); answers to calls and
    descriptors are routed by whichever thread reads the socket."""
    assert m.Exec in m.MAIN_THREAD and m.Fini in m.MAIN_THREAD
    assert m.CallResult not in m.MAIN_THREAD and m.Segment not in m.MAIN_THREAD


def test_done_answered_travels_packed_and_small() -> None:
    """The message most requests end with is packed (the length's top bit set); it comes
    back the same record, and pickled messages never carry the bit."""
    frame = m.encode(m.DoneAnswered(12, 34))
    head = int.from_bytes(frame[:4], "little")
    assert head >> 31 == 1 and head & 0x7FFFFFFF == len(frame) - 4 == 17
    (back,) = m.FrameReader().feed(frame)
    assert type(back) is m.DoneAnswered and back == (12, 34)
    assert m.encode(m.Done(12, [m.Final(34, m.AnsweredDesc(b""), False)], [False]))[3] >> 7 == 0


@settings(max_examples=100, deadline=None)
@given(batch=_INT, requests=_NESTED[m.Exec]["requests"])
def test_encode_exec_is_encode_of_the_exec_record(batch: int, requests: list[Any]) -> None:
    """The server's shortcut for its one message per batch frames the very bytes of the
    record it stands for."""
    assert m.encode_exec(batch, requests) == m.encode(m.Exec(batch, requests))


def test_an_unparsed_request_with_its_body_inline_travels_packed() -> None:
    body = b'{"inputs":[]}'
    frame = m.encode(m.ExecUnparsed(12, 34, len(body), body, 56))
    head = int.from_bytes(frame[:4], "little")
    assert head >> 31 == 1 and frame.endswith(body) and len(frame) == 4 + 33 + len(body)
    assert m.FrameReader().feed(frame) == [m.ExecUnparsed(12, 34, len(body), body, 56)]
    # a body in the arena, or a number past 64 bits: pickled
    for other in (m.ExecUnparsed(12, 34, 0, (1, 0, 0, 64, []), 56),
                  m.ExecUnparsed(1 << 70, 34, 0, b"", 56)):  # fmt: skip
        assert m.encode(other)[3] >> 7 == 0
