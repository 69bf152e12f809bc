"""BLS into a decoupled model: ``exec(decoupled=True)`` gives an iterator over the
responses of square_int32 as they arrive; SUM adds up their OUT values. The last
response of a stream that ends with a bare FINAL flag has no outputs.
"""

import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            bls_request = pb_utils.InferenceRequest(
                model_name="square_int32",
                inputs=[pb_utils.get_input_tensor_by_name(request, "IN")],
                requested_output_names=["OUT"],
            )
            total = 0
            for answer in bls_request.exec(decoupled=True):
                if answer.has_error():
                    raise pb_utils.TritonModelException(answer.error().message())
                out = pb_utils.get_output_tensor_by_name(answer, "OUT")
                if out is not None:  # the empty final response
                    total += int(out.as_numpy()[0])
            responses.append(
                pb_utils.InferenceResponse(
                    [pb_utils.Tensor("SUM", np.array([total], dtype=np.int32))]
                )
            )
        return responses
