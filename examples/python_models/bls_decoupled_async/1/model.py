"""BLS into a decoupled model from ``async def execute``: two streams of square_int32
at once (IN and IN + 1) with ``async_exec(decoupled=True)``; SUM adds up every OUT."""

import asyncio

import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    async def execute(self, requests):
        responses = []
        for request in requests:
            n = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            calls = [
                pb_utils.InferenceRequest(
                    model_name="square_int32",
                    inputs=[pb_utils.Tensor("IN", (n + k).astype(np.int32))],
                    requested_output_names=["OUT"],
                ).async_exec(decoupled=True)
                for k in (0, 1)
            ]
            total = 0
            for stream in await asyncio.gather(*calls):
                for answer in stream:
                    if answer.has_error():
                        raise pb_utils.TritonModelException(answer.error().message())
                    out = pb_utils.get_output_tensor_by_name(answer, "OUT")
                    if out is not None:
                        total += int(out.as_numpy()[0])
            responses.append(
                pb_utils.InferenceResponse(
                    [pb_utils.Tensor("SUM", np.array([total], dtype=np.int32))]
                )
            )
        return responses
