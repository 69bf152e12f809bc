import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for request in requests:
            name = pb_utils.get_input_tensor_by_name(request, "CODE").as_numpy()[0].decode()
            if name == "DEFAULT":
                error = pb_utils.TritonError(message="default code")
            else:
                error = pb_utils.TritonError(message=f"error code: {name}", code=getattr(pb_utils.TritonError, name))
            out.append(pb_utils.InferenceResponse(error=error))
        return out
