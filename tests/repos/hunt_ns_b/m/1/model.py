import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """Multiplies IN by 100 (the model m of repository hunt_ns_b)."""

    def execute(self, requests):
        return [
            pb_utils.InferenceResponse(
                [pb_utils.Tensor("OUT", pb_utils.get_input_tensor_by_name(r, "IN").as_numpy() * 100)]
            )
            for r in requests
        ]
