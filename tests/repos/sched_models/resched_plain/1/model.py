"""Scheduling probe: echoes IN and reports how each request reached ``execute``.

Request parameters steer it: ``mark`` (a path) is created when the request starts
executing, ``hold`` (a path) makes the execution wait until that file exists. Input
value -1 makes ``execute`` raise, -2 answers with an error response, -3 asks for the
request to be rescheduled.
"""

import json
import os
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.batching = json.loads(args["model_config"])["max_batch_size"] > 0
        self.instance = args["model_instance_name"]
        self.executions = 0

    def execute(self, requests):
        self.executions += 1
        sizes, values = [], []
        for r in requests:
            value = pb_utils.get_input_tensor_by_name(r, "IN").as_numpy()
            sizes.append(int(value.shape[0]) if self.batching else 1)
            values.append(int(value.reshape(-1)[0]))
        params = [json.loads(r.parameters()) for r in requests]
        for p in params:
            if "mark" in p:
                with open(p["mark"], "w"):
                    pass
        deadline = time.monotonic() + 30
        for p in params:
            while "hold" in p and not os.path.exists(p["hold"]) and time.monotonic() < deadline:
                time.sleep(0.005)
        if -1 in values:
            raise ValueError("probe failure")
        info = json.dumps(
            {
                "exec": self.executions,
                "instance": self.instance,
                "ids": [r.request_id() for r in requests],
                "sizes": sizes,
                "cancelled": [r.is_cancelled() for r in requests],
                "timeouts": [r.timeout() for r in requests],
            },
            sort_keys=True,
        ).encode()
        responses = []
        for r, size, value in zip(requests, sizes, values):
            if value == -2:
                responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError("probe error")))
                continue
            if value == -3:
                r.set_release_flags(pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)
                responses.append(None)
                continue
            shape = (size, 1) if self.batching else (1,)
            responses.append(
                pb_utils.InferenceResponse(
                    [
                        pb_utils.Tensor("OUT", pb_utils.get_input_tensor_by_name(r, "IN").as_numpy()),
                        pb_utils.Tensor("INFO", np.full(shape, info, dtype=np.object_)),
                    ]
                )
            )
        return responses
