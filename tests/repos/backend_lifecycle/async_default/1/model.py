import asyncio
import json

import numpy as np
import triton_python_backend_utils as pb_utils


async def go(mode):
    await asyncio.sleep(0.01)
    if mode == 1:
        raise KeyError("async boom")
    return "async ok"


class TritonPythonModel:
    async def execute(self, requests):
        out = []
        for request in requests:
            mode = int(pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy()[0])
            text = json.dumps(await go(mode))
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("RESULT", np.array([text], dtype=object))]))
        return out
