"""Fails on purpose. MODE 0: TritonError (INTERNAL); 1: TritonError INVALID_ARG; 2: Python exception;
anything else: echo MODE back as OUTPUT0."""
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            mode = pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy()
            m = int(mode.reshape(-1)[0])
            if m == 0:
                responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError("intentional internal error")))
            elif m == 1:
                responses.append(
                    pb_utils.InferenceResponse(
                        error=pb_utils.TritonError("intentional invalid argument", pb_utils.TritonError.INVALID_ARG)
                    )
                )
            elif m == 2:
                raise ValueError("intentional exception")
            else:
                responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", mode)]))
        return responses
