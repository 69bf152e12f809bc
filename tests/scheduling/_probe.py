"""Driving the scheduling probe models of ``tests/repos/sched_models`` over raw HTTP.

Scenarios must not depend on timing: a request that should keep an instance busy
carries ``hold`` (the model waits for that file) and ``mark`` (the model creates that
file when it starts), and the next request is only sent once the server counts the
previous one as pending. The same scenario runs on real Triton and on our server and
the outcomes are compared.
"""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from server._wire import Reply, exchange

#: time for real Triton's batcher thread to act on a request it has counted as pending
SETTLE = 0.1

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def body(
    rid: str,
    value: int = 0,
    batch: int | None = 1,
    params: dict[str, Any] | None = None,
    width: int = 1,
) -> str:
    """An infer body for the probes' ``IN`` input (``batch=None``: no batch dimension)."""
    doc: dict[str, Any] = {"id": rid}
    if params:
        doc["parameters"] = params
    shape = [width] if batch is None else [batch, width]
    count = width * (batch or 1)
    doc["inputs"] = [{"name": "IN", "datatype": "INT32", "shape": shape, "data": [value] * count}]
    return json.dumps(doc)


class Call:
    """An infer request running on its own thread."""

    def __init__(self, url: str, path: str, data: str) -> None:
        self.reply: Reply | None = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(url, path, data), daemon=True)
        self._thread.start()

    def _run(self, url: str, path: str, data: str) -> None:
        try:
            self.reply = exchange(url, "POST", path, data, timeout=60)
        except BaseException as e:  # reported by result()
            self.error = e

    def done(self) -> bool:
        return not self._thread.is_alive()

    def result(self, timeout: float = 60) -> Reply:
        self._thread.join(timeout)
        if self.error is not None:
            raise self.error
        assert self.reply is not None, "request did not finish"
        return self.reply


class Probe:
    """One server (real or ours) plus a scratch folder for gate files."""

    def __init__(self, server: Any, scratch: Path, name: str) -> None:
        self.server = server
        self.url: str = server.url
        self.metrics_url: str = server.metrics_url
        self.scratch = scratch
        self.name = name
        self._gates = 0

    # ------------------------------------------------------------------ requests

    def post(self, model: str, rid: str, value: int = 0, batch: int | None = 1, **kw: Any) -> Reply:
        return exchange(
            self.url, "POST", f"/v2/models/{model}/infer", body(rid, value, batch, **kw)
        )

    def send(self, model: str, rid: str, value: int = 0, batch: int | None = 1, **kw: Any) -> Call:
        return Call(self.url, f"/v2/models/{model}/infer", body(rid, value, batch, **kw))

    def gate(self) -> tuple[dict[str, str], Path, Path]:
        """Parameters that hold a request in ``execute``, its start marker, its release."""
        self._gates += 1
        mark = self.scratch / f"{self.name}-{self._gates}.started"
        hold = self.scratch / f"{self.name}-{self._gates}.go"
        return {"mark": str(mark), "hold": str(hold)}, mark, hold

    def send_held(
        self, model: str, rid: str, value: int = 0, batch: int | None = 1, **kw: Any
    ) -> tuple[Call, Path]:
        """Send a request that occupies an instance until the returned path is created."""
        params, mark, hold = self.gate()
        params.update(kw.pop("params", None) or {})
        call = self.send(model, rid, value, batch, params=params, **kw)
        wait_for(mark.exists, f"{self.name}: {rid} never started")
        return call, hold

    # ------------------------------------------------------------------ observation

    def raw_stats(self, model: str) -> dict[str, Any]:
        reply = exchange(self.url, "GET", f"/v2/models/{model}/stats")
        assert reply.status == 200, reply.body
        result: dict[str, Any] = json.loads(reply.body)["model_stats"][0]
        return result

    def stats(self, model: str) -> dict[str, Any]:
        """Statistics once they stopped moving: Triton may answer a request a moment
        before it has counted it."""
        last = counts(self.raw_stats(model))
        while True:
            time.sleep(0.05)
            stats = self.raw_stats(model)
            now = counts(stats)
            if now == last:
                return stats
            last = now

    def metrics(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        with urllib.request.urlopen(f"http://{self.metrics_url}/metrics", timeout=10) as r:
            text = r.read().decode()
        out: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
        for line in text.splitlines():
            m = _SAMPLE.match(line)
            if m is None or line.startswith("#"):
                continue
            labels = tuple(sorted(_LABEL.findall(m.group(2) or "")))
            out[(m.group(1), labels)] = float(m.group(3))
        return out

    def families(self) -> list[str]:
        with urllib.request.urlopen(f"http://{self.metrics_url}/metrics", timeout=10) as r:
            text = r.read().decode()
        return [line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")]

    def model_metrics(self, model: str) -> dict[str, float]:
        """This model's series: ``name`` or ``name[reason]`` -> value."""
        out: dict[str, float] = {}
        for (name, labels), value in self.metrics().items():
            d = dict(labels)
            if d.get("model") != model:
                continue
            out[f"{name}[{d['reason']}]" if "reason" in d else name] = value
        return out

    def pending(self, model: str) -> float:
        return self.model_metrics(model).get("nv_inference_pending_request_count", -1)

    def wait_pending(self, model: str, n: int, settle: float = SETTLE) -> None:
        """Wait until ``model`` has ``n`` pending requests, then a moment more: Triton's
        batcher thread sees an arrival a little after it is counted."""
        wait_for(lambda: self.pending(model) == n, f"{self.name}: {model} never had {n} pending")
        time.sleep(settle)


def wait_for(cond: Any, message: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(message)
        time.sleep(0.01)


def info(reply: Reply) -> dict[str, Any]:
    """The INFO output of a probe answer."""
    assert reply.status == 200, (reply.status, reply.body)
    out = {o["name"]: o for o in reply.json()["outputs"]}
    result: dict[str, Any] = json.loads(out["INFO"]["data"][0])
    return result


def executions(replies: dict[str, Reply]) -> list[list[str]]:
    """The request ids of each ``execute`` that answered one of ``replies``, in order."""
    seen: dict[tuple[str, int], list[str]] = {}
    for reply in replies.values():
        if reply.status == 200:
            doc = info(reply)
            seen[(doc["instance"], doc["exec"])] = doc["ids"]
    return [seen[k] for k in sorted(seen)]


def outcome(reply: Reply) -> tuple[int, str | None, bytes | None]:
    """Status, content type and (for errors) body of a reply."""
    return reply.status, reply.content_type, None if reply.status == 200 else reply.body


def counts(stats: dict[str, Any]) -> dict[str, Any]:
    """Statistics without timings."""
    inf = stats["inference_stats"]
    return {
        "inference_count": stats["inference_count"],
        "execution_count": stats["execution_count"],
        **{k: v["count"] for k, v in inf.items()},
        "batches": {b["batch_size"]: b["compute_infer"]["count"] for b in stats["batch_stats"]},
    }


#: metric series whose values are counts (timings and gauges differ between servers)
COUNT_METRICS = (
    "nv_inference_request_success",
    "nv_inference_request_failure[REJECTED]",
    "nv_inference_request_failure[CANCELED]",
    "nv_inference_request_failure[BACKEND]",
    "nv_inference_request_failure[OTHER]",
    "nv_inference_count",
    "nv_inference_exec_count",
    "nv_inference_pending_request_count",
    "nv_cache_num_hits_per_model",
    "nv_cache_num_misses_per_model",
)


def metric_counts(probe: Probe, model: str) -> dict[str, float]:
    m = probe.model_metrics(model)
    return {k: m[k] for k in COUNT_METRICS if k in m}
