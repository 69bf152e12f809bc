"""Every coroutine of tritonhttp.aio side by side with tritonclient.http.aio.

Each scenario runs through both clients and must give the same result (inference
outputs compared byte for byte, dtype and shape included) or the same exception
(``str``, status, message) — against real Triton, against our bundled server over a
socket, and against our server in-process through ``httpx.ASGITransport`` (where
tritonclient, which cannot go in-process, talks to the bundled server's socket).
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np
import pytest
import tritonclient.http.aio as ref_aio
from client import _scenarios as shared
from client._scenarios import DTYPES, F32, add_sub_inputs

import tritonhttp
import tritonhttp.aio as aio

from .conftest import MODELS, APair, LoopThread, Target, close_pair, make_target, open_pair


def same(loop: LoopThread, pair: APair, scenario: Any, **kw: Any) -> Any:
    return loop.run(pair.same(scenario, **kw))


# -- health, metadata, configuration -----------------------------------------------------

AIO_ENDPOINTS = [
    *shared.ENDPOINTS,
    lambda m, c: c.unregister_cuda_shared_memory("no_such_region"),
    lambda m, c: c.is_server_live(headers={"X-Custom": 1}),
]


@pytest.mark.parametrize("index", range(len(AIO_ENDPOINTS)))
def test_endpoint_matches_tritonclient(loop: LoopThread, apair: APair, index: int) -> None:
    same(loop, apair, AIO_ENDPOINTS[index])


@pytest.mark.parametrize(
    "call",
    [
        *shared.INT_VERSIONS,
        lambda m, c: c.infer("add_sub", add_sub_inputs(m), model_version=1),
    ],
)
def test_non_string_version_is_a_clear_error(loop: LoopThread, apair: APair, call: Any) -> None:
    """tritonclient.http.aio raises NameError here (its missing raise_error)."""
    outcome = same(loop, apair, call, ref_bug=NameError)
    assert outcome.kind == "err" and "model version must be a string" in str(outcome.value)


def test_statistics_have_the_same_layout(loop: LoopThread, apair: APair) -> None:
    async def stats(m: Any, c: Any) -> Any:
        s = (await c.get_inference_statistics("add_sub"))["model_stats"][0]
        return sorted(s), sorted(s["inference_stats"])

    same(loop, apair, stats)


def test_trace_and_log_updates_round_trip(loop: LoopThread, apair: APair) -> None:
    async def go() -> None:
        before = await apair.ours.get_log_settings()
        for update in shared.LOG_UPDATES:
            await apair.same(update)
        assert await apair.ours.get_log_settings() == before
        for update in shared.TRACE_UPDATES:
            await apair.same(update)

    loop.run(go())


# -- inference ---------------------------------------------------------------------------


def test_add_sub_binary_and_json(loop: LoopThread, apair: APair) -> None:
    out = same(loop, apair, shared.add_sub)
    np.testing.assert_array_equal(out.value.as_numpy("OUTPUT0"), F32 * 3)
    assert out.value.as_numpy("OUTPUT0").flags.writeable
    same(loop, apair, shared.add_sub_json)


@pytest.mark.parametrize("datatype", sorted(DTYPES))
def test_identity_every_datatype(loop: LoopThread, apair: APair, datatype: str) -> None:
    data = DTYPES[datatype]

    async def scenario(m: Any, c: Any) -> Any:
        results = []
        for binary in (True, False):
            try:
                inp = m.InferInput(f"IN_{datatype}", list(data.shape), datatype)
                inp.set_data_from_numpy(data, binary_data=binary)
                out = m.InferRequestedOutput(f"OUT_{datatype}", binary_data=binary)
                results.append(await c.infer("identity_all", [inp], outputs=[out]))
            except tritonhttp.InferenceServerException as e:  # BF16 as JSON
                results.append(str(e))
            except ref_aio.InferenceServerException as e:
                results.append(str(e))
        return [r if isinstance(r, str) else _result_form(r) for r in results]

    outcome = same(loop, apair, scenario)
    binary_result = outcome.value[0]
    assert not isinstance(binary_result, str)


def _result_form(result: Any) -> Any:
    from client.conftest import normalize

    return normalize(result)


@pytest.mark.parametrize("binary", [True, False])
def test_bytes_identity(loop: LoopThread, apair: APair, binary: bool) -> None:
    data = np.array([b"", b"a", "h\u00e9llo".encode(), b"x" * 300], dtype=object)

    def scenario(m: Any, c: Any) -> Any:
        inp = m.InferInput("IN_STRING", [4], "BYTES").set_data_from_numpy(data, binary_data=binary)
        return c.infer(
            "identity_all", [inp], outputs=[m.InferRequestedOutput("OUT_STRING", binary)]
        )

    outcome = same(loop, apair, scenario)
    assert len(outcome.value.as_numpy("OUT_STRING")) == 4


@pytest.mark.filterwarnings("ignore:Sending a large body:ResourceWarning")  # aiohttp's
def test_large_tensor_round_trip(loop: LoopThread, apair: APair) -> None:
    """16 MB each way: the body is received straight into the result buffer."""
    data = np.random.default_rng(1).random(4 << 20, dtype=np.float32)

    def scenario(m: Any, c: Any) -> Any:
        inp = m.InferInput("IN_FP32", [data.size], "FP32").set_data_from_numpy(data)
        return c.infer("identity_all", [inp])

    outcome = same(loop, apair, scenario)
    np.testing.assert_array_equal(outcome.value.as_numpy("OUT_FP32"), data)


def test_many_short_strings(loop: LoopThread, apair: APair) -> None:
    same(loop, apair, shared.many_short_strings)


def test_classification_outputs(loop: LoopThread, apair: APair) -> None:
    same(loop, apair, shared.classification)


@pytest.mark.parametrize("algorithm", ["gzip", "deflate", "br", None])
def test_request_and_response_compression(
    loop: LoopThread, apair: APair, algorithm: str | None
) -> None:
    same(loop, apair, shared.compressed(algorithm))


def test_request_options(loop: LoopThread, apair: APair) -> None:
    same(loop, apair, shared.every_request_option)
    same(loop, apair, shared.string_sequence_id)


AIO_BAD_REQUESTS = [
    *shared.BAD_REQUESTS,
    lambda m, c: c.get_server_metadata(headers={"transfer-encoding": "chunked"}),
]


@pytest.mark.parametrize("index", range(len(AIO_BAD_REQUESTS)))
def test_bad_requests_fail_like_tritonclient(loop: LoopThread, apair: APair, index: int) -> None:
    outcome = same(loop, apair, AIO_BAD_REQUESTS[index])
    assert outcome.kind == "err"


@pytest.mark.parametrize("mode", [0, 1, 2, 9])
def test_model_errors(loop: LoopThread, apair: APair, mode: int) -> None:
    same(loop, apair, shared.model_error(mode))


def test_generate_request_body_and_parse_response_body(loop: LoopThread, apair: APair) -> None:
    header = (
        b'{"model_name":"add_sub","model_version":"1","outputs":[{"name":"OUTPUT0",'
        b'"datatype":"FP32","shape":[4],"parameters":{"binary_data_size":16}}]}'
    )

    async def scenario(m: Any, c: Any) -> Any:
        from client.conftest import normalize

        body, json_size = m.InferenceServerClient.generate_request_body(
            add_sub_inputs(m), outputs=[m.InferRequestedOutput("OUTPUT1")], request_id="r"
        )
        result = m.InferenceServerClient.parse_response_body(
            bytearray(header + F32.tobytes()), header_length=len(header)
        )
        return body, json_size, normalize(result)

    same(loop, apair, scenario)


def test_async_infer_matches_infer(loop: LoopThread, apair: APair) -> None:
    async def go() -> None:
        ours = await apair.ours.async_infer("add_sub", add_sub_inputs(aio), request_id="a1")
        ref = await apair.ref.infer("add_sub", add_sub_inputs(ref_aio), request_id="a1")
        assert ours.get_response() == ref.get_response()
        np.testing.assert_array_equal(ours.as_numpy("OUTPUT1"), ref.as_numpy("OUTPUT1"))
        tasks = [apair.ours.async_infer("add_sub", add_sub_inputs(aio)) for _ in range(8)]
        for result in [await t for t in tasks]:
            np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), F32 * 3)
        mode = np.array([0], np.int32)
        task = apair.ours.async_infer(
            "error_model", [aio.InferInput("MODE", [1], "INT32").set_data_from_numpy(mode)]
        )
        with pytest.raises(tritonhttp.InferenceServerException, match="intentional"):
            await task
        with pytest.raises(tritonhttp.InferenceServerException, match="reserved"):
            apair.ours.async_infer("add_sub", add_sub_inputs(aio), parameters={"priority": 1})

    loop.run(go())


def test_verbose_output_is_the_same(
    loop: LoopThread, target: Target, capfd: pytest.CaptureFixture[str]
) -> None:
    if target.name == "asgi":
        pytest.skip("the in-process server has no URL of its own to print")

    async def calls(m: Any) -> str:
        c = m.InferenceServerClient(target.url, verbose=True)
        try:
            capfd.readouterr()
            await c.is_server_live()
            await c.get_model_metadata("add_sub", headers={"X-A": "b"})
            await c.infer("add_sub", add_sub_inputs(m), request_id="v")
            with contextlib.suppress(Exception):
                await c.get_model_metadata("nope")
            await c.unregister_system_shared_memory()
            return capfd.readouterr().out
        finally:
            await c.close()

    ours = loop.run(calls(aio))
    ref = loop.run(calls(ref_aio))
    # aiohttp asks for gzip by default, so Triton compressed its infer answer (different
    # Content-Encoding and -Length), and aiohttp prints well-known header names in their
    # canonical case; everything else printed is the same.
    assert _normalized(ours) == _normalized(ref)
    assert "<ClientResponse(http://" in ours and "[404 Not Found]" in ours


def _normalized(text: str) -> str:
    import re

    text = re.sub(
        r"<CIMultiDictProxy\(.*\)>", lambda m: m.group(0).lower(), text, flags=re.MULTILINE
    )
    text = re.sub(r"'(date|content-encoding)': '[^']*', ", "", text)
    return re.sub(r"'content-length': '\d+'", "'content-length': N", text)


# -- shared memory (system) --------------------------------------------------------------


def test_system_shared_memory_round_trip(loop: LoopThread, apair: APair) -> None:
    with shared.region(64) as (key, shm):
        buf = np.ndarray((16,), np.float32, buffer=shm.buf)
        buf[:4] = F32
        buf[4:8] = F32 * 2

        async def scenario(m: Any, c: Any) -> Any:
            name = "io_" + m.__name__.replace(".", "_")
            await c.register_system_shared_memory(name, key, 64)
            try:
                status = await c.get_system_shared_memory_status(name)
                inputs, outputs = shared.shm_add_sub_io(m, name)
                result = await c.infer("add_sub", inputs, outputs=outputs)
                return shared.shm_round_trip_answer(status, result, buf)
            finally:
                await c.unregister_system_shared_memory(name)

        outcome = same(loop, apair, scenario)
        assert outcome.value[3] == (F32 * 3).tolist()
        same(loop, apair, lambda m, c: c.register_system_shared_memory("bad", "/no_such_key", 64))


# -- model control (explicit mode) -------------------------------------------------------


@pytest.mark.parametrize("name", [pytest.param("real", marks=pytest.mark.real_triton), "bundled"])
def test_load_and_unload_in_explicit_mode(
    loop: LoopThread, request: pytest.FixtureRequest, name: str
) -> None:
    target = make_target(name, request, ("--model-control-mode=explicit", "--load-model=add_sub"))
    config = '{"backend": "python", "max_batch_size": 0}'
    model_py = (MODELS / "identity_bytes" / "1" / "model.py").read_bytes()

    async def go() -> None:
        pair = await open_pair(target)
        try:
            for model in ("error_model", "identity_bytes"):
                await pair.same(
                    lambda m, c, model=model: _load_and_check(c, model),
                )
                await pair.same(
                    lambda m, c, model=model: _unload_and_check(c, model),
                )
            await pair.same(lambda m, c: c.load_model("no_such_model"))
            await pair.same(lambda m, c: c.load_model("identity_bytes", config=config))
            await pair.same(lambda m, c: c.unload_model("identity_bytes", unload_dependents=True))
            await pair.same(
                lambda m, c: c.load_model(
                    "identity_bytes", files={"file:1/model.py": model_py}, config=config
                )
            )
            index = await pair.ours.get_model_repository_index()
            assert {"name": "add_sub", "version": "1", "state": "READY"} in index
        finally:
            await close_pair(pair)

    loop.run(go())


async def _load_and_check(c: Any, model: str) -> Any:
    await c.load_model(model)
    return await c.is_model_ready(model)


async def _unload_and_check(c: Any, model: str) -> Any:
    await c.unload_model(model)
    return await c.is_model_ready(model)


# -- plugins -----------------------------------------------------------------------------


def test_plugins(loop: LoopThread, apair: APair) -> None:
    from tritonclient.http.aio.auth import BasicAuth as RefBasicAuth

    from tritonhttp.aio.auth import BasicAuth

    async def go() -> None:
        with pytest.raises(tritonhttp.InferenceServerException):
            apair.ours.unregister_plugin()
        apair.ours.register_plugin(BasicAuth("user", "secret"))
        apair.ref.register_plugin(RefBasicAuth("user", "secret"))
        await apair.same(lambda m, c: _plugin_name(c))
        for call in shared.PLUGGED_CALLS:
            await apair.same(call)
        apair.ours.unregister_plugin()
        apair.ref.unregister_plugin()
        apair.ours.register_plugin(shared.chunking_plugin(aio.InferenceServerClientPlugin))
        apair.ref.register_plugin(shared.chunking_plugin(ref_aio.InferenceServerClientPlugin))
        await apair.same(lambda m, c: c.get_server_metadata())  # checked after the plugin

    loop.run(go())


async def _plugin_name(c: Any) -> str:
    return type(c.plugin()).__name__
