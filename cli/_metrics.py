"""``metrics``: the Prometheus metrics from the server's metrics port, as a table."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import click

from ._errors import CliError, describe
from ._render import emit_json, new_table, print_table
from ._settings import Settings, json_flag

__all__ = ["Sample", "fetch_metrics", "metrics", "parse_metrics", "resolve_metrics_url"]


@dataclass(frozen=True)
class Sample:
    """One sample: metric name (as the server wrote it), type, labels, value."""

    name: str
    type: str
    labels: dict[str, str]
    value: float

    @property
    def selector(self) -> str:
        """``name{k="v",...}``, the text ``--filter`` is matched against."""
        if not self.labels:
            return self.name
        inner = ",".join(f'{k}="{v}"' for k, v in sorted(self.labels.items()))
        return f"{self.name}{{{inner}}}"


def resolve_metrics_url(settings: Settings, given: str | None) -> str:
    """The metrics endpoint: ``given`` (scheme and /metrics added when missing), or the
    server's host on port 8002."""
    if not given:
        host = settings.host
        return f"http://{host}:8002/metrics"
    url = given if "://" in given else f"http://{given}"
    scheme, _, rest = url.partition("://")
    if "/" not in rest:
        url = f"{scheme}://{rest}/metrics"
    return url


def fetch_metrics(settings: Settings, url: str) -> str:
    """The exposition text at ``url``."""
    import urllib.error
    import urllib.request

    request = urllib.request.Request(url, headers=settings.headers)
    context = settings.ssl_context() if url.startswith("https://") else None
    try:
        with urllib.request.urlopen(request, timeout=settings.timeout, context=context) as r:
            body: bytes = r.read()
    except urllib.error.HTTPError as e:
        raise CliError(f"{url} answered HTTP {e.code} {e.reason}") from None
    except urllib.error.URLError as e:
        reason = e.reason if isinstance(e.reason, BaseException) else OSError(str(e.reason))
        raise CliError(f"cannot fetch metrics from {url}: {describe(reason)}") from None
    except OSError as e:
        raise CliError(f"cannot fetch metrics from {url}: {describe(e)}") from None
    return body.decode("utf-8", errors="replace")


def parse_metrics(text: str) -> list[Sample]:
    """Samples of a Prometheus text exposition (parsed by prometheus_client)."""
    from prometheus_client.parser import text_string_to_metric_families

    samples = []
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                name = sample.name
                if family.type == "counter" and name == family.name + "_total":
                    # prometheus_client adds _total to counters; Triton's names lack it.
                    name = family.name
                samples.append(Sample(name, family.type, dict(sample.labels), sample.value))
    except ValueError as e:
        raise CliError(f"the metrics are not in the Prometheus text format: {e}") from None
    return samples


def _value_text(value: float) -> str:
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return f"{value:g}"


@click.command()
@click.option(
    "--filter",
    "pattern",
    metavar="REGEX",
    help='Only samples whose name{labels} matches, e.g. "nv_inference_count" or "add_sub".',
)
@click.option(
    "--metrics-url",
    envvar="TRITON_METRICS_URL",
    show_envvar=True,
    metavar="URL",
    help="Metrics endpoint (default: the server's host, port 8002, /metrics).",
)
@json_flag
@click.pass_obj
def metrics(settings: Settings, pattern: str | None, metrics_url: str | None) -> None:
    """Show the server's Prometheus metrics as a table."""
    try:
        matcher = re.compile(pattern) if pattern else None
    except re.error as e:
        raise click.BadParameter(
            f"invalid regular expression: {e}", param_hint="--filter"
        ) from None
    url = resolve_metrics_url(settings, metrics_url)
    samples = parse_metrics(fetch_metrics(settings, url))
    if matcher is not None:
        samples = [s for s in samples if matcher.search(s.selector)]
    if settings.json_output:
        rows: list[dict[str, Any]] = [
            {"name": s.name, "type": s.type, "labels": s.labels, "value": s.value} for s in samples
        ]
        emit_json(settings, rows)
        return
    table = new_table("metric", "labels", "value", numeric=("value",), names=("metric",))
    for s in samples:
        labels = ", ".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
        table.add_row(s.name, labels, _value_text(s.value))
    print_table(settings, table)
