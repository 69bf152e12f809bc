"""BLS to add_sub inside execute. MODE 0: the child carries this request's trace; 1: it
carries none; 2: two traced children. CONTEXT: what ``request.trace().get_context()`` gave."""
import json

import numpy as np

import triton_python_backend_utils as pb_utils


def _child(trace):
    inputs = [pb_utils.Tensor("INPUT0", np.arange(4, dtype=np.float32)),
              pb_utils.Tensor("INPUT1", np.ones(4, dtype=np.float32))]
    kw = {} if trace is None else {"trace": trace}
    return pb_utils.InferenceRequest(model_name="add_sub", inputs=inputs,
                                     requested_output_names=["OUTPUT0"], **kw)


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for request in requests:
            mode = int(pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy()[0])
            trace = request.trace()
            for _ in range(2 if mode == 2 else 1):
                response = _child(None if mode == 1 else trace).exec()
                if response.has_error():
                    raise pb_utils.TritonModelException(response.error().message())
            context = trace.get_context()
            text = json.dumps(context if context is None else json.loads(context))
            out.append(pb_utils.InferenceResponse(
                [pb_utils.Tensor("CONTEXT", np.array([text], dtype=object))]))
        return out
