import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse(error=pb_utils.TritonError("custom not found", pb_utils.TritonError.NOT_FOUND)) for _ in requests]
