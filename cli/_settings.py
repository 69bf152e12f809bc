"""The global options, and the client they describe."""

from __future__ import annotations

import ssl as _ssl
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO

import click

if TYPE_CHECKING:
    import tritonhttp

__all__ = ["Settings", "json_flag", "parse_header"]


def parse_header(raw: str) -> tuple[str, str]:
    """``"K: V"`` -> ``("K", "V")``; a usage error when there is no name or colon."""
    key, sep, value = raw.partition(":")
    key = key.strip()
    if not sep or not key:
        raise click.BadParameter(f"expected K:V, got {raw!r}", param_hint="'--header'")
    return key, value.strip()


def _check_address(url: str) -> None:
    """A usage error when ``host:port[/base]`` cannot name a server (a bad port, an
    unclosed IPv6 bracket), rather than a failure once a request is tried."""
    from urllib.parse import urlsplit

    netloc = url.split("/", 1)[0]
    try:
        parts = urlsplit("//" + netloc)
        parts.port  # noqa: B018 - reading it checks it
    except ValueError as e:
        raise click.BadParameter(f"{url!r}: {e}", param_hint="'--url'") from None
    if not parts.hostname:
        raise click.BadParameter(f"{url!r} has no host", param_hint="'--url'")


@dataclass
class Settings:
    """What the global options say: where the server is and how to talk and answer."""

    url: str  # host:port[/base], no scheme
    ssl: bool = False
    insecure: bool = False
    ca_certs: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    timeout: float = 60.0
    json_output: bool = False
    verbose: bool = False
    stdout: TextIO = field(default_factory=lambda: sys.stdout)  # where results go

    @classmethod
    def from_options(cls, *, url: str, ssl: bool, **options: Any) -> Settings:
        """Settings from the command line; an ``http(s)://`` prefix on the URL is accepted."""
        lowered = url.lower()
        if lowered.startswith("https://"):
            url, ssl = url[len("https://") :], True
        elif lowered.startswith("http://"):
            url = url[len("http://") :]
        url = url.rstrip("/")
        if not url:
            raise click.BadParameter("the URL has no host", param_hint="'--url'")
        _check_address(url)
        return cls(url=url, ssl=ssl, **options)

    @property
    def host(self) -> str:
        """The host name of the server (without port or base path)."""
        netloc = self.url.split("/", 1)[0]
        if netloc.startswith("["):  # [v6]:port
            return netloc[: netloc.find("]") + 1]
        return netloc.rsplit(":", 1)[0] if ":" in netloc else netloc

    @property
    def base_url(self) -> str:
        """``http(s)://host:port[/base]``."""
        return ("https://" if self.ssl else "http://") + self.url

    @property
    def request_headers(self) -> dict[str, str] | None:
        """The ``--header`` values for a client call (None when there are none)."""
        return dict(self.headers) if self.headers else None

    def ssl_context(self) -> _ssl.SSLContext | None:
        """The TLS context for direct HTTP calls (None without ``--ssl``)."""
        if not self.ssl:
            return None
        context = _ssl.create_default_context(cafile=self.ca_certs)
        if self.insecure:
            context.check_hostname = False
            context.verify_mode = _ssl.CERT_NONE
        return context

    def client(
        self,
        concurrency: int = 1,
        *,
        timeout: float | None = None,
        max_greenlets: int | None = None,
    ) -> tritonhttp.InferenceServerClient:
        """A ``tritonhttp.InferenceServerClient`` for these settings (close it when done)."""
        import tritonhttp

        wait = self.timeout if timeout is None else timeout
        ssl_options: dict[str, Any] = {}
        if self.ca_certs:
            ssl_options["ca_certs"] = self.ca_certs
        if self.insecure:
            ssl_options["cert_reqs"] = _ssl.CERT_NONE
        return tritonhttp.InferenceServerClient(
            self.url,
            verbose=self.verbose,
            concurrency=concurrency,
            connection_timeout=wait,
            network_timeout=wait,
            max_greenlets=max_greenlets,
            ssl=self.ssl,
            ssl_options=ssl_options or None,
            insecure=self.insecure,
        )


def _set_json(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value:
        settings = ctx.find_object(Settings)
        if settings is not None:
            settings.json_output = True


#: ``--json`` on a subcommand: the same as the global ``--json``.
json_flag = click.option(
    "--json",
    "json_output",
    is_flag=True,
    expose_value=False,
    callback=_set_json,
    help="Machine-readable JSON on stdout.",
)
