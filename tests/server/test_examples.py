"""The example repository of the README demo works, through the stock tritonclient."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import tritonclient.http as httpclient

from tritonhttp.server import _launch

EXAMPLES = Path(__file__).parent.parent.parent / "examples" / "models"


def test_example_repository_with_tritonclient() -> None:
    with _launch.running(EXAMPLES) as server:
        client = httpclient.InferenceServerClient(server.url)
        try:
            assert client.is_server_ready()
            a = np.array([1, 2, 3, 4], dtype=np.float32)
            inputs = [
                httpclient.InferInput("INPUT0", [4], "FP32"),
                httpclient.InferInput("INPUT1", [4], "FP32"),
            ]
            inputs[0].set_data_from_numpy(a)
            inputs[1].set_data_from_numpy(np.ones(4, np.float32))
            result = client.infer("add_sub", inputs)
            assert result.as_numpy("OUTPUT0").tolist() == [2, 3, 4, 5]
            text = np.array([["héllo", "triton"]], dtype=object)
            t = httpclient.InferInput("TEXT", [1, 2], "BYTES")
            t.set_data_from_numpy(text, binary_data=False)
            result = client.infer("text_upper", [t])
            assert result.as_numpy("UPPER").tolist() == [["HÉLLO".encode(), b"TRITON"]]
            assert result.as_numpy("LENGTH").tolist() == [[5, 6]]
            assert client.get_model_metadata("text_upper")["inputs"][0]["shape"] == [-1, -1]
        finally:
            client.close()
