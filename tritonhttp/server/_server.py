"""Wiring and running the server: repository, HTTP and metrics endpoints, signals."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import gc
import logging
import os
import signal
import sys
import time
from collections.abc import Sequence
from typing import Any

from ._options import ServerOptions
from .backends.python import PythonBackend
from .backends.python._direct import DirectReply, ReplyCodec
from .core._bridge import CoreBridge
from .core._cache import MIN_SIZE, ResponseCache
from .core._core import VERSION, ServerCore
from .core._metrics import make_registry
from .core._rate_limit import RateLimiter
from .core._repository import Repository
from .core._settings import LogSettings, TraceSettings
from .front import HttpFrontend, MetricsApp, _reply
from .http import HttpServer, UvicornServer
from .support import _platform
from .support._logging import configure_logging

__all__ = ["Server", "StartupError"]

#: the front's reply capability and codec, handed to the Python backend; typed as what
#: the backend expects of them, so mypy checks that the two sides agree
REPLY_CODEC: ReplyCodec = _reply
REPLY_TYPE: type[DirectReply] = _reply.HttpReply

log = logging.getLogger("tritonhttp.server")


class StartupError(RuntimeError):
    """The server could not start (bad repository, failed models with exit-on-error...)."""


def _table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> str:
    widths = [
        max(len(header[i]), *(len(r[i]) for r in rows)) if rows else len(header[i])
        for i in range(len(header))
    ]
    line = "+" + "+".join("-" * (w + 2) for w in widths) + "+"

    def fmt(r: tuple[str, ...]) -> str:
        return "|" + "|".join(f" {c:<{w}} " for c, w in zip(r, widths, strict=False)) + "|"

    return "\n".join([line, fmt(header), line, *(fmt(r) for r in rows), line])


class Server:
    """A running tritonhttp server (build with options, then ``await serve()``)."""

    def __init__(self, options: ServerOptions) -> None:
        self.options = options
        o = options
        try:
            trace = TraceSettings.from_config(o.trace_config)
        except ValueError as e:
            raise StartupError(f"error: --trace-config: {e}") from None
        if o.cache_size is not None and o.cache_size < MIN_SIZE:
            # tritonserver's local cache cannot lay out a buffer this small
            raise StartupError(
                "error: creating server: Internal - Failed to initialize LocalCache: Could "
                "not initialize buffer in basic_managed_external_buffer constructor"
            )
        self.python_backend = PythonBackend(
            isolation=o.python_isolation, reply_codec=_reply.__name__
        )
        self.repository = Repository(
            o.model_repositories,
            o.model_control_mode,
            {"python": self.python_backend},
            o.backend_config,
            o.strict_readiness,
            o.auto_complete,
            ResponseCache(o.cache_size) if o.cache_size is not None else None,
            RateLimiter(o.rate_limit, o.rate_limit_resources),
        )
        self.repository.namespacing = o.model_namespacing
        self.repository.summary_quantiles = o.summary_quantiles
        self.repository.quantile_problems = o.quantile_problems
        self.core = ServerCore(
            self.repository,
            server_id=o.server_id,
            registry=make_registry(
                self.repository.loaded_versions,
                self.repository.response_cache,
                cpu=o.cpu_metrics,
                latency_counters=o.latency_counters,
            ),
            trace=trace,
            log=LogSettings(
                log_file=o.log_file,
                log_info=o.log_info,
                log_warning=o.log_warning,
                log_error=o.log_error,
                log_verbose_level=o.log_verbose,
                log_format=o.log_format,
            ),
        )
        self.http = HttpFrontend(self.core, o.restricted_apis, o.header_forward_pattern)
        self.metrics = MetricsApp(self.core)
        self._stop = asyncio.Event() if sys.version_info >= (3, 10) else None
        self._listeners: list[HttpServer | UvicornServer] = []
        self._poll: asyncio.Task[None] | None = None
        #: what ``python -m tritonhttp.server`` exits with after :meth:`serve`: 1 when the
        #: shutdown ran out of ``--exit-timeout-secs`` (as tritonserver does)
        self.exit_status = 0

    def request_stop(self) -> None:
        """Begin a clean shutdown (what SIGINT/SIGTERM do)."""
        assert self._stop is not None
        self._stop.set()

    async def load_models(self) -> None:
        """Load the startup models (what :meth:`start` does before opening ports).

        Enough for driving :attr:`http` in-process, e.g. with ``httpx.ASGITransport``.
        """
        o = self.options
        if not _platform.workers_supported():
            log.info(
                "worker processes are not supported on this platform (%s): Python models "
                "run in the server's process",
                _platform.system(),
            )
        self._install_pb_hooks()
        failed = await self.repository.load_startup(o.load_models)
        self._log_models()
        if failed and o.exit_on_error:
            await self.repository.shutdown()
            raise StartupError("error: creating server: Internal - failed to load all models")

    async def start(self) -> None:
        """Load the startup models and open the HTTP (and metrics) ports."""
        o = self.options
        await self.load_models()
        kind = HttpServer if o.http_server == "native" else UvicornServer
        targets: list[tuple[Any, str, int]] = [(self.http, o.http_address, o.http_port)]
        if o.allow_metrics:
            targets.append((self.metrics, o.metrics_address or o.http_address, o.metrics_port))
        for app, host, port in targets:
            listener = kind(
                app,
                busy_wait_us=o.http_busy_wait_us if app is self.http else 0,
                keep_raw_header_names=o.header_forward_pattern is not None,
            )
            try:
                await listener.listen(host, port)
            except OSError as e:
                await self._close_servers(0.0)
                await self.repository.shutdown()
                raise StartupError(_listen_error(app is self.http, host, port, e)) from None
            self._listeners.append(listener)
        log.info("Started HTTPService at %s:%d", o.http_address, o.http_port)
        if o.allow_metrics:
            log.info(
                "Started Metrics Service at %s:%d",
                o.metrics_address or o.http_address,
                o.metrics_port,
            )
        if o.model_control_mode == "poll":
            self._poll = asyncio.get_running_loop().create_task(
                self.repository.poll_forever(o.repository_poll_secs)
            )

    def _install_pb_hooks(self) -> None:
        """Lend the Python backend the core's bridge (BLS, model control, metrics)."""
        self.python_backend.bind(CoreBridge(self.repository, self.core.registry))

    def _log_models(self) -> None:
        rows = [
            (
                item["name"],
                item.get("version", ""),
                item.get("state", "")
                if not item.get("reason")
                else f"{item['state']}: {item['reason'].splitlines()[0] if item['reason'] else ''}",
            )
            for item in self.repository.index()
        ]
        log.info("\n%s", _table(("Model", "Version", "Status"), rows))
        o = self.options
        if o.allow_metrics and o.cpu_metrics:
            log.info("Collecting CPU metrics")
        info = [
            ("server_id", o.server_id),
            ("server_version", VERSION),
            ("model_repository_path[0]", str(o.model_repositories[0])),
            ("model_control_mode", f"MODE_{o.model_control_mode.upper()}"),
            ("strict_readiness", str(int(o.strict_readiness))),
            ("exit_timeout", str(int(o.exit_timeout_secs))),
        ]
        log.info("\n%s", _table(("Option", "Value"), info))

    async def _close_servers(self, timeout: float) -> bool:
        """Stop listening at once; let the connections' requests finish within
        ``timeout``, then cut off the rest. True when nothing had to be cut off."""
        listeners, self._listeners = self._listeners, []
        results = await asyncio.gather(
            *(listener.shutdown(timeout) for listener in listeners), return_exceptions=True
        )
        return all(result is True for result in results)

    async def stop(self) -> bool:
        """Triton's shutdown within one exit timeout: refuse new connections, let the
        requests on open ones finish (the server live and ready meanwhile), then unload
        every model. False when the timeout ran out first."""
        deadline = time.monotonic() + self.options.exit_timeout_secs
        if self._poll is not None:
            self._poll.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._poll
        in_time = await self._close_servers(max(0.0, deadline - time.monotonic()))
        self.repository.live = False
        try:
            await asyncio.wait_for(
                self.repository.shutdown(), max(0.0, deadline - time.monotonic())
            )
        except asyncio.TimeoutError:
            in_time = False
        self.python_backend.close()
        self.core.shm.close()
        self.core.tracer.close()
        return in_time

    async def serve(self) -> None:
        """Run until SIGINT/SIGTERM (or :meth:`request_stop`)."""
        loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        await self.start()
        # what lives on after start-up (modules, configurations, loaded models) is left
        # out of the collector's scans from now on
        gc.freeze()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, self._on_signal, sig)
        try:
            await self._stop.wait()
        finally:
            log.info("Waiting for in-flight requests to complete.")
            if await self.stop():
                log.info("All models are stopped, unloading models")
            else:
                log.error(
                    "failed to stop server: Internal - Exit timeout expired. Exiting immediately."
                )
                self.exit_status = 1

    def _on_signal(self, sig: signal.Signals) -> None:
        """The first SIGINT/SIGTERM starts a clean stop and says what it waits for; a
        second one ends the process at once."""
        assert self._stop is not None
        if self._stop.is_set():
            log.warning("%s again: stopping now, without waiting", sig.name)
            logging.shutdown()
            os._exit(128 + int(sig))
        n = self.http.in_flight
        timeout = self.options.exit_timeout_secs
        again = "Ctrl-C" if sig == signal.SIGINT else sig.name
        log.info(
            "%s: waiting for %d in-flight request%s, up to %g s; %s again to stop now",
            sig.name, n, "" if n == 1 else "s", timeout, again,
        )  # fmt: skip
        self._stop.set()


#: the most open files the server asks for (connections, shared-memory regions, workers)
OPEN_FILES_CAP = 65536


def _listen_error(http: bool, host: str, port: int, error: OSError) -> str:
    """What Triton says when the HTTP or the metrics service cannot listen."""
    service = "HTTP" if http else "Metrics"
    if error.errno == errno.EADDRINUSE or "address already in use" in str(error):
        return (
            f"failed to start {service} service: Unavailable - Socket '{host}:{port}' "
            "already in use "
        )
    return f"failed to start {service} service: Unavailable - {error}"


def raise_open_file_limit(cap: int = OPEN_FILES_CAP) -> None:
    """Raise the soft RLIMIT_NOFILE to the hard limit (at most ``cap``); best effort.

    Many client connections and shared-memory regions each hold a descriptor; the common
    soft default of 1024 is easily reached. Does nothing where ``resource`` is missing
    (Windows) or the limit cannot be changed.
    """
    try:
        import resource
    except ImportError:  # pragma: no cover - Windows
        return
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        target = cap if hard == resource.RLIM_INFINITY else min(hard, cap)
        if soft != resource.RLIM_INFINITY and soft < target:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (OSError, ValueError):  # e.g. macOS caps the soft limit below the hard one
        pass


def run(options: ServerOptions) -> int:
    """Configure logging, run the server on uvloop (when available); the exit status.

    A shutdown that the exit timeout cut off ends the process there (status 1)."""
    raise_open_file_limit()
    configure_logging(
        options.log_verbose, options.log_info, options.log_warning, options.log_error,
        options.log_format, options.log_file,
    )  # fmt: skip
    warning = options.grpc_warning()
    if warning:
        log.warning("%s", warning)
    try:
        server = Server(options)
    except StartupError as e:
        print(str(e), file=sys.stderr)
        return 1
    try:
        import uvloop

        runner: Any = uvloop.run
    except ImportError:  # pragma: no cover - Windows
        runner = asyncio.run
    try:
        runner(server.serve())
    except StartupError as e:
        log.error("%s", e)
        print(str(e), file=sys.stderr)
        return 1
    if server.exit_status:
        # cut off by the exit timeout: end at once, as tritonserver does, without waiting
        # for model code still running in this process's threads
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(server.exit_status)
    return 0
