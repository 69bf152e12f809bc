import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """Multiplies IN by 10 (the model m of repository hunt_ns_a)."""

    def execute(self, requests):
        return [
            pb_utils.InferenceResponse(
                [pb_utils.Tensor("OUT", pb_utils.get_input_tensor_by_name(r, "IN").as_numpy() * 10)]
            )
            for r in requests
        ]
