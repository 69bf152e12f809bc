import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """Decoupled: answers X with Y = X twice."""

    def execute(self, requests):
        for r in requests:
            x = pb_utils.get_input_tensor_by_name(r, "X").as_numpy()
            sender = r.get_response_sender()
            for _ in range(2):
                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("Y", x)]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
