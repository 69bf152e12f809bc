"""Fixtures for the asyncio client tests: one event loop, three servers, the comparison.

``loop`` is a session-wide event loop running in a thread of its own; ``loop.run(coro)``
runs a coroutine there and returns its result. Every client of these tests lives on it,
so one in-process server (for ``httpx.ASGITransport``) serves the whole session.

``target`` is where a test sends its requests, in three variants:

* ``real``     real tritonserver 2.51.0 over a socket;
* ``bundled``  our server (``python -m tritonhttp.server``) over a socket;
* ``asgi``     our server in-process, reached through ``httpx.ASGITransport`` (no socket).

``apair`` holds a tritonhttp.aio client on the target and a tritonclient.http.aio client
(on the same server; for ``asgi``, on the bundled server's socket, since tritonclient
cannot go in-process). ``await apair.same(scenario)`` runs ``scenario(module, client)``
through both and asserts identical outcomes.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
import tritonclient.http as ref_http
import tritonclient.http.aio as ref_aio
from client.conftest import Outcome

import tritonhttp
import tritonhttp.aio as aio
from tritonhttp.testing import _real_triton as rt

T = TypeVar("T")
TESTS = Path(__file__).resolve().parent.parent
MODELS = TESTS / "models"
GENERATE_REPO = TESTS / "repos" / "cli_generate"
#: The arguments the CLI tests start real Triton with: sharing them shares the server.
GENERATE_ARGS = (
    f"--model-repository={GENERATE_REPO}",
    "--model-control-mode=explicit",
    "--load-model=*",
)
AScenario = Callable[[Any, Any], Awaitable[Any]]


class LoopThread:
    """An event loop running in a background thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="aio-tests", daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 120) -> T:
        """Run ``coro`` on the loop; its result (or exception)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        async def finish() -> None:
            await self.loop.shutdown_asyncgens()

        self.run(finish())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


@pytest.fixture(scope="session")
def loop() -> Iterator[LoopThread]:
    thread = LoopThread()
    yield thread
    thread.close()


@dataclass
class InProcess:
    """Our server running on the test loop, driven through httpx.ASGITransport."""

    server: Any
    http: httpx.AsyncClient


async def start_in_process(*args: str) -> InProcess:
    from tritonhttp.server import Server, parse_args

    server = Server(parse_args(list(args)))
    await server.load_models()
    transport = httpx.ASGITransport(app=server.http)
    return InProcess(server, httpx.AsyncClient(transport=transport))


async def stop_in_process(target: InProcess) -> None:
    await target.http.aclose()
    await target.server.stop()


@pytest.fixture(scope="session")
def in_process_factory(loop: LoopThread) -> Iterator[Callable[..., InProcess]]:
    """In-process servers on the test loop, one per distinct argument list."""
    servers: dict[tuple[str, ...], InProcess] = {}

    def factory(*args: str) -> InProcess:
        if args not in servers:
            servers[args] = loop.run(start_in_process(*args))
        return servers[args]

    yield factory
    for target in servers.values():
        loop.run(stop_in_process(target))


@dataclass
class Target:
    """Where requests go: ``url`` for sockets, plus an httpx client for in-process."""

    name: str
    url: str  # host:port (for asgi: the bundled server's, where tritonclient goes)
    http_client: httpx.AsyncClient | None = None

    def client(self, **kw: Any) -> aio.InferenceServerClient:
        if self.http_client is not None:
            return aio.InferenceServerClient("inprocess:8000", http_client=self.http_client, **kw)
        return aio.InferenceServerClient(self.url, **kw)


TARGETS = [pytest.param("real", marks=pytest.mark.real_triton), "bundled", "asgi"]


def make_target(
    name: str,
    request: pytest.FixtureRequest,
    repo_args: tuple[str, ...] = (),
) -> Target:
    """The ``name`` target serving tests/models (plus ``repo_args`` flags)."""
    if name == "real":
        factory = request.getfixturevalue("real_triton_factory")
        return Target(name, factory(MODELS, *repo_args).url)
    bundled = request.getfixturevalue("bundled_server_factory")(MODELS, *repo_args)
    if name == "bundled":
        return Target(name, bundled.url)
    in_process = request.getfixturevalue("in_process_factory")(
        f"--model-repository={MODELS}", *repo_args
    )
    return Target(name, bundled.url, in_process.http)


@pytest.fixture(params=TARGETS)
def target(request: pytest.FixtureRequest) -> Target:
    return make_target(request.param, request)


def describe(outcome: Outcome) -> Any:
    return outcome.describe()


async def run_async(scenario: AScenario, module: Any, client: Any) -> Outcome:
    try:
        return Outcome("ok", await scenario(module, client))
    except Exception as e:
        return Outcome("err", e)


@dataclass
class APair:
    ours: aio.InferenceServerClient
    ref: Any
    target: Target

    async def both(self, scenario: AScenario) -> tuple[Outcome, Outcome]:
        return await run_async(scenario, aio, self.ours), await run_async(
            scenario, ref_aio, self.ref
        )

    async def same(
        self, scenario: AScenario, ref_bug: type[BaseException] | None = None
    ) -> Outcome:
        """Run on both clients, assert identical outcomes, return ours.

        ``ref_bug``: tritonclient.http.aio is known to raise this instead (its NameError
        bug); ours must then raise an ``InferenceServerException``.
        """
        ours, ref = await self.both(scenario)
        if ref_bug is not None and ref.kind == "err" and isinstance(ref.value, ref_bug):
            assert ours.kind == "err", ours.value
            assert isinstance(ours.value, tritonhttp.InferenceServerException), ours.value
            return ours
        assert ours.kind == ref.kind, (ours.value, ref.value)
        if ours.kind == "err" and not isinstance(ref.value, ref_http.InferenceServerException):
            # tritonclient let a builtin or aiohttp exception through; ours is typed.
            assert isinstance(ours.value, tritonhttp.InferenceServerException), ours.value
            return ours
        assert describe(ours) == describe(ref)
        if ours.kind == "err":
            assert isinstance(ours.value, tritonhttp.InferenceServerException)
        return ours


async def open_pair(target: Target, **kw: Any) -> APair:
    return APair(target.client(**kw), ref_aio.InferenceServerClient(target.url, **kw), target)


async def close_pair(pair: APair) -> None:
    await pair.ours.close()
    await pair.ref.close()


@pytest.fixture
def apair(loop: LoopThread, target: Target) -> Iterator[APair]:
    pair = loop.run(open_pair(target))
    try:
        yield pair
    finally:
        loop.run(close_pair(pair))


@pytest.fixture(scope="session")
def generate_triton(real_triton_factory: Callable[..., rt.RealTriton]) -> rt.RealTriton:
    """Real Triton serving tests/models + tests/repos/cli_generate (the CLI tests' server)."""
    return real_triton_factory(MODELS, *GENERATE_ARGS)
