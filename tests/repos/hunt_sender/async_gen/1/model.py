"""A decoupled model whose ``execute`` is an async generator: it sends N responses
through the sender, yields each one too, then raises."""

import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    async def execute(self, requests):
        for request in requests:
            n = int(pb_utils.get_input_tensor_by_name(request, "N").as_numpy()[0])
            sender = request.get_response_sender()
            for i in range(n):
                response = pb_utils.InferenceResponse(
                    [pb_utils.Tensor("OUT", np.array([i], np.int32))]
                )
                sender.send(response)
                yield response
            raise ValueError("boom in the generator")
