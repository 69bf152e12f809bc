"""The ensemble example (``examples/ensemble``) through the stock tritonclient, on our
server and on real Triton: the same answer, and the repository loads in the default
control mode (the ensemble after the models its steps use)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.http as httpclient

EXAMPLE = Path(__file__).parent.parent.parent / "examples" / "ensemble"


def _ask(url: str) -> tuple[Any, ...]:
    client = httpclient.InferenceServerClient(url)
    try:
        text = httpclient.InferInput("TEXT", [1, 2], "BYTES")
        text.set_data_from_numpy(np.array([["  Hello ", "ÉNSEMBLE"]], dtype=object))
        result = client.infer("pipeline", [text])
        return (
            client.is_server_ready(),
            result.as_numpy("CLEAN").tolist(),
            result.as_numpy("LENGTH").tolist(),
            client.get_model_metadata("pipeline"),
            [m["state"] for m in client.get_model_repository_index()],
        )
    finally:
        client.close()


def test_ensemble_example(bundled_server_factory: Any) -> None:
    ours = _ask(bundled_server_factory(EXAMPLE).url)
    assert ours[:3] == (True, [[b"hello", "énsemble".encode()]], [[5, 8]])
    assert ours[3]["platform"] == "ensemble"
    assert ours[4] == ["READY"] * 3


@pytest.mark.real_triton
def test_ensemble_example_as_triton(real_triton_factory: Any, bundled_server_factory: Any) -> None:
    assert _ask(bundled_server_factory(EXAMPLE).url) == _ask(real_triton_factory(EXAMPLE).url)
