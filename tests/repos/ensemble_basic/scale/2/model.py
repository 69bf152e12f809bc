import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """Multiplies A by a hundred."""

    def execute(self, requests):
        return [
            pb_utils.InferenceResponse(
                [pb_utils.Tensor("B", pb_utils.get_input_tensor_by_name(r, "A").as_numpy() * 100)]
            )
            for r in requests
        ]
