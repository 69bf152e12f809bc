"""A pure-Python loop of N steps (holds the GIL); TIMES = start, end, thread CPU time."""
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for request in requests:
            n = int(pb_utils.get_input_tensor_by_name(request, "N").as_numpy()[0])
            start, cpu = time.time(), time.thread_time()
            total = 0
            for i in range(n):
                total += i * i % 7
            times = np.array([start, time.time(), time.thread_time() - cpu], dtype=np.float64)
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("TIMES", times)]))
        return out
