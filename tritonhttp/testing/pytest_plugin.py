"""pytest fixtures that serve a Triton model repository for a test.

Installed with ``tritonhttp[server]`` and registered as a pytest plugin (entry point
``pytest11``), so the fixtures are available in any test suite::

    def test_add_sub(triton_server):
        served = triton_server("models", isolation="in-process")
        a = tritonhttp.InferInput("INPUT0", [4], "FP32")
        ...
        result = served.client.infer("add_sub", [a, b])

* ``isolation="in-process"`` (the default here) runs the server on a thread of the test
  process, so the models' code runs in it too: breakpoints, ``pytest --pdb`` and
  coverage see ``model.py`` like any other module.
* ``isolation="process"`` runs the server as a separate process with one worker process
  per model instance, exactly as ``python -m tritonhttp.server`` does.

``triton_client`` is a shortcut: a connected client for the repository given by the
``triton_repository`` marker (``@pytest.mark.triton_repository("models")``) or by a
``triton_repository`` fixture the suite defines.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ._process import free_port

if TYPE_CHECKING:
    from tritonhttp import InferenceServerClient

__all__ = ["ServedRepository", "triton_client", "triton_server"]


class _ThreadedServer:
    """The server on its own event loop, on a thread of this process."""

    def __init__(self, argv: list[str]) -> None:
        self._argv = argv
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, name="tritonhttp-server", daemon=True)

    def start(self, timeout: float = 120.0) -> None:
        self._thread.start()
        if not self._ready.wait(timeout):
            raise RuntimeError(f"the server did not start within {timeout} s")
        if self._error is not None:
            raise RuntimeError(f"the server did not start: {self._error}") from self._error

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._main())
        finally:
            self._loop.close()

    async def _main(self) -> None:
        from triton_python_backend_utils import _runtime

        from ..server import Server, parse_args

        previous = _runtime.current()
        self._stop = asyncio.Event()
        try:
            server = Server(parse_args(self._argv))
            await server.start()
        except BaseException as e:
            self._error = e
            self._ready.set()
            _runtime.install(previous)
            return
        self._ready.set()
        try:
            await self._stop.wait()
        finally:
            await server.stop()
            _runtime.install(previous)

    def stop(self, timeout: float = 60.0) -> None:
        if self._stop is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout)


@dataclass
class ServedRepository:
    """A repository being served for a test: where it is and a client connected to it."""

    url: str
    client: InferenceServerClient
    isolation: str
    #: the server process (``isolation="process"``; None in-process)
    process: Any = None
    _stop: Callable[[], None] = field(default=lambda: None, repr=False)

    def log(self) -> str:
        """The server log (process isolation; in-process logs go through ``logging``)."""
        return self.process.log() if self.process is not None else ""

    def stop(self) -> None:
        """Close the client and stop the server (done after the test anyway)."""
        with contextlib.suppress(Exception):
            self.client.close()
        self._stop()
        self._stop = lambda: None


ServeRepository = Callable[..., ServedRepository]


@pytest.fixture
def triton_server() -> Iterator[ServeRepository]:
    """``triton_server(repository, isolation="in-process", models=None, args=())``.

    Serves ``repository`` (all models, or only ``models``) with tritonhttp's server and
    returns a :class:`ServedRepository` whose ``client`` is a connected
    ``tritonhttp.InferenceServerClient``. ``args`` are extra server flags
    (tritonserver's names). Everything stops when the test ends.
    """
    served: list[ServedRepository] = []

    def serve(
        repository: str | Path,
        isolation: str = "in-process",
        models: Sequence[str] | None = None,
        args: Sequence[str] = (),
    ) -> ServedRepository:
        from tritonhttp import InferenceServerClient

        if isolation not in ("in-process", "process"):
            raise ValueError(f"isolation must be 'in-process' or 'process', not {isolation!r}")
        flags = [f"--python-isolation={isolation}", *args]
        if models is not None:
            flags += ["--model-control-mode=explicit", *(f"--load-model={m}" for m in models)]
        if isolation == "process":
            from ..server import _launch

            process = _launch.start(repository, *flags)
            url = process.url

            def stop() -> None:
                process.stop()

        else:
            port = free_port()
            threaded = _ThreadedServer(
                [f"--model-repository={Path(repository).resolve()}", f"--http-port={port}",
                 "--allow-metrics=false", *flags]
            )  # fmt: skip
            threaded.start()
            process, url = None, f"127.0.0.1:{port}"

            def stop() -> None:
                threaded.stop()

        result = ServedRepository(url, InferenceServerClient(url), isolation, process, stop)
        served.append(result)
        return result

    yield serve
    for s in reversed(served):
        s.stop()


@pytest.fixture
def triton_client(
    request: pytest.FixtureRequest, triton_server: ServeRepository
) -> InferenceServerClient:
    """A client connected to the repository of the ``triton_repository`` marker (or of a
    ``triton_repository`` fixture), served in-process unless the marker says
    ``isolation="process"``."""
    marker = request.node.get_closest_marker("triton_repository")
    if marker is not None:
        repository = marker.args[0] if marker.args else marker.kwargs["path"]
        isolation = marker.kwargs.get("isolation", "in-process")
    else:
        try:
            repository = request.getfixturevalue("triton_repository")
        except pytest.FixtureLookupError:
            raise pytest.UsageError(
                "triton_client needs @pytest.mark.triton_repository(<path>) or a "
                "'triton_repository' fixture"
            ) from None
        isolation = "in-process"
    return triton_server(repository, isolation=isolation).client


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "triton_repository(path, isolation='in-process'): the model repository the "
        "triton_client fixture serves",
    )
