"""Sequences: OUT is the running sum of IN per correlation id; IN=-1 makes ``execute``
raise, IN=-2 answers with an error response. ``mark``/``hold`` parameters as the probe's."""

import json
import os
import time

import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.totals = {}

    def execute(self, requests):
        params = [json.loads(r.parameters()) for r in requests]
        for p in params:
            if "mark" in p:
                open(p["mark"], "w").close()
        deadline = time.monotonic() + 30
        for p in params:
            while "hold" in p and not os.path.exists(p["hold"]) and time.monotonic() < deadline:
                time.sleep(0.005)
        values = [
            int(pb_utils.get_input_tensor_by_name(r, "IN").as_numpy().reshape(-1)[0])
            for r in requests
        ]
        if -1 in values:
            raise ValueError("sequence failure")
        out = []
        for r, v in zip(requests, values, strict=True):
            if v == -2:
                out.append(pb_utils.InferenceResponse(error=pb_utils.TritonError("sequence error")))
                continue
            cid = r.correlation_id()
            self.totals[cid] = self.totals.get(cid, 0) + v
            out.append(
                pb_utils.InferenceResponse(
                    [pb_utils.Tensor("OUT", np.array([[self.totals[cid]]], dtype=np.int32))]
                )
            )
        return out
