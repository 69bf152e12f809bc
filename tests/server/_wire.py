"""Raw HTTP exchanges for comparing servers byte for byte."""

from __future__ import annotations

import http.client
import json
import struct
import urllib.error
import urllib.request
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

#: the tensors of tests/models/add_sub, as a JSON model configuration lists them
ADD_SUB_IO: dict[str, Any] = {
    "input": [
        {"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [4]},
        {"name": "INPUT1", "data_type": "TYPE_FP32", "dims": [4]},
    ],
    "output": [
        {"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [4]},
        {"name": "OUTPUT1", "data_type": "TYPE_FP32", "dims": [4]},
    ],
}


@dataclass(repr=False)
class Reply:
    """Status, lower-cased headers and body of one HTTP exchange."""

    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def content_type(self) -> str | None:
        return self.headers.get("content-type")

    def json(self) -> Any:
        """The JSON body (the JSON header of a binary-data body)."""
        n = int(self.headers.get("inference-header-content-length", len(self.body)))
        return json.loads(self.body[:n])

    def events(self) -> list[Any]:
        """The ``data:`` events of a server-sent-event body."""
        return [
            json.loads(c[6:]) for c in self.body.decode().split("\n\n") if c.startswith("data: ")
        ]

    def key(self) -> tuple[int, str | None, bytes]:
        """What a differential comparison looks at."""
        return (self.status, self.content_type, self.body)

    def __repr__(self) -> str:
        return f"Reply({self.status}, {self.content_type}, {self.body[:300]!r})"


def exchange(
    url: str,
    method: str,
    path: str,
    body: bytes | str | Iterable[bytes] = b"",
    headers: dict[str, str] | None = None,
    timeout: float = 60.0,
) -> Reply:
    """One request on a fresh connection (``url`` is ``host:port``).

    A body given as pieces is sent piece by piece (give its Content-Length in
    ``headers``, or it goes out chunked)."""
    host, port = url.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
    try:
        data = body.encode() if isinstance(body, str) else body
        conn.request(
            method, path, body=data if (data or method == "POST") else None, headers=headers or {}
        )
        r = conn.getresponse()
        payload = r.read()
        return Reply(r.status, {k.lower(): v for k, v in r.getheaders()}, payload)
    finally:
        conn.close()


def compare(ours: Reply, real: Reply) -> None:
    """Assert that two answers are the same: status, content type, body (compared inflated
    when compressed) and the headers a client reads."""
    assert (ours.status, ours.content_type) == (real.status, real.content_type), (
        ours.body[:600],
        real.body[:600],
    )
    if real.headers.get("content-encoding") in ("gzip", "deflate"):
        assert ours.headers.get("content-encoding") == real.headers["content-encoding"]
        assert zlib.decompress(ours.body, 47) == zlib.decompress(real.body, 47)
    else:
        assert ours.body == real.body
    for h in ("inference-header-content-length", "accept-encoding", "transfer-encoding"):
        assert ours.headers.get(h) == real.headers.get(h), h


def step_differences(real: Any, ours: Any, steps: Iterable[tuple[str, str, str]]) -> list[str]:
    """Each (method, path, body) step sent to both servers in turn; a line per answer
    that differs (status, content type or body)."""
    problems = []
    for method, path, body in steps:
        r = exchange(real.url, method, path, body)
        o = exchange(ours.url, method, path, body)
        if (o.status, o.content_type, o.body) != (r.status, r.content_type, r.body):
            problems.append(
                f"{method} {path} {body}\n  ours {o.status} {o.body!r}"
                f"\n  real {r.status} {r.body!r}"
            )
    return problems


def infer_body(*inputs: tuple[str, str, list[int], list[Any]], **extra: Any) -> str:
    """A compact JSON /infer body of ``(name, datatype, shape, data)`` inputs."""
    return json.dumps(
        {
            **extra,
            "inputs": [{"name": n, "datatype": d, "shape": s, "data": v} for n, d, s, v in inputs],
        },
        separators=(",", ":"),
    )


def binary_request(
    inputs: list[tuple[str, str, list[int], bytes]],
    outputs: list[dict[str, Any]] | None = None,
    parameters: dict[str, Any] | None = None,
    request_id: str | None = None,
) -> tuple[bytes, dict[str, str]]:
    """A JSON header + binary blobs body and its IHCL header."""
    doc: dict[str, Any] = {}
    if request_id is not None:
        doc["id"] = request_id
    if parameters:
        doc["parameters"] = parameters
    doc["inputs"] = [
        {"name": n, "datatype": dt, "shape": shape, "parameters": {"binary_data_size": len(b)}}
        for n, dt, shape, b in inputs
    ]
    if outputs is not None:
        doc["outputs"] = outputs
    header = json.dumps(doc, separators=(",", ":")).encode()
    return header + b"".join(b for *_, b in inputs), {
        "Inference-Header-Content-Length": str(len(header))
    }


def bytes_blob(items: list[bytes]) -> bytes:
    return b"".join(struct.pack("<I", len(x)) + x for x in items)


def json_call(url: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    """(status, parsed JSON body or None) of one request with a JSON body, to ``url``."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request("http://" + url + path, data=data, method=method)
    try:
        with urllib.request.urlopen(request, timeout=60) as r:
            text = r.read()
            return r.status, json.loads(text) if text else None
    except urllib.error.HTTPError as e:
        text = e.read()
        return e.code, json.loads(text) if text else None
