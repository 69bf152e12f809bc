import numpy as np
import triton_python_backend_utils as pb_utils


def helper(mode):
    raise KeyError("boom %d" % mode)


class TritonPythonModel:
    def execute(self, requests):
        mode = int(pb_utils.get_input_tensor_by_name(requests[0], "MODE").as_numpy().reshape(-1)[0])
        if mode == 0:
            return tuple(pb_utils.InferenceResponse([]) for _ in requests)
        if mode == 1:
            return []
        if mode == 2:
            return [1 for _ in requests]
        if mode == 3:
            helper(mode)
        if mode == 4:
            raise pb_utils.TritonModelException("tme from model")
        if mode == 5:
            return [pb_utils.InferenceResponse(error=pb_utils.TritonError("nf", pb_utils.TritonError.NOT_FOUND)) for _ in requests]
        if mode == 6:
            return [pb_utils.InferenceResponse(error=pb_utils.TritonError("unsup", pb_utils.TritonError.UNSUPPORTED)) for _ in requests]
        if mode == 7:
            return [pb_utils.InferenceResponse([pb_utils.Tensor("NOT_IN_CONFIG", np.array([1])), pb_utils.Tensor("OUT", np.array([[1, 2], [3, 4]], dtype=np.int64))]) for _ in requests]
        if mode == 8:
            return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array(["x", 1.5, b"y"], dtype=object))]) for _ in requests]
        if mode == 9:
            return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.arange(6, dtype=np.float64).reshape(2, 3).T)]) for _ in requests]
        return [pb_utils.InferenceResponse([]) for _ in requests]
