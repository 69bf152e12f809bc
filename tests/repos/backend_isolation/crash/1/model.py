"""MODE 0 answers with its process id; the others end the process the way they say."""
import ctypes
import os
import sys
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        mode = int(pb_utils.get_input_tensor_by_name(requests[0], "MODE").as_numpy()[0])
        if mode == 1:
            os._exit(3)
        if mode == 2:
            sys.exit(4)
        if mode == 3:
            os.abort()
        if mode == 4:
            ctypes.string_at(0)  # segmentation fault
        if mode == 5:
            time.sleep(3600)  # hangs past stub-timeout-seconds
        if mode == 6:
            os.kill(os.getpid(), 9)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("PID", np.array([os.getpid()], np.int64))]) for _ in requests]
