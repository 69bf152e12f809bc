"""Sequence probe: sums IN per correlation id and reports what ``execute`` received.

Parameters ``mark``/``hold`` work as in the batching probe. On an iterative model a
request with IN=n is rescheduled n times before it answers.
"""

import json
import os
import time

import numpy as np
import triton_python_backend_utils as pb_utils


def _plain(x):
    return x.decode() if isinstance(x, bytes) else x.item()


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.batching = config["max_batch_size"] > 0
        self.iterative = config.get("sequence_batching", {}).get("iterative_sequence", False)
        self.instance = args["model_instance_name"]
        self.executions = 0
        self.totals = {}
        self.passes = {}

    def execute(self, requests):
        self.executions += 1
        params = [json.loads(r.parameters()) for r in requests]
        for p in params:
            if "mark" in p:
                with open(p["mark"], "w"):
                    pass
        deadline = time.monotonic() + 30
        for p in params:
            while "hold" in p and not os.path.exists(p["hold"]) and time.monotonic() < deadline:
                time.sleep(0.005)
        batch = [
            {
                "id": r.request_id(),
                "cid": r.correlation_id(),
                "flags": r.flags(),
                "inputs": {
                    t.name(): [str(t.as_numpy().dtype), list(t.as_numpy().shape), [_plain(x) for x in t.as_numpy().reshape(-1)]]
                    for t in r.inputs()
                },
                "order": [t.name() for t in r.inputs()],
            }
            for r in requests
        ]
        responses = []
        for r in requests:
            if not r.request_id() and r.correlation_id() == 0:
                responses.append(pb_utils.InferenceResponse([]))
                continue
            value = int(pb_utils.get_input_tensor_by_name(r, "IN").as_numpy().reshape(-1)[0])
            key = (r.request_id(), str(r.correlation_id()))
            if self.iterative and self.passes.get(key, 0) < value:
                self.passes[key] = self.passes.get(key, 0) + 1
                r.set_release_flags(pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)
                responses.append(None)
                continue
            self.passes.pop(key, None)
            cid = r.correlation_id()
            if r.flags() & pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_START:
                self.totals[cid] = 0
            self.totals[cid] = self.totals.get(cid, 0) + value
            info = json.dumps(
                {"exec": self.executions, "instance": self.instance, "batch": batch}, sort_keys=True
            ).encode()
            shape = (1, 1) if self.batching else (1,)
            responses.append(
                pb_utils.InferenceResponse(
                    [
                        pb_utils.Tensor("OUT", np.full(shape, self.totals[cid], dtype=np.int32)),
                        pb_utils.Tensor("INFO", np.full(shape, info, dtype=np.object_)),
                    ]
                )
            )
        return responses
