import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """SUM = A + B, or A + 1000 when the optional B is not given."""

    def execute(self, requests):
        out = []
        for r in requests:
            a = pb_utils.get_input_tensor_by_name(r, "A").as_numpy()
            b = pb_utils.get_input_tensor_by_name(r, "B")
            total = a + (b.as_numpy() if b is not None else 1000)
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("SUM", total)]))
        return out
