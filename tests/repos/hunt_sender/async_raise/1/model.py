"""A decoupled model whose ``async def execute`` raises after it has answered, or part
of it, by MODE: 0 two responses then raise; 1 a response with FINAL then raise; 2 FINAL
alone then raise; 3 raise before sending anything; 4 FINAL then return a list; 5 a
response, an await, then raise; 6 a response with FINAL, an await, then raise."""

import asyncio

import numpy as np

import triton_python_backend_utils as pb_utils

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL


def _response(value):
    return pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([value], np.int32))])


class TritonPythonModel:
    async def execute(self, requests):
        for request in requests:
            mode = int(pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy()[0])
            sender = request.get_response_sender()
            if mode == 0:
                sender.send(_response(1))
                sender.send(_response(2))
            elif mode in (1, 6):
                if mode == 6:
                    await asyncio.sleep(0.01)
                sender.send(_response(1), flags=FINAL)
            elif mode in (2, 4):
                sender.send(flags=FINAL)
            elif mode == 5:
                sender.send(_response(1))
                await asyncio.sleep(0.01)
            if mode == 4:
                return [_response(9)]
            if mode == 6:
                await asyncio.sleep(0.01)
            raise ValueError(f"boom after mode {mode}")
        return None
