"""``bench --plot``: latency against throughput, and in streaming mode the distributions
of time to first token and inter-token latency, drawn with matplotlib (PNG)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._errors import CliError, InputError

if TYPE_CHECKING:
    from ._bench_measure import LevelResult
    from ._bench_stream import StreamRecord

__all__ = ["check_available", "plot", "plot_streaming"]


def check_available() -> None:
    """Fail early, before any load is generated, when matplotlib is missing."""
    import importlib.util

    if importlib.util.find_spec("matplotlib") is None:
        raise InputError("--plot needs matplotlib: pip install 'tritonhttp[cli]'")


@contextmanager
def _figure(path: Path, columns: int) -> Iterator[Any]:
    """A figure of ``columns`` plots side by side, saved to ``path`` on the way out."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display needed
    from matplotlib import pyplot as plt

    figure, axes = plt.subplots(1, columns, figsize=(7 * columns, 4.5), dpi=100, squeeze=False)
    try:
        yield axes[0]
        figure.tight_layout()
        try:
            figure.savefig(path, format="png")
        except OSError as e:
            raise CliError(f"cannot write {path}: {e.strerror or e}") from None
    finally:
        plt.close(figure)


def _label(load: str, level: float) -> str:
    return f"c={int(level)}" if load == "concurrency" else f"{level:g}/s"


def _latency_axes(
    axes: Any, model: str, load: str, points: list[tuple[float, float, dict[str, float]]]
) -> None:
    """Percentile curves of latency (ms) against throughput, one point per level."""
    throughput = [p[0] for p in points]
    for q in ("p50", "p90", "p95", "p99"):
        axes.plot(throughput, [p[2].get(q, math.nan) for p in points], marker="o", label=q)
    for x, level, stats in points:
        y = stats.get("p99", math.nan)
        if not math.isnan(y):
            axes.annotate(_label(load, level), (x, y), textcoords="offset points", xytext=(4, 4))
    what = "concurrency" if load == "concurrency" else "request rate"
    axes.set_title(f"{model}: latency vs throughput ({what} sweep)")
    axes.set_ylabel("latency (ms)")
    axes.grid(True, alpha=0.3)
    axes.legend()


def plot(path: Path, model: str, load: str, results: list[LevelResult]) -> None:
    """Write a PNG of p50/p90/p95/p99 latency (ms) against throughput (infer/s)."""
    with _figure(path, 1) as axes:
        points = [(r.infer_per_sec, r.level, r.latency_ms()) for r in results]
        _latency_axes(axes[0], model, load, points)
        axes[0].set_xlabel("throughput (infer/s)")


def plot_streaming(
    path: Path,
    model: str,
    load: str,
    results: list[tuple[float, list[StreamRecord], dict[str, dict[str, Any]]]],
) -> None:
    """Write a PNG: request latency against token throughput, and TTFT and ITL
    histograms of every level."""
    from ._bench_stream import _per_request

    with _figure(path, 3) as axes:
        points = [
            (m["output_token_throughput"]["avg"], level, m["request_latency"])
            for level, _, m in results
        ]
        _latency_axes(axes[0], model, load, points)
        axes[0].set_xlabel("output token throughput (tokens/s)")
        for ax, name, title in (
            (axes[1], "time_to_first_token", "time to first token"),
            (axes[2], "inter_token_latency", "inter-token latency"),
        ):
            for level, records, _ in results:
                per = [_per_request(r) for r in records if r.error is None]
                values = [p[name] for p in per if name in p]
                if values:
                    ax.hist(values, bins=30, alpha=0.5, label=_label(load, level))
            ax.set_title(f"{model}: {title}")
            ax.set_xlabel("ms")
            ax.set_ylabel("requests")
            ax.grid(True, alpha=0.3)
            if ax.get_legend_handles_labels()[0]:
                ax.legend()
