import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """Refuses every request with an error response."""

    def execute(self, requests):
        return [
            pb_utils.InferenceResponse(error=pb_utils.TritonError("warm-up refused"))
            for _ in requests
        ]
