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

A relative repository path is looked up in the directory of the test file first, then
in the current directory. When a model fails to load, the fixture raises
:class:`ModelLoadError` whose message names each failing model with the server's reason.
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

from ._load_log import collecting, load_failures
from ._process import free_port

if TYPE_CHECKING:
    from tritonhttp import InferenceServerClient

__all__ = ["ModelLoadError", "ServedRepository", "triton_client", "triton_server"]


class ModelLoadError(RuntimeError):
    """The server did not start because models failed to load.

    ``failures`` maps each failing model to the reasons the server gave for it.
    """

    def __init__(self, failures: dict[str, list[str]], detail: str = "") -> None:
        self.failures = failures
        lines = [f"  {name}: {reason}" for name, reasons in failures.items() for reason in reasons]
        text = "models failed to load:\n" + "\n".join(lines)
        super().__init__(text + (f"\n{detail}" if detail else ""))


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
        with collecting() as messages:
            self._thread.start()
            started = self._ready.wait(timeout)
        if not started:
            raise RuntimeError(f"the server did not start within {timeout} s")
        if self._error is not None:
            failures = load_failures(messages)
            if failures:
                raise ModelLoadError(failures, str(self._error)) from self._error
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


def _resolve(repository: str | Path, test_dir: Path) -> Path:
    """A repository path: relative ones from the test file's directory, else from here."""
    path = Path(repository).expanduser()
    if path.is_absolute():
        return path
    beside = test_dir / path
    return beside.resolve() if beside.is_dir() or not path.is_dir() else path.resolve()


def _start_process(repository: Path, flags: list[str]) -> Any:
    """The server as a child process; ModelLoadError when models failed to load."""
    from ..server import _launch

    try:
        return _launch.start(repository, *flags)
    except RuntimeError as e:
        failures = load_failures(str(e).splitlines())
        if failures:
            raise ModelLoadError(failures) from None
        raise


@pytest.fixture
def triton_server(request: pytest.FixtureRequest) -> Iterator[ServeRepository]:
    """``triton_server(repository, isolation="in-process", models=None, args=())``.

    Serves ``repository`` (all models, or only ``models``) with tritonhttp's server and
    returns a :class:`ServedRepository` whose ``client`` is a connected
    ``tritonhttp.InferenceServerClient``. ``args`` are extra server flags
    (tritonserver's names). A relative ``repository`` is found in the test file's
    directory (else the current one). Raises :class:`ModelLoadError` naming each model
    that failed to load and why. Everything stops when the test ends.
    """
    served: list[ServedRepository] = []
    test_dir = Path(str(request.path)).parent

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
        repository = _resolve(repository, test_dir)
        if isolation == "process":
            process = _start_process(repository, flags)
            url = process.url

            def stop() -> None:
                process.stop()

        else:
            port = free_port()
            threaded = _ThreadedServer(
                [f"--model-repository={repository}", f"--http-port={port}",
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
