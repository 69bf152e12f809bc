"""The real-Triton fixture itself: it must hand back a live 2.51.0 server on loopback."""

from __future__ import annotations

import json
import urllib.request

import pytest

from tritonhttp.testing import _real_triton as rt

pytestmark = pytest.mark.real_triton


def test_real_triton_serves_the_shared_repository(real_triton: rt.RealTriton) -> None:
    with urllib.request.urlopen(f"http://{real_triton.url}/v2") as r:
        meta = json.loads(r.read())
    assert meta["version"] == rt.TRITON_VERSION
    assert real_triton.url.startswith("127.0.0.1:")
    req = urllib.request.Request(f"http://{real_triton.url}/v2/repository/index", method="POST")
    with urllib.request.urlopen(req) as r:
        index = json.loads(r.read())
    assert {m["name"] for m in index if m.get("state") == "READY"} >= {
        "add_sub",
        "identity_all",
        "simple",
    }
