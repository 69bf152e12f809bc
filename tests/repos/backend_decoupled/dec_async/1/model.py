"""async def execute in a decoupled model: each request waits DELAY_MS then answers; the
instance takes the next request while earlier ones still wait. DELAY_MS < 0 raises in
the background coroutine (only logged; the request is then finished with FINAL)."""
import asyncio

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    async def execute(self, requests):
        for request in requests:
            delay = int(pb_utils.get_input_tensor_by_name(request, "DELAY_MS").as_numpy()[0])
            sender = request.get_response_sender()
            if delay < 0:
                sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                raise KeyError("background boom")
            await asyncio.sleep(delay / 1000)
            sender.send(
                pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([delay], np.int32))]),
                flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
            )
        return None
