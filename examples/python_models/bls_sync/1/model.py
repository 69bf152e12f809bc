"""Business logic scripting, blocking: MODEL_NAME picks the model that does the work.

The request's own input tensors go straight into the BLS request, and the callee's
output tensors straight into this model's response. Errors come back as error
responses, not exceptions: check ``has_error()``.
"""

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            model_name = pb_utils.get_input_tensor_by_name(request, "MODEL_NAME").as_numpy()[0]
            inputs = [
                pb_utils.get_input_tensor_by_name(request, "INPUT0"),
                pb_utils.get_input_tensor_by_name(request, "INPUT1"),
            ]
            bls_request = pb_utils.InferenceRequest(
                model_name=model_name.decode(),
                requested_output_names=["OUTPUT0", "OUTPUT1"],
                inputs=inputs,
            )
            bls_response = bls_request.exec()
            if bls_response.has_error():
                raise pb_utils.TritonModelException(bls_response.error().message())
            responses.append(
                pb_utils.InferenceResponse(
                    [
                        pb_utils.get_output_tensor_by_name(bls_response, "OUTPUT0"),
                        pb_utils.get_output_tensor_by_name(bls_response, "OUTPUT1"),
                    ]
                )
            )
        return responses
