"""Shows when the bytes of an output reach the client's region. The request parameter
``mode`` says what it does with its input IN (OUT is IN plus one):

- ``""``: returns OUT;
- ``peek``: sends OUT with its response sender, then, still inside ``execute``, reads
  what the shared-memory object ``key`` holds at ``at`` (as many bytes as OUT) and keeps
  it; returns nothing;
- ``seen``: returns as OUT what the last ``peek`` read;
- ``raise``: raises (``execute`` fails);
- ``error``: returns a response with OUT and an error;
- ``half``: returns HALF (one FP16 value, 1.5) and then OUT.
"""

import json

import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.seen = np.zeros(0, np.float32)

    def execute(self, requests):
        responses = []
        for request in requests:
            params = json.loads(request.parameters())
            mode = params.get("mode", "")
            array = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy() + 1
            out = pb_utils.Tensor("OUT", array)
            if mode == "peek":
                sender = request.get_response_sender()
                sender.send(
                    pb_utils.InferenceResponse([out]),
                    flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
                )
                path = "/dev/shm/" + params["key"].lstrip("/")
                self.seen = np.fromfile(path, np.float32, array.size, offset=params["at"])
                responses.append(None)
            elif mode == "seen":
                responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", self.seen)]))
            elif mode == "raise":
                raise pb_utils.TritonModelException("the model failed")
            elif mode == "error":
                error = pb_utils.TritonError("the model answered an error")
                responses.append(pb_utils.InferenceResponse([out], error=error))
            elif mode == "half":
                half = pb_utils.Tensor("HALF", np.array([1.5], np.float16))
                responses.append(pb_utils.InferenceResponse([half, out]))
            else:
                responses.append(pb_utils.InferenceResponse([out]))
        return responses
