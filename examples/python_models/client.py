"""Calls every model of this repository with tritonhttp and prints what comes back.

    python -m tritonhttp.server --model-repository examples/python_models &
    python examples/python_models/client.py [--url 127.0.0.1:8000]

Works the same against Triton Inference Server (the decoupled models are called through
the generate_stream endpoint, the one HTTP route for them).
"""

from __future__ import annotations

import argparse
import json
import urllib.request

import numpy as np

import tritonhttp as httpclient


def fp32_inputs(a: np.ndarray, b: np.ndarray) -> list[httpclient.InferInput]:
    inputs = [
        httpclient.InferInput("INPUT0", [4], "FP32"),
        httpclient.InferInput("INPUT1", [4], "FP32"),
    ]
    inputs[0].set_data_from_numpy(a)
    inputs[1].set_data_from_numpy(b)
    return inputs


def stream(url: str, model: str, body: dict) -> list[dict]:
    """The events of a generate_stream call."""
    req = urllib.request.Request(
        f"http://{url}/v2/models/{model}/generate_stream", data=json.dumps(body).encode()
    )
    with urllib.request.urlopen(req) as r:
        text = r.read().decode()
    return [json.loads(line[6:]) for line in text.split("\n\n") if line.startswith("data: ")]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", default="127.0.0.1:8000")
    url = parser.parse_args().url
    client = httpclient.InferenceServerClient(url)
    a = np.array([1, 2, 3, 4], dtype=np.float32)
    b = np.array([4, 3, 2, 1], dtype=np.float32)

    for model in ("add_sub", "sub_add", "nobatch_auto_complete"):
        r = client.infer(model, fp32_inputs(a, b), request_id="1")
        print(model, r.as_numpy("OUTPUT0"), r.as_numpy("OUTPUT1"))

    names = httpclient.InferInput("MODEL_NAME", [1], "BYTES")
    for callee in ("add_sub", "sub_add"):
        names.set_data_from_numpy(np.array([callee.encode()], dtype=np.object_))
        r = client.infer("bls_sync", [names, *fp32_inputs(a, b)])
        print("bls_sync ->", callee, r.as_numpy("OUTPUT0"), r.as_numpy("OUTPUT1"))
    r = client.infer("bls_async", fp32_inputs(a, b))
    print("bls_async", r.as_numpy("OUTPUT0"), r.as_numpy("OUTPUT1"))

    n = httpclient.InferInput("IN", [1], "INT32")
    n.set_data_from_numpy(np.array([3], dtype=np.int32))
    for model in ("bls_decoupled_sync", "bls_decoupled_async"):
        print(model, client.infer(model, [n]).as_numpy("SUM"))

    print("square_int32", stream(url, "square_int32", {"IN": 3}))
    print(
        "repeat_int32",
        stream(url, "repeat_int32", {"IN": [4, 2, 0], "DELAY": [1, 2, 3], "WAIT": 5}),
    )

    batch = fp32_inputs(a, b)
    for i, x in enumerate((a, b)):
        batch[i] = httpclient.InferInput(f"INPUT{i}", [2, 4], "FP32")
        batch[i].set_data_from_numpy(np.stack([x, x]))
    r = client.infer("batch_auto_complete", batch)
    print("batch_auto_complete", r.as_numpy("OUTPUT0").tolist())
    print(
        "batch_auto_complete config",
        client.get_model_config("batch_auto_complete")["max_batch_size"],
    )

    x = httpclient.InferInput("INPUT0", [4], "FP32")
    x.set_data_from_numpy(a)
    print("custom_metrics", client.infer("custom_metrics", [x]).as_numpy("OUTPUT0"))
    print("instance_kind", client.infer("instance_kind", [x]).as_numpy("DEVICE"))

    one = httpclient.InferInput("INPUT0", [1], "INT32")
    one.set_data_from_numpy(np.array([1], dtype=np.int32))
    r = client.infer("optional_inputs", [one])
    print("optional_inputs", r.as_numpy("OUTPUT0"), r.as_numpy("OUTPUT1"))

    s = httpclient.InferInput("INPUT0", [1], "BYTES")
    s.set_data_from_numpy(np.array([b"hi"], dtype=np.object_))
    r = client.infer("parameters", [s], parameters={"temperature": 1, "mode": "fast"})
    print("parameters", r.as_numpy("PARAMETERS"), r.as_numpy("CONFIG_PARAMETER"))
    print("logging", client.infer("logging", [s]).as_numpy("OUTPUT0"))
    client.close()


if __name__ == "__main__":
    main()
