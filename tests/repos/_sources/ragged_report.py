"""Reports what ``execute`` received: for each request of the batch, its id and each of
its input tensors (name, dtype, shape, values), answered as the ``INFO`` output (one row
per batch row of the request's first input).

Request parameters ``mark`` (a path, created when the request starts executing) and
``hold`` (a path: the execution waits until it exists) keep an instance busy.
"""

import json
import os
import time

import numpy as np

import triton_python_backend_utils as pb_utils


def _plain(x):
    return x.decode() if isinstance(x, bytes) else x.item()


def _gate(requests):
    params = [json.loads(r.parameters()) for r in requests]
    for p in params:
        if "mark" in p:
            with open(p["mark"], "w"):
                pass
    deadline = time.monotonic() + 30
    for p in params:
        while "hold" in p and not os.path.exists(p["hold"]) and time.monotonic() < deadline:
            time.sleep(0.005)


class TritonPythonModel:
    def initialize(self, args):
        self.executions = 0

    def execute(self, requests):
        self.executions += 1
        _gate(requests)
        batch = [
            {
                "id": r.request_id(),
                "inputs": [
                    [
                        t.name(),
                        str(t.as_numpy().dtype),
                        list(t.as_numpy().shape),
                        [_plain(x) for x in t.as_numpy().reshape(-1)],
                    ]
                    for t in r.inputs()
                ],
            }
            for r in requests
        ]
        info = json.dumps({"exec": self.executions, "batch": batch}, sort_keys=True).encode()
        responses = []
        for r in requests:
            rows = r.inputs()[0].as_numpy().shape[0]
            responses.append(
                pb_utils.InferenceResponse(
                    [pb_utils.Tensor("INFO", np.full((rows, 1), info, dtype=np.object_))]
                )
            )
        return responses
