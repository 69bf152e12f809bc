"""Adds one to its input array in place and returns it (shows whether inputs are copies)."""
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            array = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            array += 1
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", array)]))
        return responses
