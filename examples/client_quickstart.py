"""Quickstart: run the add_sub model through tritonhttp.

Usage: python examples/client_quickstart.py [HOST:PORT]   (default localhost:8000)

The server must serve a model ``add_sub`` with two FP32 [4] inputs INPUT0/INPUT1 and
outputs OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1 (as in tests/models).
"""

from __future__ import annotations

import sys

import numpy as np

import tritonhttp as httpclient


def main(url: str = "localhost:8000") -> int:
    with httpclient.InferenceServerClient(url) as client:
        if not client.is_server_live():
            print(f"no Triton server answers at {url}", file=sys.stderr)
            return 1
        a = np.arange(4, dtype=np.float32)
        b = np.ones(4, dtype=np.float32)
        inputs = [
            httpclient.InferInput("INPUT0", [4], "FP32").set_data_from_numpy(a),
            httpclient.InferInput("INPUT1", [4], "FP32").set_data_from_numpy(b),
        ]
        outputs = [
            httpclient.InferRequestedOutput("OUTPUT0"),
            httpclient.InferRequestedOutput("OUTPUT1"),
        ]
        result = client.infer("add_sub", inputs, outputs=outputs)
        print("INPUT0 + INPUT1 =", result.as_numpy("OUTPUT0"))
        print("INPUT0 - INPUT1 =", result.as_numpy("OUTPUT1"))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:2]))
