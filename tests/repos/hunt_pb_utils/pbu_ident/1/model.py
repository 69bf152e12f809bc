"""OUT = IN and OUT2 = 2 * IN, returned in the order OUT2, OUT (not the config's)."""
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            x = pb_utils.get_input_tensor_by_name(r, "IN").as_numpy()
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT2", x * 2), pb_utils.Tensor("OUT", x)]))
        return out
