"""Command-line flags with tritonserver's names, parsed into :class:`ServerOptions`."""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

from .backends.python._settings import ISOLATIONS
from .core._rate_limit import MODES as RATE_LIMIT_MODES
from .core._rate_limit import ResourceFlag
from .core._settings import CIntError, c_int
from .core._summary import DEFAULT_QUANTILES

__all__ = ["HTTP_SERVERS", "OptionsError", "ServerOptions", "parse_args"]

#: the values of ``--http-server``
HTTP_SERVERS = ("native", "uvicorn")

_API_NAMES = (
    "health",
    "metadata",
    "inference",
    "shared-memory",
    "model-config",
    "model-repository",
    "statistics",
    "trace",
    "logging",
)

#: tritonserver's gRPC flags: accepted (each with its value) and ignored with a warning,
#: so that a copied tritonserver command line starts this HTTP-only server
GRPC_FLAGS = frozenset(
    {
        "grpc-address", "grpc-header-forward-pattern", "grpc-http2-max-ping-strikes",
        "grpc-http2-max-pings-without-data", "grpc-http2-min-recv-ping-interval-without-data",
        "grpc-infer-allocation-pool-size", "grpc-infer-response-compression-level",
        "grpc-keepalive-permit-without-calls", "grpc-keepalive-time", "grpc-keepalive-timeout",
        "grpc-max-connection-age", "grpc-max-connection-age-grace", "grpc-port",
        "grpc-restricted-protocol", "grpc-root-cert", "grpc-server-cert", "grpc-server-key",
        "grpc-use-ssl", "grpc-use-ssl-mutual", "reuse-grpc-port",
    }
)  # fmt: skip

#: tritonserver flags this server knows but does not implement, with the reason
_UNSUPPORTED = {
    "allow-sagemaker": "SageMaker is not supported",
    "allow-vertex-ai": "Vertex AI is not supported",
    "cuda-memory-pool-byte-size": "CUDA is not supported (CPU-only server)",
    "pinned-memory-pool-byte-size": "pinned memory is not used by this server",
    "backend-directory": "backends are built in (only 'python')",
    "repoagent-directory": "repository agents are not supported",
}


class OptionsError(ValueError):
    """A flag or a flag value the server does not accept."""


def _bool(text: str) -> bool:
    value = text.lower()  # (tritonserver refuses " true")
    if value in ("1", "true", "on"):
        return True
    if value in ("0", "false", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected a boolean, got '{text}'")


def _port(text: str) -> int:
    """A TCP port, 0 (any free one) to 65535. (tritonserver takes any int and binds it
    modulo 65536 while it logs the number given.)"""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int value: '{text}'") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a port (0 to 65535)")
    return value


def _c_int(text: str) -> int:
    """An int as tritonserver reads one (:func:`~.core._settings.c_int`), refused with
    its words for a flag."""
    try:
        return c_int(text, flag=True)
    except CIntError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


@dataclass
class ServerOptions:
    """Everything ``python -m tritonhttp.server`` can be told (tritonserver's meanings)."""

    model_repositories: list[Path] = field(default_factory=list)
    http_address: str = "127.0.0.1"
    http_port: int = 8000
    allow_metrics: bool = True
    metrics_address: str | None = None
    metrics_port: int = 8002
    metrics_interval_ms: int = 2000
    #: ``--allow-cpu-metrics``: the ``nv_cpu_*`` families
    cpu_metrics: bool = True
    #: ``--metrics-config counter_latencies=false`` turns the ``*_duration_us`` counters off
    latency_counters: bool = True
    #: ``--metrics-config summary_latencies=true``: the summaries' (quantile, error) pairs
    #: (``summary_quantiles``, Triton's five without it); None: no summaries
    summary_quantiles: tuple[tuple[float, float], ...] | None = None
    #: the ``summary_quantiles`` pairs that were skipped, in tritonserver's error words
    quantile_problems: list[str] = field(default_factory=list)
    model_control_mode: str = "none"
    load_models: list[str] = field(default_factory=list)
    repository_poll_secs: float = 15.0
    strict_readiness: bool = True
    #: ``--model-namespacing``: each repository is a namespace of its own
    model_namespacing: bool = False
    exit_on_error: bool = True
    exit_timeout_secs: float = 30.0
    server_id: str = "triton"
    log_verbose: int = 0
    log_info: bool = True
    log_warning: bool = True
    log_error: bool = True
    log_format: str = "default"
    log_file: str = ""
    restricted_apis: dict[str, tuple[str, str]] = field(default_factory=dict)
    header_forward_pattern: str | None = None
    trace_config: dict[str, dict[str, str]] = field(default_factory=dict)
    backend_config: dict[str, dict[str, str]] = field(default_factory=dict)
    auto_complete: bool = True
    #: where Python model instances run: "process" (a worker each) or "in-process"
    python_isolation: str = "process"
    #: the response cache's size in bytes (``--cache-config local,size=N``); None: no cache
    cache_size: int | None = None
    #: µs a lone busy connection polls for its client's next request (0: never)
    http_busy_wait_us: int = 300
    #: what serves HTTP: the bundled ``native`` server or ``uvicorn`` (stock)
    http_server: str = "native"
    #: ``--rate-limit``: "off" or "execution_count"
    rate_limit: str = "off"
    #: ``--rate-limit-resource``: (name, count, device or None), in the order given
    rate_limit_resources: list[ResourceFlag] = field(default_factory=list)
    #: the gRPC flags given (accepted and ignored: gRPC is not served)
    ignored_grpc_flags: list[str] = field(default_factory=list)

    def grpc_warning(self) -> str | None:
        """The one-line warning for ignored gRPC flags (None when there were none)."""
        if not self.ignored_grpc_flags:
            return None
        names = ", ".join(self.ignored_grpc_flags)
        return f"gRPC is not served (HTTP only): ignoring {names}"


class _HelpFormatter(argparse.HelpFormatter):
    """Help with each flag's default (unless its help says it), and value names from the
    kind of value."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "default" in text or action.default is argparse.SUPPRESS or not action.option_strings:
            return text
        value = action.default
        if isinstance(value, bool):
            shown = "true" if value else "false"
        elif value is None or value == []:
            shown = "none"
        elif value == "":
            shown = "''"
        else:
            shown = str(value)
        return f"{text} (default: {shown})"

    def _get_default_metavar_for_optional(self, action: argparse.Action) -> str:
        kind: object = action.type
        if kind is _bool:
            return "BOOL"
        if kind is int:
            return "N"
        if kind is float:
            return "SECONDS" if "secs" in action.dest else "N"
        return "TEXT"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m tritonhttp.server",
        description="A Triton-compatible HTTP server for Python-backend model repositories. "
        "Flags have tritonserver's names and meanings; tritonserver's gRPC flags are "
        "accepted and ignored (gRPC is not served).",
        usage="python -m tritonhttp.server --model-repository PATH [FLAG ...]",
        allow_abbrev=False,
        formatter_class=_HelpFormatter,
    )
    _serving_flags(p.add_argument)
    _settings_flags(p.add_argument)
    _own_flags(p.add_argument)
    return p


def _serving_flags(a: Callable[..., argparse.Action]) -> None:
    """Repositories, endpoints, model control and shutdown (tritonserver's flags)."""
    a(
        "--model-repository",
        "--model-store",
        dest="model_repository",
        action="append",
        default=[],
        metavar="PATH",
        help="model repository folder (repeatable; required, no default)",
    )
    a("--http-address", default="127.0.0.1", help="address the HTTP endpoint binds")
    a("--http-port", type=_port, default=8000, help="port of the HTTP endpoint")
    a("--allow-http", type=_bool, default=True, help="must stay true (HTTP is the only protocol)")
    a("--allow-grpc", type=_bool, default=False, help="must stay false (gRPC is not served)")
    a("--allow-metrics", type=_bool, default=True, help="serve Prometheus metrics")
    a(
        "--metrics-address",
        default=None,
        help="address of the metrics endpoint (default: the --http-address)",
    )
    a("--metrics-port", type=_port, default=8002, help="port of the metrics endpoint")
    a(
        "--allow-gpu-metrics",
        type=_bool,
        default=True,
        help="accepted (a CPU-only server has no GPU metrics either way)",
    )
    a("--allow-cpu-metrics", type=_bool, default=True, help="serve the nv_cpu_* metrics")
    a(
        "--metrics-interval-ms",
        type=_c_int,  # (tritonserver's help says <float>; it reads an int: "1.5" is 1)
        default=2000,
        help="accepted (CPU and cache metrics are read at each scrape)",
    )
    a(
        "--metrics-config",
        action="append",
        default=[],
        metavar="SETTING=VALUE",
        help="counter_latencies=false leaves out the *_duration_us counters; "
        "summary_latencies=true adds latency summaries with the quantiles of "
        "summary_quantiles=Q:ERROR,...; other settings are accepted and ignored (repeatable)",
    )
    a(
        "--model-control-mode",
        type=str.lower,  # (tritonserver reads EXPLICIT or Poll too)
        choices=("none", "poll", "explicit"),
        default="none",
        help="none: load every model at start; poll: also reload what changes; explicit: "
        "load and unload on request",
    )
    a(
        "--load-model",
        action="append",
        default=[],
        metavar="NAME",
        help="explicit mode: a model to load at start ('*': all; repeatable)",
    )
    a(
        "--repository-poll-secs",
        type=float,
        default=15.0,
        help="poll mode: seconds between repository polls",
    )
    a("--strict-readiness", type=_bool, default=True, help="ready only when every model is")
    a(
        "--model-namespacing",
        type=_bool,
        default=False,
        help="each repository a namespace: same-named models of several repositories load",
    )
    a("--exit-on-error", type=_bool, default=True, help="exit when a model fails to load at start")
    a(
        "--exit-timeout-secs",
        type=float,
        default=30.0,
        help="how long a shutdown may take; what runs past it is cut off (exit status 1)",
    )


def _settings_flags(a: Callable[..., argparse.Action]) -> None:
    """Server id, logging, restricted APIs, tracing, backend and cache settings
    (tritonserver's flags)."""
    a("--id", dest="server_id", default="triton", help="server id in the server metadata")
    a("--log-verbose", type=_c_int, default=0, help="verbose log level (0: off)")
    a("--log-info", type=_bool, default=True, help="log info messages")
    a("--log-warning", type=_bool, default=True, help="log warnings")
    a("--log-error", type=_bool, default=True, help="log errors")
    a(
        "--log-format",
        choices=("default", "ISO8601"),
        default="default",
        help="time stamp format of log lines",
    )
    a("--log-file", default="", help="log to this file (default: stderr)")
    a(
        "--http-restricted-api",
        action="append",
        default=[],
        metavar="API[,API...]:HEADER=VALUE",
        help="APIs answered only with this header (repeatable)",
    )
    a(
        "--http-header-forward-pattern",
        default=None,
        metavar="REGEX",
        help="request headers passed to models as parameters",
    )
    a(
        "--trace-config",
        action="append",
        default=[],
        metavar="[MODE,]KEY=VALUE",
        help="trace setting (repeatable)",
    )
    a(
        "--backend-config",
        action="append",
        default=[],
        metavar="BACKEND,KEY=VALUE",
        help="backend setting, e.g. python,isolation=in-process (repeatable)",
    )
    a(
        "--cache-config",
        action="append",
        default=[],
        metavar="CACHE,KEY=VALUE",
        help="response cache: local,size=BYTES",
    )
    a("--cache-directory", default=None, help="accepted; the local cache is built in")
    a(
        "--response-cache-byte-size",
        type=int,
        default=None,
        help="deprecated form of --cache-config local,size=N",
    )
    a(
        "--rate-limit",
        default="off",
        metavar="off|execution_count",
        help="execution_count: instances execute only while they hold the resources "
        "their rate_limiter names",
    )
    a(
        "--rate-limit-resource",
        action="append",
        default=[],
        metavar="NAME:COUNT[:DEVICE]",
        help="units of a rate limiter resource (repeatable; once given, a resource not "
        "named has none)",
    )
    a(
        "--disable-auto-complete-config",
        action="store_true",
        help="do not let backends complete model configurations",
    )
    a(
        "--strict-model-config",
        type=_bool,
        default=None,
        help="true: the same as --disable-auto-complete-config",
    )
    a(
        "--http-thread-count",
        type=_c_int,
        default=None,
        help="accepted; one event loop serves every connection",
    )
    a(
        "--model-load-thread-count",
        type=int,
        default=None,
        help="accepted; models load concurrently",
    )


def _own_flags(a: Callable[..., argparse.Action]) -> None:
    """This server's flags that tritonserver does not have."""
    a(
        "--python-isolation",
        choices=ISOLATIONS,
        default=None,
        help="where Python model instances run: process (a worker process each) or "
        "in-process (pdb, breakpoints, coverage) (default: as --backend-config or "
        "TRITONHTTP_PYTHON_ISOLATION say, else process)",
    )
    a(
        "--http-busy-wait-us",
        type=int,
        default=300,
        help="µs to poll for the next request of a client sending back to back (0: never)",
    )
    a(
        "--http-server",
        choices=HTTP_SERVERS,
        default="native",
        help="native (this package's HTTP/1.1 server) or uvicorn (the same application)",
    )  # fmt: skip


def _cache_size(specs: list[str], legacy_size: int | None) -> int | None:
    """The local cache size from ``--cache-config`` (or the deprecated byte-size flag)."""
    size: int | None = None
    if legacy_size is not None:
        if legacy_size < 0:
            raise OptionsError("--response-cache-byte-size must not be negative")
        size = legacy_size
    for spec in specs:
        cache, sep, setting = spec.partition(",")
        key, eq, value = setting.partition("=")
        if not sep or not eq or not cache or not key:
            raise OptionsError(f"--cache-config expects <cache>,<key>=<value>, got '{spec}'")
        if cache != "local":
            raise OptionsError(
                f"--cache-config: cache '{cache}' is not supported (only the built-in 'local' "
                "cache)"
            )
        if key != "size":
            raise OptionsError(f"--cache-config: the local cache has no setting '{key}'")
        try:
            size = int(value, 10)
        except ValueError:
            size = -1
        if size < 0:
            raise OptionsError(
                f"--cache-config: local cache size must be a byte count, got '{value}'"
            )
    return size


_STOD = re.compile(r"\s*[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|inf(?:inity)?|nan)", re.I)


def _stod(text: str) -> float | None:
    """A number as C++'s ``std::stod`` reads it (the longest number the text starts
    with, after spaces), or None where it finds none."""
    found = _STOD.match(text)
    return float(found.group()) if found else None


def _quantiles(text: str) -> tuple[list[tuple[float, float]], list[str]]:
    """``summary_quantiles``: the ``quantile:error`` pairs read as tritonserver reads
    them, and its error message for each pair it skips."""
    pairs: list[tuple[float, float]] = []
    problems: list[str] = []
    parts = text.split(",")
    if parts[-1] == "":
        parts.pop()  # (a trailing comma ends the list)
    for part in parts:
        quantile, colon, error = part.partition(":")
        if not colon:
            problems.append(
                f"Invalid option: [{part}]. No ':' delimiter found. Expected format is "
                "<quantile>:<error>"
            )
            continue
        q, e = _stod(quantile), _stod(error)
        if q is None or e is None:
            problems.append(f"Invalid option: [{part}]. Error: stod")
            continue
        pairs.append((q, e))
    return pairs, problems


def _rate_limit(value: str) -> str:
    """``--rate-limit``, in any case (tritonserver's words for another value)."""
    mode = value.lower()
    if mode not in RATE_LIMIT_MODES:
        raise OptionsError("invalid argument for --rate-limit")
    return mode


def _rate_limit_resource(spec: str) -> ResourceFlag:
    """``--rate-limit-resource NAME:COUNT[:DEVICE]``, numbers read as tritonserver reads
    them (an empty name is taken)."""
    parts = spec.split(":")
    if len(parts) not in (2, 3):
        raise OptionsError(
            "--rate-limit-resource option format is '<resource_name>:<count>:<device>' or "
            f"'<resource_name>:<count>'. Got {spec}"
        )
    try:
        numbers = [c_int(part, flag=True) for part in parts[1:]]
    except CIntError as e:
        raise OptionsError(f"argument --rate-limit-resource: {e}") from None
    return parts[0], numbers[0], numbers[1] if len(numbers) == 2 else None


def _metrics_config(specs: list[str], opts: ServerOptions) -> None:
    """``--metrics-config``, as tritonserver reads it: ``counter_latencies=false`` turns
    the counters off and ``summary_latencies=true`` the summaries on (no later value turns
    them back), the last ``summary_quantiles`` with a valid pair sets the quantiles, and
    settings it does not know are ignored."""
    summaries = False
    quantiles: list[tuple[float, float]] = []
    for spec in specs:
        setting, _, value = spec.partition("=")
        if not setting or not value:
            raise OptionsError(f"--metrics-config option format is <setting>=<value>. Got {spec}")
        if setting == "counter_latencies":
            opts.latency_counters = opts.latency_counters and value != "false"
        elif setting == "summary_latencies":
            summaries = summaries or value == "true"
        elif setting == "summary_quantiles":
            pairs, problems = _quantiles(value)
            opts.quantile_problems += problems
            quantiles = pairs or quantiles
    if summaries:
        opts.summary_quantiles = tuple(quantiles) or DEFAULT_QUANTILES


def parse_args(argv: Sequence[str] | None = None) -> ServerOptions:
    """Parse tritonserver-style flags; raises OptionsError for what is not supported."""
    argv = _refuse_unsupported(list(argv)) if argv is not None else None
    argv, grpc_flags = _drop_grpc_flags(argv)
    parser = _parser()

    def fail(message: str) -> NoReturn:
        raise OptionsError(message)

    parser.error = fail  # type: ignore[method-assign]
    ns = parser.parse_args(argv)
    if not ns.allow_http:
        raise OptionsError("--allow-http=false leaves nothing to serve: HTTP is the only protocol")
    if ns.allow_grpc:
        raise OptionsError("--allow-grpc=true is not supported: gRPC is not implemented")
    if not ns.model_repository:
        raise OptionsError("--model-repository is required")
    opts = _plain_options(ns)
    opts.ignored_grpc_flags = grpc_flags
    for repo in opts.model_repositories:
        if not repo.exists():
            raise OptionsError(f"failed to stat file {repo}: the model repository does not exist")
        if not repo.is_dir():
            raise OptionsError(f"repository path is not a valid directory: {repo}")
    if ns.http_busy_wait_us < 0:
        raise OptionsError("--http-busy-wait-us must not be negative")
    if ns.load_model and ns.model_control_mode != "explicit":
        raise OptionsError(
            "Use of '--load-model' requires setting '--model-control-mode=explicit' as well."
        )
    if "*" in ns.load_model and len(set(ns.load_model)) > 1:
        raise OptionsError(
            "creating server: Invalid argument - Wildcard model name '*' must be the ONLY "
            "startup model if specified at all."
        )
    opts.restricted_apis = _restricted_apis(ns.http_restricted_api)
    opts.trace_config = _trace_config(ns.trace_config)
    opts.backend_config = _backend_config(ns.backend_config)
    opts.python_isolation = _python_isolation(ns.python_isolation, opts.backend_config)
    opts.cache_size = _cache_size(ns.cache_config, ns.response_cache_byte_size)
    _metrics_config(ns.metrics_config, opts)
    opts.rate_limit = _rate_limit(ns.rate_limit)
    opts.rate_limit_resources = [_rate_limit_resource(spec) for spec in ns.rate_limit_resource]
    if opts.header_forward_pattern is not None:
        try:
            re.compile(opts.header_forward_pattern)
        except re.error as e:
            raise OptionsError(f"invalid --http-header-forward-pattern: {e}") from None
    return opts


def _is_off(name: str, value: str | None) -> bool:
    """Whether ``--name value`` asks for what this server does anyway (no SageMaker, no
    Vertex AI, no pinned memory pool), so that it may be taken and ignored."""
    if value is None:
        return False
    try:
        if name in ("allow-sagemaker", "allow-vertex-ai"):
            return not _bool(value)
        if name == "pinned-memory-pool-byte-size":
            return _c_int(value) == 0
    except argparse.ArgumentTypeError:
        return False
    return False


def _refuse_unsupported(argv: list[str]) -> list[str]:
    """``argv`` without the unsupported flags given a value that turns them off; raise
    OptionsError for the first other tritonserver flag this server does not implement
    (see ``_UNSUPPORTED``)."""
    kept: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        name, eq, value = arg[2:].partition("=") if arg.startswith("--") else ("", "", "")
        if name in _UNSUPPORTED:
            given = value if eq else (argv[i + 1] if i + 1 < len(argv) else None)
            if not _is_off(name, given):
                raise OptionsError(f"--{name} is not supported: {_UNSUPPORTED[name]}")
            i += 1 if eq else 2
            continue
        kept.append(arg)
        i += 1
    return kept


def _drop_grpc_flags(argv: list[str] | None) -> tuple[list[str] | None, list[str]]:
    """``argv`` without tritonserver's gRPC flags and their values, and the flags."""
    if argv is None:
        return None, []
    kept: list[str] = []
    dropped: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        name, eq, _ = arg[2:].partition("=") if arg.startswith("--") else ("", "", "")
        if name in GRPC_FLAGS:
            dropped.append(f"--{name}")
            # (every gRPC flag takes a value: --grpc-port=8001 or --grpc-port 8001)
            i += 1 if eq or i + 1 >= len(argv) or argv[i + 1].startswith("--") else 2
            continue
        kept.append(arg)
        i += 1
    return kept, dropped


def _plain_options(ns: argparse.Namespace) -> ServerOptions:
    """The options that the parsed flags ``ns`` give directly; those read from
    specifications (restricted APIs, trace, backend and cache settings, the Python
    isolation) keep their defaults here."""
    return ServerOptions(
        model_repositories=[Path(p) for p in ns.model_repository],
        http_address=ns.http_address,
        http_port=ns.http_port,
        allow_metrics=ns.allow_metrics,
        metrics_address=ns.metrics_address,
        metrics_port=ns.metrics_port,
        metrics_interval_ms=ns.metrics_interval_ms,
        cpu_metrics=ns.allow_cpu_metrics,
        model_control_mode=ns.model_control_mode,
        load_models=ns.load_model,
        repository_poll_secs=ns.repository_poll_secs,
        strict_readiness=ns.strict_readiness,
        model_namespacing=ns.model_namespacing,
        exit_on_error=ns.exit_on_error,
        exit_timeout_secs=ns.exit_timeout_secs,
        server_id=ns.server_id,
        log_verbose=ns.log_verbose,
        log_info=ns.log_info,
        log_warning=ns.log_warning,
        log_error=ns.log_error,
        log_format=ns.log_format,
        log_file=ns.log_file,
        header_forward_pattern=ns.http_header_forward_pattern,
        http_busy_wait_us=ns.http_busy_wait_us,
        http_server=ns.http_server,
        auto_complete=not (ns.disable_auto_complete_config or ns.strict_model_config is True),
    )


def _restricted_apis(specs: list[str]) -> dict[str, tuple[str, str]]:
    """The (header, value) each restricted API group needs, from ``--http-restricted-api``."""
    restricted: dict[str, tuple[str, str]] = {}
    for spec in specs:
        apis, sep, kv = spec.rpartition(":")
        key, eq, value = kv.partition("=")
        if not sep or not eq or not key:
            raise OptionsError(
                f"--http-restricted-api expects <api>[,<api>...]:<key>=<value>, got '{spec}'"
            )
        for api in apis.split(","):
            if api not in _API_NAMES:
                raise OptionsError(f"unknown restricted api '{api}'")
            if api in restricted:
                raise OptionsError(f"api '{api}' can not be specified in multiple config groups")
            restricted[api] = (key, value)
    return restricted


def _trace_config(specs: list[str]) -> dict[str, dict[str, str]]:
    """The trace settings by mode ("": every mode), from ``--trace-config``; a ``level``
    or ``resource`` given again adds its value (values joined by newlines)."""
    config: dict[str, dict[str, str]] = {}
    for spec in specs:
        head, sep, rest = spec.partition(",")
        if sep and "=" not in head:
            mode, setting = head, rest
        else:
            mode, setting = "", spec
        key, eq, value = setting.partition("=")
        if not eq or not value:  # (tritonserver refuses an empty value: "triton,file=")
            raise OptionsError(f"--trace-config expects [<mode>,]<key>=<value>, got '{spec}'")
        values = config.setdefault(mode, {})
        if key in ("level", "resource") and key in values:
            value = values[key] + "\n" + value
        values[key] = value
    return config


def _backend_config(specs: list[str]) -> dict[str, dict[str, str]]:
    """The settings by backend, from ``--backend-config``."""
    config: dict[str, dict[str, str]] = {}
    for spec in specs:
        backend, sep, setting = spec.partition(",")
        key, eq, value = setting.partition("=")
        if not sep or not eq:
            raise OptionsError(f"--backend-config expects <backend>,<key>=<value>, got '{spec}'")
        config.setdefault(backend, {})[key] = value
    return config


def _python_isolation(flag: str | None, backend_config: dict[str, dict[str, str]]) -> str:
    """Where Python model instances run: ``--python-isolation``, else the python backend's
    ``isolation`` setting, else ``TRITONHTTP_PYTHON_ISOLATION``, else "process". The
    setting in ``backend_config`` is made to say the same."""
    isolation = backend_config.get("python", {}).get("isolation", "process")
    if isolation not in ISOLATIONS:
        raise OptionsError(
            f"--backend-config=python,isolation={isolation}: expected 'process' or 'in-process'"
        )
    env_isolation = os.environ.get("TRITONHTTP_PYTHON_ISOLATION", "")
    if env_isolation and not flag and "isolation" not in backend_config.get("python", {}):
        if env_isolation not in ISOLATIONS:
            raise OptionsError(
                f"TRITONHTTP_PYTHON_ISOLATION={env_isolation}: expected 'process' or 'in-process'"
            )
        isolation = env_isolation
        backend_config.setdefault("python", {})["isolation"] = isolation
    if flag:
        backend_config.setdefault("python", {})["isolation"] = flag
    return flag or isolation
