"""Shows how a worker hands a model its input. The request parameter ``mode`` says what
it does: ``add`` adds one to its input array in place and returns it, ``keep`` keeps the
array and returns it, ``kept`` returns the array a ``keep`` request kept (its own input
unused). WHERE: the file backing the input's memory in this process (/proc/self/maps),
"" where that cannot be told."""

import json

import numpy as np

import triton_python_backend_utils as pb_utils


def _backing(array):
    address = array.__array_interface__["data"][0]
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                fields = line.split(maxsplit=5)
                start, end = (int(x, 16) for x in fields[0].split("-"))
                if start <= address < end:
                    return fields[5].strip() if len(fields) > 5 else ""
    except OSError:
        pass
    return ""


class TritonPythonModel:
    def initialize(self, args):
        self.kept = None

    def execute(self, requests):
        responses = []
        for request in requests:
            mode = json.loads(request.parameters()).get("mode", "")
            array = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            where = _backing(array)
            if mode == "add":
                array += 1
            elif mode == "keep":
                self.kept = array
            elif mode == "kept":
                array = self.kept
            out = pb_utils.Tensor("OUT", array)
            text = pb_utils.Tensor("WHERE", np.array([where.encode()], dtype=np.object_))
            responses.append(pb_utils.InferenceResponse([out, text]))
        return responses
