"""Scheduling probe: reports how each request reached ``execute``.

Request parameters steer it: ``mark`` (a path) is created when the request starts
executing, ``hold`` (a path) makes the execution wait until that file exists.

On a model without sequence batching it echoes IN: input value -1 makes ``execute``
raise, -2 answers with an error response, -3 asks for the request to be rescheduled.
On a sequence model it sums IN per correlation id and reports what ``execute`` received;
on an iterative one a request with IN=n is rescheduled n times before it answers.
"""

import json
import os
import time

import numpy as np
import triton_python_backend_utils as pb_utils


def _plain(x):
    return x.decode() if isinstance(x, bytes) else x.item()


def _gate(requests):
    """Create each request's ``mark`` file, then wait (30 s at most) for its ``hold`` file."""
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
        config = json.loads(args["model_config"])
        self.batching = config["max_batch_size"] > 0
        self.sequence = "sequence_batching" in config
        self.iterative = config.get("sequence_batching", {}).get("iterative_sequence", False)
        self.instance = args["model_instance_name"]
        self.executions = 0
        self.totals = {}
        self.passes = {}

    def execute(self, requests):
        self.executions += 1
        _gate(requests)
        return self._sequences(requests) if self.sequence else self._echo(requests)

    def _echo(self, requests):
        sizes, values = [], []
        for r in requests:
            value = pb_utils.get_input_tensor_by_name(r, "IN").as_numpy()
            sizes.append(int(value.shape[0]) if self.batching else 1)
            values.append(int(value.reshape(-1)[0]))
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

    def _sequences(self, requests):
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
