"""Scheduling configuration: ``--cache-config`` and the config checks Triton makes."""

from __future__ import annotations

import numpy as np
import pytest
from google.protobuf import text_format

from tritonhttp.server._options import OptionsError, parse_args
from tritonhttp.server.core._cache import ResponseCache
from tritonhttp.server.core._config import PollError, validate_poll
from tritonhttp.server.core._types import InferRequest, InferResponse, InputTensor, OutputTensor
from tritonhttp.server.core.model_config_pb2 import ModelConfig


def _parse(*flags: str, tmp: str) -> int | None:
    return parse_args([f"--model-repository={tmp}", *flags]).cache_size


def test_cache_flags(tmp_path: object) -> None:
    tmp = str(tmp_path)
    assert _parse(tmp=tmp) is None
    assert _parse("--cache-config=local,size=1048576", tmp=tmp) == 1048576
    assert _parse("--cache-config", "local,size=0", tmp=tmp) == 0
    assert _parse("--response-cache-byte-size=4096", tmp=tmp) == 4096
    assert _parse("--cache-directory=/opt/caches", "--cache-config=local,size=8", tmp=tmp) == 8


@pytest.mark.parametrize(
    ("flag", "message"),
    [
        ("--cache-config=redis,host=x", "cache 'redis' is not supported"),
        ("--cache-config=local,size=-1", "local cache size must be a byte count, got '-1'"),
        ("--cache-config=local,size=lots", "local cache size must be a byte count, got 'lots'"),
        ("--cache-config=local,colour=red", "the local cache has no setting 'colour'"),
        ("--cache-config=local", "--cache-config expects <cache>,<key>=<value>"),
    ],
)
def test_bad_cache_flags(tmp_path: object, flag: str, message: str) -> None:
    with pytest.raises(OptionsError, match=message.replace("(", r"\(")):
        _parse(flag, tmp=str(tmp_path))


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            "sequence_batching { }",
            "Response Cache does not currently support model m with sequence batching "
            "scheduler. Please disable the response cache.",
        ),
        (
            "model_transaction_policy { decoupled: true }",
            "Response Cache does not currently support model m with 'decoupled' transaction "
            "policy. Please disable the response cache.",
        ),
    ],
)
def test_the_cache_does_not_combine_with(extra: str, message: str) -> None:
    cfg = ModelConfig()
    text_format.Parse(f"response_cache {{ enable: true }} {extra}", cfg)
    with pytest.raises(PollError) as info:
        validate_poll(cfg, "m")
    assert str(info.value) == message


def _req(value: int, shape: list[int], **kw: object) -> InferRequest:
    arr = np.full(shape, value, dtype=np.int32)
    return InferRequest(id="x", inputs={"IN": InputTensor("IN", "INT32", shape, array=arr)}, **kw)  # type: ignore[arg-type]


def _resp(nbytes: int) -> InferResponse:
    arr = np.zeros(nbytes, dtype=np.uint8)
    return InferResponse(outputs=[OutputTensor("OUT", "UINT8", [nbytes], arr)])


def test_cache_keys() -> None:
    key = ResponseCache.key
    base = key("m", 1, _req(1, [2]))
    assert key("m", 1, _req(1, [2])) == base
    assert key("m", 2, _req(1, [2])) != base  # version
    assert key("n", 1, _req(1, [2])) != base  # model
    assert key("m", 1, _req(2, [2])) != base  # data
    assert key("m", 1, _req(1, [1, 2])) != base  # shape, same bytes
    assert key("m", 1, _req(1, [2], parameters={"p": 1})) != base
    assert key("m", 1, _req(1, [2], requested_outputs=["OUT"])) != base


def test_cache_is_bounded_and_evicts_the_least_recently_used() -> None:
    cache = ResponseCache(3 * 1100)
    for k in (b"a", b"b", b"c"):
        assert cache.insert(k, _resp(900))
    assert len(cache) == 3 and cache.used <= cache.size
    assert cache.lookup(b"a") is not None  # a is now the most recent
    assert cache.insert(b"d", _resp(900))
    assert cache.lookup(b"b") is None  # b went
    assert cache.lookup(b"a") is not None and cache.lookup(b"c") is not None
    assert not cache.insert(b"a", _resp(900))  # already there
    assert not cache.insert(b"huge", _resp(10_000))  # larger than the cache
    assert not cache.insert(b"e", InferResponse(error=None, failed=True))
    assert cache.stats.evictions == 1


def test_cached_responses_cannot_be_changed() -> None:
    cache = ResponseCache(1 << 20)
    original = _resp(4)
    cache.insert(b"k", original)
    original.outputs[0].array[:] = 7  # the model reuses its buffer
    hit = cache.lookup(b"k")
    assert hit is not None
    assert hit.outputs[0].array.tolist() == [0, 0, 0, 0]
    assert not hit.outputs[0].array.flags.writeable
