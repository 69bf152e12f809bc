"""Business logic scripting, asynchronous: ``async def execute`` sends two BLS requests
at once (add_sub and sub_add) and combines their answers.

OUTPUT0 = add_sub's OUTPUT0 (a + b), OUTPUT1 = sub_add's OUTPUT0 (a - b).
"""

import asyncio

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    async def execute(self, requests):
        responses = []
        for request in requests:
            inputs = [
                pb_utils.get_input_tensor_by_name(request, "INPUT0"),
                pb_utils.get_input_tensor_by_name(request, "INPUT1"),
            ]
            calls = [
                pb_utils.InferenceRequest(
                    model_name=name, requested_output_names=["OUTPUT0"], inputs=inputs
                ).async_exec()
                for name in ("add_sub", "sub_add")
            ]
            added, subtracted = await asyncio.gather(*calls)
            for answer in (added, subtracted):
                if answer.has_error():
                    raise pb_utils.TritonModelException(answer.error().message())
            out0 = pb_utils.get_output_tensor_by_name(added, "OUTPUT0").as_numpy()
            out1 = pb_utils.get_output_tensor_by_name(subtracted, "OUTPUT0").as_numpy()
            responses.append(
                pb_utils.InferenceResponse(
                    [pb_utils.Tensor("OUTPUT0", out0), pb_utils.Tensor("OUTPUT1", out1)]
                )
            )
        return responses
