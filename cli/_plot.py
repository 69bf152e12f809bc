"""``bench --plot``: latency percentiles against throughput, drawn with matplotlib."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

from ._errors import CliError, InputError

if TYPE_CHECKING:
    from ._load import LevelResult

__all__ = ["check_available", "plot"]


def check_available() -> None:
    """Fail early, before any load is generated, when matplotlib is missing."""
    import importlib.util

    if importlib.util.find_spec("matplotlib") is None:
        raise InputError("--plot needs matplotlib: pip install 'tritonhttp[cli]'")


def plot(path: Path, model: str, load: str, results: list[LevelResult]) -> None:
    """Write a PNG of p50/p90/p95/p99 latency (ms) against throughput (infer/s)."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display needed
    from matplotlib import pyplot as plt

    throughput = [r.throughput * r.batch_size for r in results]
    figure, axes = plt.subplots(figsize=(7, 4.5), dpi=100)
    try:
        for q in ("p50", "p90", "p95", "p99"):
            latency = [r.latency_ms()[q] for r in results]
            axes.plot(throughput, latency, marker="o", label=q)
        p99 = [r.latency_ms()["p99"] for r in results]
        for r, x, y in zip(results, throughput, p99, strict=True):
            if not math.isnan(y):
                label = f"c={int(r.level)}" if load == "concurrency" else f"{r.level:g}/s"
                axes.annotate(label, (x, y), textcoords="offset points", xytext=(4, 4))
        axes.set_xlabel("throughput (infer/s)")
        axes.set_ylabel("latency (ms)")
        what = "concurrency" if load == "concurrency" else "request rate"
        axes.set_title(f"{model}: latency vs throughput ({what} sweep)")
        axes.grid(True, alpha=0.3)
        axes.legend()
        figure.tight_layout()
        try:
            figure.savefig(path, format="png")
        except OSError as e:
            raise CliError(f"cannot write {path}: {e.strerror or e}") from None
    finally:
        plt.close(figure)
