"""One model instance's life cycle with Triton's rules, whatever process it runs in.

:class:`ModelHost` imports ``model.py``, runs ``auto_complete_config``, ``initialize``,
``execute`` and ``finalize``, and applies what Triton 2.51 does with each return value
and exception (python-backend spec §3). Every final answer leaves through the request's
:class:`~triton_python_backend_utils._request.RequestLink` (``deliver`` / ``fail``);
how a link reaches the server (same process, or a worker's control channel) is the
caller's business.

Only the standard library, numpy and ``triton_python_backend_utils`` are used here: a
worker process imports this module without the server's dependencies.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import json
import threading
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import triton_python_backend_utils as pb
from triton_python_backend_utils import _runtime
from triton_python_backend_utils._request import InferenceRequest, InferenceResponse

from ._loader import _ours, format_exception, import_model_module

__all__ = ["ModelError", "ModelHost", "current_host"]

_RESCHEDULE = pb.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE
READY_TIMEOUT_S = 5.0
#: what model code may raise and Triton's stub reports as the model's error:
#: ``sys.exit()`` and ``KeyboardInterrupt`` included (they end neither stub nor server)
MODEL_ERRORS = (Exception, SystemExit, KeyboardInterrupt)


class ModelError(Exception):
    """Loading or initialising the model failed; ``str()`` is Triton's text for it."""


_local = threading.local()


def current_host() -> ModelHost | None:
    """The host whose model code runs on this thread (None on other threads)."""
    return getattr(_local, "host", None)


class _AsyncLoop:
    """The instance's asyncio loop on a daemon thread (for ``async def execute``)."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def submit(self, coro: Any) -> concurrent.futures.Future[Any]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)


def _model_file(model_dir: Path, version: int, filename: str) -> Path:
    if not filename.endswith(".py"):
        raise ModelError(f"Model name must end with '.py'. Model name is \"{filename}\".")
    path = model_dir / str(version) / filename
    if not path.is_file():
        raise ModelError(
            "Failed to preinitialize Python stub: Python model file not found in "
            f"'{model_dir / str(version)}'"
        )
    return path


def load_model_class(
    model_dir: Path, version: int, filename: str, own_process: bool = False
) -> tuple[type[Any], Path]:
    """Import ``model.py`` as Triton does; the ``TritonPythonModel`` class and the file."""
    path = _model_file(model_dir, version, filename)
    try:
        module = import_model_module(model_dir, version, filename, own_process)
    except MODEL_ERRORS as e:
        raise ModelError(format_exception(e)) from None
    cls = getattr(module, "TritonPythonModel", None)
    if cls is None:
        raise ModelError(
            f"AttributeError: module '{module.__name__}' has no attribute 'TritonPythonModel'"
        )
    return cls, path


def auto_complete(cls: type[Any], model_name: str, config_json: str) -> str | None:
    """Run ``TritonPythonModel.auto_complete_config`` (on the class); the completed config
    as JSON, or None when the model has no such method."""
    hook = getattr(cls, "auto_complete_config", None)
    if hook is None:
        return None
    try:
        result = hook(pb.ModelConfig(config_json))
    except MODEL_ERRORS as e:
        raise ModelError(format_exception(e)) from None
    if not isinstance(result, pb.ModelConfig):
        raise ModelError(
            f"auto_complete_config function in model '{model_name}' must return a valid "
            "pb.ModelConfig object."
        )
    try:  # (what json cannot write, e.g. numpy ints in dims, fails the load)
        return json.dumps(result._model_config)
    except (TypeError, ValueError) as e:
        raise ModelError(format_exception(e)) from None


class ModelHost:
    """A ``TritonPythonModel`` instance and the rules around calling it."""

    def __init__(
        self,
        cls: type[Any],
        model_file: Path,
        instance_name: str,
        decoupled: bool,
        *,
        block: Callable[[concurrent.futures.Future[Any]], Any] | None = None,
    ) -> None:
        self.instance_name = instance_name
        self.model_file = model_file
        self.model_dir = str(model_file.parent)
        self.decoupled = decoupled
        self.phase = "init"
        self._cls = cls
        self._model: Any = None
        self._loop: _AsyncLoop | None = None
        #: waits for a future of the instance loop (a worker keeps its channel going)
        self._block = block or (lambda fut: fut.result())
        self.uses_async = False
        #: what the hosting server attaches (in-process: its ModelServices)
        self.context: Any = None

    # ------------------------------------------------------------------ context

    def _enter(self) -> ModelHost | None:
        previous = current_host()
        _local.host = self
        return previous

    @staticmethod
    def _leave(previous: ModelHost | None) -> None:
        _local.host = previous

    def fail_text(self, message: str) -> str:
        return (
            f"Failed to process the request(s) for model '{self.instance_name}', message: {message}"
        )

    # ------------------------------------------------------------------ life cycle

    def initialize(self, args: dict[str, str]) -> None:
        """``TritonPythonModel()`` then ``initialize(args)``; raises ModelError."""
        previous = self._enter()
        try:
            self._model = self._cls()
            init = getattr(self._model, "initialize", None)
            if callable(init):
                result = init(args)
                if inspect.iscoroutine(result):
                    self._run_coroutine(result)
        except MODEL_ERRORS as e:
            raise ModelError(format_exception(e)) from None
        finally:
            self._leave(previous)
        self.phase = "ready"

    def finalize(self) -> None:
        """``finalize()`` if defined; errors are logged and ignored, as Triton does."""
        self.phase = "finalize"
        previous = self._enter()
        try:
            fini = getattr(self._model, "finalize", None)
            if callable(fini):
                result = fini()
                if inspect.iscoroutine(result):
                    self._run_coroutine(result)
        except MODEL_ERRORS as e:
            _runtime.current().log(
                2, f"Failed to finalize model instance '{self.instance_name}': "
                f"{format_exception(e)}", "pb_stub.cc", 0,
            )  # fmt: skip
        finally:
            self._leave(previous)
            if self._loop is not None:
                self._loop.stop()
                self._loop = None

    def has_ready_hook(self) -> bool:
        """Whether the model defines ``is_ready()``."""
        return callable(getattr(self._model, "is_ready", None))

    def is_ready(self) -> bool | None:
        """The model's ``is_ready()`` (None when it has none); errors and timeouts: False."""
        hook = getattr(self._model, "is_ready", None)
        if not callable(hook):
            return None
        try:
            result = hook()
            if inspect.iscoroutine(result):
                fut = self._async_loop().submit(result)
                result = fut.result(READY_TIMEOUT_S)
        except MODEL_ERRORS:
            return False
        return result if isinstance(result, bool) else False

    def _async_loop(self) -> _AsyncLoop:
        if self._loop is None:
            self._loop = _AsyncLoop(f"{self.instance_name}-asyncio")
        return self._loop

    def _run_coroutine(self, coro: Any) -> Any:
        self.uses_async = True
        return self._block(self._async_loop().submit(coro))

    # ------------------------------------------------------------------ execute

    def execute(self, requests: list[InferenceRequest]) -> list[bool] | None:
        """Run one batch; every request is answered (or will be) through its link.

        Returns, per request, whether it was released with RESCHEDULE; None when the
        batch failed as a whole (``execute`` raised, or broke the return rules): Triton
        then counts every request of it as failed, those a decoupled model answered
        already included.
        """
        previous = self._enter()
        try:
            return self._execute(requests)
        finally:
            self._leave(previous)

    def _execute(self, requests: list[InferenceRequest]) -> list[bool] | None:
        execute = getattr(self._model, "execute", None)
        if not callable(execute):
            self._fail_all(
                requests,
                f"Python model {self.model_file} does not implement `execute` method.",
            )
            return None
        try:
            result = execute(requests)
            if inspect.iscoroutine(result):
                if self.decoupled:
                    self._schedule(result)
                    result = None
                else:
                    result = self._run_coroutine(result)
        except MODEL_ERRORS as e:
            self._fail_all(requests, format_exception(e))
            return None
        if self.decoupled:
            return self._decoupled_return(requests, result)
        return self._default_return(requests, result)

    def _schedule(self, coro: Any) -> None:
        self.uses_async = True
        fut = self._async_loop().submit(coro)

        def done(f: concurrent.futures.Future[Any]) -> None:
            error = f.exception() if not f.cancelled() else None
            if error is not None:
                _runtime.current().log(2, format_traceback(error), "pb_stub.cc", 945)

        fut.add_done_callback(done)

    def _fail_all(self, requests: list[InferenceRequest], message: str) -> None:
        text = self.fail_text(message)
        for r in requests:
            _fail(r, text)

    def _decoupled_return(self, requests: list[InferenceRequest], result: Any) -> list[bool] | None:
        if result is not None:
            self._fail_all(
                requests,
                f"Python model '{self.instance_name}' is using the decoupled mode and the "
                "execute function must return None.",
            )
            return None
        return [r._release_flags == _RESCHEDULE for r in requests]

    def _default_return(self, requests: list[InferenceRequest], result: Any) -> list[bool] | None:
        n = len(requests)
        if result is None:
            # Triton leaves unanswered clients waiting forever; here they get an error.
            result = [None] * n
            unanswered = [
                r for r in requests if not _answering(r) and r._release_flags != _RESCHEDULE
            ]
            if unanswered:
                self._fail_all(
                    unanswered,
                    f"Expected a list in the execute return, found type '{type(None)}'.",
                )
        if not isinstance(result, list):
            self._fail_all(
                requests, f"Expected a list in the execute return, found type '{type(result)}'."
            )
            return None
        if len(result) != n:
            self._fail_all(
                requests,
                "Number of InferenceResponse objects do not match the number of "
                f"InferenceRequest objects. InferenceRequest(s) size is:{n}, and "
                f"InferenceResponse(s) size is:{len(result)}\n",
            )
            return None
        problem = None
        for request, item in zip(requests, result, strict=True):
            sender = request._sender
            if request._release_flags == _RESCHEDULE:
                if item is not None:
                    problem = (
                        "Expected a None object in the execute function return list for "
                        f"reschduled request, found type '{type(item)}'."
                    )
            elif item is None:
                if not _answering(request):
                    problem = (
                        "Expected an 'InferenceResponse' object in the execute function return "
                        f"list, found type '{type(item)}'."
                    )
            elif not isinstance(item, InferenceResponse):
                problem = (
                    "Expected an 'InferenceResponse' object in the execute function return "
                    f"list, found type '{type(item)}'."
                )
            elif sender._closed:
                problem = "Unable to send response. Response sender has been closed."
            elif sender._sent:
                problem = (
                    "Unable to send response. Non-decoupled model cannot send more than one "
                    "response."
                )
            if problem is not None:
                break
        if problem is not None:
            self._fail_all(requests, problem)
            return None
        flags = []
        for request, item in zip(requests, result, strict=True):
            rescheduled = request._release_flags == _RESCHEDULE
            flags.append(rescheduled)
            if item is not None and not rescheduled:
                try:
                    request._sender._send(item, True)
                except pb.TritonModelException as e:  # a thread closed it meanwhile
                    _fail(request, self.fail_text(str(e)))
        return flags


def format_traceback(exc: BaseException) -> str:
    """``exc`` as Triton's stub logs an exception of a background ``execute`` coroutine:
    Python's own traceback text (``Traceback (most recent call last):`` ...), chained
    exceptions included, without the frames of the server and of pb_utils (C++ in
    Triton)."""
    te = traceback.TracebackException.from_exception(exc)
    seen: set[int] = set()
    todo = [te]
    while todo:
        item = todo.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        kept = [f for f in item.stack if not _ours(f.filename)]
        item.stack = traceback.StackSummary.from_list(kept)
        todo.extend(e for e in (item.__cause__, item.__context__) if e is not None)
    return "".join(te.format())


def _answering(request: InferenceRequest) -> bool:
    """The request is (being) answered through its response sender."""
    sender = request._sender
    return sender._closed or sender._sent > 0


def _fail(request: InferenceRequest, text: str) -> None:
    """Answer with a final error unless the request was already closed."""
    sender = request._sender
    with sender._lock:
        if sender._closed:
            return
        sender._closed = True
        sender._pending = None
    link = request._link
    if link is not None:
        link.fail(text)
